package jobmeta

import (
	"maps"
	"testing"
)

// Metadata comes back as it went in; attributes that another writer
// stored (the SQS API's own, or bytes that are no JSON) carry none.
func TestDecode(t *testing.T) {
	in := map[string]string{"traceparent": "00-abc-def-01", "tenant": "ünïcode", "quote": `"\`}
	b, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := Decode(b); !maps.Equal(got, in) {
		t.Fatalf("Decode(Encode(%q)) = %q", in, got)
	}
	if b, err := Encode(map[string]string{}); b != nil || err != nil {
		t.Fatalf("empty metadata encodes as %q, %v; want nil", b, err)
	}
	for _, attrs := range []string{``, `{"m":{"a":{"DataType":"String","StringValue":"x"}},"g":"group"}`, `not json`, `{"metadata":["a"]}`, `{"metadata":{}}`} {
		if got := Decode([]byte(attrs)); got != nil {
			t.Errorf("Decode(%s) = %q, want nil", attrs, got)
		}
	}
}
