// Package sdkjs runs the TypeScript SDK's tests (sdk/js) against a real
// inboxd: TestSDKJS starts an all-in-one node, a TCP proxy the tests cut
// and a control endpoint with Go clients, then runs `node --test` in
// sdk/js. A package of its own, so that its Node run does not lengthen the
// e2e package's binary and its timeout.
package sdkjs
