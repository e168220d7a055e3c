package container

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

// Ownership. Every container carries LabelOwner, its owner process's
// label; a node-local runtime's is "<pid>.<start>.<host>" and its socket
// directories are "s-<random>" with a sibling owner file (see
// nodelocal's owner.go and sockdir.go). Reap asks an OwnerJudge whether an
// owner lives and an EndpointSweeper to remove endpoints; the defaults
// are nodelocal's, which read this host's /proc and socket directory. A
// driver whose sandboxes live elsewhere brings its own.
//
// Earlier versions labelled containers under "io.dsh-container." with
// owner "<host>/<pid>/<start>" and named directories
// "run-<pid>.<start>-<random>"; the reaper still judges and removes those.

// OwnerJudge tells whether the process an owner label names still lives.
// A label it cannot judge must be reported live: its containers are left
// alone.
type OwnerJudge interface {
	Alive(owner string) bool
}

// EndpointSweeper removes the endpoints of owners that are gone.
type EndpointSweeper interface {
	// Remove removes the endpoint a removed container's bridge label
	// names, if it is one of the sweeper's; it returns what it removed.
	Remove(bridge string) (string, bool)
	// Sweep removes the endpoints at least grace old whose owner is
	// gone, and returns what it removed.
	Sweep(grace time.Duration) ([]string, error)
}

func defaultOwner() string { return nodelocal.SelfOwner() }

// OwnerOf returns the owner label a runtime in process pid puts on its
// containers by default (WithOwner aside), or "" when there is no such
// process: tests and tools find a process's containers with it.
func OwnerOf(pid int) string { return nodelocal.OwnerOf(pid) }

// Labels of earlier versions, still reaped.
const (
	legacyLabelManaged = "io.dsh-container.managed"
	legacyLabelOwner   = "io.dsh-container.owner"
	legacyLabelSockDir = "io.dsh-container.sockdir"
)

// validLabelValue reports a valid Kubernetes label value.
var validLabelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

func checkLabelValue(what, v string) error {
	if len(v) > 63 || !validLabelValue.MatchString(v) {
		return fmt.Errorf("%s %q is not a valid label value (at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric)", what, v)
	}
	return nil
}

// ReapOptions configure Reap.
type ReapOptions struct {
	// SocketDir is the directory holding per-run socket directories
	// (default DefaultSocketDir()).
	SocketDir string
	// Grace spares containers and directories younger than this, whoever
	// owns them.
	Grace time.Duration
	// Owners judges owner labels (default nodelocal.Owners, this host's
	// /proc).
	Owners OwnerJudge
	// Endpoints removes dead owners' endpoints (default
	// nodelocal.SocketDirs in SocketDir).
	Endpoints EndpointSweeper
}

// ReapReport lists what Reap removed.
type ReapReport struct {
	Containers []string
	SocketDirs []string
}

// Reap removes managed containers and socket directories whose owner
// process is gone. It is safe to run while other processes use the same
// daemon: live owners' resources are left alone.
func Reap(ctx context.Context, d Driver, opts ReapOptions) (ReapReport, error) {
	if opts.SocketDir == "" {
		opts.SocketDir = DefaultSocketDir()
	}
	if opts.Owners == nil {
		opts.Owners = nodelocal.Owners{}
	}
	if opts.Endpoints == nil {
		opts.Endpoints = nodelocal.SocketDirs{Base: opts.SocketDir}
	}
	var rep ReapReport
	var errs []error
	list, err := d.List(ctx, LabelManaged, "true")
	if err != nil {
		return rep, err
	}
	legacy, err := d.List(ctx, legacyLabelManaged, "true")
	if err != nil {
		return rep, err
	}
	now := time.Now()
	for _, c := range append(list, legacy...) {
		owner, bridge := c.Labels[LabelOwner], c.Labels[LabelBridge]
		if _, ok := c.Labels[legacyLabelManaged]; ok {
			owner = c.Labels[legacyLabelOwner]
			if dir := c.Labels[legacyLabelSockDir]; filepath.Dir(dir) == filepath.Clean(opts.SocketDir) {
				bridge = filepath.Base(dir)
			}
		}
		if now.Sub(c.Created) < opts.Grace || opts.Owners.Alive(owner) {
			continue
		}
		if err := d.Remove(ctx, c.ID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID, err))
			continue
		}
		rep.Containers = append(rep.Containers, c.ID)
		if dir, ok := opts.Endpoints.Remove(bridge); ok {
			rep.SocketDirs = append(rep.SocketDirs, dir)
		}
	}
	swept, err := opts.Endpoints.Sweep(opts.Grace)
	rep.SocketDirs = append(rep.SocketDirs, swept...)
	if err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}
