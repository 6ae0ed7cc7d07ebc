package sqsapi

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// attrValue is one message attribute, as the JSON protocol carries it
// (BinaryValue in base64) and as it is stored.
type attrValue struct {
	DataType         string   `json:"DataType"`
	StringValue      *string  `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

// storedAttrs is what a message keeps beside its body: its message
// attributes and its system attributes, and what the API gives back
// about its sending: the MessageGroupId of a message of a standard queue
// (where the group is no store key) and the MessageDeduplicationId of one
// whose store dedup id is scoped to its group.
type storedAttrs struct {
	Message map[string]attrValue `json:"m,omitempty"`
	System  map[string]attrValue `json:"s,omitempty"`
	Group   string               `json:"g,omitempty"`
	Dedup   string               `json:"d,omitempty"`
}

// maxMessageAttributes is SQS's limit of message attributes per message.
const maxMessageAttributes = 10

// checkAttrs checks a message's attributes and returns how many bytes
// they count towards the message's size: names, types and values.
func checkAttrs(attrs map[string]attrValue, system bool) (int, *apiError) {
	what, whose := "message attribute", "Message (user)"
	if system {
		what, whose = "message system attribute", "Message (system)"
	}
	if !system && len(attrs) > maxMessageAttributes {
		return 0, errInvalidParameter.f("the message has %d message attributes; at most %d are allowed", len(attrs), maxMessageAttributes)
	}
	size := 0
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		if system {
			if name != "AWSTraceHeader" {
				return 0, errInvalidParameter.f("%s %q is not supported; the only one is AWSTraceHeader", what, name)
			}
			if v.DataType != "String" {
				return 0, errInvalidParameter.f("%s %q must have DataType String", what, name)
			}
		} else if err := checkAttrName(name); err != nil {
			return 0, err
		}
		base, _, _ := strings.Cut(v.DataType, ".")
		if len(v.DataType) > 256 || base != "String" && base != "Number" && base != "Binary" {
			return 0, errInvalidParameter.f("%s %q has DataType %q; it must be String, Number or Binary, optionally followed by .custom-type", what, name, v.DataType)
		}
		if len(v.StringListValues) > 0 || len(v.BinaryListValues) > 0 {
			return 0, errInvalidParameter.f("%s %q: StringListValues and BinaryListValues are not supported", what, name)
		}
		switch base {
		case "Binary":
			if v.StringValue != nil || len(v.BinaryValue) == 0 {
				return 0, errInvalidParameter.f("%s attribute '%s' must contain a non-empty value of type 'Binary'.", whose, name)
			}
			size += len(v.BinaryValue)
		default:
			if v.StringValue == nil || *v.StringValue == "" || v.BinaryValue != nil {
				return 0, errInvalidParameter.f("%s attribute '%s' must contain a non-empty value of type '%s'.", whose, name, base)
			}
			if !validText(*v.StringValue) {
				return 0, errInvalidParameter.f("%s %q has characters outside those SQS allows", what, name)
			}
			if base == "Number" {
				if !validNumber(*v.StringValue) {
					return 0, errInvalidParameter.f("%s %q of type Number has value %q, which is not a number SQS takes: decimal digits, with an optional sign, point and exponent, at most 38 significant digits, zero or from 10^-128 to 10^126 in magnitude", what, name, *v.StringValue)
				}
			}
			size += len(*v.StringValue)
		}
		size += len(name) + len(v.DataType)
	}
	return size, nil
}

// Limits of SQS's Number attributes.
const (
	maxNumberDigits   = 38
	maxNumberExponent = 126
	minNumberExponent = -128
)

// validNumber applies SQS's rules to a Number attribute's value: a
// decimal number, optionally signed, with an optional fraction and an
// optional exponent ("-1.5e3"), of at most 38 significant digits (leading
// and trailing zeros do not count), zero or of a magnitude from 10^-128
// to 10^126. Not hex, not NaN or Infinity, no underscores or spaces.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	var digits []byte
	intDigits, point := 0, false
mantissa:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
			if !point {
				intDigits++
			}
		case c == '.' && !point:
			point = true
		default:
			break mantissa
		}
	}
	if len(digits) == 0 {
		return false
	}
	exp := 0
	if i < len(s) {
		if s[i] != 'e' && s[i] != 'E' {
			return false
		}
		rest := s[i+1:]
		if rest != "" && (rest[0] == '-' || rest[0] == '+') {
			rest = rest[1:]
		}
		if rest == "" || len(rest) > 6 || strings.Trim(rest, "0123456789") != "" {
			return false
		}
		n, _ := strconv.Atoi(rest)
		if s[i+1] == '-' {
			n = -n
		}
		exp = n
	}
	first := slices.IndexFunc(digits, func(c byte) bool { return c != '0' })
	if first < 0 {
		return true // zero
	}
	last := len(digits) - 1
	for digits[last] == '0' {
		last--
	}
	if last-first+1 > maxNumberDigits {
		return false
	}
	// The value is d.ddd × 10^magnitude, d its first significant digit.
	magnitude := intDigits - first - 1 + exp
	return magnitude >= minNumberExponent && (magnitude < maxNumberExponent || magnitude == maxNumberExponent && first == last && digits[first] == '1')
}

// checkAttrName applies SQS's rules for message attribute names: 1 to
// 256 characters, alphanumeric (letters and digits of any script, as SQS
// takes them), '_', '-' and '.', no AWS. or Amazon. prefix, and no period
// first, last or twice in a row.
func checkAttrName(name string) *apiError {
	lower := strings.ToLower(name)
	switch {
	case name == "" || len(name) > 256:
		return errInvalidParameter.f("message attribute name %q must be 1 to 256 characters", name)
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return errInvalidParameter.f("message attribute name %q must not start with AWS. or Amazon.", name)
	case name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, ".."):
		return errInvalidParameter.f("message attribute name %q must not start or end with a period or hold two in a row", name)
	}
	for _, c := range name {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '_' && c != '-' && c != '.' {
			return errInvalidParameter.f("message attribute name %q may hold only letters, digits, '_', '-' and '.'", name)
		}
	}
	return nil
}

// validText reports whether s holds only the characters SQS allows in a
// message: tab, newline, carriage return and Unicode from U+0020 on,
// without surrogates, U+FFFE and U+FFFF.
func validText(s string) bool {
	for i, c := range s {
		switch {
		case c == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return false
		case c == '\t' || c == '\n' || c == '\r':
		case c < 0x20, c >= 0xD800 && c <= 0xDFFF, c == 0xFFFE, c == 0xFFFF:
			return false
		}
	}
	return true
}

// encode is what the store keeps of a message's attributes: nil when it
// has none.
func (a storedAttrs) encode() []byte {
	if len(a.Message) == 0 && len(a.System) == 0 && a.Group == "" && a.Dedup == "" {
		return nil
	}
	b, _ := json.Marshal(a) // maps of plain values always marshal
	return b
}

func decodeAttrs(b []byte) storedAttrs {
	var a storedAttrs
	if len(b) > 0 {
		_ = json.Unmarshal(b, &a) // written by encodeAttrs; a message from elsewhere has none
	}
	return a
}

// attrsMD5 is SQS's digest of message attributes: for each, in the byte
// order of the names, the name, the data type, a transport byte (1 for a
// string, 2 for binary) and the value, each length first as a 4-byte big
// endian number. It is "" for no attributes.
func attrsMD5(attrs map[string]attrValue) string {
	if len(attrs) == 0 {
		return ""
	}
	h := md5.New()
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		h.Write(b)
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		field([]byte(name))
		field([]byte(v.DataType))
		if v.StringValue != nil {
			h.Write([]byte{1})
			field([]byte(*v.StringValue))
		} else {
			h.Write([]byte{2})
			field(v.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func bodyMD5(body string) string {
	sum := md5.Sum([]byte(body))
	return hex.EncodeToString(sum[:])
}

// selectAttrs keeps the attributes that names ask for: "All", "*" or
// ".*" for every one, "prefix.*" for those whose names start with prefix
// (Amazon SQS matches "Hel.*" to "Hello" and "Help.Me" alike), or exact
// names.
func selectAttrs(attrs map[string]attrValue, names []string) map[string]attrValue {
	if len(attrs) == 0 || len(names) == 0 {
		return nil
	}
	out := map[string]attrValue{}
	for name, v := range attrs {
		for _, want := range names {
			prefix, isPrefix := strings.CutSuffix(want, ".*")
			if want == "All" || want == "*" || want == name || isPrefix && strings.HasPrefix(name, prefix) {
				out[name] = v
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
