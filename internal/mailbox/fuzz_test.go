package mailbox

import "testing"

func FuzzParseReceiptHandle(f *testing.F) {
	for _, s := range []string{"1.1", "zz.zz", "0.1", "1.0", "-1.5", "+1.+1", "1", ".", "1.2.3", "", "7fffffffffff.1", "a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		l, err := ParseReceiptHandle(h)
		if err != nil {
			return
		}
		if l.MessageID <= 0 || l.FencingToken <= 0 {
			t.Fatalf("%q parsed to %+v", h, l)
		}
		back, err := ParseReceiptHandle(FormatReceiptHandle(l))
		if err != nil || back != l {
			t.Fatalf("round trip of %+v: %+v, %v", l, back, err)
		}
	})
}
