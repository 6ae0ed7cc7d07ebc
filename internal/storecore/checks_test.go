package storecore_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/storecore"
	"github.com/leasehold/leasehold/store"
)

// A merge sets the keys given, removes those given empty, and leaves both
// maps as they were.
func TestMergeQueueAttributes(t *testing.T) {
	old := map[string]string{"A": "1", "B": "2"}
	changes := map[string]string{"A": "10", "B": "", "C": "3", "D": ""}
	got := storecore.MergeQueueAttributes(old, changes)
	if want := map[string]string{"A": "10", "C": "3"}; !maps.Equal(got, want) {
		t.Fatalf("merged %v, want %v", got, want)
	}
	if len(old) != 2 || old["A"] != "1" || len(changes) != 4 {
		t.Fatalf("the merge changed its input: %v, %v", old, changes)
	}
	if got := storecore.NewQueueAttributes(nil); got == nil || len(got) != 0 {
		t.Fatalf("NewQueueAttributes(nil) = %#v, want an empty map", got)
	}
}

// Attributes are checked key by key and in all; a merged record is
// checked against the same limit.
func TestCheckQueueAttributes(t *testing.T) {
	half := strings.Repeat("v", store.MaxQueueAttributesSize/2-1)
	if err := storecore.CheckQueueAttributes(map[string]string{"A": half, "B": half}); err != nil {
		t.Fatalf("attributes at the size limit: %v", err)
	}
	for _, bad := range []map[string]string{
		{"": "x"},
		{strings.Repeat("k", store.MaxNameLength+1): "x"},
		{"\xff": "x"},
		{"a\x00": "x"},
		{"A": "\xff"},
		{"A": "\x00"},
		{"A": half, "B": half + "v"},
	} {
		err := storecore.CheckQueueAttributes(bad)
		if !errors.Is(err, store.ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckQueueAttributes(%q) = %v, want one line wrapping ErrInvalid", bad, err)
		}
	}
	if err := storecore.CheckMergedAttributes("q", map[string]string{"A": half, "B": half + "v"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CheckMergedAttributes of a record over the limit = %v, want ErrInvalid", err)
	}
}

// The SQL backends' encoding of attributes round-trips, and NULL is none.
func TestQueueAttributesEncoding(t *testing.T) {
	attrs := map[string]string{"Policy": `{"a": "<b> & é"}`, "X": "1"}
	text, err := storecore.EncodeQueueAttributes(attrs)
	if err != nil {
		t.Fatal(err)
	}
	back, err := storecore.DecodeQueueAttributes(text)
	if err != nil || !maps.Equal(back, attrs) {
		t.Fatalf("decoded %v, %v; want %v", back, err, attrs)
	}
	if none, err := storecore.DecodeQueueAttributes(""); err != nil || none == nil || len(none) != 0 {
		t.Fatalf("decoded NULL as %#v, %v; want an empty map", none, err)
	}
	if empty, err := storecore.EncodeQueueAttributes(nil); err != nil || empty != "{}" {
		t.Fatalf("encoded no attributes as %q, %v; want {}", empty, err)
	}
}

// A message's payload and attributes share the payload limit, and the
// error says which is which.
func TestPayloadLimitCountsAttributes(t *testing.T) {
	o := store.Options{}.WithDefaults()
	msgs, err := storecore.CheckNewMessages([]store.NewMessage{{Queue: "q", Payload: make([]byte, o.PayloadLimit-1), Attributes: []byte("a")},
		{Queue: "q", Attributes: []byte{}}}, o)
	if err != nil {
		t.Fatalf("payload and attributes at the limit: %v", err)
	}
	if msgs[1].Attributes != nil {
		t.Fatalf("empty attributes came back as %#v, want nil", msgs[1].Attributes)
	}
	_, err = storecore.CheckNewMessages([]store.NewMessage{{Queue: "q", Payload: make([]byte, o.PayloadLimit), Attributes: []byte("a")}}, o)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "payload and attributes") {
		t.Fatalf("payload and attributes over the limit: %v, want ErrInvalid naming both", err)
	}
}

// A listing's filters are checked: a dead reason filters dead messages
// only, a key or kind is a name, and the bound before is not negative; the
// limit is defaulted.
func TestCheckListFilter(t *testing.T) {
	good := store.ListFilter{Queue: "q", State: store.Dead, Key: "k", Kind: "email", Reason: store.ReasonPermanent, AfterID: 3, BeforeID: 9}
	if limit, err := storecore.CheckListFilter(good); err != nil || limit != 100 {
		t.Fatalf("CheckListFilter(%+v) = %d, %v; want the default limit", good, limit, err)
	}
	for _, bad := range []store.ListFilter{
		{Queue: "q", State: store.Completed, Reason: store.ReasonPermanent},
		{Queue: "q", State: store.Dead, Reason: "a\x00b"},
		{Queue: "q", Key: strings.Repeat("k", store.MaxNameLength+1)},
		{Queue: "q", Kind: "\xff"},
		{Queue: "q", BeforeID: -1},
	} {
		if _, err := storecore.CheckListFilter(bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CheckListFilter(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := storecore.CheckListFilter(store.ListFilter{Queue: "q", State: store.Pending, Reason: store.ReasonPermanent}); err == nil ||
		!strings.Contains(err.Error(), "dead messages only, not pending ones") {
		t.Fatalf("a dead reason for pending messages: %v, want the error to name the state", err)
	}
}

// A listing of blocked keys checks its queue, the key it starts after and
// its limit, which defaults to 100.
func TestCheckBlockedKeys(t *testing.T) {
	if limit, err := storecore.CheckBlockedKeys("q", "", 0); err != nil || limit != 100 {
		t.Fatalf("CheckBlockedKeys = %d, %v; want the default limit", limit, err)
	}
	if limit, err := storecore.CheckBlockedKeys("q", "k", store.MaxBatch); err != nil || limit != store.MaxBatch {
		t.Fatalf("CheckBlockedKeys at the batch limit = %d, %v", limit, err)
	}
	for _, bad := range []struct {
		queue, after string
		limit        int
	}{{"", "", 0}, {"q", "\x00", 0}, {"q", "", -1}, {"q", "", store.MaxBatch + 1}} {
		if _, err := storecore.CheckBlockedKeys(bad.queue, bad.after, bad.limit); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CheckBlockedKeys(%q, %q, %d) = %v, want ErrInvalid", bad.queue, bad.after, bad.limit, err)
		}
	}
}
