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
