package node

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inboxd/inboxd/internal/config"
)

// A key set with HS256 secrets that other users can read is warned about;
// one they cannot read, or one of public keys only, is not.
func TestKeySetReadableByOthersWarns(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ed.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		json string
		mode os.FileMode
		warn bool
	}{
		{"secrets, world-readable", `{"keys":[{"kid":"a","secret":"` + prodSecret + `"}]}`, 0o644, true},
		{"secrets, group-readable", `{"keys":[{"kid":"a","secret":"` + prodSecret + `"}]}`, 0o640, true},
		{"secrets, owner only", `{"keys":[{"kid":"a","secret":"` + prodSecret + `"}]}`, 0o600, false},
		{"public keys only, world-readable", `{"keys":[{"kid":"a","ed25519_key_file":"ed.pub"}]}`, 0o644, false},
	} {
		path := filepath.Join(dir, "keys.json")
		if err := os.WriteFile(path, []byte(tc.json), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil { // past the umask
			t.Fatal(err)
		}
		core, logs := observer.New(zapcore.WarnLevel)
		cfg := config.Defaults()
		cfg.TokenSecret, cfg.TokenKeysFile = "", path
		if _, err := tokenVerifier(cfg, zap.New(core)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := logs.FilterMessageSnippet("readable by other users").Len() == 1; got != tc.warn {
			t.Errorf("%s: warned %v, want %v", tc.name, got, tc.warn)
		}
	}
}
