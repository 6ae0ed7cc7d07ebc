package sqsapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// A query request that accepts application/json before XML is answered in
// JSON, as Amazon SQS answers it: the XML answer's tree, with its root
// element as the outer key ({"ActionResponse": {"ActionResult": ...,
// "ResponseMetadata": {"RequestId": ...}}}) and an error as {"Error":
// {"Code", "Message", "Type"}, "RequestId"}. The result holds the JSON
// protocol's output, but for what Amazon SQS writes otherwise there: a
// map is a list of its entries under their query names (an attribute is
// {"Name", "Value"}, a tag {"Key", "Value"}), and the lists of queue URLs
// and of messages are queueUrls and messages.

// queryJSONContentType is the type of a query request's JSON answers.
const queryJSONContentType = "application/json"

// queryJSONNames are the names Amazon SQS gives, in a query request's
// JSON answer, to the output members the JSON protocol names otherwise.
var queryJSONNames = map[string]string{"QueueUrls": "queueUrls", "Messages": "messages"}

// acceptsJSON reports whether a query request asks for JSON: its Accept
// header names application/json before any XML type.
func acceptsJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			t, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			switch {
			case err != nil:
			case t == queryJSONContentType:
				return true
			case strings.HasSuffix(t, "/xml"):
				return false
			}
		}
	}
	return false
}

// encodeQueryJSON writes out, action's output, as the JSON answer to
// query request id. An action without output (empty) has no Result.
func encodeQueryJSON(w io.Writer, action, id string, out any) error {
	response := map[string]any{"ResponseMetadata": map[string]string{"RequestId": id}}
	if _, none := out.(empty); !none {
		var b bytes.Buffer
		if err := encodeJSON(&b, out); err != nil {
			return err
		}
		d := json.NewDecoder(&b)
		d.UseNumber()
		var result any
		if err := d.Decode(&result); err != nil {
			return err
		}
		response[action+"Result"] = queryJSONValue(result, "", action)
	}
	return encodeJSON(w, map[string]any{action + "Response": response})
}

// queryJSONValue rewrites v, the JSON protocol's value of the member
// named name, in the shape of a query request's JSON answer.
func queryJSONValue(v any, name, action string) any {
	switch v := v.(type) {
	case map[string]any:
		if f, ok := flattenedName(name, action); ok && f.key != "" {
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range v {
					if !yield(k) {
						return
					}
				}
			})
			entries := make([]any, 0, len(v))
			for _, k := range keys {
				entries = append(entries, map[string]any{f.key: k, f.value: queryJSONValue(v[k], "", action)})
			}
			return entries
		}
		out := make(map[string]any, len(v))
		for k, m := range v {
			out[cmp.Or(queryJSONNames[k], k)] = queryJSONValue(m, k, action)
		}
		return out
	case []any:
		for i, m := range v {
			v[i] = queryJSONValue(m, "", action)
		}
		return v
	}
	return v
}

// queryJSONError is the JSON answer of a query request that failed.
type queryJSONError struct {
	Error struct {
		Code    string `json:"Code"`
		Message string `json:"Message"`
		Type    string `json:"Type"`
	} `json:"Error"`
	RequestID string `json:"RequestId"`
}

// writeQueryJSONError writes e as the JSON answer of a query request
// that failed.
func writeQueryJSONError(w http.ResponseWriter, e *apiError, id string) {
	h := w.Header()
	h.Set("Content-Type", queryJSONContentType)
	setRetryAfter(h, e)
	w.WriteHeader(e.status)
	var out queryJSONError
	out.Error.Code, out.Error.Message, out.Error.Type = e.code, queryMessage(e), e.fault()
	out.RequestID = id
	_ = encodeJSON(w, out)
}
