package containerd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// Remove right after Kill — what every teardown does — removes the task,
// the container and its snapshot, under each OCI runtime the driver has.
// The task is dead and not yet reaped then: containerd refuses its
// delete, and runsc refuses the kill that follows ("sandbox is not
// running", an unknown error), which Remove took for a failure — the
// container, its task and its snapshot stayed (issue 24: measured here,
// 3 removals of 5 under runsc). Several rounds, since the engine decides
// how long a dead task stays unreaped.
func TestRemoveRightAfterKill(t *testing.T) {
	d := driver(t)
	im, _ := images.RunnerFor(backend.Python)
	for _, name := range d.Capabilities().Runtimes {
		t.Run(name, func(t *testing.T) {
			if err := d.Probe(context.Background(), im.DefaultTag(), []string{"python3", "-c", "0"}, name); err != nil {
				if name == "runc" {
					t.Fatal(err)
				}
				testenv.Unsupported(t, "%s cannot start a container here: %v", name, err)
			}
			owner := fmt.Sprintf("ctrd-kill-%d-%d", os.Getpid(), time.Now().UnixNano())
			defer checkNothingLeft(t, container.LabelOwner, owner)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i := range 4 {
				s := sleeper(fmt.Sprintf("dsh-kill-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), i), owner, im.DefaultTag(), name)
				id, err := d.Create(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				exit, err := d.Wait(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				st, err := d.StartAttached(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				// Running for real: the program has written its line.
				if _, err := st.Stdout.Read(make([]byte, 3)); err != nil {
					t.Fatalf("round %d: the program did not start: %v", i, err)
				}
				if err := d.Kill(ctx, id); err != nil {
					t.Fatalf("round %d: kill: %v", i, err)
				}
				if err := d.Remove(ctx, id); err != nil {
					t.Fatalf("round %d: remove right after kill: %v", i, err)
				}
				<-exit
				if list, err := d.List(ctx, container.LabelOwner, owner); err != nil || len(list) != 0 {
					t.Fatalf("round %d: after Remove returned nil: %+v (%v)", i, list, err)
				}
			}
		})
	}
}

// sleeper is a hardened container of image running a Python program that
// prints "up" and sleeps.
func sleeper(name, owner, image, ociRuntime string) container.Spec {
	return container.Spec{
		Name: name, Hostname: "sandbox",
		Image: image, Cmd: []string{"python3", "-c", "import time; print('up', flush=True); time.sleep(60)"},
		Env: []string{"PATH=/usr/bin:/bin"}, User: container.RunnerUser, WorkingDir: "/tmp",
		Labels:          map[string]string{container.LabelManaged: "true", container.LabelOwner: owner},
		NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true, IPCPrivate: true, LogDriverNone: true,
		MemoryBytes: 256 << 20, NanoCPUs: 1e9, Pids: 512, TmpfsBytes: 16 << 20, NoFile: 1024, OCIRuntime: ociRuntime,
	}
}

// A create whose caller gave up before it began makes nothing: it does
// not even resolve the image (a missing one here) — before, it made the
// snapshot, the record and the task, and then undid them all.
func TestCreateUnderACancelledContext(t *testing.T) {
	d := driver(t)
	owner := fmt.Sprintf("ctrd-cancelled-%d-%d", os.Getpid(), time.Now().UnixNano())
	defer checkNothingLeft(t, container.LabelOwner, owner)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id, err := d.Create(ctx, sleeper(fmt.Sprintf("dsh-cancelled-%d", time.Now().UnixNano()), owner, "dsh-container/no-such-image:0", ""))
	if id != "" || !errors.Is(err, context.Canceled) {
		t.Fatalf("Create under a cancelled context: %q, %v; want nothing, context.Canceled", id, err)
	}
}
