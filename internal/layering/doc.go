// Package layering holds the test of the module's layering, as
// docs/ARCHITECTURE.md states it: which of our packages may import which,
// which third-party packages each may use, and which may reach the Docker
// or containerd client. The document is the source of truth: the test
// reads its package table and its engine-client table (the format is in
// table_test.go) and checks every package of the module against them. A
// new package needs a row there; a removed one must lose its row. It has no
// code of its own; `go test ./...` runs the check.
package layering
