// Package pb holds the protocol buffer schema of the inboxd wire protocol
// (inboxd.proto) and the Go code generated from it. Do not edit *.pb.go.
package pb

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative inboxd.proto
