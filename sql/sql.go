// Package sql holds the Postgres migrations of inboxd (NNN_name.sql, in the
// format of github.com/jackc/tern). The services apply them at start through
// internal/store.Migrate.
package sql

import "embed"

// Migrations holds the *.sql files.
//
//go:embed *.sql
var Migrations embed.FS
