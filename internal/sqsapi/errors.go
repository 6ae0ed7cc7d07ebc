package sqsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/leasehold/leasehold/store"
)

// apiError is an error in SQS's terms: the shape name that the JSON
// protocol puts in __type, the code of the older query protocol that the
// x-amzn-query-error header carries (SDKs of query-compatible services
// take the code from it), whose fault it is, and the HTTP status.
type apiError struct {
	status  int
	shape   string
	code    string
	server  bool
	message string
	// retryAfter, when positive, is sent as Retry-After, in seconds.
	retryAfter int
	// cause is the detail of a server-side failure: logged under the
	// request's id, never sent to the client.
	cause error
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// errorKind is one of SQS's errors, without its message.
type errorKind struct {
	status int
	shape  string
	code   string
}

func (k errorKind) f(format string, args ...any) *apiError {
	return &apiError{status: k.status, shape: k.shape, code: k.code, message: fmt.Sprintf(format, args...)}
}

// The errors this API returns, by their SQS shape; the codes are SQS's.
// Two shapes are not named after their codes, as Amazon SQS names them
// in the JSON protocol: InvalidParameterValueException and
// MissingRequiredParameterException.
var (
	errQueueDoesNotExist      = errorKind{400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}
	errQueueNameExists        = errorKind{400, "QueueNameExists", "QueueAlreadyExists"}
	errReceiptHandleIsInvalid = errorKind{400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid"}
	errInvalidAttributeName   = errorKind{400, "InvalidAttributeName", "InvalidAttributeName"}
	errInvalidAttributeValue  = errorKind{400, "InvalidAttributeValue", "InvalidAttributeValue"}
	errInvalidMessageContents = errorKind{400, "InvalidMessageContents", "InvalidMessageContents"}
	errEmptyBatch             = errorKind{400, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest"}
	errTooManyEntries         = errorKind{400, "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"}
	errBatchIDsNotDistinct    = errorKind{400, "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"}
	errInvalidBatchEntryID    = errorKind{400, "InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId"}
	errBatchTooLong           = errorKind{400, "BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong"}
	errUnsupported            = errorKind{400, "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation"}
	errInvalidParameter       = errorKind{400, "InvalidParameterValueException", "InvalidParameterValue"}
	errMissingParameter       = errorKind{400, "MissingRequiredParameterException", "MissingParameter"}
	errInvalidAction          = errorKind{400, "InvalidAction", "InvalidAction"}
	errInvalidAddress         = errorKind{404, "InvalidAddress", "InvalidAddress"}
	errOverLimit              = errorKind{403, "OverLimit", "OverLimit"}
	errInternal               = errorKind{500, "InternalFailure", "InternalFailure"}
	errUnavailable            = errorKind{503, "ServiceUnavailable", "ServiceUnavailable"}
	errThrottled              = errorKind{400, "RequestThrottled", "RequestThrottled"}
	errPurgeInProgress        = errorKind{403, "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress"}
	errQueueDeletedRecently   = errorKind{400, "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently"}
)

// authError is a refused signature: HTTP 403 under the signer's code.
func authError(code, message string) *apiError {
	return &apiError{status: http.StatusForbidden, shape: code, code: code, message: message}
}

// fromStore turns a store error into an SQS one: bad input is the
// sender's fault and names its problem; anything else is the server's,
// and a closed store (a server stopping) is worth a retry.
func fromStore(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, store.ErrInvalid):
		return errInvalidParameter.f("%v", err)
	case errors.Is(err, store.ErrClosed):
		return errUnavailable.f("the server is stopping")
	default:
		e := errInternal.f("the server failed; its log has the detail under this response's request id (x-amzn-RequestId)")
		e.server, e.cause = true, err
		return e
	}
}

// retryIn sets how long the client is told to wait before it retries, in
// whole seconds, at least one.
func (e *apiError) retryIn(d time.Duration) *apiError {
	e.retryAfter = max(1, int((d+time.Second-1)/time.Second))
	return e
}

// writeError writes e in the JSON protocol's shape.
func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Amzn-Query-Error", e.code+";"+e.fault())
	setRetryAfter(h, e)
	w.WriteHeader(e.status)
	_ = encodeJSON(w, struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{"com.amazonaws.sqs#" + e.shape, e.message})
}

// encodeJSON writes v as SQS's JSON: characters HTML gives meaning to
// (<, >, &) are sent as they are, not as six-byte escapes.
func encodeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e.Encode(v)
}
