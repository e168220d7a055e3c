package nodelocal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CgroupRoot is where this host mounts the cgroup filesystem.
const CgroupRoot = "/sys/fs/cgroup"

// Cgroups are the accounting files of one container's cgroups on this
// host; "" where the host cannot see one (another machine, another cgroup
// namespace, gVisor's sandbox-wide cgroup).
type Cgroups struct {
	CPU        string // v1 cpuacct.usage or v2 cpu.stat
	MemoryPeak string // v1 memory.max_usage_in_bytes or v2 memory.peak
	OOM        string // v1 memory.oom_control or v2 memory.events: oom_kill
}

// CgroupsOf finds the accounting files of the container named id through
// its init process pid, which is in the container's cgroups from the
// moment it exists. It finds nothing for pid <= 0 or when /proc/<pid>
// cannot be read.
func CgroupsOf(pid int, id string) Cgroups {
	if pid <= 0 {
		return Cgroups{}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return Cgroups{}
	}
	return FindCgroups(CgroupRoot, string(data), id)
}

// FindCgroups locates the accounting files under the cgroup filesystem
// mounted at root of the container whose init process's /proc/<pid>/cgroup
// reads procCgroup. Only cgroups named after the container's id count: an
// engine on another machine reports a pid that here may belong to an
// unrelated process. It finds nothing when the host cannot see the
// container's cgroups.
func FindCgroups(root, procCgroup, id string) Cgroups {
	var f Cgroups
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	v1 := func(controllers, dir, ctrl, file string) string {
		// A hierarchy is mounted under its joined controller list
		// ("cpu,cpuacct") or alone, usually with a link per controller.
		for _, mnt := range []string{controllers, ctrl} {
			if p := filepath.Join(root, mnt, dir, file); exists(p) {
				return p
			}
		}
		return ""
	}
	for _, line := range strings.Split(strings.TrimSpace(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || id == "" || !strings.Contains(parts[2], id) {
			continue
		}
		controllers, dir := parts[1], parts[2]
		if parts[0] == "0" && controllers == "" { // cgroup v2
			for _, c := range []struct {
				dst  *string
				file string
			}{{&f.CPU, "cpu.stat"}, {&f.MemoryPeak, "memory.peak"}, {&f.OOM, "memory.events"}} {
				if p := filepath.Join(root, dir, c.file); *c.dst == "" && exists(p) {
					*c.dst = p
				}
			}
			continue
		}
		for _, c := range strings.Split(controllers, ",") {
			switch {
			case c == "cpuacct" && f.CPU == "":
				f.CPU = v1(controllers, dir, c, "cpuacct.usage")
			case c == "memory" && f.MemoryPeak == "":
				f.MemoryPeak = v1(controllers, dir, c, "memory.max_usage_in_bytes")
				f.OOM = v1(controllers, dir, c, "memory.oom_control")
			}
		}
	}
	return f
}

// ReadCPU reads the CPU time the container has used; false when its
// file is not visible or cannot be read (the caller asks its engine).
func (c Cgroups) ReadCPU() (time.Duration, bool) {
	if c.CPU == "" {
		return 0, false
	}
	v, err := readCPUFile(c.CPU)
	return v, err == nil
}

// ReadMemoryPeak reads the most memory the container has used at once, in
// bytes; false when its file is not visible or cannot be read. Sample it
// while the container runs: the cgroup goes when it exits.
func (c Cgroups) ReadMemoryPeak() (int64, bool) {
	if c.MemoryPeak == "" {
		return 0, false
	}
	v, err := readIntFile(c.MemoryPeak)
	return v, err == nil
}

// ReadOOMKills reads the kernel's OOM-kill count of the container's cgroup;
// false when its file is not visible or cannot be read.
func (c Cgroups) ReadOOMKills() (int64, bool) {
	if c.OOM == "" {
		return 0, false
	}
	v, err := readKeyed(c.OOM, "oom_kill")
	return v, err == nil
}

// readCPUFile reads v1 cpuacct.usage (nanoseconds) or v2 cpu.stat
// (usage_usec).
func readCPUFile(path string) (time.Duration, error) {
	if strings.HasSuffix(path, "cpuacct.usage") {
		ns, err := readIntFile(path)
		return time.Duration(ns), err
	}
	us, err := readKeyed(path, "usage_usec")
	return time.Duration(us) * time.Microsecond, err
}

// readIntFile reads a cgroup file holding one decimal integer.
func readIntFile(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// readKeyed reads "key value" from a flat keyed cgroup file.
func readKeyed(path, key string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}
