package ops

import "testing"

func TestJSErrorKind(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"type":"io.nats.jetstream.api.v1.consumer_info_response","name":"d_1","config":{"description":"no error here"}}`, ""},
		{`{"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}`, "stream_not_found"},
		{`{"error":{"code":503,"err_code":99999,"description":"x"}}`, "code_99999"},
		{`{"error":{"code":408,"description":"request timeout"}}`, "status_408"},
		{`{"description":"\"error\" in a value"}`, ""},
		{`not json "error"`, ""},
	} {
		if got := jsErrorKind([]byte(c.data)); got != c.want {
			t.Errorf("jsErrorKind(%s) = %q, want %q", c.data, got, c.want)
		}
	}
}
