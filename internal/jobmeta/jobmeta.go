// Package jobmeta encodes what a client keeps beside a job's args in the
// store's message attributes: today the job's metadata. The attributes are
// one JSON object whose fields each carry one thing, so that a later field
// can join without a change to the stored bytes of older jobs, and a field
// a reader does not know is skipped.
package jobmeta

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"
)

// Limits of a job's metadata.
const (
	// MaxKeys is the most keys a job's metadata may have.
	MaxKeys = 64
	// MaxSize is the most bytes the encoded attributes may take.
	MaxSize = 8 << 10
)

// attributes is the JSON object stored as a message's attributes.
type attributes struct {
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Encode returns the attributes that carry metadata, or nil when it is
// empty. Metadata over the limits, with an empty key or with a key or
// value that is not UTF-8 (JSON could not give it back as it was) is an
// error naming the problem.
func Encode(metadata map[string]string) ([]byte, error) {
	if len(metadata) == 0 {
		return nil, nil
	}
	if len(metadata) > MaxKeys {
		return nil, fmt.Errorf("metadata has %d keys, at most %d are allowed", len(metadata), MaxKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(metadata)) {
		switch {
		case k == "":
			return nil, fmt.Errorf("metadata has an empty key")
		case !utf8.ValidString(k):
			return nil, fmt.Errorf("metadata key %q is not UTF-8", k)
		case !utf8.ValidString(metadata[k]):
			return nil, fmt.Errorf("metadata value of key %q is not UTF-8", k)
		}
	}
	b, err := json.Marshal(attributes{Metadata: metadata})
	if err != nil {
		// A map of valid strings always encodes.
		panic(err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("metadata takes %d bytes encoded, at most %d are allowed", len(b), MaxSize)
	}
	return b, nil
}

// Decode returns the metadata in a message's attributes; nil when there is
// none. Attributes that another writer stored (a message sent through the
// SQS API keeps its own there) carry no metadata, and give nil.
func Decode(attrs []byte) map[string]string {
	if len(attrs) == 0 {
		return nil
	}
	var a attributes
	if json.Unmarshal(attrs, &a) != nil || len(a.Metadata) == 0 {
		return nil
	}
	return a.Metadata
}
