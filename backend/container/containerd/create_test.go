package containerd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	containerdclient "github.com/containerd/containerd"
	"github.com/containerd/containerd/leases"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/snapshots"
	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// hookedDriver is a driver of its own (the hook is the driver's), closed
// with the test.
func hookedDriver(t *testing.T) *containerd.Driver {
	t.Helper()
	driver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := containerd.New(ctx, containerd.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// endAt is a create hook that, at step, ends the create's context once
// the engine has answered and hands Create the context's error instead of
// the answer: the deadline passed while the engine worked, its work done
// (or, when it refused, its refusal lost). fired reports that it did.
func endAt(step string, fired *bool) func(context.Context, context.CancelFunc, string, error) error {
	return func(ctx context.Context, end context.CancelFunc, s string, err error) error {
		if s != step {
			return err
		}
		*fired = true
		end()
		return ctx.Err()
	}
}

// nothingOf fails unless the driver lists nothing of owner and no lease
// carries it (checkNothingLeft counts the rest from containerd itself).
func nothingOf(t *testing.T, d *containerd.Driver, owner string) {
	t.Helper()
	if list, err := d.List(context.Background(), container.LabelOwner, owner); err != nil || len(list) != 0 {
		t.Errorf("Driver.List of the owner: %+v (%v), want nothing", list, err)
	}
	ctx := namespaces.WithNamespace(context.Background(), d.Namespace())
	ls, err := raw.LeasesService().List(ctx, fmt.Sprintf("labels.%q==%q", container.LabelOwner, owner))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		t.Errorf("lease left: %s", l.ID)
		raw.LeasesService().Delete(ctx, l)
	}
}

// A create whose own context ends midway — after the engine made the
// lease, the snapshot, the container record or the task, before its answer
// arrived — leaves nothing, under each OCI runtime: the cleanup runs under
// a fresh context of its own. It ran under the create's, already ended:
// every removal failed at once and the snapshot, the record and the task
// stayed, their id known to nobody (issue 24 §1, L2).
func TestCreateEndedMidwayLeavesNothing(t *testing.T) {
	d := hookedDriver(t)
	im, _ := images.RunnerFor(backend.Python)
	for _, name := range d.Capabilities().Runtimes {
		t.Run(name, func(t *testing.T) {
			if err := d.Probe(context.Background(), im.DefaultTag(), []string{"python3", "-c", "0"}, name); err != nil {
				if name == "runc" {
					t.Fatal(err)
				}
				testenv.Unsupported(t, "%s cannot start a container here: %v", name, err)
			}
			for _, step := range []string{"lease", "snapshot", "container", "task"} {
				t.Run(step, func(t *testing.T) {
					owner := fmt.Sprintf("ctrd-ended-%d-%d", os.Getpid(), time.Now().UnixNano())
					defer checkNothingLeft(t, container.LabelOwner, owner)
					defer nothingOf(t, d, owner)
					var fired bool
					containerd.SetCreateHook(d, endAt(step, &fired))
					defer containerd.SetCreateHook(d, nil)
					id, err := d.Create(context.Background(), sleeper(fmt.Sprintf("dsh-ended-%d", time.Now().UnixNano()), owner, im.DefaultTag(), name))
					if !fired {
						t.Fatalf("the create never reached %s: %q, %v", step, id, err)
					}
					if id != "" || !errors.Is(err, context.Canceled) {
						t.Fatalf("Create ended at %s: %q, %v; want no id and the context's error", step, id, err)
					}
					if strings.Contains(err.Error(), "removing what it made failed") {
						t.Errorf("the cleanup failed: %v", err)
					}
				})
			}
		})
	}
}

// A name someone else holds stays theirs: a create under it fails and
// removes nothing of theirs — whether the engine's refusal arrives
// (AlreadyExists) or is lost to the create's context ending, when only
// the labels tell whose it is. Three holders: a container made by the
// driver (snapshot, record and task), a bare record, a bare snapshot.
func TestCreateKeepsAnotherNamesContainer(t *testing.T) {
	d := hookedDriver(t)
	im, _ := images.RunnerFor(backend.Python)
	ctx := namespaces.WithNamespace(context.Background(), d.Namespace())

	theirs := func(t *testing.T) (owner, ours string) {
		owner = fmt.Sprintf("ctrd-theirs-%d-%d", os.Getpid(), time.Now().UnixNano())
		ours = fmt.Sprintf("ctrd-ours-%d-%d", os.Getpid(), time.Now().UnixNano())
		t.Cleanup(func() {
			checkNothingLeft(t, container.LabelOwner, ours)
			nothingOf(t, d, ours)
		})
		return owner, ours
	}

	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("container/refusal_lost=%v", lost), func(t *testing.T) {
			owner, ours := theirs(t)
			name := fmt.Sprintf("dsh-taken-%d", time.Now().UnixNano())
			id, err := d.Create(context.Background(), sleeper(name, owner, im.DefaultTag(), ""))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := d.Remove(context.Background(), id); err != nil {
					t.Errorf("removing theirs: %v", err)
				}
				checkNothingLeft(t, container.LabelOwner, owner)
			}()
			var fired bool
			if lost {
				containerd.SetCreateHook(d, endAt("snapshot", &fired))
				defer containerd.SetCreateHook(d, nil)
			}
			_, err = d.Create(context.Background(), sleeper(name, ours, im.DefaultTag(), ""))
			if lost && (!fired || !errors.Is(err, context.Canceled)) || !lost && !errdefs.IsAlreadyExists(err) {
				t.Fatalf("a create under a taken name: %v (hook fired: %v)", err, fired)
			}
			list, err := d.List(context.Background(), container.LabelOwner, owner)
			if err != nil || len(list) != 1 || list[0].ID != name {
				t.Fatalf("theirs after the failed create: %+v (%v)", list, err)
			}
			c, err := raw.LoadContainer(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Task(ctx, nil); err != nil {
				t.Fatalf("their task: %v", err)
			}
			if _, err := raw.SnapshotService(d.Snapshotter()).Stat(ctx, name); err != nil {
				t.Fatalf("their snapshot: %v", err)
			}
		})
	}

	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("record/refusal_lost=%v", lost), func(t *testing.T) {
			owner, ours := theirs(t)
			name := fmt.Sprintf("dsh-taken-%d", time.Now().UnixNano())
			c, err := raw.NewContainer(ctx, name, containerdclient.WithNewSpec(), containerdclient.WithContainerLabels(map[string]string{container.LabelOwner: owner}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Delete(ctx)
			var fired bool
			if lost {
				containerd.SetCreateHook(d, endAt("container", &fired))
				defer containerd.SetCreateHook(d, nil)
			}
			_, err = d.Create(context.Background(), sleeper(name, ours, im.DefaultTag(), ""))
			if lost && (!fired || !errors.Is(err, context.Canceled)) || !lost && !errdefs.IsAlreadyExists(err) {
				t.Fatalf("a create under a taken name: %v (hook fired: %v)", err, fired)
			}
			if got, err := raw.LoadContainer(ctx, name); err != nil {
				t.Fatalf("their record: %v", err)
			} else if l, _ := got.Labels(ctx); l[container.LabelOwner] != owner {
				t.Fatalf("their record's labels: %v", l)
			}
		})
	}

	t.Run("snapshot/refusal_lost=true", func(t *testing.T) {
		owner, ours := theirs(t)
		name := fmt.Sprintf("dsh-taken-%d", time.Now().UnixNano())
		lctx, done, err := raw.WithLease(ctx, leases.WithExpiration(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		defer done(ctx)
		sn := raw.SnapshotService(d.Snapshotter())
		if _, err := sn.Prepare(lctx, name, "", snapshots.WithLabels(map[string]string{container.LabelOwner: owner})); err != nil {
			t.Fatal(err)
		}
		defer sn.Remove(ctx, name)
		var fired bool
		containerd.SetCreateHook(d, endAt("snapshot", &fired))
		defer containerd.SetCreateHook(d, nil)
		_, err = d.Create(context.Background(), sleeper(name, ours, im.DefaultTag(), ""))
		if !fired || !errors.Is(err, context.Canceled) {
			t.Fatalf("a create under a taken name: %v (hook fired: %v)", err, fired)
		}
		if info, err := sn.Stat(ctx, name); err != nil || info.Labels[container.LabelOwner] != owner {
			t.Fatalf("their snapshot: %+v, %v", info, err)
		}
	})
}

// A create whose undo fails too — the engine refusing the look under the
// name or the removal — returns a *container.LeftError naming the id, and
// Remove of it finishes the undo: nothing of the create is left, and a
// record of another's under the name stays. Create returned an error and
// no id, and the snapshot, record and task stayed with nobody knowing
// (review of issue 24 §1).
func TestCreateUndoFailedNamesWhatIsLeft(t *testing.T) {
	d := hookedDriver(t)
	im, _ := images.RunnerFor(backend.Python)
	ctx := namespaces.WithNamespace(context.Background(), d.Namespace())
	for _, tc := range []struct {
		name, step, op string
		theirs         bool // a bare record of another's holds the name
	}{
		{name: "look refused", step: "container", op: "get"},
		{name: "removal refused", step: "task", op: "delete"},
		{name: "look refused, the record another's", step: "container", op: "get", theirs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := fmt.Sprintf("ctrd-undo-%d-%d", os.Getpid(), time.Now().UnixNano())
			defer checkNothingLeft(t, container.LabelOwner, owner)
			defer nothingOf(t, d, owner)
			name := fmt.Sprintf("dsh-undo-%d", time.Now().UnixNano())
			other := owner + "-other"
			if tc.theirs {
				c, err := raw.NewContainer(ctx, name, containerdclient.WithNewSpec(), containerdclient.WithContainerLabels(map[string]string{container.LabelOwner: other}))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Delete(ctx)
			}
			var fired bool
			containerd.SetCreateHook(d, endAt(tc.step, &fired))
			defer containerd.SetCreateHook(d, nil)
			containerd.FailRecordCalls(d, tc.op, 1)
			defer containerd.FailRecordCalls(d, tc.op, 0)
			id, err := d.Create(context.Background(), sleeper(name, owner, im.DefaultTag(), ""))
			var left *container.LeftError
			if !fired || id != "" || !errors.As(err, &left) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Create ended at %s, its undo refused: %q, %v (hook fired: %v); want no id and a *LeftError of the context's error", tc.step, id, err, fired)
			}
			if left.ID != name || !errdefs.IsUnavailable(left.Undo) {
				t.Fatalf("LeftError %+v, want it to name %s and the refusal", left, name)
			}
			if err := d.Remove(context.Background(), left.ID); err != nil {
				t.Fatalf("Remove(%s): %v", left.ID, err)
			}
			if tc.theirs {
				got, err := raw.LoadContainer(ctx, name)
				if err != nil {
					t.Fatalf("their record: %v", err)
				}
				if l, _ := got.Labels(ctx); l[container.LabelOwner] != other {
					t.Fatalf("their record's labels: %v", l)
				}
			}
		})
	}
}

// A probe removes what it made on every path: its lease, even when the
// engine's answer to the lease's create was lost (the lease had a random
// id, unknown after the error, and stayed until it expired), and its
// container when the engine refuses the first removal — then the probe's
// error is a *container.LeftError naming it, and Remove of it leaves
// nothing.
func TestProbeLeavesNothing(t *testing.T) {
	im, _ := images.RunnerFor(backend.Python)
	ctx := namespaces.WithNamespace(context.Background(), hookedDriver(t).Namespace())
	t.Run("lease answer lost", func(t *testing.T) {
		d := hookedDriver(t)
		made := containerd.LoseLeaseAnswers(d, 1)
		err := d.Probe(context.Background(), im.DefaultTag(), []string{"python3", "-c", "0"}, "runc")
		if !errdefs.IsUnavailable(err) || len(made()) != 1 {
			t.Fatalf("Probe: %v, leases made %v; want Unavailable after one lease", err, made())
		}
		ls, err := raw.LeasesService().List(ctx, fmt.Sprintf("id==%q", made()[0]))
		if err != nil || len(ls) != 0 {
			t.Errorf("the lease whose answer was lost: %v (%v), want it deleted", ls, err)
			for _, l := range ls {
				raw.LeasesService().Delete(ctx, l)
			}
		}
	})
	t.Run("removal refused", func(t *testing.T) {
		d := hookedDriver(t)
		containerd.FailRecordCalls(d, "delete", 1)
		err := d.Probe(context.Background(), im.DefaultTag(), []string{"python3", "-c", "0"}, "runc")
		var left *container.LeftError
		if !errors.As(err, &left) || !strings.HasPrefix(left.ID, "dsh-probe-") || left.Err != nil {
			t.Fatalf("Probe: %v, want a *LeftError naming the probe's container and no other failure", err)
		}
		if err := d.Remove(context.Background(), left.ID); err != nil {
			t.Fatal(err)
		}
		if list, err := d.List(context.Background(), container.LabelPrefix+"probe", "true"); err != nil {
			t.Fatal(err)
		} else {
			for _, c := range list {
				if c.ID == left.ID {
					t.Errorf("the probe's container is left: %+v", c)
				}
			}
		}
		if _, err := raw.SnapshotService(d.Snapshotter()).Stat(ctx, left.ID); !errdefs.IsNotFound(err) {
			t.Errorf("the probe's snapshot: %v, want NotFound", err)
		}
		if ls, err := raw.LeasesService().List(ctx, fmt.Sprintf("id==%q", left.ID)); err != nil || len(ls) != 0 {
			t.Errorf("the probe's lease: %v (%v), want none", ls, err)
		}
	})
}
