package nodelocal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The two drivers' ids: Docker's hex id, containerd's container name.
const (
	dockerID     = "fb327dbd5fc8a70f81297073673173d972d02debb812e22069fa36b6a2589654"
	containerdID = "dsh-abc"
)

// writeFiles lays out a fake cgroup filesystem under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFindCgroups(t *testing.T) {
	v1 := "/docker/" + dockerID
	v2 := "/system.slice/docker-" + dockerID + ".scope"
	c1 := "/dsh-container/" + containerdID // containerd's cgroupfs layout
	tests := []struct {
		name           string
		id             string   // dockerID when empty
		files          []string // relative to the cgroup root
		procCgroup     string
		cpu, peak, oom string // expected, relative to the root ("" = none)
	}{
		{
			name:  "v1, controllers mounted apart (this project's CI host)",
			files: []string{"cpuacct" + v1 + "/cpuacct.usage", "memory" + v1 + "/memory.max_usage_in_bytes"},
			procCgroup: "9:name=systemd:" + v1 + "\n4:memory:" + v1 + "\n2:cpuacct:" + v1 + "\n1:cpu:" + v1 +
				"\n0::" + v1 + "\n", // hybrid: the unified line names a directory that is not there
			cpu: "cpuacct" + v1 + "/cpuacct.usage", peak: "memory" + v1 + "/memory.max_usage_in_bytes",
		},
		{
			name:       "v1, cpu and cpuacct co-mounted",
			files:      []string{"cpu,cpuacct" + v1 + "/cpuacct.usage", "memory" + v1 + "/memory.max_usage_in_bytes"},
			procCgroup: "4:memory:" + v1 + "\n3:cpu,cpuacct:" + v1,
			cpu:        "cpu,cpuacct" + v1 + "/cpuacct.usage", peak: "memory" + v1 + "/memory.max_usage_in_bytes",
		},
		{
			name:       "v1, co-mounted hierarchy reached through its per-controller link",
			files:      []string{"cpuacct" + v1 + "/cpuacct.usage"},
			procCgroup: "3:cpu,cpuacct:" + v1,
			cpu:        "cpuacct" + v1 + "/cpuacct.usage",
		},
		{
			name: "v1 with the OOM control file (containerd's task)",
			id:   containerdID,
			files: []string{"cpuacct" + c1 + "/cpuacct.usage", "memory" + c1 + "/memory.max_usage_in_bytes",
				"memory" + c1 + "/memory.oom_control"},
			procCgroup: "12:pids:" + c1 + "\n5:memory:" + c1 + "\n3:cpuacct:" + c1 + "\n2:cpu:" + c1 + "\n1:name=systemd:/x\n0::/\n",
			cpu:        "cpuacct" + c1 + "/cpuacct.usage", peak: "memory" + c1 + "/memory.max_usage_in_bytes",
			oom: "memory" + c1 + "/memory.oom_control",
		},
		{
			name: "another container's cgroups do not count",
			id:   "dsh-other",
			files: []string{"cpuacct" + c1 + "/cpuacct.usage", "memory" + c1 + "/memory.max_usage_in_bytes",
				"memory" + c1 + "/memory.oom_control"},
			procCgroup: "5:memory:" + c1 + "\n3:cpuacct:" + c1,
		},
		{
			name:       "v2 with memory.peak and memory.events",
			files:      []string{v2 + "/cpu.stat", v2 + "/memory.peak", v2 + "/memory.events"},
			procCgroup: "0::" + v2 + "\n",
			cpu:        v2 + "/cpu.stat", peak: v2 + "/memory.peak", oom: v2 + "/memory.events",
		},
		{
			name:       "v2 before Linux 5.19: no memory.peak",
			files:      []string{v2 + "/cpu.stat", v2 + "/memory.current"},
			procCgroup: "0::" + v2,
			cpu:        v2 + "/cpu.stat",
		},
		{
			name:       "a process outside the container's cgroups (a remote daemon's pid)",
			files:      []string{"user.slice/cpu.stat", "user.slice/memory.peak"},
			procCgroup: "0::/user.slice",
		},
		{
			name:       "cgroups not visible from here",
			procCgroup: "4:memory:" + v1 + "\n2:cpuacct:" + v1 + "\n0::" + v2,
		},
		{
			name:       "garbage",
			files:      []string{"cpuacct" + v1 + "/cpuacct.usage"},
			procCgroup: "not a cgroup file\n\n2-cpuacct-" + v1,
		},
		{
			name:       "no id matches nothing",
			id:         "-",
			files:      []string{"user.slice/cpu.stat"},
			procCgroup: "0::/user.slice",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			files := map[string]string{}
			for _, f := range tc.files {
				files[f] = "0\n"
			}
			writeFiles(t, root, files)
			id := tc.id
			switch id {
			case "":
				id = dockerID
			case "-":
				id = ""
			}
			got := FindCgroups(root, tc.procCgroup, id)
			want := Cgroups{}
			for _, w := range []struct {
				dst  *string
				name string
			}{{&want.CPU, tc.cpu}, {&want.MemoryPeak, tc.peak}, {&want.OOM, tc.oom}} {
				if w.name != "" {
					*w.dst = filepath.Join(root, w.name)
				}
			}
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestReadAccountingFiles(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpuacct.usage":             "1500000000\n",
		"cpu.stat":                  "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n",
		"memory.max_usage_in_bytes": "104857600\n",
		"memory.peak":               "73400320\n",
		"memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"memory.events":             "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
		"bad/cpu.stat":              "user_usec 1\n",
		"bad/memory.peak":           "max\n",
		"bad/memory.events":         "oom 1\n",
	})
	p := func(name string) string { return filepath.Join(root, name) }
	if d, err := readCPUFile(p("cpuacct.usage")); err != nil || d != 1500*time.Millisecond {
		t.Errorf("cpuacct.usage: %v, %v", d, err)
	}
	if d, err := readCPUFile(p("cpu.stat")); err != nil || d != 2500*time.Millisecond {
		t.Errorf("cpu.stat: %v, %v", d, err)
	}
	if v, err := readIntFile(p("memory.max_usage_in_bytes")); err != nil || v != 100<<20 {
		t.Errorf("memory.max_usage_in_bytes: %v, %v", v, err)
	}
	if v, err := readIntFile(p("memory.peak")); err != nil || v != 70<<20 {
		t.Errorf("memory.peak: %v, %v", v, err)
	}
	if _, err := readCPUFile(p("bad/cpu.stat")); err == nil || !strings.Contains(err.Error(), "no usage_usec") {
		t.Errorf("cpu.stat without usage_usec: %v", err)
	}
	if _, err := readIntFile(p("bad/memory.peak")); err == nil || !strings.Contains(err.Error(), "memory.peak") {
		t.Errorf("memory.peak holding %q: %v", "max", err)
	}
	if _, err := readIntFile(p("missing")); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}

	// What the drivers call: false where a file is not known or not readable.
	c := Cgroups{CPU: p("cpu.stat"), MemoryPeak: p("memory.peak"), OOM: p("memory.oom_control")}
	if v, ok := c.ReadCPU(); !ok || v != 2500*time.Millisecond {
		t.Errorf("ReadCPU: %v, %v", v, ok)
	}
	if v, ok := c.ReadMemoryPeak(); !ok || v != 70<<20 {
		t.Errorf("ReadMemoryPeak: %v, %v", v, ok)
	}
	if v, ok := c.ReadOOMKills(); !ok || v != 2 {
		t.Errorf("ReadOOMKills (v1): %v, %v", v, ok)
	}
	if v, ok := (Cgroups{OOM: p("memory.events")}).ReadOOMKills(); !ok || v != 1 {
		t.Errorf("ReadOOMKills (v2): %v, %v", v, ok)
	}
	bad := Cgroups{CPU: p("bad/cpu.stat"), MemoryPeak: p("bad/memory.peak"), OOM: p("bad/memory.events")}
	for _, c := range []Cgroups{{}, bad} {
		if _, ok := c.ReadCPU(); ok {
			t.Errorf("ReadCPU of %+v: ok", c)
		}
		if _, ok := c.ReadMemoryPeak(); ok {
			t.Errorf("ReadMemoryPeak of %+v: ok", c)
		}
		if _, ok := c.ReadOOMKills(); ok {
			t.Errorf("ReadOOMKills of %+v: ok", c)
		}
	}
}

// CgroupsOf finds this test process's own cgroups under its cgroup path
// (an id every line contains), and nothing for an impossible pid.
func TestCgroupsOf(t *testing.T) {
	if got := CgroupsOf(0, "x"); got != (Cgroups{}) {
		t.Fatalf("pid 0: %+v", got)
	}
	if got := CgroupsOf(-1, "x"); got != (Cgroups{}) {
		t.Fatalf("pid -1: %+v", got)
	}
	if got := CgroupsOf(os.Getpid(), ""); got != (Cgroups{}) {
		t.Fatalf("no id: %+v", got)
	}
}
