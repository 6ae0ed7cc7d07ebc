// Package sqsid maps leasehold's message ids to the message ids the SQS
// API gives: UUIDs, as Amazon SQS's are, which clients may parse as such.
//
// A message id is a UUID of version 8 (custom) and the RFC 9562 variant
// whose last 8 bytes are the leasehold id (below 2^62, so that the
// variant's two bits above it are free) and whose first 8 bytes, but for
// the version's 4 bits, are an HMAC of the id under a key of the
// database. So the mapping is one to one and reversible, and two
// databases give different UUIDs for the same leasehold id. Leasehold
// never gives an id twice in a database (SQLite's AUTOINCREMENT,
// PostgreSQL's identity column), so neither is a UUID.
package sqsid

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
)

// MinKey is the fewest bytes of a Mapper's key.
const MinKey = 32

// Mapper maps leasehold message ids to SQS message ids and back. The zero
// Mapper maps nothing: MessageID returns "".
type Mapper struct{ key []byte }

// New returns the Mapper of a database whose server secret is secret:
// servers, the dashboard and the command that read the same secret map
// alike. The key is made from the secret for this use alone.
func New(secret []byte) (Mapper, error) {
	if len(secret) < MinKey {
		return Mapper{}, errors.New("sqsid: the secret has fewer than 32 bytes")
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("leasehold sqs message ids"))
	return Mapper{key: h.Sum(nil)}, nil
}

// maxID bounds the ids a UUID can carry: the variant takes the top two
// bits of the last 8 bytes.
const maxID = 1<<62 - 1

// MessageID is the SQS message id of leasehold's message id, or "" for
// the zero Mapper or an id that is not positive.
func (m Mapper) MessageID(id int64) string {
	if m.key == nil || id <= 0 || id > maxID {
		return ""
	}
	var u [16]byte
	m.tag(u[:8], id)
	binary.BigEndian.PutUint64(u[8:], uint64(id))
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] |= 0x80            // variant 10
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return string(s[:])
}

// ID is the leasehold id of an SQS message id this Mapper gave; ok is
// false for anything else, another database's ids included.
func (m Mapper) ID(messageID string) (id int64, ok bool) {
	if m.key == nil || len(messageID) != 36 {
		return 0, false
	}
	var u [16]byte
	var b []byte
	for i, c := range []byte(messageID) {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return 0, false
			}
			continue
		}
		b = append(b, c)
	}
	if _, err := hex.Decode(u[:], b); err != nil || u[6]&0xf0 != 0x80 || u[8]&0xc0 != 0x80 {
		return 0, false
	}
	id = int64(binary.BigEndian.Uint64(u[8:]) &^ (0xc0 << 56))
	if id <= 0 {
		return 0, false
	}
	var want [8]byte
	m.tag(want[:], id)
	want[6] = want[6]&0x0f | 0x80
	if !hmac.Equal(want[:], u[:8]) {
		return 0, false
	}
	return id, true
}

// tag writes the HMAC of id under the key into dst's 8 bytes.
func (m Mapper) tag(dst []byte, id int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(id))
	h := hmac.New(sha256.New, m.key)
	h.Write(b[:])
	copy(dst, h.Sum(nil))
}
