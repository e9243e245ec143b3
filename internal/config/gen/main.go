// Command gen writes the flag reference of docs/configuration.md (the
// lines between <!-- flags:begin --> and <!-- flags:end -->) from the flag
// definitions, config.Reference:
//
//	go generate ./internal/config
//	go run ./internal/config/gen -out docs/configuration.md
//
// The text around the table is written by hand. config's
// TestConfigurationReferenceIsCurrent fails when the file is stale.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/docmarks"
)

func main() {
	out := flag.String("out", "docs/configuration.md", "the page whose flags markers enclose the table")
	flag.Parse()
	doc, err := os.ReadFile(*out)
	if err == nil {
		doc, err = docmarks.Replace(doc, config.ReferenceMarks, config.Reference())
	}
	if err == nil {
		err = os.WriteFile(*out, doc, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
}
