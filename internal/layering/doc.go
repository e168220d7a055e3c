// Package layering holds the test of DESIGN.md's layering: which of our
// packages may import which, and which may reach the Docker or containerd
// client. It has no code of its own; `go test ./...` runs the check.
package layering
