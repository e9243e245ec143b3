// Package jsonscan walks JSON objects without decoding them: the
// members of an object as key and raw value, values skipped by their
// structure. For the hot paths that need a few fields of a larger
// document (a device consumer's info, a token's claims); each user
// checks its reading against encoding/json with a fuzz test.
package jsonscan

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Unquote returns the string a JSON string's bytes (quotes included)
// stand for; only one with escapes is decoded.
func Unquote(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' {
		return "", false
	}
	if !slices.Contains(q, '\\') {
		return string(q[1 : len(q)-1]), true
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err == nil
}

// Uint reads a JSON number that is a non-negative integer within uint64:
// digits only (no sign, fraction or exponent).
func Uint(val []byte) (uint64, bool) {
	if len(val) == 0 || len(val) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range val {
		d := uint64(c - '0')
		if d > 9 || n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// EachMember calls f with each member of the JSON object data: its key
// (unescaped) and its value's bytes, whitespace trimmed. Values are skipped by their structure (strings, with their
// escapes, and nested objects and arrays), not validated; a truncated or
// misshapen object is an error.
func EachMember(data []byte, f func(key, val []byte) error) error {
	i := SkipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return trailing(data, i+1)
	}
	for {
		if i == len(data) || data[i] != '"' {
			return errors.New("a member without a quoted key")
		}
		end, err := SkipString(data, i)
		if err != nil {
			return err
		}
		key := data[i+1 : end-1]
		if slices.Contains(key, '\\') {
			k, ok := Unquote(data[i:end])
			if !ok {
				return fmt.Errorf("a bad key %.40s", data[i:end])
			}
			key = []byte(k)
		}
		i = SkipSpace(data, end)
		if i == len(data) || data[i] != ':' {
			return fmt.Errorf("member %q without a colon", key)
		}
		i = SkipSpace(data, i+1)
		vend, err := SkipValue(data, i)
		if err != nil {
			return fmt.Errorf("member %q: %w", key, err)
		}
		if err := f(key, data[i:vend]); err != nil {
			return err
		}
		i = SkipSpace(data, vend)
		if i == len(data) {
			return errors.New("an object not closed")
		}
		switch data[i] {
		case ',':
			i = SkipSpace(data, i+1)
		case '}':
			return trailing(data, i+1)
		default:
			return fmt.Errorf("%q after member %q", data[i], key)
		}
	}
}

// trailing says whether anything but whitespace follows an object's end.
func trailing(data []byte, i int) error {
	if SkipSpace(data, i) != len(data) {
		return errors.New("data after the object")
	}
	return nil
}

func SkipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the index past the string starting at data[i] (a
// quote).
func SkipString(data []byte, i int) (int, error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++ // the escaped byte (of \uXXXX, the u: its hex digits are plain)
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("a string not closed")
}

// SkipValue returns the index past the value starting at data[i].
func SkipValue(data []byte, i int) (int, error) {
	if i == len(data) {
		return 0, errors.New("a value missing")
	}
	switch data[i] {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := SkipString(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("an object or array not closed")
	case ',', '}', ']', ':':
		return 0, fmt.Errorf("a value missing before %q", data[i])
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[j])) {
		j++
	}
	return j, nil
}
