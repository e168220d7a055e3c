// Package bench measures dsh-container against its reference points in
// one invocation, so the figures are ratios taken side by side on the same
// (possibly noisy) machine: cold and warm-pool runs against `docker run
// --rm` of the same image and a fresh-per-run Node worker_threads baseline,
// the binding round trip per language, sustained throughput (warm, and
// cold with the pool off) against the engine's own container churn, and
// the host process's memory. Given several drivers (Docker, containerd),
// it runs every phase on each, in turns, and compares them.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/seccomp"
	"github.com/dsh-container/dsh-container/images"
)

// Options configure a benchmark invocation.
type Options struct {
	// Runs per latency phase (default 30).
	Runs int
	// Calls in the binding round-trip program (default 500).
	Calls int
	// Clients for the sustained phase (default 4).
	Clients int
	// Sustain is how long the sustained phases last (default 10s).
	Sustain time.Duration
	// Soak runs this many consecutive warm runs and checks nothing is left
	// behind (0 skips).
	Soak int
	// Languages to measure (default both).
	Languages []backend.Language
	// Progress receives one line per phase (nil: silent).
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Runs <= 0 {
		o.Runs = 30
	}
	if o.Calls <= 0 {
		o.Calls = 500
	}
	if o.Clients <= 0 {
		o.Clients = 4
	}
	if o.Sustain <= 0 {
		o.Sustain = 10 * time.Second
	}
	if len(o.Languages) == 0 {
		o.Languages = backend.Languages()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Dist summarises a latency distribution in milliseconds.
type Dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
}

func dist(d []time.Duration) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) float64 {
		return float64(s[int(p*float64(len(s)-1)+0.5)].Microseconds()) / 1000
	}
	return Dist{N: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99)}
}

// Report is the result of one invocation: a DriverReport per target (a
// driver, or a driver under one OCI runtime), in the order given, and the
// ratios between them.
type Report struct {
	Machine string          `json:"machine"`
	Drivers []*DriverReport `json:"drivers"`
	// Skipped names the targets asked for that this host cannot measure,
	// with the reason (a runtime not registered with the daemon).
	Skipped []string `json:"skipped,omitempty"`
	// WorkerThreads is a fresh Node worker thread per trivial program on
	// the host (the in-process substrate this project replaces); zero when
	// node is not installed.
	WorkerThreads Dist   `json:"workerThreads"`
	WorkerNote    string `json:"workerNote,omitempty"`
	// HostRSSMiB is this process's resident memory after the phases.
	HostRSSMiB float64 `json:"hostRssMiB"`
	HeapMiB    float64 `json:"hostHeapMiB"`
	// Comparisons set each target against the first one it differs from
	// in one thing: containerd over Docker under the same runtime, another
	// runtime over the first under the same driver.
	Comparisons []Comparison `json:"comparisons,omitempty"`
}

// DriverReport holds one target's phases.
type DriverReport struct {
	// Name is the driver, with "/runtime" when a runtime was asked for.
	Name      string                `json:"name"`
	Driver    string                `json:"driver"`
	Runtime   string                `json:"runtime,omitempty"`
	Languages map[string]LangReport `json:"languages"`
	// DockerRun is `docker run --rm <ts image> node -e 0` (Docker only).
	DockerRun Dist `json:"dockerRun"`
	// ChurnPerSec is the engine's own container churn rate (create,
	// start, wait, remove of the same image) with the same clients, per
	// second.
	ChurnPerSec float64 `json:"engineChurnPerSec"`
	// SustainedPerSec is trivial TypeScript runs per second through the
	// warm-pool runtime with the same clients.
	SustainedPerSec float64 `json:"sustainedRunsPerSec"`
	// SustainedColdPerSec is the same with the pool off: every run pays
	// for a fresh container.
	SustainedColdPerSec float64 `json:"sustainedColdRunsPerSec"`
	Soak                *Soak   `json:"soak,omitempty"`
	Ratios              Ratios  `json:"ratios"`
}

// Comparison is one target's figures over another's, from the same
// invocation.
type Comparison struct {
	Of   string `json:"of"`
	Over string `json:"over"`
	// ColdTS and WarmTS are TypeScript p50 ratios (issue 11's targets for
	// containerd over Docker: ≤ 0.6 and ≤ 1).
	ColdTS float64 `json:"coldTsP50"`
	WarmTS float64 `json:"warmTsP50"`
	// ColdPy and WarmPy are the same for Python.
	ColdPy float64 `json:"coldPyP50"`
	WarmPy float64 `json:"warmPyP50"`
	// RoundTripTS and RoundTripPy are binding round-trip p50 ratios.
	RoundTripTS float64 `json:"roundTripTsP50"`
	RoundTripPy float64 `json:"roundTripPyP50"`
	// SustainedCold is sustained cold runs/s over the other's (target
	// for containerd over Docker: ≥ 1.6).
	SustainedCold float64 `json:"sustainedColdRunsPerSec"`
}

// LangReport holds one language's phases.
type LangReport struct {
	Cold        Dist `json:"cold"`
	ColdStartup Dist `json:"coldStartup"`
	Warm        Dist `json:"warm"`
	RoundTrip   Dist `json:"bindingRoundTrip"`
	// RawFloor and LibraryFloor are the round trip's floors (floor.go).
	RawFloor     Dist        `json:"rawSocketFloor"`
	LibraryFloor Dist        `json:"libraryFloor"`
	FloorRatios  FloorRatios `json:"floorRatios"`
	// IdleMemory is an idle pooled runner's cgroup memory (density.go).
	IdleMemory *IdleMemory `json:"idleMemory,omitempty"`
	// WarmBreakdown is where a warm run's time goes (breakdown.go).
	WarmBreakdown *Breakdown `json:"warmBreakdown,omitempty"`
}

// Ratios are the targets of issue 7, computed from this invocation.
type Ratios struct {
	WarmTSOverWorker     float64 `json:"warmTsOverWorkerThreads"`
	ColdTSOverDockerRun  float64 `json:"coldTsOverDockerRun"`
	SustainedOverChurn   float64 `json:"sustainedOverDaemonChurn"`
	PythonColdOverTSCold float64 `json:"pythonColdOverTsCold"`
	PythonWarmOverTSWarm float64 `json:"pythonWarmOverTsWarm"`
	// WarmTSOverWarmPy is issue 17's (target ≤ 1.5).
	WarmTSOverWarmPy float64 `json:"warmTsOverWarmPython"`
}

// Soak is the outcome of many consecutive runs.
type Soak struct {
	Runs     int `json:"runs"`
	Failures int `json:"failures"`
	LeftOver int `json:"containersLeft"`
	// TasksLeft and SnapshotsLeft are counted where the engine has them
	// apart from containers (containerd).
	TasksLeft     int `json:"tasksLeft"`
	SnapshotsLeft int `json:"snapshotsLeft"`
	DirsLeft      int `json:"socketDirsLeft"`
	Goroutines    int `json:"goroutineGrowth"`
}

// Driver is what the benchmark needs of a driver.
type Driver interface {
	container.Driver
	container.ImageChecker
	container.Prober
}

// Target is one column of the report: a driver, and the OCI runtime its
// containers run under ("" = the driver's default).
type Target struct {
	Driver  Driver
	Runtime string
}

func (t Target) name() string {
	if t.Runtime == "" {
		return t.Driver.Capabilities().Name
	}
	return t.Driver.Capabilities().Name + "/" + t.Runtime
}

// LeftoverCounter is a driver that counts what carries label=value apart
// from containers: tasks and snapshots (containerd).
type LeftoverCounter interface {
	Leftovers(ctx context.Context, label, value string) (tasks, snapshots int, err error)
}

const trivialTS, trivialPy = "return 1", "return 1"

func trivial(l backend.Language) string {
	if l == backend.Python {
		return trivialPy
	}
	return trivialTS
}

func roundTripProgram(l backend.Language, calls int) string {
	if l == backend.Python {
		return fmt.Sprintf(`import time
out = []
for i in range(%d):
    t = time.perf_counter_ns()
    await tools.noop(None)
    out.append(time.perf_counter_ns() - t)
return out`, calls)
	}
	return fmt.Sprintf(`const out: number[] = [];
for (let i = 0; i < %d; i++) {
  const t = process.hrtime.bigint();
  await tools.noop(null);
  out.push(Number(process.hrtime.bigint() - t));
}
return out;`, calls)
}

var noop = []backend.BindingNamespace{{Global: "tools", Functions: map[string]backend.BindingFunc{
	"noop": func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage("null"), nil },
}}}

// Run performs every phase against each target, phase by phase: the
// cold runs alternate between the targets (and `docker run --rm`), so
// each sees the same machine state; the other phases run on one target
// at a time, so no target's pool refill competes with another's runs.
// Targets whose runtime their driver lacks are skipped and named.
func Run(ctx context.Context, targets []Target, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{Machine: fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)}
	var ts []*target
	for _, t := range targets {
		caps := t.Driver.Capabilities()
		if t.Runtime != "" && !slices.Contains(caps.Runtimes, t.Runtime) {
			why := "not registered with the Docker daemon (`docker info`)"
			if caps.Name != "docker" {
				why = "not installed for " + caps.Name
			}
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: runtime %s is %s", t.name(), t.Runtime, why))
			fmt.Fprintf(o.Progress, "skipping %s: runtime %s is %s\n", t.name(), t.Runtime, why)
			continue
		}
		tt, err := newTarget(t, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name(), err)
		}
		defer tt.close()
		ts = append(ts, tt)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("nothing to measure: %s", strings.Join(rep.Skipped, "; "))
	}
	if err := measure(ctx, ts, o); err != nil {
		return nil, err
	}
	for _, t := range ts {
		rep.Drivers = append(rep.Drivers, t.rep)
	}

	rep.WorkerThreads, rep.WorkerNote = workerThreads(ctx, o.Runs)
	fmt.Fprintf(o.Progress, "node worker_threads fresh-per-run: p50 %.1fms %s\n", rep.WorkerThreads.P50, rep.WorkerNote)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	rep.HostRSSMiB = rssMiB()

	for _, dr := range rep.Drivers {
		ts := dr.Languages[string(backend.TypeScript)]
		py := dr.Languages[string(backend.Python)]
		dr.Ratios = Ratios{
			WarmTSOverWorker:     ratio(ts.Warm.P50, rep.WorkerThreads.P50),
			ColdTSOverDockerRun:  ratio(ts.Cold.P50, dr.DockerRun.P50),
			SustainedOverChurn:   ratio(dr.SustainedPerSec, dr.ChurnPerSec),
			PythonColdOverTSCold: ratio(py.Cold.P50, ts.Cold.P50),
			PythonWarmOverTSWarm: ratio(py.Warm.P50, ts.Warm.P50),
			WarmTSOverWarmPy:     ratio(ts.Warm.P50, py.Warm.P50),
		}
	}
	rep.Comparisons = compare(rep.Drivers)
	return rep, nil
}

// compare sets each report against the first earlier one that differs
// from it in the driver alone or in the runtime alone.
func compare(drs []*DriverReport) []Comparison {
	var out []Comparison
	for i, a := range drs {
		for _, b := range drs[:i] {
			if (a.Driver == b.Driver) == (a.Runtime == b.Runtime) {
				continue
			}
			get := func(d *DriverReport, l backend.Language) LangReport { return d.Languages[string(l)] }
			at, bt := get(a, backend.TypeScript), get(b, backend.TypeScript)
			ap, bp := get(a, backend.Python), get(b, backend.Python)
			out = append(out, Comparison{
				Of: a.Name, Over: b.Name,
				ColdTS: ratio(at.Cold.P50, bt.Cold.P50), WarmTS: ratio(at.Warm.P50, bt.Warm.P50),
				ColdPy: ratio(ap.Cold.P50, bp.Cold.P50), WarmPy: ratio(ap.Warm.P50, bp.Warm.P50),
				RoundTripTS: ratio(at.RoundTrip.P50, bt.RoundTrip.P50), RoundTripPy: ratio(ap.RoundTrip.P50, bp.RoundTrip.P50),
				SustainedCold: ratio(a.SustainedColdPerSec, b.SustainedColdPerSec),
			})
			break
		}
	}
	return out
}

// target is one target being measured: its driver, its runtime, a
// private socket directory and its report.
type target struct {
	Target
	rep      *DriverReport
	sockDir  string
	progress io.Writer
}

func newTarget(t Target, o Options) (*target, error) {
	dir, err := os.MkdirTemp("", "dshb")
	if err != nil {
		return nil, err
	}
	name := t.Driver.Capabilities().Name
	return &target{
		Target:   t,
		rep:      &DriverReport{Name: t.name(), Driver: name, Runtime: t.Runtime, Languages: map[string]LangReport{}},
		sockDir:  dir,
		progress: prefixWriter{o.Progress, t.name() + ": "},
	}, nil
}

func (t *target) close() { os.RemoveAll(t.sockDir) }

// newRT is a runtime of language l on the target, the default limits,
// and opts.
func (t *target) newRT(ctx context.Context, l backend.Language, opts ...container.Option) (*container.Runtime, error) {
	im, err := images.RunnerFor(l)
	if err != nil {
		return nil, err
	}
	tag := im.DefaultTag()
	if ok, err := t.Driver.ImageExists(ctx, tag); err != nil {
		return nil, err
	} else if !ok {
		hint := "dsh-container images build"
		if t.rep.Driver != "docker" {
			hint += " --driver " + t.rep.Driver
		}
		return nil, fmt.Errorf("runner image %s is missing from %s; build it with `%s`", tag, t.rep.Driver, hint)
	}
	return container.New(t.Driver, append([]container.Option{
		container.WithLanguage(l), container.WithImage(tag), container.WithLimits(container.DefaultLimits()),
		container.WithSocketDir(t.sockDir), container.WithOCIRuntime(t.Runtime),
	}, opts...)...)
}

// dockerRunArgs is `docker run --rm` of the TypeScript image under the
// target's runtime, for a Docker target; nil otherwise.
func (t *target) dockerRunArgs() []string {
	if t.rep.Driver != "docker" {
		return nil
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return nil
	}
	args := []string{"run", "--rm", "--network", "none"}
	if t.Runtime != "" {
		args = append(args, "--runtime", t.Runtime)
	}
	if seccomp.IsGVisor(t.Runtime) {
		// runsc --oci-seccomp answers the default profile's clone3 rule
		// with EPERM, and node cannot start a thread; our runs use
		// seccomp.ForGVisor. The baseline leaves the filtering to
		// gVisor's kernel, which it measures either way.
		args = append(args, "--security-opt", "seccomp=unconfined")
	}
	return append(args, images.Runners[0].DefaultTag(), "node", "-e", "0")
}

// measure runs the phases over the targets.
func measure(ctx context.Context, ts []*target, o Options) error {
	for _, l := range o.Languages {
		if err := coldPhase(ctx, ts, l, o); err != nil {
			return err
		}
		for _, t := range ts {
			if err := t.warmAndRoundTrip(ctx, l, o); err != nil {
				return fmt.Errorf("%s: %w", t.rep.Name, err)
			}
			if err := t.floors(ctx, l, o); err != nil {
				return fmt.Errorf("%s: %w", t.rep.Name, err)
			}
		}
	}
	for _, t := range ts {
		if err := t.sustained(ctx, o); err != nil {
			return fmt.Errorf("%s: %w", t.rep.Name, err)
		}
	}
	for _, t := range ts {
		if o.Soak == 0 {
			break
		}
		s, err := soak(ctx, t, o.Soak)
		if err != nil {
			return fmt.Errorf("%s: %w", t.rep.Name, err)
		}
		t.rep.Soak = s
		fmt.Fprintf(t.progress, "soak: %d runs, %d failures, %d containers, %d tasks, %d snapshots and %d socket dirs left\n", s.Runs, s.Failures, s.LeftOver, s.TasksLeft, s.SnapshotsLeft, s.DirsLeft)
	}
	return nil
}

// coldPhase times o.Runs cold runs of language l on every target, in
// turns, each TypeScript run on Docker followed by `docker run --rm` of
// the same image.
func coldPhase(ctx context.Context, ts []*target, l backend.Language, o Options) error {
	rts := make([]*container.Runtime, len(ts))
	defer func() {
		for _, rt := range rts {
			if rt != nil {
				closeRT(ctx, rt)
			}
		}
	}()
	for i, t := range ts {
		rt, err := t.newRT(ctx, l)
		if err != nil {
			return fmt.Errorf("%s: %w", t.rep.Name, err)
		}
		rts[i] = rt
	}
	coldD := make([][]time.Duration, len(ts))
	startD := make([][]time.Duration, len(ts))
	dockerD := make([][]time.Duration, len(ts))
	for n := 0; n < o.Runs; n++ {
		for i, t := range ts {
			d, res, err := timeRun(ctx, rts[i], trivial(l), nil)
			if err != nil {
				return fmt.Errorf("%s: %w", t.rep.Name, err)
			}
			coldD[i] = append(coldD[i], d)
			startD[i] = append(startD[i], res.Stats.Startup)
			if args := t.dockerRunArgs(); l == backend.TypeScript && args != nil {
				t0 := time.Now()
				if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
					return fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, out)
				}
				dockerD[i] = append(dockerD[i], time.Since(t0))
			}
		}
	}
	for i, t := range ts {
		lr := t.rep.Languages[string(l)]
		lr.Cold, lr.ColdStartup = dist(coldD[i]), dist(startD[i])
		t.rep.Languages[string(l)] = lr
		if l == backend.TypeScript {
			t.rep.DockerRun = dist(dockerD[i])
		}
		fmt.Fprintf(t.progress, "%s cold: p50 %.1fms (startup p50 %.1fms)\n", l, lr.Cold.P50, lr.ColdStartup.P50)
	}
	return nil
}

// warmAndRoundTrip times warm-pool runs and the binding round trip of
// language l on the target.
func (t *target) warmAndRoundTrip(ctx context.Context, l backend.Language, o Options) error {
	lr := t.rep.Languages[string(l)]
	// Warm runs: wait for a full pool before each, so every run is served
	// warm and no refill competes with it for the CPUs.
	warm, err := t.newRT(ctx, l, container.WithPool(2))
	if err != nil {
		return err
	}
	var warmD []time.Duration
	var trs traces
	for i := 0; i < o.Runs; i++ {
		waitIdle(warm, 2, 10*time.Second)
		d, res, tr, err := timeTracedRun(ctx, warm, trivial(l), nil)
		if err != nil {
			closeRT(ctx, warm)
			return err
		}
		if res.Stats.Warm {
			warmD = append(warmD, d)
			trs = append(trs, tr)
		}
	}
	lr.WarmBreakdown = trs.breakdown()
	lr.IdleMemory = idleMemory(ctx, warm, 2)
	closeRT(ctx, warm)
	lr.Warm = dist(warmD)
	fmt.Fprintf(t.progress, "%s warm: p50 %.1fms (%d of %d runs warm)\n", l, lr.Warm.P50, len(warmD), o.Runs)
	fmt.Fprintf(t.progress, "%s idle pooled runner memory: %s\n", l, lr.IdleMemory)
	fmt.Fprintf(t.progress, "%s warm breakdown: %s\n", l, lr.WarmBreakdown)

	// Binding round trip, timed inside the program around each await, on
	// a runtime without a pool so no refill competes with it.
	rtt, err := t.newRT(ctx, l)
	if err != nil {
		return err
	}
	_, res, err := timeRun(ctx, rtt, roundTripProgram(l, o.Calls), noop)
	closeRT(ctx, rtt)
	if err != nil {
		return err
	}
	var ns []int64
	if err := json.Unmarshal(res.Value, &ns); err != nil {
		return fmt.Errorf("round-trip program returned %s: %w", res.Value, err)
	}
	var calls []time.Duration
	for _, n := range ns[len(ns)/10:] { // drop warm-up
		calls = append(calls, time.Duration(n))
	}
	lr.RoundTrip = dist(calls)
	fmt.Fprintf(t.progress, "%s binding round trip: p50 %.3fms p99 %.3fms\n", l, lr.RoundTrip.P50, lr.RoundTrip.P99)
	t.rep.Languages[string(l)] = lr
	return nil
}

// sustained measures the engine's churn rate, then our throughput with
// the pool on and with it off, with the same clients.
func (t *target) sustained(ctx context.Context, o Options) error {
	var err error
	rep := t.rep
	if rep.ChurnPerSec, err = churn(ctx, t.Driver, images.Runners[0].DefaultTag(), t.Runtime, o.Clients, o.Sustain); err != nil {
		return err
	}
	fmt.Fprintf(t.progress, "engine churn with %d clients: %.2f containers/s\n", o.Clients, rep.ChurnPerSec)
	sus, err := t.newRT(ctx, backend.TypeScript, container.WithPool(o.Clients))
	if err != nil {
		return err
	}
	waitIdle(sus, o.Clients, 20*time.Second)
	rep.SustainedPerSec, err = sustained(ctx, sus, o.Clients, o.Sustain)
	closeRT(ctx, sus)
	if err != nil {
		return err
	}
	fmt.Fprintf(t.progress, "sustained warm with %d clients: %.2f runs/s\n", o.Clients, rep.SustainedPerSec)
	susCold, err := t.newRT(ctx, backend.TypeScript)
	if err != nil {
		return err
	}
	rep.SustainedColdPerSec, err = sustained(ctx, susCold, o.Clients, o.Sustain)
	closeRT(ctx, susCold)
	if err != nil {
		return err
	}
	fmt.Fprintf(t.progress, "sustained cold (pool off) with %d clients: %.2f runs/s\n", o.Clients, rep.SustainedColdPerSec)
	return nil
}

// closeRT closes rt even when ctx is done (an interrupted bench still
// removes its containers), within a minute.
func closeRT(ctx context.Context, rt *container.Runtime) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return rt.Close(cctx)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func timeRun(ctx context.Context, rt *container.Runtime, prog string, b []backend.BindingNamespace) (time.Duration, backend.RunResult, error) {
	t0 := time.Now()
	res, err := rt.Run(ctx, backend.RunRequest{Program: prog, Bindings: b})
	d := time.Since(t0)
	if err == nil && res.Error != nil {
		err = fmt.Errorf("benchmark program failed: %s: %s", res.Error.Kind, res.Error.Message)
	}
	return d, res, err
}

func waitIdle(rt *container.Runtime, n int, max time.Duration) {
	deadline := time.Now().Add(max)
	for rt.PoolIdle() < n && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// workerThreads times a fresh Node worker thread per trivial program on
// the host, in one node process, like the in-process substrate does.
func workerThreads(ctx context.Context, runs int) (Dist, string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return Dist{}, "node is not installed on the host"
	}
	script := fmt.Sprintf(`
const { Worker } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
(async () => {
  const out = [];
  for (let i = 0; i < %d; i++) {
    const t = performance.now();
    await new Promise((resolve, reject) => {
      const w = new Worker('const { parentPort } = require("node:worker_threads"); (async () => { return 1 })().then(v => parentPort.postMessage(v))', { eval: true, env: {} });
      w.once('message', () => { w.terminate().then(resolve) });
      w.once('error', reject);
    });
    out.push(performance.now() - t);
  }
  console.log(JSON.stringify(out));
})();`, runs)
	out, err := exec.CommandContext(ctx, node, "-e", script).Output()
	if err != nil {
		return Dist{}, "node worker_threads baseline failed: " + err.Error()
	}
	var msf []float64
	if err := json.Unmarshal(out, &msf); err != nil {
		return Dist{}, "node worker_threads baseline printed " + strings.TrimSpace(string(out))
	}
	var d []time.Duration
	for _, m := range msf {
		d = append(d, time.Duration(m*float64(time.Millisecond)))
	}
	v, _ := exec.Command(node, "--version").Output()
	return dist(d), "node " + strings.TrimSpace(string(v))
}

// loop runs fn from clients goroutines until d has passed and returns the
// completed calls per second; the first error stops its client and is
// returned.
func loop(clients int, d time.Duration, fn func() error) (float64, error) {
	var mu sync.Mutex
	var n int
	var firstErr error
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				err := fn()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					n++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds(), firstErr
}

// churn measures the engine's own container churn: create, start, wait
// for and remove a container of the same image running node -e 0.
func churn(ctx context.Context, drv Driver, image, runtime string, clients int, d time.Duration) (float64, error) {
	return loop(clients, d, func() error {
		return drv.Probe(ctx, image, []string{"node", "-e", "0"}, runtime)
	})
}

// sustained measures trivial runs per second through rt.
func sustained(ctx context.Context, rt *container.Runtime, clients int, d time.Duration) (float64, error) {
	return loop(clients, d, func() error {
		_, _, err := timeRun(ctx, rt, trivialTS, nil)
		return err
	})
}

// soak runs n consecutive warm runs with a binding on the target under an
// owner of its own, then counts what is left of that owner: containers,
// tasks and snapshots (where the engine has them apart), socket
// directories, goroutines.
func soak(ctx context.Context, t *target, n int) (*Soak, error) {
	before := runtime.NumGoroutine()
	// This process's own owner label, so the reaper can judge what an
	// interrupted soak leaves: every other runtime of this bench is closed
	// by now, so whatever carries it afterwards is a leftover.
	owner := container.OwnerOf(os.Getpid())
	rt, err := t.newRT(ctx, backend.TypeScript, container.WithPool(2), container.WithOwner(owner))
	if err != nil {
		return nil, err
	}
	s := &Soak{Runs: n}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if _, _, err := timeRun(ctx, rt, trivialTS, noop); err != nil {
			s.Failures++
			if s.Failures <= 3 {
				fmt.Fprintf(t.progress, "soak run %d failed: %v\n", i, err)
			}
		}
	}
	if err := closeRT(ctx, rt); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("soak interrupted: %w", err)
	}
	list, err := t.Driver.List(ctx, container.LabelOwner, owner)
	if err != nil {
		return nil, err
	}
	s.LeftOver = len(list)
	if lc, ok := t.Driver.(LeftoverCounter); ok {
		if s.TasksLeft, s.SnapshotsLeft, err = lc.Leftovers(ctx, container.LabelOwner, owner); err != nil {
			return nil, err
		}
	}
	// Socket directories and their owner files: the target's directory
	// is its own, and every runtime on it is closed, so everything in it
	// is a leftover.
	entries, _ := os.ReadDir(t.sockDir)
	s.DirsLeft = len(entries)
	time.Sleep(100 * time.Millisecond)
	s.Goroutines = runtime.NumGoroutine() - before
	return s, nil
}

func rssMiB() float64 {
	data, err := os.ReadFile(filepath.Join("/proc", "self", "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// Text renders a report as a table: one column of figures per driver.
func (r *Report) Text(w io.Writer) {
	fmt.Fprintf(w, "machine: %s\n\n", r.Machine)
	fmt.Fprintf(w, "%-36s", "phase (p50 / p90 / p99 ms)")
	for _, d := range r.Drivers {
		fmt.Fprintf(w, " %28s", d.Name)
	}
	fmt.Fprintln(w)
	row := func(name string, get func(*DriverReport) Dist) {
		fmt.Fprintf(w, "%-36s", name)
		for _, d := range r.Drivers {
			v := get(d)
			if v.N == 0 {
				fmt.Fprintf(w, " %28s", "-")
				continue
			}
			fmt.Fprintf(w, " %28s", fmt.Sprintf("%.1f / %.1f / %.1f", v.P50, v.P90, v.P99))
		}
		fmt.Fprintln(w)
	}
	lang := func(l backend.Language, f func(LangReport) Dist) func(*DriverReport) Dist {
		return func(d *DriverReport) Dist { return f(d.Languages[string(l)]) }
	}
	for _, l := range backend.Languages() {
		if _, ok := r.Drivers[0].Languages[string(l)]; !ok {
			continue
		}
		row(string(l)+" cold run", lang(l, func(x LangReport) Dist { return x.Cold }))
		row(string(l)+"   of which startup", lang(l, func(x LangReport) Dist { return x.ColdStartup }))
		row(string(l)+" warm-pool run", lang(l, func(x LangReport) Dist { return x.Warm }))
		row(string(l)+" binding round trip", lang(l, func(x LangReport) Dist { return x.RoundTrip }))
		row(string(l)+"   raw socket floor", lang(l, func(x LangReport) Dist { return x.RawFloor }))
		row(string(l)+"   library floor", lang(l, func(x LangReport) Dist { return x.LibraryFloor }))
		breakdownRows(w, r, l, row)
		fmt.Fprintf(w, "%-36s", string(l)+" idle pooled runner memory")
		for _, d := range r.Drivers {
			fmt.Fprintf(w, " %28s", d.Languages[string(l)].IdleMemory)
		}
		fmt.Fprintln(w)
	}
	row("docker run --rm (same image)", func(d *DriverReport) Dist { return d.DockerRun })
	rate := func(name string, get func(*DriverReport) float64) {
		fmt.Fprintf(w, "%-36s", name)
		for _, d := range r.Drivers {
			fmt.Fprintf(w, " %28.2f", get(d))
		}
		fmt.Fprintln(w)
	}
	rate("sustained warm runs/s", func(d *DriverReport) float64 { return d.SustainedPerSec })
	rate("sustained cold runs/s (pool off)", func(d *DriverReport) float64 { return d.SustainedColdPerSec })
	rate("engine churn containers/s", func(d *DriverReport) float64 { return d.ChurnPerSec })
	fmt.Fprintf(w, "\nnode worker_threads per run: p50 %.1f ms", r.WorkerThreads.P50)
	if r.WorkerNote != "" {
		fmt.Fprintf(w, " (%s)", r.WorkerNote)
	}
	fmt.Fprintf(w, "\nhost RSS: %.1f MiB, heap: %.1f MiB\n", r.HostRSSMiB, r.HeapMiB)
	for _, d := range r.Drivers {
		if s := d.Soak; s != nil {
			fmt.Fprintf(w, "%s soak: %d runs, %d failures, %d containers, %d tasks, %d snapshots, %d socket dirs left, goroutine growth %d\n", d.Driver, s.Runs, s.Failures, s.LeftOver, s.TasksLeft, s.SnapshotsLeft, s.DirsLeft, s.Goroutines)
		}
	}
	fmt.Fprintln(w)
	for _, d := range r.Drivers {
		fmt.Fprintf(w, "%s ratios: warm TS / worker_threads %.2f (target ≤ 0.5); sustained warm / churn %.2f (target ≥ 0.9)", d.Name, d.Ratios.WarmTSOverWorker, d.Ratios.SustainedOverChurn)
		if d.DockerRun.N > 0 {
			fmt.Fprintf(w, "; cold TS / docker run %.2f (target ≤ 1.3)", d.Ratios.ColdTSOverDockerRun)
		}
		fmt.Fprintf(w, "; python cold / TS cold %.2f; python warm / TS warm %.2f\n", d.Ratios.PythonColdOverTSCold, d.Ratios.PythonWarmOverTSWarm)
	}
	issue17Ratios(w, r)
	for _, c := range r.Comparisons {
		fmt.Fprintf(w, "%s / %s: cold p50 TS %.2f, Python %.2f; warm p50 TS %.2f, Python %.2f; round trip p50 TS %.2f, Python %.2f; sustained cold runs/s %.2f\n",
			c.Of, c.Over, c.ColdTS, c.ColdPy, c.WarmTS, c.WarmPy, c.RoundTripTS, c.RoundTripPy, c.SustainedCold)
		if strings.HasPrefix(c.Of, "containerd") && strings.HasPrefix(c.Over, "docker") {
			fmt.Fprintf(w, "  issue 11's targets: cold TS ≤ 0.6 (%s), sustained cold ≥ 1.6 (%s), warm TS ≤ 1 (%s)\n",
				verdict(c.ColdTS <= 0.6), verdict(c.SustainedCold >= 1.6), verdict(c.WarmTS <= 1))
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
}

// SoakErr is an error naming each target whose soak failed a run or left
// anything behind; nil when every soak was clean (or none ran).
func (r *Report) SoakErr() error {
	var bad []string
	for _, d := range r.Drivers {
		if s := d.Soak; s != nil && (s.Failures > 0 || s.LeftOver > 0 || s.TasksLeft > 0 || s.SnapshotsLeft > 0 || s.DirsLeft > 0) {
			bad = append(bad, fmt.Sprintf("%s: %d of %d runs failed; left %d containers, %d tasks, %d snapshots, %d socket dirs", d.Name, s.Failures, s.Runs, s.LeftOver, s.TasksLeft, s.SnapshotsLeft, s.DirsLeft))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: soak: %s", errSoak, strings.Join(bad, "; "))
}

// errSoak marks a soak that failed.
var errSoak = errors.New("the soak failed")

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// prefixWriter prefixes each write (one progress line) with a driver's
// name.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
