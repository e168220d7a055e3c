// Package container is the container runtime behind the backend seam: every
// program runs in a fresh container used once, and reaches the host's
// bindings only through a websocket bridge to the endpoint its driver
// supplies (Driver.Endpoint): for the node-local drivers, a Unix socket in
// a private per-sandbox directory bind-mounted read-only into the container
// (NewUnixEndpoint).
//
// A run: validate the request; wait for admission; for TypeScript, check
// its nesting and strip its types with esbuild (package tsprep; main, or a
// test binary's TestMain, calls tsprep.ServeWorkerIfRequested first) in a
// worker process with stack, memory and time limits (a syntax error or a broken limit is an
// exception and starts nothing; a source map keeps stack positions on the
// model's own lines); take a ready sandbox
// from the warm pool or create and start one with the hardening preset
// (no network, read-only root, fixed non-root user, all capabilities
// dropped, no-new-privileges, our seccomp profile (package seccomp;
// WithSeccomp(nil) keeps the engine's), pids / memory
// (= memory+swap) / CPU limits, private IPC, an init process, a small
// noexec /tmp, no log driver, a fixed three-variable environment, labels
// under one prefix); the runner says hello and receives the program;
// bindings are invoked one at a time in the order the program issued them;
// with egress (WithEgress, narrowed per run by RunRequest.Egress), the
// program's CONNECT streams travel in the same connection and package
// egress decides each one;
// the run settles on done, a budget (CPU time from the container's cgroup,
// wall time), cancellation, or the container's death (OOM-killed or not).
// Settlement stops binding dispatch and waits for in-flight bindings before
// Run returns; the container and the bridge endpoint are then removed in
// the background, under a non-cancellable context. A removal that fails
// (or what a failed create could not undo) is retried before each later
// run and by Close, which returns nil only when nothing the runtime or its
// warm pool created is left. A Reap pass removes whatever a crashed process left: every
// container and socket directory names its owner process.
//
// The package is generic over Driver, a flat set of container verbs plus
// optional abilities found by type assertion (driver.go); packages docker
// and containerd implement it on the Docker Engine API and on containerd's
// Go client, and package containertest is the conformance suite each runs.
// docs/ARCHITECTURE.md shows where the package sits, a run's path through
// it, and the invariants it owns.
package container
