package docker

// Create against the real daemon: what a failed create leaves, and whose
// container a taken name is. The hook (Driver.createHook) ends the
// create's context once the daemon has answered, deterministically.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	dcontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// realDriver is a driver of its own on the daemon (the hook is the
// driver's), with the Python runner image there.
func realDriver(t *testing.T) (*Driver, string) {
	t.Helper()
	testenv.UsesDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := New(ctx)
	if err != nil {
		testenv.Missing(t, "docker: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	im, _ := images.RunnerFor(backend.Python)
	if ok, err := images.Exists(ctx, d.cli, im.DefaultTag()); err != nil || !ok {
		testenv.Missing(t, "docker: %v", errors.Join(err, images.ErrMissing(im.DefaultTag())))
	}
	return d, im.DefaultTag()
}

func sleeper(name, owner, image string) container.Spec {
	return container.Spec{
		Name: name, Hostname: "sandbox", Image: image, Cmd: []string{"python3", "-c", "import time; time.sleep(60)"},
		Env: []string{"PATH=/usr/bin:/bin"}, User: container.RunnerUser, WorkingDir: "/tmp",
		Labels:          map[string]string{container.LabelManaged: "true", container.LabelOwner: owner},
		NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true, IPCPrivate: true, LogDriverNone: true,
		MemoryBytes: 64 << 20, NanoCPUs: 1e9, Pids: 64, TmpfsBytes: 16 << 20, NoFile: 64,
	}
}

// endAt ends the create's context once the daemon has answered and hands
// Create the context's error instead of the answer: the deadline passed
// while the daemon worked, its work done (or, when it refused, its refusal
// lost). fired reports that it did.
func endAt(fired *bool) func(context.Context, context.CancelFunc, string, error) error {
	return func(ctx context.Context, end context.CancelFunc, _ string, _ error) error {
		*fired = true
		end()
		return ctx.Err()
	}
}

// nothingOf fails unless the driver lists nothing of owner, removing what
// it finds.
func nothingOf(t *testing.T, d *Driver, owner string) {
	t.Helper()
	list, err := d.List(context.Background(), container.LabelOwner, owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		t.Errorf("container left, its id known to nobody: %s %v", c.ID, c.Labels)
		d.Remove(context.Background(), c.ID)
	}
}

func uniqueName(what string) string {
	return fmt.Sprintf("dsh-%s-%d-%d", what, os.Getpid(), time.Now().UnixNano())
}

// A create whose own context ends after the daemon made the container
// leaves nothing: the removal runs under a fresh context of its own. It
// ran under the create's, already ended: the removal failed at once and
// the container stayed, its id known to nobody (issue 24 §1, L2). A caller
// giving up meanwhile leaves nothing either.
func TestCreateEndedMidwayLeavesNothing(t *testing.T) {
	d, image := realDriver(t)
	t.Run("create's context", func(t *testing.T) {
		owner := uniqueName("ended")
		defer nothingOf(t, d, owner)
		var fired bool
		d.createHook = endAt(&fired)
		defer func() { d.createHook = nil }()
		id, err := d.Create(context.Background(), sleeper(uniqueName("ended"), owner, image))
		if !fired || id != "" || !errors.Is(err, context.Canceled) {
			t.Fatalf("Create ended after the daemon's answer: %q, %v (hook fired: %v); want no id and the context's error", id, err, fired)
		}
		if strings.Contains(err.Error(), "failed") {
			t.Errorf("the cleanup failed: %v", err)
		}
	})
	t.Run("caller's context", func(t *testing.T) {
		owner := uniqueName("gaveup")
		defer nothingOf(t, d, owner)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		d.createHook = func(_ context.Context, _ context.CancelFunc, _ string, err error) error {
			cancel()
			return err
		}
		defer func() { d.createHook = nil }()
		id, err := d.Create(ctx, sleeper(uniqueName("gaveup"), owner, image))
		if id != "" || !errors.Is(err, context.Canceled) {
			t.Fatalf("Create whose caller gave up: %q, %v; want no id and context.Canceled", id, err)
		}
	})
}

// A name someone else's container holds stays theirs: a create under it
// fails and removes nothing — whether the daemon's refusal arrives
// (Conflict; the create removed the container by that name) or is lost to
// the create's context ending, when only the labels tell whose it is.
func TestCreateKeepsAnotherNamesContainer(t *testing.T) {
	d, image := realDriver(t)
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("refusal_lost=%v", lost), func(t *testing.T) {
			name, owner, ours := uniqueName("taken"), uniqueName("theirs"), uniqueName("ours")
			defer nothingOf(t, d, ours)
			theirs, err := d.Create(context.Background(), sleeper(name, owner, image))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := d.Remove(context.Background(), theirs); err != nil {
					t.Errorf("removing theirs: %v", err)
				}
			}()
			var fired bool
			if lost {
				d.createHook = endAt(&fired)
				defer func() { d.createHook = nil }()
			}
			_, err = d.Create(context.Background(), sleeper(name, ours, image))
			if lost && (!fired || !errors.Is(err, context.Canceled)) || !lost && !errdefs.IsConflict(err) {
				t.Fatalf("a create under a taken name: %v (hook fired: %v)", err, fired)
			}
			info, err := d.api.ContainerInspect(context.Background(), theirs)
			if err != nil {
				t.Fatalf("their container after the failed create: %v", err)
			}
			if info.Config.Labels[container.LabelOwner] != owner {
				t.Fatalf("their container's labels: %v", info.Config.Labels)
			}
		})
	}
}

// A Spec without a name is refused before anything is made: a create
// that failed midway could not find its container again.
func TestCreateRefusesNoName(t *testing.T) {
	api := &createAPI{}
	d := &Driver{api: api}
	s := runnerSpec()
	s.Name = ""
	if _, err := d.Create(context.Background(), s); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "Spec.Name") {
		t.Errorf("Create without a name: %v, want InvalidArgument naming Spec.Name", err)
	}
	if api.inspects != 0 || len(api.created) != 0 {
		t.Errorf("%d inspects, %d creates before the refusal", api.inspects, len(api.created))
	}
}

// undoAPI is a daemon that keeps containers by name and id, and fails on
// command: a create's answer lost after the container was made (lose),
// the first refuseLooks inspects, the first refuseRemovals removals.
type undoAPI struct {
	*createAPI
	lose                        error
	refuseLooks, refuseRemovals int
	byName                      map[string]dcontainer.InspectResponse
	removals                    int
	// A start fails with startErr, or the container exits with exit.
	startErr error
	exit     int64
	waits    map[string]chan dcontainer.WaitResponse
}

func (a *undoAPI) ContainerWait(_ context.Context, id string, _ dcontainer.WaitCondition) (<-chan dcontainer.WaitResponse, <-chan error) {
	if a.waits == nil {
		a.waits = map[string]chan dcontainer.WaitResponse{}
	}
	a.waits[id] = make(chan dcontainer.WaitResponse, 1)
	return a.waits[id], make(chan error)
}

func (a *undoAPI) ContainerStart(_ context.Context, id string, _ dcontainer.StartOptions) error {
	if a.startErr != nil {
		return a.startErr
	}
	a.waits[id] <- dcontainer.WaitResponse{StatusCode: a.exit}
	return nil
}

func newUndoAPI() *undoAPI {
	return &undoAPI{createAPI: &createAPI{}, byName: map[string]dcontainer.InspectResponse{}}
}

func (a *undoAPI) ContainerCreate(_ context.Context, cfg *dcontainer.Config, _ *dcontainer.HostConfig, _ *network.NetworkingConfig, _ any, name string) (dcontainer.CreateResponse, error) {
	if _, taken := a.byName[name]; taken {
		if a.lose != nil {
			return dcontainer.CreateResponse{}, a.lose
		}
		return dcontainer.CreateResponse{}, fmt.Errorf("%w: the name %s is taken", errdefs.ErrConflict, name)
	}
	id := fmt.Sprintf("id-%d", len(a.byName)+1)
	a.byName[name] = dcontainer.InspectResponse{ContainerJSONBase: &dcontainer.ContainerJSONBase{ID: id, Name: "/" + name}, Config: cfg}
	if a.lose != nil {
		return dcontainer.CreateResponse{}, a.lose
	}
	return dcontainer.CreateResponse{ID: id}, nil
}

func (a *undoAPI) ContainerInspect(_ context.Context, name string) (dcontainer.InspectResponse, error) {
	if a.refuseLooks > 0 {
		a.refuseLooks--
		return dcontainer.InspectResponse{}, fmt.Errorf("%w: the daemon is restarting", errdefs.ErrUnavailable)
	}
	if info, ok := a.byName[name]; ok {
		return info, nil
	}
	return dcontainer.InspectResponse{}, fmt.Errorf("%w: no container %s", errdefs.ErrNotFound, name)
}

func (a *undoAPI) ContainerRemove(_ context.Context, id string, _ dcontainer.RemoveOptions) error {
	a.removals++
	if a.refuseRemovals > 0 {
		a.refuseRemovals--
		return fmt.Errorf("%w: removal of container %s is already in progress", errdefs.ErrConflict, id)
	}
	for name, info := range a.byName {
		if info.ID == id {
			delete(a.byName, name)
			return nil
		}
	}
	return fmt.Errorf("%w: no container %s", errdefs.ErrNotFound, id)
}

// A create whose undo fails too returns a *container.LeftError naming what
// may be left — the container's id, or its name when the daemon could not
// be asked what is under it — and Remove of that removes it, once the
// daemon agrees; under a name, only a container the create made (another's
// stays). Create returned an error and no id, and the container stayed
// with nobody knowing it was there (review of issue 24 §1).
func TestCreateUndoFailedNamesWhatIsLeft(t *testing.T) {
	lost := fmt.Errorf("creating: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name            string
		lose            error
		gaveUp          bool
		looks, removals int
		theirs          bool // the name is taken by another's container
		byName          bool // the LeftError names the Spec's name, not an id
	}{
		{name: "answer lost, removal refused", lose: lost, removals: 1},
		{name: "caller gave up, removal refused", gaveUp: true, removals: 2},
		{name: "answer lost, look refused", lose: lost, looks: 1, byName: true},
		{name: "answer lost, look refused, the name another's", lose: lost, looks: 1, byName: true, theirs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newUndoAPI()
			d := &Driver{api: api}
			s := runnerSpec()
			if tc.theirs {
				other := runnerSpec()
				other.Labels = map[string]string{container.LabelManaged: "true", container.LabelOwner: "another"}
				if _, err := d.Create(context.Background(), other); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.gaveUp {
				d.createHook = func(_ context.Context, _ context.CancelFunc, _ string, err error) error {
					cancel()
					return err
				}
			}
			api.lose, api.refuseLooks, api.refuseRemovals = tc.lose, tc.looks, tc.removals
			id, err := d.Create(ctx, s)
			var left *container.LeftError
			if id != "" || !errors.As(err, &left) {
				t.Fatalf("Create: %q, %v; want no id and a *LeftError", id, err)
			}
			want := "id-1"
			if tc.byName {
				want = s.Name
			}
			if left.ID != want || left.Undo == nil || !strings.Contains(err.Error(), want+" may be left") {
				t.Fatalf("LeftError %+v (%v), want it to name %s", left, err, want)
			}
			if tc.gaveUp && !errors.Is(err, context.Canceled) || tc.lose != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("the create's own error is not visible through the LeftError: %v", err)
			}
			for range tc.removals - 1 {
				if err := d.Remove(context.Background(), left.ID); err == nil {
					t.Fatal("Remove succeeded while the daemon refused")
				}
			}
			if err := d.Remove(context.Background(), left.ID); err != nil {
				t.Fatalf("Remove(%s): %v", left.ID, err)
			}
			if tc.theirs {
				if info, ok := api.byName[s.Name]; !ok || info.Config.Labels[container.LabelOwner] != "another" || api.removals != 0 {
					t.Fatalf("another's container under the name: %+v (present %v), %d removals", info.Config, ok, api.removals)
				}
				return
			}
			if len(api.byName) != 0 {
				t.Fatalf("left: %v", api.byName)
			}
			if err := d.Remove(context.Background(), left.ID); !errdefs.IsNotFound(err) && !(tc.byName && err == nil) {
				t.Errorf("a second Remove: %v", err)
			}
		})
	}
}

// A probe removes its container on every path — a failed start, a failed
// program, a create whose answer was lost (found by its name) — and a
// removal the daemon refuses is the probe's error, naming the container.
// The probe had no name (a lost answer left its container, found by
// nobody) and ignored its removal's error.
func TestProbeLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lose      error
		startErr  error
		exit      int64
		refuse    int
		wantError string
	}{
		{name: "passes", wantError: ""},
		{name: "start fails", startErr: fmt.Errorf("%w: runtime runsc not found", errdefs.ErrInvalidArgument), wantError: "runsc not found"},
		{name: "program fails", exit: 1, wantError: "status 1"},
		{name: "answer lost", lose: fmt.Errorf("creating: %w", context.DeadlineExceeded), wantError: "deadline exceeded"},
		{name: "removal refused", refuse: 1, wantError: "may be left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newUndoAPI()
			api.lose, api.startErr, api.exit, api.refuseRemovals = tc.lose, tc.startErr, tc.exit, tc.refuse
			d := &Driver{api: api}
			err := d.Probe(context.Background(), "dsh-container/py-runner:abc", []string{"python3", "-c", "0"}, "runc")
			if tc.wantError == "" && err != nil || tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)) {
				t.Fatalf("Probe: %v, want %q", err, tc.wantError)
			}
			if tc.refuse > 0 {
				var left *container.LeftError
				if !errors.As(err, &left) || left.ID != "id-1" {
					t.Fatalf("Probe: %v, want a *LeftError naming id-1", err)
				}
				if err := d.Remove(context.Background(), left.ID); err != nil {
					t.Fatal(err)
				}
			}
			if len(api.byName) != 0 {
				t.Errorf("left: %v", api.byName)
			}
		})
	}
}
