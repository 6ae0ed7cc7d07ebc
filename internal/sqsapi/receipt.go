package sqsapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/store"
)

// MinReceiptKey is the shortest Config.ReceiptKey.
const MinReceiptKey = 32

// receiptMACSize is how many bytes of the HMAC-SHA256 a handle carries:
// 128 bits, past any guessing.
const receiptMACSize = 16

// receipts makes and checks receipt handles. A handle names the lease
// (formatLease) and carries a MAC of the lease and its queue under a key
// every server of the database shares: a client can neither forge a
// handle for a lease it did not receive (message ids and fencing tokens
// are sequential, so they are easily guessed) nor use a handle with
// another queue, and any server of the database accepts what another
// issued.
type receipts struct{ key []byte }

func (r receipts) format(queue string, l store.Lease) string {
	lease := formatLease(l)
	return lease + "." + r.mac(queue, lease)
}

// mac is the MAC of a lease's name with its queue's, separated by a byte
// that neither holds, so that no two pairs sign alike.
func (r receipts) mac(queue, lease string) string {
	h := hmac.New(sha256.New, r.key)
	h.Write([]byte(queue))
	h.Write([]byte{0})
	h.Write([]byte(lease))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:receiptMACSize])
}

// parse returns the lease of a handle that this database's servers issued
// for queue; any other handle is ReceiptHandleIsInvalid.
func (r receipts) parse(queue, h string) (store.Lease, *apiError) {
	invalid := errReceiptHandleIsInvalid.f("The input receipt handle \"%s\" is not a valid receipt handle.", h)
	if h == "" {
		return store.Lease{}, errMissingParameter.f("The request must contain the parameter ReceiptHandle.")
	}
	i := strings.LastIndexByte(h, '.')
	if i < 0 || !hmac.Equal([]byte(h[i+1:]), []byte(r.mac(queue, h[:i]))) {
		return store.Lease{}, invalid
	}
	l, ok := parseLease(h[:i])
	if !ok {
		return store.Lease{}, invalid
	}
	return l, nil
}

// formatLease names a lease: its message id and fencing token, in base
// 36.
func formatLease(l store.Lease) string {
	return strconv.FormatInt(l.MessageID, 36) + "." + strconv.FormatInt(l.FencingToken, 36)
}

// parseLease reads a lease named by formatLease; ok is false for anything
// else.
func parseLease(h string) (l store.Lease, ok bool) {
	id, fence, found := strings.Cut(h, ".")
	if !found {
		return store.Lease{}, false
	}
	i, err1 := strconv.ParseInt(id, 36, 64)
	f, err2 := strconv.ParseInt(fence, 36, 64)
	if err1 != nil || err2 != nil || i <= 0 || f <= 0 {
		return store.Lease{}, false
	}
	return store.Lease{MessageID: i, FencingToken: f}, true
}
