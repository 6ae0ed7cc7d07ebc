package sqsapi

import (
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/store"
)

// A receipt handle names the lease (formatLease) and tags its queue, so
// that a handle is good only with the queue it came from.
func formatHandle(queue string, l store.Lease) string {
	return formatLease(l) + "." + queueTag(queue)
}

func queueTag(queue string) string {
	return strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(queue))), 36)
}

func parseHandle(queue, h string) (store.Lease, *apiError) {
	invalid := errReceiptHandleIsInvalid.f("the input receipt handle %q is not a valid receipt handle for queue %s", h, queue)
	if h == "" {
		return store.Lease{}, errMissingParameter.f("the request must contain the parameter ReceiptHandle")
	}
	i := strings.LastIndexByte(h, '.')
	if i < 0 || h[i+1:] != queueTag(queue) {
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
