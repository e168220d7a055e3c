package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/client"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// fleet is deploy/fleet/docker-compose.yml brought up under a name of its
// own: three authenticated daemons on this host's engine behind HAProxy.
type fleet struct {
	t     *testing.T
	name  string // compose project, hostname and socket-folder prefix
	file  string
	env   []string
	url   string
	token string
}

var fleetDaemons = []string{"d1", "d2", "d3"}

func (f *fleet) compose(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker-compose", append([]string{"-f", f.file, "-p", f.name}, args...)...)
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// hostTag is the owner-label tag of a daemon whose hostname is host (the
// first 8 hex digits of its SHA-256, as backend/container/reaper.go makes).
func hostTag(host string) string {
	sum := sha256.Sum256([]byte(host))
	return hex.EncodeToString(sum[:4])
}

// socketDir is daemon d's socket folder, the same path on the host and in
// its container.
func (f *fleet) socketDir(d string) string {
	return filepath.Join("/run/dsh-fleet", f.name, d, "dsh-container")
}

// state is daemon d's container: its host pid, health and restarts.
func (f *fleet) state(d string) (pid int, health string, restarts int) {
	f.t.Helper()
	id, err := f.compose(30*time.Second, "ps", "-q", d)
	id = strings.TrimSpace(id)
	if err != nil || id == "" {
		return 0, "", 0
	}
	ins, err := cli.ContainerInspect(context.Background(), id)
	if err != nil || ins.State == nil {
		return 0, "", 0
	}
	if ins.State.Health != nil {
		health = ins.State.Health.Status
	}
	if !ins.State.Running {
		return 0, health, ins.RestartCount
	}
	return ins.State.Pid, health, ins.RestartCount
}

// runners lists the runner containers of the fleet's daemons by owner:
// daemon name → owner label → container ids.
func (f *fleet) runners() map[string]map[string][]string {
	f.t.Helper()
	list, err := cli.ContainerList(context.Background(), dcontainer.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", container.LabelManaged+"=true"))})
	if err != nil {
		f.t.Fatal(err)
	}
	tags := map[string]string{}
	for _, d := range fleetDaemons {
		tags[hostTag(f.name+"-"+d)] = d
	}
	out := map[string]map[string][]string{}
	for _, c := range list {
		owner := c.Labels[container.LabelOwner]
		i := strings.LastIndexByte(owner, '.')
		if i < 0 {
			continue
		}
		d, ok := tags[owner[i+1:]]
		if !ok {
			continue
		}
		if out[d] == nil {
			out[d] = map[string][]string{}
		}
		out[d][owner] = append(out[d][owner], c.ID)
	}
	return out
}

// ownedBy counts daemon d's containers and socket directories whose owner
// process is pid.
func (f *fleet) ownedBy(d string, pid int) (containers, dirs int) {
	for owner, ids := range f.runners()[d] {
		if strings.HasPrefix(owner, strconv.Itoa(pid)+".") {
			containers += len(ids)
		}
	}
	entries, _ := os.ReadDir(f.socketDir(d))
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".owner") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(f.socketDir(d), e.Name()))
		if strings.HasPrefix(string(b), strconv.Itoa(pid)+".") {
			dirs++
		}
	}
	return containers, dirs
}

// leftovers counts what the fleet left: runner containers of its daemons,
// entries in its socket folders, its compose containers.
func (f *fleet) leftovers() (n int, what []string) {
	for d, owners := range f.runners() {
		for owner, ids := range owners {
			n += len(ids)
			what = append(what, fmt.Sprintf("%s: %d container(s) of %s", d, len(ids), owner))
		}
	}
	for _, d := range fleetDaemons {
		entries, _ := os.ReadDir(f.socketDir(d))
		for _, e := range entries {
			n++
			what = append(what, filepath.Join(f.socketDir(d), e.Name()))
		}
	}
	list, err := cli.ContainerList(context.Background(), dcontainer.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "com.docker.compose.project="+f.name))})
	if err == nil {
		for _, c := range list {
			n++
			what = append(what, "compose container "+strings.Join(c.Names, ","))
		}
	}
	return n, what
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// startFleet brings the fleet up and waits until every daemon is healthy
// and HAProxy answers; everything is torn down when the test ends, failed
// or not.
func startFleet(t *testing.T) *fleet {
	t.Helper()
	if _, err := exec.LookPath("docker-compose"); err != nil {
		testenv.Missing(t, "fleet: docker-compose is not installed (apt-get install docker-compose)")
	}
	daemonImage := envOr("DSH_FLEET_IMAGE", "dsh-container/daemon:latest")
	haproxyImage := envOr("DSH_FLEET_HAPROXY_IMAGE", "dsh-container/haproxy:latest")
	for _, im := range []string{daemonImage, haproxyImage} {
		if ok, err := images.Exists(context.Background(), cli, im); err != nil || !ok {
			testenv.Missing(t, "fleet: image %s is missing (%v): run `make fleet-images`", im, err)
		}
	}
	f := &fleet{t: t, name: "dshfleet" + randomHex(t, 4), file: "../deploy/fleet/docker-compose.yml", token: randomHex(t, 32)}
	secrets := t.TempDir()
	sum := sha256.Sum256([]byte(f.token))
	auth := fmt.Sprintf(`{"tenants":[{"name":"fleet","tokenSha256":"%s"}]}`, hex.EncodeToString(sum[:]))
	if err := os.WriteFile(filepath.Join(secrets, "auth.json"), []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	f.url = "http://127.0.0.1:" + port
	f.env = append(os.Environ(),
		"DSH_FLEET_NAME="+f.name, "DSH_FLEET_SECRETS="+secrets, "DSH_FLEET_PORT="+port, "DSH_FLEET_BIND=127.0.0.1",
		"DSH_FLEET_IMAGE="+daemonImage, "DSH_FLEET_HAPROXY_IMAGE="+haproxyImage,
		"DSH_FLEET_POOL=1", "DSH_FLEET_MAX_RUNS=2", "DSH_FLEET_QUEUE=1", "DSH_FLEET_LANGUAGES=python",
		"DSH_FLEET_SHUTDOWN=30s")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := f.compose(60*time.Second, "logs", "--no-color", "--tail=60")
			t.Logf("fleet logs:\n%s", out)
		}
		if out, err := f.compose(3*time.Minute, "down", "--timeout", "45", "--remove-orphans"); err != nil {
			t.Errorf("docker-compose down: %v\n%s", err, out)
		}
		// What down left (it should be nothing; the test body counts it).
		for _, owners := range f.runners() {
			for _, ids := range owners {
				for _, id := range ids {
					_ = cli.ContainerRemove(context.Background(), id, dcontainer.RemoveOptions{Force: true})
				}
			}
		}
		os.RemoveAll(filepath.Join("/run/dsh-fleet", f.name))
		os.Remove("/run/dsh-fleet") // only when empty
	})
	if out, err := f.compose(3*time.Minute, "up", "-d"); err != nil {
		t.Fatalf("docker-compose up: %v\n%s", err, out)
	}
	f.waitHealthy(t, 2*time.Minute)
	return f
}

// waitHealthy waits until every daemon is healthy and HAProxy answers
// /healthz.
func (f *fleet) waitHealthy(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		healthy := 0
		for _, d := range fleetDaemons {
			if pid, h, _ := f.state(d); pid != 0 && h == "healthy" {
				healthy++
			}
		}
		if healthy == len(fleetDaemons) {
			resp, err := http.Get(f.url + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					// HAProxy's own checks bring each back after 2 passes.
					time.Sleep(2500 * time.Millisecond)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet is not healthy after %v (%d/%d daemons)", timeout, healthy, len(fleetDaemons))
		}
		time.Sleep(time.Second)
	}
}

// busiest is the daemon (not in skip) with the most runner containers.
func (f *fleet) busiest(skip ...string) string {
	best, most := "", -1
	for _, d := range fleetDaemons {
		if strings.Contains(strings.Join(skip, ","), d) {
			continue
		}
		n := 0
		for _, ids := range f.runners()[d] {
			n += len(ids)
		}
		if n > most {
			best, most = d, n
		}
	}
	return best
}

// The fleet survives losing daemons: three authenticated daemons behind
// HAProxy take a bounded load of session runs through the Go client; mid-
// load one daemon is SIGKILLed and another SIGTERMed. Every run completes
// (some after 429/503 retries), or fails with client.ErrNodeLost; none runs
// twice (each records its id through a client tool); the killed daemon's
// leftovers are reaped when it restarts; nothing is left at the end.
//
//	DSH_TEST_DAEMON=require go test -count=1 -run '^TestFleet$' -v ./e2e/
func TestFleet(t *testing.T) {
	began := time.Now()
	f := startFleet(t)
	t.Logf("fleet %s up in %v at %s", f.name, time.Since(began).Round(time.Millisecond), f.url)

	const runs, workers = 30, 8
	var (
		mu        sync.Mutex
		recorded  = map[string]int{}
		reasons   = map[string]int{} // retries by cause: 429, 503, connection
		inFlight  atomic.Int32       // accepted, not returned
		completed atomic.Int32
		retried   atomic.Int32
		lost      atomic.Int32
		failed    []string
	)
	record := client.Tool{Name: "record", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		Func: func(_ context.Context, args json.RawMessage) (any, error) {
			var a struct{ ID string }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			mu.Lock()
			recorded[a.ID]++
			mu.Unlock()
			return true, nil
		}}
	runOne := func(i int) {
		id := fmt.Sprintf("%s-%02d", f.name, i)
		code := fmt.Sprintf("import asyncio\nawait tools.record({\"id\": %q})\nawait asyncio.sleep(1.5)\nreturn %q", id, id)
		c, err := client.New(f.url)
		if err != nil {
			t.Error(err)
			return
		}
		c.Token, c.MaxRetries, c.RetryBackoff, c.MaxRetryWait = f.token, 12, 200*time.Millisecond, 3*time.Second
		var tries atomic.Int32
		c.OnRetry = func(_ string, err error) {
			tries.Add(1)
			why := "connection"
			if rf := (*client.RefusedError)(nil); errors.As(err, &rf) {
				why = strconv.Itoa(rf.Status)
			}
			mu.Lock()
			reasons[why]++
			mu.Unlock()
		}
		var accepted atomic.Bool
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		rep, err := c.Run(ctx, client.Request{Language: "python", Code: code, ID: id}, []client.Tool{record}, client.Handlers{
			Accepted: func(string) { accepted.Store(true); inFlight.Add(1) },
		})
		if accepted.Load() {
			inFlight.Add(-1)
		}
		if tries.Load() > 0 {
			retried.Add(1)
		}
		switch {
		case err == nil && rep.Error == nil && string(rep.Value) == strconv.Quote(id):
			completed.Add(1)
		case errors.Is(err, client.ErrNodeLost):
			lost.Add(1)
		default:
			detail := fmt.Sprint(err)
			if rep != nil {
				detail = fmt.Sprintf("%v, report error %+v value %s", err, rep.Error, rep.Value)
			}
			mu.Lock()
			failed = append(failed, fmt.Sprintf("%s (after %d retries): %s", id, tries.Load(), detail))
			mu.Unlock()
		}
	}

	// The load: workers take run numbers until none are left.
	loadStart := time.Now()
	var next atomic.Int32
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= runs; i = int(next.Add(1)) {
				runOne(i)
			}
		}()
	}
	loadDone := make(chan struct{})
	go func() { wg.Wait(); close(loadDone) }()

	// Mid-load: once runs are in flight, SIGKILL the busiest daemon, then
	// SIGTERM the busiest of the others.
	deadline := time.Now().Add(90 * time.Second)
	for inFlight.Load() < 4 || completed.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the load never reached 4 runs in flight (completed %d, failed %v)", completed.Load(), failed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	killed := f.busiest()
	killedPid, _, killedRestarts := f.state(killed)
	beforeC, beforeD := f.ownedBy(killed, killedPid)
	if killedPid == 0 {
		t.Fatalf("%s is not running", killed)
	}
	if err := syscall.Kill(killedPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL %s (pid %d) with %d runs in flight in the fleet; it had %d container(s), %d socket dir(s)", killed, killedPid, inFlight.Load(), beforeC, beforeD)
	time.Sleep(time.Second)
	termed := f.busiest(killed)
	termedPid, _, termedRestarts := f.state(termed)
	if termedPid == 0 {
		t.Fatalf("%s is not running", termed)
	}
	if err := syscall.Kill(termedPid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM %s (pid %d)", termed, termedPid)

	select {
	case <-loadDone:
	case <-time.After(150 * time.Second):
		t.Fatal("the load did not finish in 150s")
	}
	loadTime := time.Since(loadStart)

	// Both come back (restart: unless-stopped), and the killed daemon's
	// restart reaps what its dead process left; the SIGTERMed one left
	// nothing to reap.
	restartDeadline := time.Now().Add(90 * time.Second)
	for _, c := range []struct {
		d        string
		pid      int
		restarts int
	}{{killed, killedPid, killedRestarts}, {termed, termedPid, termedRestarts}} {
		for {
			pid, health, restarts := f.state(c.d)
			if pid != 0 && pid != c.pid && restarts > c.restarts && health == "healthy" {
				break
			}
			if time.Now().After(restartDeadline) {
				t.Fatalf("%s did not come back healthy (pid %d, health %q, restarts %d)", c.d, pid, health, restarts)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	var leftC, leftD int
	for {
		leftC, leftD = f.ownedBy(killed, killedPid)
		tc, td := f.ownedBy(termed, termedPid)
		leftC, leftD = leftC+tc, leftD+td
		if leftC+leftD == 0 || time.Now().After(restartDeadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if leftC+leftD != 0 {
		t.Errorf("after the restarts, the dead processes' leftovers remain: %d container(s), %d socket dir(s)", leftC, leftD)
	}
	logs, _ := f.compose(30*time.Second, "logs", "--no-color", killed)
	reapedLine := ""
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "reaped leftovers of dead runs") {
			reapedLine = strings.TrimSpace(line)
		}
	}
	if beforeC+beforeD > 0 && reapedLine == "" {
		t.Errorf("%s had %d container(s) and %d socket dir(s) when killed, and its restart logged no reaping:\n%s", killed, beforeC, beforeD, logs)
	}
	t.Logf("%s's restart: %s", killed, reapedLine)

	// Down: graceful, and nothing of the fleet is left.
	if out, err := f.compose(3*time.Minute, "down", "--timeout", "45", "--remove-orphans"); err != nil {
		t.Fatalf("docker-compose down: %v\n%s", err, out)
	}
	leaked, what := f.leftovers()
	if leaked != 0 {
		t.Errorf("left after down: %v", what)
	}

	duplicated := 0
	mu.Lock()
	for id, n := range recorded {
		if n > 1 {
			duplicated++
			t.Errorf("run %s executed %d times", id, n)
		}
	}
	for _, fl := range failed {
		t.Errorf("run neither completed nor lost with ErrNodeLost: %s", fl)
	}
	mu.Unlock()
	if int(completed.Load()+lost.Load())+len(failed) != runs {
		t.Errorf("%d completed + %d lost + %d failed != %d runs", completed.Load(), lost.Load(), len(failed), runs)
	}
	line := fmt.Sprintf("FLEET runs=%d completed=%d retried=%d lost=%d failed=%d duplicated=%d leaked=%d reaped_at_restart=%d+%d load=%v total=%v",
		runs, completed.Load(), retried.Load(), lost.Load(), len(failed), duplicated, leaked, beforeC, beforeD,
		loadTime.Round(time.Second), time.Since(began).Round(time.Second))
	t.Log(line)
	fmt.Println(line)
	t.Logf("retries by cause: %v", reasons)
}
