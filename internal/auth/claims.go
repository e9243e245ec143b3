package auth

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/inboxd/inboxd/internal/jsonscan"
)

// A token's claims decoded without reflection when they have the shape
// our signers and every common issuer give them: each claim once, under
// its own lowercase name, strings without escapes, whole seconds, the
// audience a string or an array of them. golang-jwt decodes the claims
// with encoding/json (before it checks the signature, as every JWT
// library must: the key may depend on them), whose reflection over the
// embedded RegisteredClaims, the audience decoded into an `any` and each
// date into a json.Number was half of a token's verification (9 of 16.5
// µs, BenchmarkClaimsDecode) and 5 % of the gateway's CPU in a login
// wave. Anything else (an escape, a fraction, null, a claim twice, a key
// encoding/json would match case-insensitively) is decoded by
// encoding/json exactly as before: the fast path only gives what
// encoding/json gives for the same bytes (FuzzClaimsDecode), and the
// signature, audience, issuer and lifetime checks are golang-jwt's and
// Verify's as before.

// jsonClaims is Claims without its UnmarshalJSON.
type jsonClaims Claims

// UnmarshalJSON decodes the claims (see above).
func (c *Claims) UnmarshalJSON(data []byte) error {
	var fast Claims
	if fastClaims(data, &fast) {
		*c = fast
		return nil
	}
	return json.Unmarshal(data, (*jsonClaims)(c))
}

// claimNames are the claims Claims holds, by their JSON names.
var claimNames = [...]string{"dev", "iss", "sub", "aud", "exp", "nbf", "iat", "jti"}

// fastClaims decodes data into c when it has the plain shape (above) and
// reports whether it did; c is then what encoding/json would give.
func fastClaims(data []byte, c *Claims) bool {
	var seen [len(claimNames)]bool
	err := jsonscan.EachMember(data, func(key, val []byte) error {
		n := slices.Index(claimNames[:], string(key))
		if n < 0 {
			// Not a claim of ours: ignored, as by encoding/json, unless it
			// would match one of ours case-insensitively (or it has
			// non-ASCII bytes, which might fold to one). Keys come
			// unescaped.
			if !ascii(key) || slices.ContainsFunc(claimNames[:], func(name string) bool { return strings.EqualFold(string(key), name) }) {
				return errNotPlain
			}
			return nil
		}
		if seen[n] {
			return errNotPlain
		}
		seen[n] = true
		var ok bool
		switch claimNames[n] {
		case "dev":
			c.Device, ok = plainString(val)
		case "iss":
			c.Issuer, ok = plainString(val)
		case "sub":
			c.Subject, ok = plainString(val)
		case "jti":
			c.ID, ok = plainString(val)
		case "aud":
			c.Audience, ok = plainAudience(val)
		case "exp":
			c.ExpiresAt, ok = plainDate(val)
		case "nbf":
			c.NotBefore, ok = plainDate(val)
		case "iat":
			c.IssuedAt, ok = plainDate(val)
		}
		if !ok {
			return errNotPlain
		}
		return nil
	})
	return err == nil
}

var errNotPlain = errors.New("claims not of the plain shape")

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// plainString returns the string val is when it is one without escapes
// and of valid UTF-8 (encoding/json would replace invalid bytes).
func plainString(val []byte) (string, bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", false
	}
	s := val[1 : len(val)-1]
	for _, b := range s {
		if b == '\\' || b == '"' || b < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// plainAudience returns the audience val is: a plain string or a
// non-empty array of them.
func plainAudience(val []byte) (jwt.ClaimStrings, bool) {
	if s, ok := plainString(val); ok {
		return jwt.ClaimStrings{s}, true
	}
	if len(val) < 2 || val[0] != '[' || val[len(val)-1] != ']' {
		return nil, false
	}
	var aud jwt.ClaimStrings
	for i := 1; ; {
		i = jsonscan.SkipSpace(val, i)
		end, err := jsonscan.SkipValue(val, i)
		if err != nil {
			return nil, false
		}
		s, ok := plainString(val[i:end])
		if !ok {
			return nil, false
		}
		aud = append(aud, s)
		i = jsonscan.SkipSpace(val, end)
		switch {
		case i < len(val)-1 && val[i] == ',':
			i++
		case i == len(val)-1: // the closing bracket
			return aud, true
		default:
			return nil, false
		}
	}
}

// plainDate returns the NumericDate of a whole number of seconds, as
// golang-jwt makes it of the same number.
func plainDate(val []byte) (*jwt.NumericDate, bool) {
	if len(val) > 12 || (len(val) > 1 && val[0] == '0') {
		return nil, false // past 2^53 a float64 is not exact; 0… is not JSON
	}
	n, ok := jsonscan.Uint(val)
	if !ok {
		return nil, false
	}
	return jwt.NewNumericDate(time.Unix(int64(n), 0)), true
}
