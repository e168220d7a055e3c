package containertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
)

// RunBudgets checks that each budget fires at its setting, not merely
// with the right kind — compute at 500ms and 2s of CPU, wall at 1s and
// 3s, memory at 128 and 256 MiB — in both languages, and logs one
// quotable BUDGET line per driver, language and budget:
//
//	go test -count=1 -run TestBudgets -v ./e2e/ | grep BUDGET
func RunBudgets(t *testing.T, cfg Config) {
	cfg.validate(t)
	type budget struct {
		name     string
		programs map[backend.Language]string
		limits   func(*container.Limits)
		setting  func(container.Limits) string
		kind     backend.FailureKind
		measure  func(res backend.RunResult, l container.Limits) string
		// onTime checks that the budget fired at its setting (issue 18,
		// item 11): the kind alone passes with a timer at 10x.
		onTime func(t *testing.T, res backend.RunResult, l container.Limits)
	}
	hot := both(`for (;;) {}`, "while True:\n    pass")
	idle := both(`await new Promise(() => {})`, "import asyncio\nawait asyncio.Event().wait()")
	bomb := both(`const hog: number[][] = [];
for (;;) hog.push(Array.from({ length: 1 << 16 }, (_, i) => i + 0.5));`, `hog = []
while True:
    hog.append(bytearray(1 << 20))`)
	var budgets []budget
	for _, c := range []time.Duration{500 * time.Millisecond, 2 * time.Second} {
		budgets = append(budgets, budget{
			name: fmt.Sprintf("compute %v", c), programs: hot, kind: backend.FailureTimeout,
			limits: func(l *container.Limits) { l.ComputeTime = c; l.WallTime = 10 * c },
			setting: func(l container.Limits) string {
				return fmt.Sprintf("computeMs=%d (cpus %.1f)", l.ComputeTime.Milliseconds(), float64(l.NanoCPUs)/1e9)
			},
			measure: func(res backend.RunResult, l container.Limits) string {
				return fmt.Sprintf("fired at cpu %v (+%v over), wall %v", res.Stats.CPU.Round(time.Millisecond), (res.Stats.CPU - l.ComputeTime).Round(time.Millisecond), res.Stats.Wall.Round(time.Millisecond))
			},
			onTime: func(t *testing.T, res backend.RunResult, l container.Limits) {
				if !strings.Contains(res.Error.Message, "compute budget") {
					t.Fatalf("%s, want the compute budget", res.Error.Message)
				}
				wantFiredOnTime(t, "compute", res.Stats.CPU, l.ComputeTime)
			},
		})
	}
	for _, w := range []time.Duration{time.Second, 3 * time.Second} {
		budgets = append(budgets, budget{
			name: fmt.Sprintf("wall %v", w), programs: idle, kind: backend.FailureTimeout,
			limits:  func(l *container.Limits) { l.WallTime = w },
			setting: func(l container.Limits) string { return fmt.Sprintf("maxWallMs=%d", l.WallTime.Milliseconds()) },
			measure: func(res backend.RunResult, l container.Limits) string {
				return fmt.Sprintf("fired at wall %v (+%v over)", res.Stats.Wall.Round(time.Millisecond), (res.Stats.Wall - l.WallTime).Round(time.Millisecond))
			},
			onTime: func(t *testing.T, res backend.RunResult, l container.Limits) {
				if !strings.Contains(res.Error.Message, "wall-clock budget") {
					t.Fatalf("%s, want the wall-clock budget", res.Error.Message)
				}
				wantFiredOnTime(t, "wall", res.Stats.Wall, l.WallTime)
			},
		})
	}
	for _, m := range []int64{128 << 20, 256 << 20} {
		budgets = append(budgets, budget{
			name: fmt.Sprintf("memory %dMiB", m>>20), programs: bomb, kind: backend.FailureOOM,
			limits:  func(l *container.Limits) { l.MemoryBytes = m; l.TmpfsBytes = 16 << 20 },
			setting: func(l container.Limits) string { return fmt.Sprintf("memory=%dMiB", l.MemoryBytes>>20) },
			measure: func(res backend.RunResult, l container.Limits) string {
				return fmt.Sprintf("oom after wall %v, cpu %v: %s", res.Stats.Wall.Round(time.Millisecond), res.Stats.CPU.Round(time.Millisecond), res.Error.Message)
			},
		})
	}
	driver := cfg.driverName()
	for _, lang := range Languages {
		for _, b := range budgets {
			t.Run(string(lang)+"/"+b.name, func(t *testing.T) {
				e := newEnv(t, cfg, lang, func(l *container.Limits) {
					l.StartupTime = 90 * time.Second
					b.limits(l)
				})
				res := e.run(t, b.programs[lang])
				wantFailure(t, res, b.kind)
				l := e.rt.Limits()
				t.Logf("BUDGET %-10s %-10s %-16s %-28s %s", driver, lang, b.name, b.setting(l), b.measure(res, l))
				if b.onTime != nil {
					b.onTime(t, res, l)
				}
			})
		}
	}
}
