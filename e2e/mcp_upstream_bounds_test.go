package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-container/dsh-container/internal/testenv"
)

// What a hostile MCP upstream can make `dsh-container mcp` hold, and
// leave behind (issue 24 §7). The upstream is testdata/mcphostile, which
// speaks JSON-RPC itself so that it can send what no SDK would.

// hostileListBytes is the size of mcphostile's big list: under the 16
// MiB bound.
const hostileListBytes = 15<<20 + 512<<10

// buildHostile builds the hostile stdio MCP server of
// testdata/mcphostile.
func buildHostile(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcphostile")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/mcphostile").CombinedOutput(); err != nil {
		t.Fatalf("go build mcphostile: %v\n%s", err, out)
	}
	return bin
}

// hostileManifest writes a manifest whose one MCP server "h" is the
// hostile upstream with args, and returns it with the trigger file the
// upstream waits for.
func hostileManifest(t testing.TB, bin string, args ...string) (manifest, trigger string) {
	t.Helper()
	dir := t.TempDir()
	trigger = filepath.Join(dir, "trigger")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"h": map[string]any{
		"command": bin, "args": append([]string{"-trigger", trigger}, args...)}}})
	manifest = filepath.Join(dir, "tools.json")
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return manifest, trigger
}

// procCPU is the CPU time (user and system) process pid has used.
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the line, in clock ticks (100 a second).
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// resetPeak resets process pid's peak resident size (VmHWM) to its
// current one.
func resetPeak(t testing.TB, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

// quiet waits until process pid has used no CPU for half a second.
func quiet(t testing.TB, pid int) {
	t.Helper()
	last := procCPU(t, pid)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		now := procCPU(t, pid)
		if now == last {
			return
		}
		last = now
	}
	t.Fatal("the process never went quiet")
}

// An upstream's list of 15.5 MiB (under the 16 MiB bound) and its changes,
// as `dsh-container mcp` takes them in: peak resident memory over idle
// from the list's arrival until the process is quiet again, and CPU.
// Natively the tools are held once (descriptions and schemas; the registry
// and what is offered share them): a static list and one whose every tool
// changes (descriptions) on every tools/list_changed stay under 4× the
// list's bytes, the changing one under half a core; when every byte of
// every tool changes, two generations exist while the second is built
// (under 6×). In code mode (the full SDK, mcp's default) the SDK rendered
// from the list, about as large, comes on top, rendered into one buffer
// sized before it starts and shared by the prompt section and run_code's
// description: a static list stays under 4× (2.3-2.4× measured; 7.3-8.0×
// before). A changing one in code mode holds the list and its SDK, twice
// the list, while the next list is decoded and its SDK rendered, and the
// collector lets the heap grow to twice what it found live before it
// looks: under 5× (3.2-3.8× measured) and half a core. Schema bombs are
// refused naming the bound, holding next to nothing.
func TestMCPUpstreamMemory(t *testing.T) {
	bin, hostile := buildCLI(t), buildHostile(t)
	const change = 4 * time.Second
	for _, c := range []struct {
		name     string
		args     []string
		mode     []string
		factor   float64 // the bound: peak over idle ≤ factor × the list's bytes
		bytes    int
		changing bool
	}{
		{"static", []string{"-list", "big"}, []string{"--mode", "native"}, 4, hostileListBytes, false},
		{"changing", []string{"-list", "big", "-change-for", change.String()}, []string{"--mode", "native"}, 4, hostileListBytes, true},
		{"changing_every_byte", []string{"-list", "big", "-change-for", change.String(), "-change-schemas"}, []string{"--mode", "native"}, 6, hostileListBytes, true},
		{"code_mode", []string{"-list", "big"}, []string{"--mode", "code", "--pool", "0"}, 4, hostileListBytes, false},
		{"code_mode_changing", []string{"-list", "big", "-change-for", change.String()}, []string{"--mode", "code", "--pool", "0"}, 5, hostileListBytes, true},
		{"schema_bombs", []string{"-list", "bombs"}, []string{"--mode", "native"}, 4, 5 << 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			manifest, trigger := hostileManifest(t, hostile, c.args...)
			p := startMCP(t, bin, append([]string{"--tools", manifest}, c.mode...)...)
			pid := p.cmd.Process.Pid
			quiet(t, pid)
			idle := procStatusKiB(pid, "VmRSS")
			resetPeak(t, pid)
			cpu0, wall0 := procCPU(t, pid), time.Now()
			if err := os.WriteFile(trigger, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.name == "schema_bombs" {
				for deadline := time.Now().Add(time.Minute); !strings.Contains(p.stderr.String(), "over a bound"); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the bombs were not refused")
					}
				}
				if log := p.stderr.String(); !strings.Contains(log, `tool \"deep_objects\": its inputSchema is over a bound: it is nested deeper than 128 levels (MaxSchemaDepth)`) {
					t.Errorf("the refusal does not name the tool and the bound:\n%s", log)
				}
			} else {
				for deadline := time.Now().Add(2 * time.Minute); p.changed.Load() == 0; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("no tools/list_changed")
					}
				}
			}
			if c.changing {
				time.Sleep(change)
			}
			quiet(t, pid)
			cpu, wall := procCPU(t, pid)-cpu0, time.Since(wall0)
			peak, now := procStatusKiB(pid, "VmHWM")-idle, procStatusKiB(pid, "VmRSS")-idle
			factor := float64(peak<<10) / float64(c.bytes)
			t.Logf("%s: idle %d MiB; over idle: peak %d MiB (%.1f× the list's %.1f MiB), now %d MiB; CPU %v in %v (%.2f of a core)",
				c.name, idle>>10, peak>>10, factor, float64(c.bytes)/(1<<20), now>>10, cpu, wall.Round(time.Millisecond), cpu.Seconds()/wall.Seconds())
			if factor > c.factor {
				t.Errorf("peak resident memory over idle is %.1f× the list's bytes; the bound is %v×", factor, c.factor)
			}
			if c.changing && cpu.Seconds()/wall.Seconds() >= 0.5 {
				t.Errorf("a changing list costs %.2f of a core; the bound is half", cpu.Seconds()/wall.Seconds())
			}
			if c.name == "schema_bombs" {
				return
			}
			// What the client's listing of what changed costs on top (the
			// go-sdk marshals a page of up to 1000 tools): reported only.
			resetPeak(t, pid)
			n := 0
			for tool, err := range p.cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				n += len(tool.Description)
			}
			t.Logf("%s: one listing by the client (%d bytes of descriptions): peak %d MiB over idle", c.name, n, (procStatusKiB(pid, "VmHWM")-idle)>>10)
		})
	}
}

// Two programs each receive a 15 MiB result and a 17 MiB line from the
// upstream: each call is rejected naming its bound, before the host
// decodes anything (the result is over MaxServerResultBytes; the line over
// MaxServerMessageBytes, which closes the connection, and the next call
// starts the server again), and the host holds a few MiB for them.
func TestMCPUpstreamHugeResults(t *testing.T) {
	bin, hostile := buildCLI(t), buildHostile(t)
	manifest, _ := hostileManifest(t, hostile)
	p := startMCP(t, bin, "--tools", manifest, "--pool", "2", "--wall-timeout", "2m")
	pid := p.cmd.Process.Pid
	// Warm the pool and the runtime, then measure from quiet.
	mustRun(t, p.cs, `return 1`)
	quiet(t, pid)
	idle := procStatusKiB(pid, "VmRSS")
	resetPeak(t, pid)
	program := `
const said: string[] = [];
for (const [tool, bytes] of [["h__big", 15 * 1048576], ["h__line", 17 * 1048576]] as const) {
  try { await tools[tool]({ bytes }); said.push(tool + ": no error"); }
  catch (e) { said.push(tool + ": " + (e as Error).message); }
}
return said;
`
	var wg sync.WaitGroup
	outs := make([][]string, 2)
	for i := range outs {
		wg.Go(func() {
			res, err := runCode(context.Background(), p.cs, program, nil)
			if err != nil {
				t.Error(err)
				return
			}
			out := outputOf(t, res)
			if res.IsError || out.Error != nil {
				t.Errorf("the program failed: %s", resultText(res))
				return
			}
			json.Unmarshal(out.Value, &outs[i])
		})
	}
	wg.Wait()
	peak := procStatusKiB(pid, "VmHWM") - idle
	for i, said := range outs {
		t.Logf("program %d: %.300q", i, said)
		if len(said) != 2 {
			t.Fatalf("program %d returned %q", i, said)
		}
		// The line may close the connection while the other program's big
		// result is in flight: either bound is named.
		for _, s := range said {
			if !strings.Contains(s, "(MaxServerResultBytes)") && !strings.Contains(s, "(MaxServerMessageBytes)") {
				t.Errorf("program %d: %q names no bound", i, s)
			}
		}
	}
	t.Logf("idle %d MiB; peak over idle %d MiB while two programs received 15 MiB results and 17 MiB lines", idle>>10, peak>>10)
	if peak>>10 > 40 {
		t.Errorf("peak resident memory over idle %d MiB; the results are refused holding at most their bounds (want ≤ 40 MiB)", peak>>10)
	}
}

// When `dsh-container mcp` is killed outright, its stdio upstream's whole
// tree dies with it: a grandchild that left the server's process group and
// session and ignores SIGHUP and SIGTERM is gone within seconds (it is in
// the upstream's PID namespace, whose init dies with us).
func TestMCPUpstreamTreeDiesWithMCP(t *testing.T) {
	bin, hostile := buildCLI(t), buildHostile(t)
	manifest, _ := hostileManifest(t, hostile)
	xdg := t.TempDir()
	cmd := exec.Command(bin, "mcp", "--mode", "native", "--tools", manifest)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+xdg)
	stderr := &testenv.LockedBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cs.Close()
	})
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "h__spawn"})
	if err != nil || res.IsError {
		t.Fatalf("h__spawn: %v %+v", err, res)
	}
	marker := resultText(res)
	pid := pidWithArg(t, marker)
	if pid == 0 {
		t.Fatalf("no process with %q in its command line", marker)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	processGone(t, pid)
	t.Logf("the upstream's escaped grandchild %d was gone %v after mcp was killed", pid, time.Since(start).Round(time.Millisecond))
}

// pidWithArg is the pid of a process with arg among its arguments, or 0.
func pidWithArg(t testing.TB, arg string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if string(a) == arg {
				return pid
			}
		}
	}
	return 0
}
