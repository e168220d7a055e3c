// Package server is dsh-container's HTTP API: an http.Handler that runs
// programs through the registry on long-lived code runtimes, serves the
// SDK of the loaded tools, reports health and exports Prometheus metrics.
//
// A Server holds, per language, a default backend.Runtime (WithRuntime)
// and the runtimes a request may choose by OCI runtime name with
// "runtime" (WithNamedRuntime; in the daemon one container runtime per
// runtime serve --allow-runtimes admits, each with its own warm pool and
// admission limit), the
// tools loaded at start and, optionally, a ToolSource whose tools may
// change (the tools of MCP servers), read afresh for each request. Its
// mode (WithMode: code, the default; both; native) decides what GET
// /v1/tools lists; in native mode POST /v1/run answers 404. Every POST /v1/run gets its own registry in Code
// Mode over the runtime of the requested language, so the run's
// tool/code-dispatch events are collected for that request alone and call
// ids of concurrent requests never mix. The registry is cheap; the runtime,
// which owns the containers, is shared.
//
// Endpoints:
//
//	POST /v1/run      {"language","code","id"?,"limits"?,"runtime"?,"egress"?} → the `run --json` object plus "events" (and "egressEvents")
//	GET  /v1/sessions a websocket: one run with tools the client defines and
//	                  answers, logs and events streamed, abort (session.go;
//	                  the protocol is in docs/session-protocol.md)
//	GET  /v1/sdk      ?language=typescript|python&format=prompt|source → SDK text
//	GET  /v1/tools    ?language=typescript|python → {"mode","language","tools": [MCP tool shape]}
//	GET  /healthz     200 {"status":"ok"} or 503 {"status":"unavailable","error"}
//	GET  /metrics     Prometheus text exposition
//
// A program's own failure (exception, timeout, abort, oom, exit) is a 200
// whose "error" field says which kind. The request's failures are
// {"error": "..."} with 400 (bad JSON, unknown field, unknown language, no
// code), 413 (body too large), 429 with Retry-After (admission queue full,
// or the tenant's requests hold its share of the request memory), 503
// (runner image missing, container engine unreachable, shutting down, or the
// server's total of request bytes held past the body timeout) or 500. A
// client that disconnects cancels its run, which the runtime reports as
// an abort.
//
// Memory before admission (intake.go): a body or a session's start frame
// is read only into bytes reserved for it first — its Content-Length, or,
// when its length is not announced, past its first 4 KiB the body limit,
// given back down to its size once read — and held until its run ends.
// WithMaxRequestBytes bounds all of them and is divided into a share per
// tenant that the others cannot take (the smaller of what its quota can
// use and an even split), so one tenant's flood never starves another
// while the tenants × the body limit fit in it (a larger table is taken
// with a warning: every share is then one body limit, and the total,
// enforced alone, is shared first come). Reading and decoding cost a few
// times a request's size, not a multiple of tens.
//
// WithAuth puts bearer-token tenants in front of every endpoint but
// /healthz (401 otherwise, one message whatever failed);
// WithClientCertificates requires a verified TLS client certificate;
// WithAdmission bounds runs per tenant and per language (429 beyond).
// docs/ARCHITECTURE.md follows a POST /v1/run and a session hop by hop. Shutdown
// drains sessions, which the HTTP server's own Shutdown does not see.
//
// The server never closes its runtimes: whoever built them does, after
// the HTTP server has shut down.
package server
