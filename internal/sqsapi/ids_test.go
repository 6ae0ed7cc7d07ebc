package sqsapi

import (
	"bytes"
	"testing"

	"github.com/leasehold/leasehold/internal/sqsid"
)

// testIDs is a Mapper of message ids for tests that build an API.
func testIDs(t testing.TB) sqsid.Mapper {
	m, err := sqsid.New(bytes.Repeat([]byte{7}, sqsid.MinKey))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
