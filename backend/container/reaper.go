package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
)

// Ownership. Every container carries LabelOwner = "<host>/<pid>/<start>"
// and every socket directory is named "run-<pid>.<start>-<random>", where
// start is the owner process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22). A pid alone could be reused; the pair cannot.
// An owner is live when it is on this host and a process with that pid and
// that start time exists.

// processStart returns pid's start time, or "" if there is no such process.
func processStart(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces and parentheses; the
	// fields after the last ')' are fixed.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

var selfStart = processStart(os.Getpid())

func defaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), selfStart)
}

func sockDirPrefix() string { return fmt.Sprintf("run-%d.%s-", os.Getpid(), selfStart) }

// ownerLive judges an owner label. Owners on other hosts are reported
// live: this process cannot judge them. So are labels not of the form
// "<host>/<pid>/<start>" (set with WithOwner by an embedding program or a
// test suite): the reaper cannot tell whether their owner lives, and a
// shared daemon's running containers must not be removed on a guess.
func ownerLive(owner string) bool {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return true
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return true
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return true
	}
	return processStart(pid) == parts[2]
}

// dirLive judges a socket directory by its name.
func dirLive(name string) bool {
	rest, ok := strings.CutPrefix(name, "run-")
	if !ok {
		return true // not ours: leave it
	}
	id, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false
	}
	pidS, start, ok := strings.Cut(id, ".")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(pidS)
	if err != nil || pid <= 0 {
		return false
	}
	return processStart(pid) == start
}

// ReapOptions configure Reap.
type ReapOptions struct {
	// SocketDir is the directory holding per-run socket directories
	// (default DefaultSocketDir()).
	SocketDir string
	// Grace spares containers and directories younger than this, whoever
	// owns them.
	Grace time.Duration
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
	var rep ReapReport
	var errs []error
	list, err := d.List(ctx, LabelManaged, "true")
	if err != nil {
		return rep, err
	}
	now := time.Now()
	for _, c := range list {
		if now.Sub(c.Created) < opts.Grace || ownerLive(c.Labels[LabelOwner]) {
			continue
		}
		if err := d.Remove(ctx, c.ID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID, err))
			continue
		}
		rep.Containers = append(rep.Containers, c.ID)
		if dir := c.Labels[LabelSockDir]; dir != "" && filepath.Dir(dir) == filepath.Clean(opts.SocketDir) {
			if err := os.RemoveAll(dir); err == nil {
				rep.SocketDirs = append(rep.SocketDirs, dir)
			}
		}
	}
	entries, err := os.ReadDir(opts.SocketDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if !e.IsDir() || dirLive(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < opts.Grace {
			continue
		}
		dir := filepath.Join(opts.SocketDir, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		rep.SocketDirs = append(rep.SocketDirs, dir)
	}
	return rep, errors.Join(errs...)
}
