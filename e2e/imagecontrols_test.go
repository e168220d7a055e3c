package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	containerdclient "github.com/containerd/containerd"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	dbuild "github.com/docker/docker/api/types/build"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container"
	"github.com/dsh-container/dsh-container/backend/container/containerd"
	"github.com/dsh-container/dsh-container/backend/container/containertest"
	dimages "github.com/dsh-container/dsh-container/images"
	"github.com/dsh-container/dsh-container/internal/testenv"
)

// Image-controlled strings (issue 24 §5): what an image's configuration
// says — its labels, its USER, its VOLUMEs — never reaches the container's
// labels as the runtime and reaper read them, its log settings, its
// runtime or its identity, under either driver. The images are derived
// from the runner images here, with hostile configuration; under
// containerd they are imported the way `images build --driver
// containerd` imports Docker's.

// deriveImage builds an image FROM base with the Dockerfile lines added,
// under a tag of its own, removed when t ends.
func deriveImage(t *testing.T, base, name string, lines ...string) string {
	t.Helper()
	tag := fmt.Sprintf("dsh-e2e-%s:%d-%d", name, os.Getpid(), time.Now().UnixNano())
	df := []byte("FROM " + base + "\n" + strings.Join(lines, "\n") + "\n")
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))})
	tw.Write(df)
	tw.Close()
	ctx := context.Background()
	t.Cleanup(func() {
		if _, err := cli.ImageRemove(ctx, tag, dimage.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("removing %s: %v", tag, err)
		}
	})
	resp, err := cli.ImageBuild(ctx, &ctxTar, dbuild.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true, Version: dbuild.BuilderV1})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, io.Discard, 0, false, nil); err != nil {
		t.Fatalf("building %s: %v", tag, err)
	}
	return tag
}

// scratchContainerd is a containerd driver on a namespace of its own
// (removed when t ends) holding Docker's images tags, imported from one
// `docker save`, as `images build --driver containerd` does.
func scratchContainerd(t *testing.T, tags ...string) (*containerd.Driver, *containerdclient.Client) {
	t.Helper()
	ns := scratchNamespace(t, containerdDriver(t))
	ctx := context.Background()
	d, err := containerd.New(ctx, containerd.Options{Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	cl, err := containerdclient.New(d.Address(), containerdclient.WithDefaultNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	rc, err := cli.ImageSave(ctx, tags)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	names, err := d.Import(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		if !slices.Contains(names, tag) {
			t.Fatalf("importing %v gave %v", tags, names)
		}
	}
	return d, cl
}

// runtimeOn is a runtime for lang over d running image, with a private
// socket directory and owner, closed and checked for leftovers (through
// the driver) when t ends.
func runtimeOn(t *testing.T, d container.Driver, lang backend.Language, image string, opts ...container.Option) (*container.Runtime, string) {
	t.Helper()
	dir := t.TempDir()
	own := fmt.Sprintf("%s-img-%s-%d", owner, lang, time.Now().UnixNano())
	l := container.DefaultLimits()
	l.WallTime = 60 * time.Second
	l.StartupTime = 90 * time.Second
	rt, err := container.New(d, append([]container.Option{
		container.WithLanguage(lang), container.WithImage(image), container.WithLimits(l),
		container.WithSocketDir(dir), container.WithOwner(own), container.WithLogger(testLogger(t)),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		if list, err := d.List(ctx, container.LabelOwner, own); err != nil || len(list) != 0 {
			t.Errorf("left behind: %v %v", list, err)
			for _, c := range list {
				d.Remove(ctx, c.ID)
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("left in the socket directory: %v", entries)
		}
	})
	return rt, own
}

// identityProgram returns the program's uid, gid and groups, whether it
// can write to the hostile image's VOLUME, the names in its environment,
// and what the host's "inspect" tool found while it ran.
var identityProgram = both(`
const fs = await import("node:fs");
let volume = "ok";
try { fs.writeFileSync("/var/tmp/dsh-volume", "x") } catch (e) { volume = (e as any).code }
const inspected = await tools.inspect({});
return { uid: process.getuid!(), gid: process.getgid!(), groups: process.getgroups!(), volume, env: Object.keys(process.env).sort(), inspected };`, `
import os, errno
try:
    open("/var/tmp/dsh-volume", "w").write("x")
    volume = "ok"
except OSError as e:
    volume = errno.errorcode.get(e.errno, str(e.errno))
inspected = await tools.inspect({})
return {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "volume": volume, "env": sorted(os.environ), "inspected": inspected}`)

type identity struct {
	UID, GID  int
	Groups    []int
	Volume    string
	Env       []string
	Inspected []string
}

// runInspected runs identityProgram, calling check on the live container
// (found by its owner label) from the "inspect" tool; check's complaints
// come back in Inspected.
func runInspected(t *testing.T, rt *container.Runtime, d container.Driver, own string, lang backend.Language, check func(ctx context.Context, id string) []string) identity {
	t.Helper()
	b := tools(map[string]backend.BindingFunc{"inspect": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		list, err := d.List(ctx, container.LabelOwner, own)
		if err != nil || len(list) != 1 {
			return nil, fmt.Errorf("%d containers of owner %s: %v", len(list), own, err)
		}
		problems := check(ctx, list[0].ID)
		if problems == nil {
			problems = []string{}
		}
		return json.Marshal(problems)
	}})
	res, err := rt.Run(context.Background(), backend.RunRequest{Program: identityProgram[lang], Bindings: b})
	if err != nil {
		t.Fatal(err)
	}
	return decode[identity](t, res)
}

// hostileLabels are labels an image may carry that try to reach what the
// host acts on: containerd's logger URI (CVE-2026-53488), log and runtime
// settings, and our own prefix beyond the keys the runtime reads. pwned is
// a host path the logger URI's command would create.
func hostileLabels(pwned string) []string {
	return []string{
		fmt.Sprintf(`LABEL io.containerd.logger.uri="binary:///bin/sh?-c=touch+%s" io.containerd.runtime.v2.shim="io.containerd.runsc.v1"`, pwned),
		`LABEL com.docker.log-driver="json-file" log-driver="syslog" log-opt.syslog-address="udp://192.0.2.1:514" runtime="runc"`,
		`LABEL dsh-container.io/foo="bar" org.opencontainers.image.title="hostile"`,
	}
}

// userVariants are image USERs that must not choose the identity: root by
// number and by name, and uids past 32 bits that a resolver could wrap to
// 0.
var userVariants = []string{"0", "root", "4294967296", "99999999999:0"}

// reservedImage carries the labels the runtime sets and the reaper reads
// (current and earlier) with values that would hand the container to
// another owner, and a VOLUME over a read-only path.
var reservedLines = []string{
	`LABEL dsh-container.io/owner="victim" dsh-container.io/managed="true" dsh-container.io/run="r" dsh-container.io/bridge="s-0000000000000000" dsh-container.io/language="python"`,
	`LABEL io.dsh-container.managed="true" io.dsh-container.owner="1.1.gone" io.dsh-container.sockdir="/run/user/0/dsh-container/s-0000000000000000"`,
	`VOLUME /var/tmp`,
	`USER 0`,
	hostileEnv,
}

// hostileEnv sets variables the interpreters read before the program
// (harmless values: were one to reach the sandbox, the test says so
// rather than the run failing), and one of no meaning.
const hostileEnv = `ENV NODE_OPTIONS="--title=dsh-hostile" PYTHONSTARTUP=/tmp/dsh-hostile.py DSH_HOSTILE_ENV=1`

// hostileEnvNames are the names hostileEnv sets.
var hostileEnvNames = []string{"DSH_HOSTILE_ENV", "NODE_OPTIONS", "PYTHONSTARTUP"}

// TestImageControlledStrings: under Docker and containerd, a runner image
// carrying hostile labels and a root USER runs the program as the runner
// contract's uid:gid, and the engine's own account of the container
// carries our labels where the runtime and reaper read them, our log
// settings and our runtime; containerd's records (container and
// snapshot) carry exactly our labels. An image carrying the runtime's own
// label keys, a VOLUME or an ENV the runtime does not set is refused by
// the Docker driver before anything is created (Docker would merge them
// into the container), also when another image is tagged under a
// reference the driver already ran; containerd, which never reads the
// image's configuration, runs it with our labels, no volume and none of
// its environment.
func TestImageControlledStrings(t *testing.T) {
	pwned := filepath.Join(t.TempDir(), "pwned")
	for _, lang := range langs {
		t.Run(string(lang), func(t *testing.T) {
			runner, _ := dimages.RunnerFor(lang)
			var hostile []string
			for i, u := range userVariants {
				hostile = append(hostile, deriveImage(t, runner.DefaultTag(), fmt.Sprintf("hostile-%d", i), append(hostileLabels(pwned), "USER "+u)...))
			}
			reserved := deriveImage(t, runner.DefaultTag(), "reserved", reservedLines...)
			wantIdentity := func(t *testing.T, v identity, user string) {
				t.Helper()
				if v.UID != 65532 || v.GID != 65532 || slices.Contains(v.Groups, 0) {
					t.Errorf("image USER %s: uid %d gid %d groups %v, want the runner contract's %s", user, v.UID, v.GID, v.Groups, container.RunnerUser)
				}
				if len(v.Inspected) != 0 {
					t.Errorf("image USER %s: the engine's account: %v", user, v.Inspected)
				}
				for _, name := range hostileEnvNames {
					if slices.Contains(v.Env, name) {
						t.Errorf("image USER %s: the image's %s reached the program's environment %v", user, name, v.Env)
					}
				}
			}

			t.Run("docker", func(t *testing.T) {
				for i, image := range hostile {
					rt, own := runtimeOn(t, drv, lang, image)
					v := runInspected(t, rt, drv, own, lang, func(ctx context.Context, id string) []string { return dockerAccount(ctx, id, own, lang) })
					wantIdentity(t, v, userVariants[i])
					t.Logf("USER %s: %+v", userVariants[i], v)
				}
				rt, own := runtimeOn(t, drv, lang, reserved)
				_, err := rt.Run(context.Background(), backend.RunRequest{Program: "return 1"})
				if !errdefs.IsInvalidArgument(err) {
					t.Fatalf("an image with the runtime's labels and a VOLUME: %v, want InvalidArgument", err)
				}
				for _, want := range []string{container.LabelOwner + `="victim"`, `io.dsh-container.managed="true"`, "VOLUME /var/tmp", "ENV " + strings.Join(hostileEnvNames, " ")} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the refusal %q does not name %s", err, want)
					}
				}
				if list, _ := drv.List(context.Background(), container.LabelOwner, own); len(list) != 0 {
					t.Errorf("a refused image left %d containers", len(list))
				}

				// A reference the driver ran, then moved to the reserved
				// image (a retag): the driver checks the image it names
				// now.
				ctx := context.Background()
				moved := fmt.Sprintf("dsh-e2e-retag:%d-%d", os.Getpid(), time.Now().UnixNano())
				if err := cli.ImageTag(ctx, hostile[0], moved); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cli.ImageRemove(ctx, moved, dimage.RemoveOptions{}) })
				rt, _ = runtimeOn(t, drv, lang, moved)
				if _, err := rt.Run(ctx, backend.RunRequest{Program: "return 1"}); err != nil {
					t.Fatalf("before the retag: %v", err)
				}
				if err := cli.ImageTag(ctx, reserved, moved); err != nil {
					t.Fatal(err)
				}
				rt, own = runtimeOn(t, drv, lang, moved)
				if _, err := rt.Run(ctx, backend.RunRequest{Program: "return 1"}); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "ENV "+strings.Join(hostileEnvNames, " ")) {
					t.Errorf("after another image was tagged %s: %v, want InvalidArgument naming its ENV", moved, err)
				}
				if list, _ := drv.List(ctx, container.LabelOwner, own); len(list) != 0 {
					t.Errorf("the retagged image left %d containers", len(list))
				}
			})

			t.Run("containerd", func(t *testing.T) {
				d, cl := scratchContainerd(t, append(slices.Clone(hostile), reserved)...)
				for i, image := range append(slices.Clone(hostile), reserved) {
					user := "0 (with the runtime's labels, a VOLUME and an ENV)"
					if i < len(userVariants) {
						user = userVariants[i]
					}
					rt, own := runtimeOn(t, d, lang, image)
					v := runInspected(t, rt, d, own, lang, func(ctx context.Context, id string) []string { return containerdAccount(ctx, cl, d, id, own, lang) })
					wantIdentity(t, v, user)
					if v.Volume != "EROFS" {
						t.Errorf("image USER %s: writing the image's VOLUME path: %s, want EROFS (no volume; the root is read-only)", user, v.Volume)
					}
					t.Logf("USER %s: %+v", user, v)
				}
			})
		})
	}
	if _, err := os.Stat(pwned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the logger URI's command ran on the host: %s exists (%v)", pwned, err)
	}
}

// wantOurLabels compares labels with what the runtime sets: each
// reserved key it sets with our value, the earlier keys absent.
func wantOurLabels(labels map[string]string, own string, lang backend.Language) []string {
	var bad []string
	want := map[string]string{container.LabelManaged: "true", container.LabelOwner: own, container.LabelLang: string(lang)}
	for _, k := range container.ReservedLabels() {
		v, found := labels[k]
		switch {
		case want[k] != "" && v != want[k]:
			bad = append(bad, fmt.Sprintf("label %s=%q, want %q", k, v, want[k]))
		case (k == container.LabelRun || k == container.LabelBridge) && (!found || v == "r" || v == "s-0000000000000000"):
			bad = append(bad, fmt.Sprintf("label %s=%q: not the runtime's", k, v))
		case want[k] == "" && k != container.LabelRun && k != container.LabelBridge && found:
			bad = append(bad, fmt.Sprintf("label %s=%q: set on a new container", k, v))
		}
	}
	return bad
}

// dockerAccount checks a live container as the Docker daemon holds it:
// our labels where the runtime reads them (Docker adds the image's other
// labels), no log driver and no log option, our runtime, and a containerd
// record (the daemon's own, in containerd's "moby" namespace) carrying
// none of the image's labels.
func dockerAccount(ctx context.Context, id, own string, lang backend.Language) []string {
	info, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return []string{err.Error()}
	}
	bad := wantOurLabels(info.Config.Labels, own, lang)
	if _, found := info.Config.Labels["io.containerd.logger.uri"]; !found {
		bad = append(bad, "Docker no longer copies image labels into the container's: the refusal of the reserved ones may be unneeded")
	}
	if lc := info.HostConfig.LogConfig; lc.Type != "none" || len(lc.Config) != 0 {
		bad = append(bad, fmt.Sprintf("log config %+v, want none without options", lc))
	}
	if info.HostConfig.Runtime != "runc" {
		bad = append(bad, fmt.Sprintf("runtime %q, want runc", info.HostConfig.Runtime))
	}
	if info.Config.Healthcheck == nil || strings.Join(info.Config.Healthcheck.Test, " ") != "NONE" {
		bad = append(bad, fmt.Sprintf("healthcheck %+v, want NONE", info.Config.Healthcheck))
	}
	cl, err := containerdclient.New(containerd.ResolveAddress(""), containerdclient.WithDefaultNamespace("moby"))
	if err != nil {
		return append(bad, err.Error())
	}
	defer cl.Close()
	rec, err := cl.ContainerService().Get(ctx, id)
	if err != nil {
		return append(bad, fmt.Sprintf("the daemon's containerd record: %v", err))
	}
	for k := range rec.Labels {
		if _, fromImage := info.Config.Labels[k]; fromImage || k != "com.docker/engine.bundle.path" {
			bad = append(bad, fmt.Sprintf("the daemon's containerd record carries label %s", k))
		}
	}
	if rec.Runtime.Name != "io.containerd.runc.v2" {
		bad = append(bad, fmt.Sprintf("the daemon's containerd record runs %s", rec.Runtime.Name))
	}
	return bad
}

// containerdAccount checks a live container as containerd holds it: the
// container record and its snapshot carry exactly the runtime's labels,
// the runtime is ours, the spec's user the contract's.
func containerdAccount(ctx context.Context, cl *containerdclient.Client, d *containerd.Driver, id, own string, lang backend.Language) []string {
	rec, err := cl.ContainerService().Get(ctx, id)
	if err != nil {
		return []string{err.Error()}
	}
	bad := wantOurLabels(rec.Labels, own, lang)
	keys := slices.Sorted(maps.Keys(rec.Labels))
	if want := []string{container.LabelBridge, container.LabelLang, container.LabelManaged, container.LabelOwner, container.LabelRun}; !slices.Equal(keys, want) {
		bad = append(bad, fmt.Sprintf("container record labels %v, want exactly %v", rec.Labels, want))
	}
	snap, err := cl.SnapshotService(d.Snapshotter()).Stat(ctx, rec.SnapshotKey)
	if err != nil {
		bad = append(bad, fmt.Sprintf("snapshot %s: %v", rec.SnapshotKey, err))
	} else if !maps.Equal(snap.Labels, rec.Labels) {
		bad = append(bad, fmt.Sprintf("snapshot labels %v, want the container's %v", snap.Labels, rec.Labels))
	}
	if rec.Runtime.Name != "io.containerd.runc.v2" {
		bad = append(bad, fmt.Sprintf("runtime %s", rec.Runtime.Name))
	}
	v, err := typeurl.UnmarshalAny(rec.Spec)
	if sp, isSpec := v.(*specs.Spec); err != nil || !isSpec || sp.Process.User.UID != 65532 || sp.Process.User.GID != 65532 {
		bad = append(bad, fmt.Sprintf("spec user: %v %v", v, err))
	}
	return bad
}

// TestUnparsableUserRefused: a Spec whose User is not a numeric uid:gid
// is refused by each driver with InvalidArgument, and nothing is left:
// neither driver lets the image's /etc/passwd resolve it.
func TestUnparsableUserRefused(t *testing.T) {
	runner, _ := dimages.RunnerFor(backend.Python)
	drivers := map[string]container.Driver{"docker": drv, "containerd": containerdDriver(t)}
	for name, d := range drivers {
		t.Run(name, func(t *testing.T) {
			for i, user := range []string{"abc", "-1", "4294967296", "1000:x", "root", "0"} {
				own := fmt.Sprintf("%s-user-%d-%d", owner, i, time.Now().UnixNano())
				s := container.Spec{
					Name: fmt.Sprintf("dsh-e2e-user-%d-%d", i, time.Now().UnixNano()), Hostname: "sandbox", Image: runner.DefaultTag(),
					Cmd: []string{"true"}, User: user, WorkingDir: "/tmp", Labels: map[string]string{container.LabelManaged: "true", container.LabelOwner: own},
					NetworkDisabled: true, ReadOnlyRoot: true, CapDropAll: true, NoNewPrivileges: true, IPCPrivate: true, LogDriverNone: true,
					MemoryBytes: 64 << 20, Pids: 64, TmpfsBytes: 16 << 20, NoFile: 64, Seccomp: container.SeccompFor(""),
				}
				id, err := d.Create(context.Background(), s)
				if err == nil {
					d.Remove(context.Background(), id)
				}
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), fmt.Sprintf("User %q", user)) {
					t.Errorf("User %q: %v, want InvalidArgument naming it", user, err)
				}
				if list, err := d.List(context.Background(), container.LabelOwner, own); err != nil || len(list) != 0 {
					t.Errorf("User %q: left %v (%v)", user, list, err)
				}
			}
		})
	}
}

// TestImageRootfsCheck: the Docker path's root filesystem check
// (images.CheckImage) passes the runner images and their base, whose /dev
// holds Debian's device nodes and links, and refuses an image whose /dev
// is a symbolic link, read from the daemon as `docker save` writes it.
func TestImageRootfsCheck(t *testing.T) {
	ctx := context.Background()
	for _, ref := range []string{dimages.DefaultBase.Tag(), dimages.Runners[0].DefaultTag(), dimages.Runners[1].DefaultTag()} {
		if err := dimages.CheckImage(ctx, cli, ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "dev", Typeflag: tar.TypeSymlink, Linkname: "/run/host-dev", Mode: 0o777})
	tw.WriteHeader(&tar.Header{Name: "opt/mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1, Mode: 0o666})
	tw.Close()
	tag := fmt.Sprintf("dsh-e2e-devlink:%d-%d", os.Getpid(), time.Now().UnixNano())
	rc, err := cli.ImageImport(ctx, dimage.ImportSource{Source: &layer, SourceName: "-"}, tag, dimage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	t.Cleanup(func() { cli.ImageRemove(ctx, tag, dimage.RemoveOptions{Force: true}) })
	err = dimages.CheckImage(ctx, cli, tag)
	if !errdefs.IsInvalidArgument(err) {
		t.Fatalf("%v, want InvalidArgument", err)
	}
	for _, want := range []string{tag, "/dev is a symbolic link to /run/host-dev", "/opt/mem (a character device 1:1): a device node outside /dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// TestContainerdGVisor: the containerd driver under runsc holds the
// hardening preset (its stored spec and from inside) and the kernel
// surface: socket families, foreign ABIs, device nodes, and /proc mounted
// read-only, so a program cannot lower its oom_score_adj in the Sentry.
func TestContainerdGVisor(t *testing.T) {
	d := containerdDriver(t)
	required, _ := runtimesInfo(t)
	if !slices.Contains(d.Capabilities().Runtimes, containertest.GVisor) {
		if required[containertest.GVisor] {
			t.Fatalf("the containerd driver has no runsc (it has %v), and %s requires it", d.Capabilities().Runtimes, requiredRuntimesVar)
		}
		testenv.Unsupported(t, "the containerd driver has no runsc (it has %v)", d.Capabilities().Runtimes)
	}
	cfg := containerdConfig(t)
	cfg.OCIRuntime = containertest.GVisor
	cfg.ReadOnlyProcUnderGVisor = true
	t.Run("Hardening", func(t *testing.T) { containertest.RunHardening(t, cfg) })
	t.Run("Surface", func(t *testing.T) { containertest.RunSurface(t, cfg) })
}

// TestGVisorOOMScoreAdjStaysInTheSentry: under Docker and runsc, whose
// /proc Docker cannot mount read-only, a program that lowers its
// oom_score_adj lowers the Sentry's own number only: every host process of
// the sandbox keeps the score it had, which is what the host's OOM killer
// reads.
func TestGVisorOOMScoreAdjStaysInTheSentry(t *testing.T) {
	requireGVisor(t)
	e := newEnv(t, backend.Python, nil, container.WithOCIRuntime(containertest.GVisor))
	b := tools(map[string]backend.BindingFunc{"host": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		list, err := drv.List(ctx, container.LabelOwner, e.owner)
		if err != nil || len(list) != 1 {
			return nil, fmt.Errorf("%d containers: %v", len(list), err)
		}
		scores, err := hostScores(ctx, list[0].ID)
		if err != nil {
			return nil, err
		}
		return json.Marshal(scores)
	}})
	v := decode[struct {
		Before, After map[string]int
		Inside        int
	}](t, e.run(t, `
before = await tools.host({})
with open("/proc/self/oom_score_adj", "w") as f:
    f.write("-1000")
inside = int(open("/proc/self/oom_score_adj").read())
return {"before": before, "after": await tools.host({}), "inside": inside}`, b...))
	t.Logf("sandbox host processes' oom_score_adj before %v, after %v; inside the Sentry %d", v.Before, v.After, v.Inside)
	if v.Inside != -1000 {
		t.Errorf("inside: %d, want the Sentry's own score lowered to -1000 (if refused now, set ReadOnlyProcUnderGVisor for Docker)", v.Inside)
	}
	if len(v.Before) == 0 || !maps.Equal(v.Before, v.After) {
		t.Errorf("the sandbox's host processes' scores changed: %v, then %v", v.Before, v.After)
	}
	for pid, s := range v.After {
		if s < 0 {
			t.Errorf("host process %s of the sandbox has oom_score_adj %d", pid, s)
		}
	}
}

// hostScores maps each host process in container id's memory cgroup to
// its oom_score_adj.
func hostScores(ctx context.Context, id string) (map[string]int, error) {
	info, err := cli.ContainerInspect(ctx, id)
	if err != nil || info.State == nil || info.State.Pid == 0 {
		return nil, fmt.Errorf("inspect %s: %v", id, err)
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", info.State.Pid))
	if err != nil {
		return nil, err
	}
	var procs string
	for _, line := range strings.Split(string(cg), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) < 3:
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			procs = filepath.Join("/sys/fs/cgroup/memory", f[2], "cgroup.procs")
		case f[0] == "0" && f[1] == "" && procs == "":
			procs = filepath.Join("/sys/fs/cgroup", f[2], "cgroup.procs")
		}
	}
	data, err := os.ReadFile(procs)
	if err != nil {
		return nil, err
	}
	scores := map[string]int{}
	for _, pid := range strings.Fields(string(data)) {
		s, err := os.ReadFile("/proc/" + pid + "/oom_score_adj")
		if err != nil {
			continue // gone meanwhile
		}
		var n int
		fmt.Sscan(string(s), &n)
		scores[pid] = n
	}
	return scores, nil
}
