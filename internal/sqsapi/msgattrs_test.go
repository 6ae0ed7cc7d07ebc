package sqsapi

import "testing"

func str(s string) *string { return &s }

// The digests of these attributes are the ones Amazon SQS gives for them.
func TestAttrsMD5(t *testing.T) {
	for _, tc := range []struct {
		attrs map[string]attrValue
		want  string
	}{
		{map[string]attrValue{"SellerName": {DataType: "String", StringValue: str("Example Store")}}, "cd28f3b68aeee4b2eac9c66f2f694b58"},
		{map[string]attrValue{"timestamp": {DataType: "Number", StringValue: str("1493147359900")}}, "235c5c510d26fb653d073faed50ae77c"},
		{nil, ""},
	} {
		if got := attrsMD5(tc.attrs); got != tc.want {
			t.Errorf("attrsMD5(%v) = %s, want %s", tc.attrs, got, tc.want)
		}
	}
}

func TestValidText(t *testing.T) {
	for s, want := range map[string]bool{"plain": true, "tab\tnew\nline\r": true, "é中😀": true, "\uFFFD": true,
		"nul\x00": false, "bell\x07": false, "\uFFFE": false, "bad\xffutf8": false} {
		if got := validText(s); got != want {
			t.Errorf("validText(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestQueueName(t *testing.T) {
	for name, want := range map[string]string{
		"https://sqs.us-east-1.amazonaws.com/123456789012/jobs": "jobs",
		"http://127.0.0.1:9324/000000000000/a%20b":              "a b",
		"http://127.0.0.1:9324/000000000000/jobs/":              "jobs",
		"jobs": "jobs",
	} {
		if got, err := queueName(name); err != nil || got != want {
			t.Errorf("queueName(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "http://host/", "%zz"} {
		if got, err := queueName(bad); err == nil {
			t.Errorf("queueName(%q) = %q, want an error", bad, got)
		}
	}
}
