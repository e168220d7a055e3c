package main

import "testing"

// A bad --otlp-endpoint is a usage error naming the flag, on every
// command that takes it, before anything runs.
func TestBadOTLPEndpoint(t *testing.T) {
	prog := write(t, "p.ts", "return 1")
	for _, args := range [][]string{
		{"run", "--otlp-endpoint", "ftp://collector:21", prog},
		{"serve", "--otlp-endpoint", "http://", "--listen", "unix://" + t.TempDir() + "/s.sock"},
		{"mcp", "--otlp-endpoint", "http://u:p@collector:4318"},
	} {
		r := runCLI(t, "", func(f *factory) { f.connect = nil }, args...)
		wantUsage(t, r, "--otlp-endpoint")
	}
}

// A negative --max-connections is a usage error before anything starts.
func TestServeMaxConnectionsFlag(t *testing.T) {
	r := runCLI(t, "", func(f *factory) { f.connect = nil }, "serve", "--max-connections", "-1", "--listen", "unix://"+t.TempDir()+"/s.sock")
	wantUsage(t, r, "--max-connections must not be negative")
}
