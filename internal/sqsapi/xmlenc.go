package sqsapi

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The query protocol's answers are XML: an action's output, the same
// value the JSON protocol encodes, written by its json names, lists and
// maps flattened under their query names (flattenedNames), inside
// <ActionResponse><ActionResult>, with the request's id.

// xmlNamespace is the namespace of SQS's XML answers.
const xmlNamespace = "http://queue.amazonaws.com/doc/2012-11-05/"

// xmlContentType is the type of SQS's XML answers.
const xmlContentType = "text/xml"

// encodeXML writes out, action's output, as the query protocol's answer
// to request id. An action without output (empty) has no Result element,
// and an output with nothing to write an empty one.
func encodeXML(w io.Writer, action, id string, out any) error {
	var b bytes.Buffer
	b.Grow(4 << 10)
	b.WriteString(xml.Header)
	b.WriteString("<" + action + "Response xmlns=\"" + xmlNamespace + "\">")
	if _, none := out.(empty); !none {
		b.WriteString("<" + action + "Result>")
		start := b.Len()
		writeXMLFields(&b, reflect.ValueOf(out), action)
		if b.Len() == start {
			// A result with nothing in it is an empty element, as
			// Amazon SQS writes it: <ReceiveMessageResult/>.
			b.Truncate(start - 1)
			b.WriteString("/>")
		} else {
			b.WriteString("</" + action + "Result>")
		}
	}
	b.WriteString("<ResponseMetadata><RequestId>" + id + "</RequestId></ResponseMetadata></" + action + "Response>")
	_, err := w.Write(b.Bytes())
	return err
}

// writeXMLError writes e as the query protocol's error answer to request
// id.
func writeXMLError(w http.ResponseWriter, e *apiError, id string) {
	h := w.Header()
	h.Set("Content-Type", xmlContentType)
	setRetryAfter(h, e)
	w.WriteHeader(e.status)
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString("<ErrorResponse xmlns=\"" + xmlNamespace + "\"><Error><Type>" + e.fault() + "</Type>")
	writeXMLText(&b, "Code", e.code)
	writeXMLText(&b, "Message", queryMessage(e))
	b.WriteString("<Detail/></Error><RequestId>" + id + "</RequestId></ErrorResponse>")
	_, _ = w.Write(b.Bytes())
}

// queryMessage is e's text in the query protocol.
func queryMessage(e *apiError) string {
	if e.code == errQueueDoesNotExist.code {
		// The query protocol's text of this error, as Amazon SQS words it.
		return "The specified queue does not exist for this wsdl version."
	}
	return e.message
}

// setRetryAfter sets the Retry-After header of e, if it has one.
func setRetryAfter(h http.Header, e *apiError) {
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
}

// writeXMLFields writes the fields of v, a struct, by their json names,
// leaving out those json would leave out.
func writeXMLFields(b *bytes.Buffer, v reflect.Value, action string) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	for _, sf := range fieldsOf(v.Type()) {
		fv := v.Field(sf.index)
		if sf.embedded {
			writeXMLFields(b, fv, action)
			continue
		}
		if sf.omitEmpty && fv.IsZero() || fv.Kind() == reflect.Pointer && fv.IsNil() {
			continue
		}
		if f, ok := flattenedName(sf.name, action); ok && sf.collection {
			writeXMLCollection(b, fv, f, action)
			continue
		}
		writeXMLValue(b, sf.name, fv, action)
	}
}

// writeXMLCollection writes a list's elements, or a map's entries in the
// order of their keys, each as an element of f's name.
func writeXMLCollection(b *bytes.Buffer, v reflect.Value, f flattened, action string) {
	if v.Kind() == reflect.Slice {
		for i := range v.Len() {
			writeXMLValue(b, f.name, v.Index(i), action)
		}
		return
	}
	keys := v.MapKeys()
	slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
	for _, k := range keys {
		b.WriteString("<" + f.name + ">")
		writeXMLText(b, f.key, k.String())
		writeXMLValue(b, f.value, v.MapIndex(k), action)
		b.WriteString("</" + f.name + ">")
	}
}

// writeXMLValue writes v as the element name: a struct's fields, text, a
// number, a boolean, or bytes in base64.
func writeXMLValue(b *bytes.Buffer, name string, v reflect.Value, action string) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		b.WriteString("<" + name + ">")
		writeXMLFields(b, v, action)
		b.WriteString("</" + name + ">")
	case reflect.String:
		writeXMLText(b, name, v.String())
	case reflect.Int, reflect.Int32, reflect.Int64:
		writeXMLText(b, name, strconv.FormatInt(v.Int(), 10))
	case reflect.Bool:
		writeXMLText(b, name, strconv.FormatBool(v.Bool()))
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			writeXMLText(b, name, base64.StdEncoding.EncodeToString(v.Bytes()))
		}
	}
}

// writeXMLText writes <name>text</name>, text escaped: carriage returns
// and tabs too, so that a parser gives back the text as it was.
func writeXMLText(b *bytes.Buffer, name, text string) {
	b.WriteByte('<')
	b.WriteString(name)
	b.WriteByte('>')
	if plainText(text) {
		b.WriteString(text)
	} else {
		_ = xml.EscapeText(b, []byte(text))
	}
	b.WriteString("</")
	b.WriteString(name)
	b.WriteByte('>')
}

// plainText reports whether text is printable ASCII that XML takes as it
// is.
func plainText(text string) bool {
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c < 0x20 || c > 0x7e, c == '<', c == '>', c == '&', c == '\'', c == '"':
			return false
		}
	}
	return true
}

// fault is whose fault e is, in the query protocol's terms.
func (e *apiError) fault() string {
	if e.server || e.status >= 500 {
		return "Receiver"
	}
	return "Sender"
}
