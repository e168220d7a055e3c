package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
)

// Ownership. Every container carries LabelOwner = "<pid>.<start>.<host>",
// where start is the owner process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22) and host the first 8 hex digits of the
// SHA-256 of the host's name (a valid label value whatever the name). A
// pid alone could be reused; the pair cannot. An owner is live when it is
// on this host and a process with that pid and that start time exists.
//
// A socket directory is named "s-<random>": the container sees its host
// path in its mount table, so the name says nothing about the host. Its
// owner, "<pid>.<start>", is in the sibling file "s-<random>.owner",
// created before the directory and removed after it.
//
// Earlier versions labelled containers under "io.dsh-container." with
// owner "<host>/<pid>/<start>" and named directories
// "run-<pid>.<start>-<random>"; the reaper still judges and removes those.

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

// hostTag is this host's tag in owner labels.
func hostTag() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}

func defaultOwner() string { return selfID() + "." + hostTag() }

// OwnerOf returns the owner label a runtime in process pid puts on its
// containers by default (WithOwner aside), or "" when there is no such
// process: tests and tools find a process's containers with it.
func OwnerOf(pid int) string {
	start := processStart(pid)
	if start == "" {
		return ""
	}
	return fmt.Sprintf("%d.%s.%s", pid, start, hostTag())
}

// Socket directory naming.
const (
	sockDirPrefix = "s-"
	ownerSuffix   = ".owner"
)

// selfID is this process's "<pid>.<start>".
func selfID() string { return fmt.Sprintf("%d.%s", os.Getpid(), selfStart) }

// idLive judges a "<pid>.<start>" owner id.
func idLive(id string) bool {
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

// ownerLive judges an owner label. Owners on other hosts are reported
// live: this process cannot judge them. So are labels of any other form
// (set with WithOwner by an embedding program or a test suite): the reaper
// cannot tell whether their owner lives, and a shared engine's running
// containers must not be removed on a guess.
func ownerLive(owner string) bool {
	parts := strings.Split(owner, ".")
	if len(parts) != 3 {
		return legacyOwnerLive(owner)
	}
	if parts[2] != hostTag() {
		return true
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || parts[1] == "" || strings.Trim(parts[1], "0123456789") != "" {
		return true
	}
	return processStart(pid) == parts[1]
}

// legacyOwnerLive judges an earlier version's "<host>/<pid>/<start>".
func legacyOwnerLive(owner string) bool {
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

// Labels of earlier versions, still reaped.
const (
	legacyLabelManaged = "io.dsh-container.managed"
	legacyLabelOwner   = "io.dsh-container.owner"
	legacyLabelSockDir = "io.dsh-container.sockdir"
)

// dirLive judges the socket directory name in base by its owner file
// (or, in the earlier layout, by its name). Names of neither form are not
// ours: they are reported live and left alone.
func dirLive(base, name string) bool {
	if rest, ok := strings.CutPrefix(name, "run-"); ok {
		id, _, _ := strings.Cut(rest, "-")
		return idLive(id)
	}
	if !strings.HasPrefix(name, sockDirPrefix) {
		return true
	}
	data, err := os.ReadFile(filepath.Join(base, name+ownerSuffix))
	if err != nil {
		// The owner file comes first and goes last: without it the
		// directory is a leftover.
		return false
	}
	return idLive(strings.TrimSpace(string(data)))
}

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
		if now.Sub(c.Created) < opts.Grace || ownerLive(owner) {
			continue
		}
		if err := d.Remove(ctx, c.ID); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID, err))
			continue
		}
		rep.Containers = append(rep.Containers, c.ID)
		// The label names a directory in the socket folder, nothing else.
		if bridge != "" && bridge == filepath.Base(bridge) && (strings.HasPrefix(bridge, sockDirPrefix) || strings.HasPrefix(bridge, "run-")) {
			dir := filepath.Join(opts.SocketDir, bridge)
			if err := os.RemoveAll(dir); err == nil {
				rep.SocketDirs = append(rep.SocketDirs, dir)
				os.Remove(dir + ownerSuffix)
			}
		}
	}
	entries, err := os.ReadDir(opts.SocketDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	dirs := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			dirs[e.Name()] = true
		}
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() {
			// An owner file whose directory is gone goes once its
			// owner has.
			dirName, ok := strings.CutSuffix(name, ownerSuffix)
			if ok && strings.HasPrefix(dirName, sockDirPrefix) && !dirs[dirName] && !dirLive(opts.SocketDir, dirName) {
				if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) >= opts.Grace {
					os.Remove(filepath.Join(opts.SocketDir, name))
				}
			}
			continue
		}
		if dirLive(opts.SocketDir, name) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < opts.Grace {
			continue
		}
		dir := filepath.Join(opts.SocketDir, name)
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		os.Remove(dir + ownerSuffix)
		rep.SocketDirs = append(rep.SocketDirs, dir)
	}
	return rep, errors.Join(errs...)
}
