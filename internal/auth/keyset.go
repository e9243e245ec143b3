package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// keySetFile is the JSON form of a key set (--token-keys; docs/protocol.md,
// "Tokens"):
//
//	{"keys": [
//	  {"kid": "2026-01", "secret": "a shared secret of 32 bytes or more"},
//	  {"kid": "2026-02", "ed25519_key_file": "tokens-2026-02.pub"}
//	]}
//
// Each key has a kid and exactly one of secret (HS256) or ed25519_key_file
// (a PEM Ed25519 public key: EdDSA; a relative path is relative to the key
// set file). Unknown fields are errors, so a misspelt field is not a
// silently missing key.
type keySetFile struct {
	Keys []struct {
		KID            string  `json:"kid"`
		Secret         *string `json:"secret"`
		Ed25519KeyFile string  `json:"ed25519_key_file"`
	} `json:"keys"`
}

// LoadKeySet reads a key set file. Errors name the file and the key (by kid
// or position), never a secret.
func LoadKeySet(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeySet(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// ParseKeySet parses a key set; relative public key paths are read from
// dir.
func ParseKeySet(data []byte, dir string) ([]Key, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f keySetFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	if len(f.Keys) == 0 {
		return nil, errors.New("key set: no keys")
	}
	keys := make([]Key, 0, len(f.Keys))
	for i, e := range f.Keys {
		if e.KID == "" {
			return nil, fmt.Errorf("key set: key %d has no kid", i+1)
		}
		var k Key
		var err error
		switch {
		case (e.Secret != nil) == (e.Ed25519KeyFile != ""):
			err = errors.New("needs exactly one of secret and ed25519_key_file")
		case e.Secret != nil:
			k, err = HS256Key(e.KID, *e.Secret)
		default:
			k, err = ed25519File(e.KID, e.Ed25519KeyFile, dir)
		}
		if err != nil {
			return nil, fmt.Errorf("key set: key %q: %w", e.KID, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ed25519File reads an Ed25519 public key PEM file into a key.
func ed25519File(kid, path, dir string) (Key, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, err
	}
	pub, err := ParseEd25519PublicKey(b)
	if err != nil {
		return Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return Ed25519Key(kid, pub)
}

// LoadEd25519Key reads a PEM Ed25519 public key file into a key without kid
// (--token-ed25519-key).
func LoadEd25519Key(path string) (Key, error) { return ed25519File("", path, "") }
