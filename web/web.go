// Package web holds the browser client that the gateway serves at /app/:
// plain HTML, CSS and ES modules, no build step of its own. The SDK bundle
// app/inboxd-sdk.js is generated from sdk/js (make web checks it matches).
package web

import (
	"embed"
	"io/fs"
)

//go:embed app
var files embed.FS

// App returns the client's files, index.html at the root.
func App() fs.FS {
	sub, err := fs.Sub(files, "app")
	if err != nil {
		panic(err) // "app" is a literal embedded above: cannot fail
	}
	return sub
}
