package nodelocal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Socket directories. A node-local endpoint is a socket in a directory
// "s-<random>" under a base: the container sees its host path in its
// mount table, so the name says nothing about the host. Its owner,
// "<pid>.<start>", is in the sibling file "s-<random>.owner", created
// before the directory and removed after it. Earlier versions named the
// directory "run-<pid>.<start>-<random>"; SocketDirs still judges and
// removes those.
const (
	SockDirPrefix = "s-"
	OwnerSuffix   = ".owner"
	legacyPrefix  = "run-"
)

// SocketDirs sweeps the socket directories under Base: the node-local
// endpoint sweeper.
type SocketDirs struct {
	Base string
}

// Remove removes the socket directory a removed container's bridge label
// names, and its owner file. It touches only a directory of ours directly
// in Base; it returns the path it removed.
func (s SocketDirs) Remove(bridge string) (string, bool) {
	if bridge == "" || bridge != filepath.Base(bridge) || !strings.HasPrefix(bridge, SockDirPrefix) && !strings.HasPrefix(bridge, legacyPrefix) {
		return "", false
	}
	dir := filepath.Join(s.Base, bridge)
	if err := os.RemoveAll(dir); err != nil {
		return "", false
	}
	os.Remove(dir + OwnerSuffix)
	return dir, true
}

// Sweep removes the socket directories whose owner is gone and that are
// at least grace old, and owner files left without their directory once
// their owner has gone. A missing Base is nothing to sweep.
func (s SocketDirs) Sweep(grace time.Duration) ([]string, error) {
	var removed []string
	var errs []error
	now := time.Now()
	entries, err := os.ReadDir(s.Base)
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
			dirName, ok := strings.CutSuffix(name, OwnerSuffix)
			if ok && strings.HasPrefix(dirName, SockDirPrefix) && !dirs[dirName] && !DirLive(s.Base, dirName) {
				if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) >= grace {
					os.Remove(filepath.Join(s.Base, name))
				}
			}
			continue
		}
		if DirLive(s.Base, name) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < grace {
			continue
		}
		dir := filepath.Join(s.Base, name)
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		os.Remove(dir + OwnerSuffix)
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// DirLive judges the socket directory name in base by its owner file
// (or, in the earlier layout, by its name). Names of neither form are not
// ours: they are reported live and left alone.
func DirLive(base, name string) bool {
	if rest, ok := strings.CutPrefix(name, legacyPrefix); ok {
		id, _, _ := strings.Cut(rest, "-")
		return IDLive(id)
	}
	if !strings.HasPrefix(name, SockDirPrefix) {
		return true
	}
	data, err := os.ReadFile(filepath.Join(base, name+OwnerSuffix))
	if err != nil {
		// The owner file comes first and goes last: without it the
		// directory is a leftover.
		return false
	}
	return IDLive(strings.TrimSpace(string(data)))
}
