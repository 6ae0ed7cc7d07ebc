package sqsapi

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// A request's JSON is scanned, as raw bytes, before it is decoded, for
// two things the decoder would not refuse:
//
//   - Containers beyond SQS's limits. Decoding a map of half a million
//     message attributes costs hundreds of megabytes before its size can be
//     checked; the scan stops at the first member past a limit, having
//     allocated nothing.
//   - Text that is not Unicode. The decoder turns invalid UTF-8 and lone
//     surrogate escapes ("\ud800") into U+FFFD without a word; SQS refuses
//     them, and so does this API, before they are lost.
//
// A body that is not JSON passes the scan unjudged, so that the decoder's
// own error names the problem.

// maxMembers bounds the members of any object or array of a request
// whose key has no lower limit of its own: SQS's inputs hold at most 50
// (a queue's tags).
const maxMembers = 100

// maxKeyText bounds the strings whose text the scan keeps, quotes
// included: the keys it looks for are far shorter, and a longer string
// (a message body) is passed over without a copy.
const maxKeyText = 1024

// maxDepth bounds how deeply a request's containers nest: SQS's inputs
// go five deep (entries, their attributes, an attribute's lists).
const maxDepth = 16

// memberLimits are the keys whose containers SQS bounds lower, with the
// error SQS gives past the limit. Keys match as the decoder matches
// them, without regard to case.
var memberLimits = map[string]struct {
	max  int
	fail func(n int) *apiError
}{
	// Past ten entries, the batch's own check names how many were sent,
	// as SQS does; the scan stops only a batch far beyond that.
	"entries": {maxMembers, func(n int) *apiError {
		return errTooManyEntries.f("Maximum number of entries per request are %d. You have sent more than %d.", maxBatch, n-1)
	}},
	"messageattributes": {maxMessageAttributes, func(n int) *apiError {
		return errInvalidParameter.f("the message has at least %d message attributes; at most %d are allowed", n, maxMessageAttributes)
	}},
	"messagesystemattributes": {maxMessageAttributes, func(n int) *apiError {
		return errInvalidParameter.f("the message has at least %d message system attributes; at most %d are allowed", n, maxMessageAttributes)
	}},
}

// memberLimit is how many members the container under key may hold, and
// the error past them, which names the container as shown.
func memberLimit(key, shown string) (int, func(n int) *apiError) {
	for name, l := range memberLimits {
		// Folded as the decoder folds a key to a field: "Entrieſ" is
		// Entries.
		if strings.EqualFold(key, name) {
			return l.max, l.fail
		}
	}
	return maxMembers, func(n int) *apiError {
		return errInvalidParameter.f("%s holds more than %d members", describe(shown), maxMembers)
	}
}

// errSyntax stops a scan at bytes that are not JSON, which the decoder
// then reports.
var errSyntax = &apiError{}

// scanInput checks body, a request's JSON, against the limits above. It
// returns nil when the body is within them or is not JSON.
func scanInput(body []byte) *apiError {
	s := scanner{b: body}
	s.space()
	if s.i == len(s.b) {
		return nil
	}
	if err := s.value("", "", 0); err != nil && err != errSyntax {
		return err
	}
	return nil
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value: the member key of an object (or "" at the top),
// whose parent member is parent.
func (s *scanner) value(key, parent string, depth int) *apiError {
	if s.i >= len(s.b) {
		return errSyntax
	}
	switch s.b[s.i] {
	case '{', '[':
		return s.container(key, depth)
	case '"':
		_, err := s.str(key, parent)
		return err
	}
	// A number or a literal: the decoder judges it.
	for s.i < len(s.b) && !strings.ContainsRune(",}] \t\r\n", rune(s.b[s.i])) {
		s.i++
	}
	return nil
}

// container scans an object or an array under key.
func (s *scanner) container(key string, depth int) *apiError {
	if depth >= maxDepth {
		return errInvalidParameter.f("the request's JSON nests deeper than %d levels", maxDepth)
	}
	object := s.b[s.i] == '{'
	end := byte(']')
	if object {
		end = '}'
	}
	limit, fail := memberLimit(key, key)
	s.i++
	for n := 0; ; n++ {
		s.space()
		if s.i >= len(s.b) {
			return errSyntax
		}
		if s.b[s.i] == end {
			s.i++
			return nil
		}
		if n > 0 {
			if s.b[s.i] != ',' {
				return errSyntax
			}
			s.i++
			s.space()
		}
		if n == limit {
			return fail(n + 1)
		}
		// An array's elements are named after it, marked so that the
		// array's limit does not apply to them.
		member := key + "[]"
		if object {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return errSyntax
			}
			var err *apiError
			if member, err = s.str("", key); err != nil {
				return err
			}
			s.space()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return errSyntax
			}
			s.i++
			s.space()
		}
		if err := s.value(member, key, depth+1); err != nil {
			return err
		}
	}
}

// str scans a string, the value of key under parent (or a key itself,
// when key is ""), and returns its text when it is short enough to be a
// key worth knowing.
func (s *scanner) str(key, parent string) (string, *apiError) {
	start := s.i
	s.i++
	escaped := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			raw := s.b[start:s.i]
			if len(raw) > maxKeyText {
				return "", nil // no key worth knowing: a value, not copied
			}
			if !escaped {
				return string(raw[1 : len(raw)-1]), nil
			}
			var text string
			if json.Unmarshal(raw, &text) == nil {
				return text, nil
			}
			return "", nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return "", errSyntax
			}
			if s.b[s.i+1] != 'u' {
				s.i += 2
				continue
			}
			r, ok := s.hex(s.i + 2)
			if !ok {
				return "", errSyntax
			}
			s.i += 6
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return "", notText(key, parent)
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := rune(0), false
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					low, ok = s.hex(s.i + 2)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return "", notText(key, parent)
				}
				s.i += 6
			}
		case c < 0x20:
			return "", errSyntax
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				return "", notText(key, parent)
			}
			s.i += size
		}
	}
	return "", errSyntax
}

// hex reads the four hex digits of a \u escape at i.
func (s *scanner) hex(i int) (rune, bool) {
	if i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[i : i+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// notText is the error of a string that is not Unicode text: SQS's
// InvalidMessageContents for a message body, InvalidParameterValue for
// anything else.
func notText(key, parent string) *apiError {
	const rule = "invalid UTF-8 or a lone surrogate escape (\\uD800 to \\uDFFF); SQS takes Unicode text only"
	key = strings.TrimSuffix(key, "[]")
	switch {
	case strings.EqualFold(key, "MessageBody"):
		return errInvalidMessageContents.f("the message body holds %s", rule)
	case strings.EqualFold(key, "StringValue") || strings.EqualFold(key, "StringListValues"):
		return errInvalidParameter.f("message attribute %q has a value that holds %s", parent, rule)
	case key == "":
		return errInvalidParameter.f("a key under %s holds %s", describe(parent), rule)
	}
	return errInvalidParameter.f("%s holds %s", describe(key), rule)
}

// describe names the member key for a message.
func describe(key string) string {
	key = strings.TrimSuffix(key, "[]")
	if key == "" {
		return "the request"
	}
	return "the parameter " + key
}
