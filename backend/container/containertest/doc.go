// Package containertest is the conformance suite every container.Driver
// runs, in both languages, through the real runtime (container.New over
// the driver under test) and the real runner images.
//
// Each case gets a runtime of its own, with a private socket directory
// and a unique owner label, and ends with a leak check made through the
// driver itself: no container left with that owner (Driver.List), no
// socket directory left. The suites:
//
//   - RunConformance: the run lifecycle — values and their renderings,
//     logs, exceptions on the program's own lines, bindings, concurrency,
//     the failure kinds, the budgets' kinds and cancellation.
//   - RunHardening: the hardening preset (docs/ARCHITECTURE.md),
//     asserted from the driver's own account of the container (container.Inspector: Docker's
//     inspect, containerd's stored OCI spec and live task) and from inside
//     the container (capability sets, no_new_privs, a seccomp filter,
//     EROFS, only lo). CheckPreset is the first half as a function, so a
//     driver that drops a setting can be shown to be caught.
//   - RunBudgets: each budget fires at its setting, logged as one
//     quotable BUDGET line per driver, language and budget.
//   - RunHostile: programs that try to exhaust, escape or outlive their
//     container, each logged as one quotable OUTCOME line; the process
//     running the suite leaks no goroutine and no file descriptor.
//   - RunSurface (also part of RunHostile): the kernel surface beyond the
//     removed system calls — every socket address family (the refused
//     ones answer EAFNOSUPPORT, one subtest each), x32 and 32-bit x86
//     system calls, device nodes, /tmp's mount options, oom_score_adj —
//     asserted per OCI runtime.
//   - RunCloseWhileStarting: Runtime.Close called while the warm pool's
//     refill is held at its create or its start leaves no container
//     behind (counted through Driver.List and the driver's own leftovers).
//     It needs a runtime per OCI runtime and runs on its own
//     (e2e/TestCloseWhilePoolStarts).
//
// Run runs all but RunCloseWhileStarting. A driver's test is one call:
//
//	containertest.Run(t, containertest.Config{Driver: d, Images: images})
//
// TypeScript programs are type-stripped in a worker process, the test
// binary re-executed: the driver's package needs a TestMain that calls
// tsprep.ServeWorkerIfRequested first (else every TypeScript case fails as
// unavailable, naming that call).
//
// The package never imports an engine's client: what it knows of a
// container comes through the Driver and its optional interfaces.
package containertest
