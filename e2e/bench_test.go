package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/images"
)

// buildCLI builds bin/dsh-container into a temp dir for exec-based tests.
func buildCLI(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "dsh-container")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/dsh-container")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("go build: %v", err)
	}
	return bin
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// BenchmarkColdRunVsDockerRun alternates `dsh-container run` of a trivial
// program with `docker run --rm <same image> node -e 0`, so both see the
// same machine state, and reports each p50 and their ratio.
//
//	go test -run '^$' -bench ColdRunVsDockerRun -benchtime 30x ./e2e/
func BenchmarkColdRunVsDockerRun(b *testing.B) {
	bin := buildCLI(b)
	prog := filepath.Join(b.TempDir(), "p.ts")
	os.WriteFile(prog, []byte("return 1"), 0o644)
	im, _ := images.RunnerFor("typescript")
	tag := im.DefaultTag()
	var ours, theirs []time.Duration
	timeCmd := func(name string, args ...string) time.Duration {
		start := time.Now()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ours = append(ours, timeCmd(bin, "run", prog))
		theirs = append(theirs, timeCmd("docker", "run", "--rm", "--network", "none", tag, "node", "-e", "0"))
	}
	b.StopTimer()
	p50o, p50t := percentile(ours, 0.5), percentile(theirs, 0.5)
	b.ReportMetric(float64(p50o.Microseconds())/1000, "dsh-p50-ms")
	b.ReportMetric(float64(p50t.Microseconds())/1000, "docker-run-p50-ms")
	b.ReportMetric(float64(p50o)/float64(p50t), "ratio")
}

// BenchmarkRun reports per-language cold and warm-pool run latency and the
// binding round trip, each as ns/op:
//
//	go test -run '^$' -bench 'BenchmarkRun' -benchtime 20x ./e2e/
func BenchmarkRun(b *testing.B) {
	for _, lang := range langs {
		b.Run(string(lang)+"/cold", func(b *testing.B) {
			e := newEnv(b, lang, nil)
			for i := 0; i < b.N; i++ {
				e.run(b, "return 1")
			}
		})
		b.Run(string(lang)+"/warm", func(b *testing.B) {
			e := newEnv(b, lang, nil, container.WithPool(1))
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for e.rt.PoolIdle() == 0 {
					time.Sleep(time.Millisecond)
				}
				b.StartTimer()
				if res := e.run(b, "return 1"); !res.Stats.Warm {
					b.Fatal("cold run with a ready pool")
				}
			}
		})
		b.Run(string(lang)+"/binding-round-trip", func(b *testing.B) {
			e := newEnv(b, lang, nil)
			prog := map[backend.Language]string{
				backend.TypeScript: fmt.Sprintf("for (let i = 0; i < %d; i++) await tools.noop(null)", b.N),
				backend.Python:     fmt.Sprintf("for i in range(%d):\n    await tools.noop(None)", b.N),
			}[lang]
			b.ResetTimer()
			res := e.run(b, prog, tools(map[string]backend.BindingFunc{"noop": func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }})...)
			b.StopTimer()
			if res.Error != nil {
				b.Fatal(res.Error)
			}
			// Charge only the program's own time, not the container's start.
			b.ReportMetric(float64(res.Stats.Wall.Nanoseconds())/float64(b.N), "ns/call")
		})
	}
}

// bench measures several drivers and runtimes side by side in one
// invocation: a column per driver × runtime (a runtime Docker lacks is
// skipped and named), cold, warm and round-trip figures in each, the
// comparisons between columns, and a clean soak on each, checked.
func TestBenchDriversAndRuntimes(t *testing.T) {
	bin := buildCLI(t)
	ctrd := containerdDriver(t)
	cmd := exec.Command(bin, "bench", "--json", "--driver", "docker,containerd", "--runtime", "runc,runsc",
		"--lang", "typescript", "--runs", "2", "--calls", "20", "--clients", "2", "--sustain", "1s", "--soak", "5")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Drivers []struct {
			Name      string
			Languages map[string]struct{ Cold, Warm, BindingRoundTrip struct{ N int } }
			DockerRun struct{ N int }
			Soak      *struct{ Runs, Failures, ContainersLeft, TasksLeft, SnapshotsLeft, SocketDirsLeft int }
			// sustained figures
			SustainedColdRunsPerSec float64
		}
		Skipped     []string
		Comparisons []struct{ Of, Over string }
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := []string{"docker/runc"}
	if slices.Contains(drv.Capabilities().Runtimes, "runsc") {
		want = append(want, "docker/runsc")
	} else if !slices.ContainsFunc(rep.Skipped, func(s string) bool { return strings.Contains(s, "docker/runsc") }) {
		t.Errorf("docker/runsc neither measured nor skipped: %v", rep.Skipped)
	}
	want = append(want, "containerd/runc")
	if slices.Contains(ctrd.Capabilities().Runtimes, "runsc") {
		want = append(want, "containerd/runsc")
	}
	var got []string
	for _, d := range rep.Drivers {
		got = append(got, d.Name)
		ts := d.Languages["typescript"]
		if ts.Cold.N != 2 || ts.Warm.N == 0 || ts.BindingRoundTrip.N == 0 || d.SustainedColdRunsPerSec <= 0 {
			t.Errorf("%s: %+v, sustained cold %.2f/s", d.Name, ts, d.SustainedColdRunsPerSec)
		}
		if strings.HasPrefix(d.Name, "docker") != (d.DockerRun.N == 2) {
			t.Errorf("%s: %d docker run --rm timings", d.Name, d.DockerRun.N)
		}
		if s := d.Soak; s == nil || s.Runs != 5 || s.Failures+s.ContainersLeft+s.TasksLeft+s.SnapshotsLeft+s.SocketDirsLeft != 0 {
			t.Errorf("%s soak: %+v", d.Name, s)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("columns %v, want %v", got, want)
	}
	if !slices.ContainsFunc(rep.Comparisons, func(c struct{ Of, Over string }) bool {
		return c.Of == "containerd/runc" && c.Over == "docker/runc"
	}) {
		t.Errorf("comparisons %+v lack containerd/runc over docker/runc", rep.Comparisons)
	}
	if strings.Contains(stderr.String(), "soak run") {
		t.Errorf("soak failures reported:\n%s", stderr.String())
	}
}
