package sqsapi

import (
	"cmp"
	"encoding/base64"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// SQS's query protocol, the older of its two: the action and its input
// are form parameters (Action=SendMessage&QueueUrl=...), in a POST's
// url-encoded body or in the URL, and the answer is XML (xmlenc.go). Its
// input is decoded into the same typed structs as the JSON protocol's, by
// their json names; lists and maps are flattened under the names below.
// The form is read into a tree first, within the same limits as the JSON
// scan (inputscan.go), so that a request of a thousand attributes is
// refused before any map is made of it.

// formContentType is the body type of a query request.
const formContentType = "application/x-www-form-urlencoded"

// maxFormParams bounds a query request's parameters, URL and body
// together: SQS's largest input, a batch of ten messages with ten
// attributes each, takes about 650.
const maxFormParams = 1000

// errMissingAction is a query request that names no action.
var errMissingAction = errorKind{400, "MissingAction", "MissingAction"}

// flattened is how the query protocol names a list or map member: each
// element is Name.N (N from 1), a map's entry Name.N.Key and Name.N.Value.
type flattened struct {
	name       string
	key, value string
}

// flattenedNames are the query protocol's names of the members, by their
// json names, that are lists or maps, in inputs and outputs. A batch's
// entries are named after their action (entryName).
var flattenedNames = map[string]flattened{
	"Attributes":                  {"Attribute", "Name", "Value"},
	"tags":                        {"Tag", "Key", "Value"},
	"Tags":                        {"Tag", "Key", "Value"},
	"MessageAttributes":           {"MessageAttribute", "Name", "Value"},
	"MessageSystemAttributes":     {"MessageSystemAttribute", "Name", "Value"},
	"AttributeNames":              {name: "AttributeName"},
	"MessageAttributeNames":       {name: "MessageAttributeName"},
	"MessageSystemAttributeNames": {name: "MessageSystemAttributeName"},
	"TagKeys":                     {name: "TagKey"},
	"AWSAccountIds":               {name: "AWSAccountId"},
	"Actions":                     {name: "ActionName"},
	"StringListValues":            {name: "StringListValue"},
	"BinaryListValues":            {name: "BinaryListValue"},
	"QueueUrls":                   {name: "QueueUrl"},
	"queueUrls":                   {name: "QueueUrl"},
	"Messages":                    {name: "Message"},
	"Failed":                      {name: "BatchResultErrorEntry"},
}

// batchActions are the actions whose input has Entries.
var batchActions = []string{"SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"}

// flattenedName returns the query name of the member of action whose json
// name is field, when it is a list or a map.
func flattenedName(field, action string) (flattened, bool) {
	switch field {
	case "Entries":
		return flattened{name: action + "RequestEntry"}, true
	case "Successful":
		return flattened{name: action + "ResultEntry"}, true
	}
	f, ok := flattenedNames[field]
	return f, ok
}

// inputCollections are the query names of the input lists and maps, by
// the json name whose limit they share with the JSON protocol.
var inputCollections = func() map[string]string {
	m := map[string]string{}
	for field, f := range flattenedNames {
		switch field {
		case "QueueUrls", "queueUrls", "Messages", "Failed":
		default:
			m[f.name] = field
		}
	}
	for _, a := range batchActions {
		m[a+"RequestEntry"] = "Entries"
	}
	return m
}()

// formNode is a parameter of a query request, and those under it: a
// name's value, its members by name (Name.Member), and a collection's
// elements by index (Name.N).
type formNode struct {
	value  string
	set    bool
	fields map[string]*formNode
	items  map[int]*formNode
}

// isQuery reports whether r is a query request: one that is not of the
// JSON protocol, which names its action in X-Amz-Target or sends JSON.
func isQuery(r *http.Request) bool {
	if r.Header.Get("X-Amz-Target") != "" {
		return false
	}
	t, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return !strings.HasPrefix(t, "application/x-amz-json-")
}

// IsRequest reports whether r is an SQS request rather than a page's: a
// POST, or a GET that names its action in the URL (the query protocol).
func IsRequest(r *http.Request) bool {
	return r.Method == http.MethodPost || r.Method == http.MethodGet && r.URL.Query().Has("Action")
}

// parseForm reads a query request's parameters, from its URL and its
// body, into a tree, within SQS's limits. It refuses a parameter given
// twice, an element index that is not a number from 1, text that is not
// Unicode, and more members than the JSON protocol takes.
func parseForm(r *http.Request, body []byte) (*formNode, *apiError) {
	root := &formNode{}
	n := 0
	if err := root.addAll(r.URL.RawQuery, &n); err != nil {
		return nil, err
	}
	if len(body) > 0 {
		t, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if t != formContentType {
			return nil, errInvalidParameter.f("a query request's body is a form (Content-Type: %s), not %q", formContentType, r.Header.Get("Content-Type"))
		}
		if err := root.addAll(string(body), &n); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// addAll adds the parameters of s, url-encoded, counting them in n.
func (root *formNode) addAll(s string, n *int) *apiError {
	for s != "" {
		var pair string
		pair, s, _ = strings.Cut(s, "&")
		if pair == "" {
			continue
		}
		if *n++; *n > maxFormParams {
			return errInvalidParameter.f("the request has more than %d parameters", maxFormParams)
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return errInvalidParameter.f("the parameter name %q is not url-encoded: %v", k, err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return errInvalidParameter.f("the value of parameter %s is not url-encoded: %v", key, err)
		}
		if err := root.add(key, val); err != nil {
			return err
		}
	}
	return nil
}

// add sets the parameter key (Name.N.Member...) to val.
func (root *formNode) add(key, val string) *apiError {
	if !utf8.ValidString(key) {
		return notText("", "")
	}
	if strings.Count(key, ".") >= maxDepth {
		return errInvalidParameter.f("the parameter %.64s nests deeper than %d levels", key, maxDepth)
	}
	segs := strings.Split(key, ".")
	node := root
	for i := 0; i < len(segs); i++ {
		child, err := node.field(segs[i], segs[:i])
		if err != nil {
			return err
		}
		node = child
		field, collection := inputCollections[segs[i]]
		if !collection || i+1 == len(segs) {
			continue
		}
		i++
		idx, aerr := strconv.Atoi(segs[i])
		if aerr != nil || idx < 1 || segs[i][0] < '1' || segs[i][0] > '9' {
			return errInvalidParameter.f("the parameter %s has a malformed index %q: the members of %s are numbered from 1", key, segs[i], segs[i-1])
		}
		item := node.items[idx]
		if item == nil {
			limit, fail := memberLimit(field, strings.Join(segs[:i], "."))
			if len(node.items) == limit {
				return fail(limit + 1)
			}
			if node.items == nil {
				node.items = map[int]*formNode{}
			}
			item = &formNode{}
			node.items[idx] = item
		}
		node = item
	}
	if node.set {
		return errInvalidParameter.f("the parameter %s is given more than once", key)
	}
	if !utf8.ValidString(val) {
		return notText(segs[len(segs)-1], strings.Join(segs[:len(segs)-1], "."))
	}
	node.value, node.set = val, true
	return nil
}

// field returns the member name of n, whose path is path, made if new,
// within maxMembers.
func (n *formNode) field(name string, path []string) (*formNode, *apiError) {
	if c := n.fields[name]; c != nil {
		return c, nil
	}
	if len(n.fields) == maxMembers {
		return nil, errInvalidParameter.f("%s holds more than %d members", describe(strings.Join(path, ".")), maxMembers)
	}
	if n.fields == nil {
		n.fields = map[string]*formNode{}
	}
	c := &formNode{}
	n.fields[name] = c
	return c, nil
}

// action is the request's Action parameter.
func (n *formNode) action() string {
	if a := n.fields["Action"]; a != nil {
		return a.value
	}
	return ""
}

// decode sets the fields of v, a pointer to an action's input struct,
// from the form, by their json names: scalars by name, lists and maps
// by their flattened names. Parameters no field names are ignored.
func (n *formNode) decode(v any, action string) *apiError {
	return n.decodeStruct(reflect.ValueOf(v).Elem(), action, "")
}

func (n *formNode) decodeStruct(v reflect.Value, action, path string) *apiError {
	for _, sf := range fieldsOf(v.Type()) {
		fv := v.Field(sf.index)
		if sf.embedded {
			if err := n.decodeStruct(fv, action, path); err != nil {
				return err
			}
			continue
		}
		if f, ok := flattenedName(sf.name, action); ok && sf.collection {
			c := n.fields[f.name]
			if c == nil || len(c.items) == 0 {
				continue
			}
			if err := c.decodeCollection(fv, f, action, join(path, f.name)); err != nil {
				return err
			}
			continue
		}
		if c := n.fields[sf.name]; c != nil && c.set {
			if err := decodeScalar(c.value, fv, path, sf.name); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeCollection sets v, a slice or a map, from the elements of n in
// the order of their indexes.
func (n *formNode) decodeCollection(v reflect.Value, f flattened, action, path string) *apiError {
	idx := slices.Sorted(func(yield func(int) bool) {
		for i := range n.items {
			if !yield(i) {
				return
			}
		}
	})
	t := v.Type()
	if t.Kind() == reflect.Slice {
		s := reflect.MakeSlice(t, len(idx), len(idx))
		for j, i := range idx {
			if err := n.items[i].decodeValue(s.Index(j), action, path+"."+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	m := reflect.MakeMapWithSize(t, len(idx))
	for _, i := range idx {
		item, at := n.items[i], path+"."+strconv.Itoa(i)
		k := item.fields[f.key]
		if k == nil || !k.set {
			return errMissingParameter.f("The request must contain the parameter %s.%s.", at, f.key)
		}
		key := reflect.ValueOf(k.value)
		if m.MapIndex(key).IsValid() {
			return errInvalidParameter.f("%s.%s names %q, which an earlier member names too", at, f.key, k.value)
		}
		val := reflect.New(t.Elem()).Elem()
		if c := item.fields[f.value]; c != nil {
			if err := c.decodeValue(val, action, at+"."+f.value); err != nil {
				return err
			}
		}
		m.SetMapIndex(key, val)
	}
	v.Set(m)
	return nil
}

// decodeValue sets v, an element of a list or a map's value, from n.
func (n *formNode) decodeValue(v reflect.Value, action, path string) *apiError {
	if v.Kind() == reflect.Struct {
		return n.decodeStruct(v, action, path)
	}
	if !n.set {
		return nil
	}
	return decodeScalar(n.value, v, path, "")
}

// decodeScalar sets v, the parameter name under path, from s: text, an
// integer, a boolean, or bytes in base64.
func decodeScalar(s string, v reflect.Value, path, name string) *apiError {
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := decodeScalar(s, p.Elem(), path, name); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	param := func() string { return join(path, name) }
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(i) {
			return errInvalidParameter.f("value %q for parameter %s is invalid: it must be an integer", s, param())
		}
		v.SetInt(i)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errInvalidParameter.f("value %q for parameter %s is invalid: it must be true or false", s, param())
		}
		v.SetBool(b)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.Uint8 {
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return errInvalidParameter.f("value of parameter %s is not base64: %v", param(), err)
		}
		v.SetBytes(b)
	}
	return nil
}

// structField is a field of an input or output struct as the encodings
// see it: embedded, or a member of a json name.
type structField struct {
	index      int
	embedded   bool
	name       string
	omitEmpty  bool
	collection bool
}

// structFields holds the fields of each struct type met, read once.
var structFields sync.Map

// fieldsOf returns the fields of struct type t that json encodes, by
// their json names, and the embedded structs, whose fields are t's too.
func fieldsOf(t reflect.Type) []structField {
	if fs, ok := structFields.Load(t); ok {
		return fs.([]structField)
	}
	var fs []structField
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			fs = append(fs, structField{index: i, embedded: true})
			continue
		}
		tag := sf.Tag.Get("json")
		if !sf.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fs = append(fs, structField{index: i, name: cmp.Or(name, sf.Name),
			omitEmpty: strings.Contains(","+opts+",", ",omitempty,"), collection: isCollection(sf.Type)})
	}
	structFields.Store(t, fs)
	return fs
}

// isCollection reports whether t is a list or a map: not bytes.
func isCollection(t reflect.Type) bool {
	return t.Kind() == reflect.Map || t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// queuePath returns the name of the queue whose URL r was sent to
// (/ACCOUNT/NAME), or "".
func (a *API) queuePath(r *http.Request) string {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/"+a.cfg.AccountID+"/")
	if !ok || rest == "" || strings.Contains(rest, "/") {
		return ""
	}
	return r.URL.EscapedPath()
}

// AccountID is the account of the API's queue URLs, /AccountID/NAME.
func (a *API) AccountID() string { return a.cfg.AccountID }

// defaultQueue names the queue of an input that names none.
func (in *queueInput) defaultQueue(u string) {
	if in.QueueUrl == "" {
		in.QueueUrl = u
	}
}
