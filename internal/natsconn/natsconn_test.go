package natsconn

import "testing"

// Redact hides passwords and tokens of every URL of a list, and leaves
// URLs without them as they are.
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://gateway:s3cret@10.0.0.1:4222", "nats://gateway:xxxxx@10.0.0.1:4222"},
		{"tls://t0ken@nats.example:4222", "tls://xxxxx@nats.example:4222"},
		{"nats://a:p1@h1:4222,nats://b:p2@h2:4222", "nats://a:xxxxx@h1:4222,nats://b:xxxxx@h2:4222"},
		{"gateway:s3cret@h:4222", "xxxxx@h:4222"}, // no scheme: nats.go adds nats://
		{"nats://u:p%zz@h:4222", "xxxxx@h:4222"},  // not a URL: only the host is kept
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
