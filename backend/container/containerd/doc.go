// Package containerd implements the container runtime's Driver on the
// containerd Go client (the v1.7 module line, which talks to containerd
// 1.6 and later), in a namespace of its own (default "dsh-container").
//
// Each container is a snapshot, a container record and a task. The OCI
// spec is built with containerd's oci options on its default Linux spec
// and carries the whole hardening preset (see BuildSpec); the driver never
// reads anything from the request. Cold starts are the point of this
// driver, so per-run work is kept to what a fresh container needs: the
// image's snapshot parent and the runtime's options are resolved once, one
// client is reused, and a container is created with the low-level
// services (lease, snapshot Prepare, container Create, task Create)
// rather than the convenience wrappers that re-read the image and the
// container for every step. The task is created with the container, its
// stdout and stderr attached through FIFOs the host reads directly (a FIFO
// holds at most a pipe buffer; the runtime caps what it keeps), so Start
// only starts it.
//
// CPU time and peak memory come from the task's cgroup files, found once
// through its init process, and from the task's cgroup metrics when those
// files are not visible; an OOM kill is read from the cgroup's oom_kill
// counter when the task exits, before its cgroup goes.
//
// Everything the driver creates carries the runtime's labels: containers,
// snapshots (keyed by the container id) and leases; List reports a
// labelled snapshot whose container is gone as a leftover too, so the
// reaper removes it. The driver touches nothing in the namespace that its
// labels do not say is the runtime's.
package containerd
