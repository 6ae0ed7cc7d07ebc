package sqsid_test

import (
	"bytes"
	"regexp"
	"testing"

	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/internal/sqsid"
)

func mapper(t testing.TB, fill byte) sqsid.Mapper {
	m, err := sqsid.New(bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// uuid8 is the canonical text of a version 8 UUID of the RFC 9562
// variant.
var uuid8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestMessageIDIsAUUIDThatMapsBack(t *testing.T) {
	a, b := mapper(t, 1), mapper(t, 2)
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.Int64Range(1, 1<<62-1).Draw(t, "id")
		s := a.MessageID(id)
		if !uuid8.MatchString(s) {
			t.Fatalf("MessageID(%d) = %q: not a version 8 UUID of the RFC 9562 variant in canonical form", id, s)
		}
		if got, ok := a.ID(s); !ok || got != id {
			t.Fatalf("ID(MessageID(%d)) = %d, %v", id, got, ok)
		}
		if _, ok := b.ID(s); ok {
			t.Fatalf("another database's mapper took %s", s)
		}
		if b.MessageID(id) == s {
			t.Fatalf("two databases gave id %d the same message id", id)
		}
	})
}

func TestOnlyItsOwnIDsMapBack(t *testing.T) {
	m := mapper(t, 1)
	s := m.MessageID(42)
	for _, bad := range []string{"", "42", "not-a-uuid", s[:35], s + "0", "00000000-0000-8000-8000-00000000002a"} {
		if _, ok := m.ID(bad); ok {
			t.Errorf("ID(%q) was taken", bad)
		}
	}
	if got := (sqsid.Mapper{}).MessageID(42); got != "" {
		t.Errorf("the zero Mapper gave %q", got)
	}
	if _, err := sqsid.New(make([]byte, 31)); err == nil {
		t.Error("New took a secret of 31 bytes")
	}
}
