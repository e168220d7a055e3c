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

// Report is the result of one invocation: a DriverReport per driver,
// in the order given, and the ratios between them.
type Report struct {
	Machine string          `json:"machine"`
	Drivers []*DriverReport `json:"drivers"`
	// WorkerThreads is a fresh Node worker thread per trivial program on
	// the host (the in-process substrate this project replaces); zero when
	// node is not installed.
	WorkerThreads Dist   `json:"workerThreads"`
	WorkerNote    string `json:"workerNote,omitempty"`
	// HostRSSMiB is this process's resident memory after the phases.
	HostRSSMiB float64 `json:"hostRssMiB"`
	HeapMiB    float64 `json:"hostHeapMiB"`
	// Containerd compares containerd with Docker when both were measured.
	Containerd *DriverRatios `json:"containerdOverDocker,omitempty"`
}

// DriverReport holds one driver's phases.
type DriverReport struct {
	Driver    string                `json:"driver"`
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

// DriverRatios compare containerd with Docker, from the same invocation.
type DriverRatios struct {
	// ColdTS is containerd's cold TypeScript p50 over Docker's (target
	// ≤ 0.6).
	ColdTS float64 `json:"coldTsP50"`
	// SustainedCold is containerd's sustained cold runs/s over Docker's
	// (target ≥ 1.6).
	SustainedCold float64 `json:"sustainedColdRunsPerSec"`
	// WarmTS is containerd's warm-pool TypeScript p50 over Docker's
	// (target ≤ 1).
	WarmTS float64 `json:"warmTsP50"`
}

// LangReport holds one language's phases.
type LangReport struct {
	Cold        Dist `json:"cold"`
	ColdStartup Dist `json:"coldStartup"`
	Warm        Dist `json:"warm"`
	RoundTrip   Dist `json:"bindingRoundTrip"`
}

// Ratios are the targets of issue 7, computed from this invocation.
type Ratios struct {
	WarmTSOverWorker     float64 `json:"warmTsOverWorkerThreads"`
	ColdTSOverDockerRun  float64 `json:"coldTsOverDockerRun"`
	SustainedOverChurn   float64 `json:"sustainedOverDaemonChurn"`
	PythonColdOverTSCold float64 `json:"pythonColdOverTsCold"`
	PythonWarmOverTSWarm float64 `json:"pythonWarmOverTsWarm"`
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

// Run performs every phase against each driver, in the order given, and
// compares containerd with Docker when both are there.
func Run(ctx context.Context, drivers []Driver, o Options) (*Report, error) {
	o.defaults()
	rep := &Report{Machine: fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)}
	for _, drv := range drivers {
		dr, err := runDriver(ctx, drv, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", drv.Capabilities().Name, err)
		}
		rep.Drivers = append(rep.Drivers, dr)
	}

	rep.WorkerThreads, rep.WorkerNote = workerThreads(ctx, o.Runs)
	fmt.Fprintf(o.Progress, "node worker_threads fresh-per-run: p50 %.1fms %s\n", rep.WorkerThreads.P50, rep.WorkerNote)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	rep.HostRSSMiB = rssMiB()

	byName := map[string]*DriverReport{}
	for _, dr := range rep.Drivers {
		ts := dr.Languages[string(backend.TypeScript)]
		py := dr.Languages[string(backend.Python)]
		dr.Ratios = Ratios{
			WarmTSOverWorker:     ratio(ts.Warm.P50, rep.WorkerThreads.P50),
			ColdTSOverDockerRun:  ratio(ts.Cold.P50, dr.DockerRun.P50),
			SustainedOverChurn:   ratio(dr.SustainedPerSec, dr.ChurnPerSec),
			PythonColdOverTSCold: ratio(py.Cold.P50, ts.Cold.P50),
			PythonWarmOverTSWarm: ratio(py.Warm.P50, ts.Warm.P50),
		}
		byName[dr.Driver] = dr
	}
	if d, c := byName["docker"], byName["containerd"]; d != nil && c != nil {
		dts, cts := d.Languages[string(backend.TypeScript)], c.Languages[string(backend.TypeScript)]
		rep.Containerd = &DriverRatios{
			ColdTS:        ratio(cts.Cold.P50, dts.Cold.P50),
			SustainedCold: ratio(c.SustainedColdPerSec, d.SustainedColdPerSec),
			WarmTS:        ratio(cts.Warm.P50, dts.Warm.P50),
		}
	}
	return rep, nil
}

// runDriver performs every phase against one driver.
func runDriver(ctx context.Context, drv Driver, o Options) (*DriverReport, error) {
	name := drv.Capabilities().Name
	rep := &DriverReport{Driver: name, Languages: map[string]LangReport{}}
	progress := prefixWriter{o.Progress, name + ": "}
	sockDir, err := os.MkdirTemp("", "dshb")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(sockDir)
	limits := container.DefaultLimits()
	newRT := func(l backend.Language, opts ...container.Option) (*container.Runtime, error) {
		im, err := images.RunnerFor(l)
		if err != nil {
			return nil, err
		}
		tag := im.DefaultTag()
		if ok, err := drv.ImageExists(ctx, tag); err != nil || !ok {
			return nil, images.ErrMissing(tag)
		}
		return container.New(drv, append([]container.Option{
			container.WithLanguage(l), container.WithImage(tag), container.WithLimits(limits), container.WithSocketDir(sockDir),
		}, opts...)...)
	}
	tsTag := images.Runners[0].DefaultTag()
	dockerRun := name == "docker"
	if _, err := exec.LookPath("docker"); err != nil {
		dockerRun = false
	}

	for _, l := range o.Languages {
		var lr LangReport
		// Cold runs, alternated with `docker run --rm` for TypeScript on
		// Docker so both see the same machine state.
		cold, err := newRT(l)
		if err != nil {
			return nil, err
		}
		var coldD, startD, dockerD []time.Duration
		for i := 0; i < o.Runs; i++ {
			d, res, err := timeRun(ctx, cold, trivial(l), nil)
			if err != nil {
				cold.Close(ctx)
				return nil, err
			}
			coldD = append(coldD, d)
			startD = append(startD, res.Stats.Startup)
			if l == backend.TypeScript && dockerRun {
				t0 := time.Now()
				if out, err := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", tsTag, "node", "-e", "0").CombinedOutput(); err != nil {
					cold.Close(ctx)
					return nil, fmt.Errorf("docker run: %v: %s", err, out)
				}
				dockerD = append(dockerD, time.Since(t0))
			}
		}
		cold.Close(ctx)
		lr.Cold, lr.ColdStartup = dist(coldD), dist(startD)
		if l == backend.TypeScript {
			rep.DockerRun = dist(dockerD)
		}
		fmt.Fprintf(progress, "%s cold: p50 %.1fms (startup p50 %.1fms)\n", l, lr.Cold.P50, lr.ColdStartup.P50)

		// Warm runs: wait for a full pool before each, so every run is
		// served warm and no refill competes with it for the CPUs.
		warm, err := newRT(l, container.WithPool(2))
		if err != nil {
			return nil, err
		}
		var warmD []time.Duration
		for i := 0; i < o.Runs; i++ {
			waitIdle(warm, 2, 10*time.Second)
			d, res, err := timeRun(ctx, warm, trivial(l), nil)
			if err != nil {
				warm.Close(ctx)
				return nil, err
			}
			if res.Stats.Warm {
				warmD = append(warmD, d)
			}
		}
		lr.Warm = dist(warmD)
		fmt.Fprintf(progress, "%s warm: p50 %.1fms (%d of %d runs warm)\n", l, lr.Warm.P50, len(warmD), o.Runs)

		warm.Close(ctx)

		// Binding round trip, timed inside the program around each await,
		// on a runtime without a pool so no refill competes with it.
		rtt, err := newRT(l)
		if err != nil {
			return nil, err
		}
		_, res, err := timeRun(ctx, rtt, roundTripProgram(l, o.Calls), noop)
		rtt.Close(ctx)
		if err != nil {
			return nil, err
		}
		var ns []int64
		if err := json.Unmarshal(res.Value, &ns); err != nil {
			return nil, fmt.Errorf("round-trip program returned %s: %w", res.Value, err)
		}
		var calls []time.Duration
		for _, n := range ns[len(ns)/10:] { // drop warm-up
			calls = append(calls, time.Duration(n))
		}
		lr.RoundTrip = dist(calls)
		fmt.Fprintf(progress, "%s binding round trip: p50 %.3fms p99 %.3fms\n", l, lr.RoundTrip.P50, lr.RoundTrip.P99)
		rep.Languages[string(l)] = lr
	}

	// Sustained: the engine's churn rate, then our throughput with the
	// pool on and with it off, with the same clients.
	rep.ChurnPerSec, err = churn(ctx, drv, tsTag, o.Clients, o.Sustain)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "engine churn with %d clients: %.2f containers/s\n", o.Clients, rep.ChurnPerSec)
	sus, err := newRT(backend.TypeScript, container.WithPool(o.Clients))
	if err != nil {
		return nil, err
	}
	waitIdle(sus, o.Clients, 20*time.Second)
	rep.SustainedPerSec, err = sustained(ctx, sus, o.Clients, o.Sustain)
	sus.Close(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "sustained warm with %d clients: %.2f runs/s\n", o.Clients, rep.SustainedPerSec)
	susCold, err := newRT(backend.TypeScript)
	if err != nil {
		return nil, err
	}
	rep.SustainedColdPerSec, err = sustained(ctx, susCold, o.Clients, o.Sustain)
	susCold.Close(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "sustained cold (pool off) with %d clients: %.2f runs/s\n", o.Clients, rep.SustainedColdPerSec)

	if o.Soak > 0 {
		rep.Soak, err = soak(ctx, drv, newRT, o.Soak, sockDir)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "soak: %d runs, %d failures, %d containers, %d tasks, %d snapshots and %d socket dirs left\n", rep.Soak.Runs, rep.Soak.Failures, rep.Soak.LeftOver, rep.Soak.TasksLeft, rep.Soak.SnapshotsLeft, rep.Soak.DirsLeft)
	}
	return rep, nil
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
func churn(ctx context.Context, drv Driver, image string, clients int, d time.Duration) (float64, error) {
	return loop(clients, d, func() error {
		return drv.Probe(ctx, image, []string{"node", "-e", "0"}, "")
	})
}

// sustained measures trivial runs per second through rt.
func sustained(ctx context.Context, rt *container.Runtime, clients int, d time.Duration) (float64, error) {
	return loop(clients, d, func() error {
		_, _, err := timeRun(ctx, rt, trivialTS, nil)
		return err
	})
}

func soak(ctx context.Context, drv Driver, newRT func(backend.Language, ...container.Option) (*container.Runtime, error), runs int, sockDir string) (*Soak, error) {
	before := runtime.NumGoroutine()
	owner := "bench-soak-" + strconv.Itoa(os.Getpid())
	rt, err := newRT(backend.TypeScript, container.WithPool(2), container.WithOwner(owner))
	if err != nil {
		return nil, err
	}
	s := &Soak{Runs: runs}
	for i := 0; i < runs; i++ {
		if _, _, err := timeRun(ctx, rt, trivialTS, noop); err != nil {
			s.Failures++
		}
	}
	if err := rt.Close(ctx); err != nil {
		return nil, err
	}
	list, err := drv.List(ctx, container.LabelOwner, owner)
	if err != nil {
		return nil, err
	}
	s.LeftOver = len(list)
	if lc, ok := drv.(LeftoverCounter); ok {
		if s.TasksLeft, s.SnapshotsLeft, err = lc.Leftovers(ctx, container.LabelOwner, owner); err != nil {
			return nil, err
		}
	}
	// Socket directories and their owner files: the soak's directory is
	// its own, so everything in it is a leftover.
	entries, _ := os.ReadDir(sockDir)
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
		fmt.Fprintf(w, " %28s", d.Driver)
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
		fmt.Fprintf(w, "%s ratios: warm TS / worker_threads %.2f (target ≤ 0.5); sustained warm / churn %.2f (target ≥ 0.9)", d.Driver, d.Ratios.WarmTSOverWorker, d.Ratios.SustainedOverChurn)
		if d.DockerRun.N > 0 {
			fmt.Fprintf(w, "; cold TS / docker run %.2f (target ≤ 1.3)", d.Ratios.ColdTSOverDockerRun)
		}
		fmt.Fprintf(w, "; python cold / TS cold %.2f; python warm / TS warm %.2f\n", d.Ratios.PythonColdOverTSCold, d.Ratios.PythonWarmOverTSWarm)
	}
	if c := r.Containerd; c != nil {
		fmt.Fprintf(w, "containerd / docker: cold TS p50 %.2f (target ≤ 0.6); sustained cold runs/s %.2f (target ≥ 1.6); warm TS p50 %.2f (target ≤ 1)\n", c.ColdTS, c.SustainedCold, c.WarmTS)
	}
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
