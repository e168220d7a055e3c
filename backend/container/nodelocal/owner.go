package nodelocal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Ownership. A node-local runtime labels its containers with its owner,
// "<pid>.<start>.<host>", where start is the owner process's start time in
// clock ticks since boot (/proc/<pid>/stat field 22) and host the first 8
// hex digits of the SHA-256 of the host's name (a valid label value
// whatever the name). A pid alone could be reused; the pair cannot. An
// owner is live when it is on this host and a process with that pid and
// that start time exists. Earlier versions wrote "<host>/<pid>/<start>";
// Owners still judges those.

// ProcessStart returns pid's start time, or "" if there is no such process.
func ProcessStart(pid int) string {
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

var selfStart = ProcessStart(os.Getpid())

// HostTag is this host's tag in owner labels.
func HostTag() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}

// SelfID is this process's "<pid>.<start>".
func SelfID() string { return fmt.Sprintf("%d.%s", os.Getpid(), selfStart) }

// SelfOwner is this process's owner label.
func SelfOwner() string { return SelfID() + "." + HostTag() }

// OwnerOf returns the owner label of process pid on this host, or "" when
// there is no such process.
func OwnerOf(pid int) string {
	start := ProcessStart(pid)
	if start == "" {
		return ""
	}
	return fmt.Sprintf("%d.%s.%s", pid, start, HostTag())
}

// IDLive judges a "<pid>.<start>" owner id.
func IDLive(id string) bool {
	pidS, start, ok := strings.Cut(id, ".")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(pidS)
	if err != nil || pid <= 0 {
		return false
	}
	return ProcessStart(pid) == start
}

// Owners judges owner labels from this host's /proc: the node-local
// owner judge.
type Owners struct{}

// Alive judges an owner label. Owners on other hosts are reported live:
// this process cannot judge them. So are labels of any other form (set
// with WithOwner by an embedding program or a test suite): no one can
// tell whether their owner lives, and a shared engine's running
// containers must not be removed on a guess.
func (Owners) Alive(owner string) bool {
	parts := strings.Split(owner, ".")
	if len(parts) != 3 {
		return legacyOwnerAlive(owner)
	}
	if parts[2] != HostTag() {
		return true
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil || pid <= 0 || parts[1] == "" || strings.Trim(parts[1], "0123456789") != "" {
		return true
	}
	return ProcessStart(pid) == parts[1]
}

// legacyOwnerAlive judges an earlier version's "<host>/<pid>/<start>".
func legacyOwnerAlive(owner string) bool {
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
	return ProcessStart(pid) == parts[2]
}
