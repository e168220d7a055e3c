// Package images builds the runner images without a container registry.
//
// Each runner's build inputs (its Dockerfile and its code) are embedded in
// the binary, so the binary knows the exact tag it needs: a hash of those
// inputs and of the runner contract (package runner: user, paths), which the
// build passes to the Dockerfiles as build arguments. An image with an older
// hash is stale. The base
// is built from Debian packages with mmdebstrap and imported into the
// daemon, so `images build` works on a machine that can reach Debian's
// mirror but no registry. A user with a registry can instead pass any
// base (BASE build argument) and the Dockerfiles install what is missing.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	dbuild "github.com/docker/docker/api/types/build"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/backend/container/runner"
)

//go:embed ts-runner/Dockerfile ts-runner/*.js py-runner/Dockerfile py-runner/dsh_runner/*.py sdk-check/Dockerfile
var inputs embed.FS

// Repository prefix of every image this project builds.
const Repository = "dsh-container/"

// Base describes the offline base image.
type Base struct {
	Suite    string
	Mirror   string
	Packages []string
}

// DefaultBase holds both runtimes so one mmdebstrap run serves both
// runners.
var DefaultBase = Base{
	Suite:    "trixie",
	Mirror:   "http://deb.debian.org/debian",
	Packages: []string{"nodejs", "node-ws", "node-undici", "python3", "python3-websockets", "ca-certificates"},
}

// Tag is the base's content-addressed tag.
func (b Base) Tag() string {
	return Repository + "base:" + b.Suite + "-" + hash(b.Suite, b.Mirror, strings.Join(b.Packages, ","))
}

// Image is one buildable image.
type Image struct {
	Name string // folder under images/, e.g. "ts-runner"
	// Language is set for runner images.
	Language backend.Language
}

// Runners lists the runner images.
var Runners = []Image{
	{Name: "ts-runner", Language: backend.TypeScript},
	{Name: "py-runner", Language: backend.Python},
}

// SDKCheck is the test-only compiler image used by sdkgen's tests.
var SDKCheck = Image{Name: "sdk-check"}

// RunnerFor returns the runner image for a language.
func RunnerFor(l backend.Language) (Image, error) {
	for _, im := range Runners {
		if im.Language == l {
			return im, nil
		}
	}
	return Image{}, fmt.Errorf("%w: no runner image for language %q", errdefs.ErrNotFound, l)
}

// files lists the image's build inputs, paths relative to its folder, in
// lexical order.
func (im Image) files() ([]string, error) {
	var names []string
	err := fs.WalkDir(inputs, im.Name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, strings.TrimPrefix(p, im.Name+"/"))
		return nil
	})
	return names, err
}

// contract is the runner contract as the build arguments a runner's
// Dockerfile declares (ARG, with the same values as defaults); nil for an
// image that is not a runner.
func (im Image) contract() map[string]string {
	var args map[string]string
	switch im.Language {
	case backend.TypeScript:
		args = map[string]string{"TS_RUNNER_DIR": runner.TypeScriptDir}
	case backend.Python:
		args = map[string]string{"PY_SITE_DIR": runner.PythonDir}
	default:
		return nil
	}
	args["RUNNER_UID"] = strconv.Itoa(runner.UID)
	args["RUNNER_GID"] = strconv.Itoa(runner.GID)
	args["WORK_DIR"] = runner.WorkDir
	return args
}

// Tag is the image's content-addressed tag: a hash of its build inputs
// (Dockerfile and code) and, for a runner, of the contract's build
// arguments. The base is not part of it, so an image built on any base
// (`--base`) is the one `run` finds; the base used is recorded in a label.
func (im Image) Tag() string { return im.tag(im.contract()) }

func (im Image) tag(args map[string]string) string {
	files, err := im.files()
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	var parts []string
	for _, f := range files {
		data, _ := inputs.ReadFile(path.Join(im.Name, f))
		parts = append(parts, f, string(data))
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, "ARG "+k, args[k])
	}
	return Repository + im.Name + ":" + hash(parts...)
}

// DefaultTag is the tag the runtime looks for (see Tag).
func (im Image) DefaultTag() string { return im.Tag() }

func hash(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Exists reports whether the daemon has the image.
func Exists(ctx context.Context, cli client.APIClient, ref string) (bool, error) {
	_, err := cli.ImageInspect(ctx, ref)
	if err == nil {
		return true, nil
	}
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	return false, err
}

// EnsureBase builds and imports the offline base unless the daemon has it.
func EnsureBase(ctx context.Context, cli client.APIClient, b Base, progress io.Writer) error {
	ok, err := Exists(ctx, cli, b.Tag())
	if err != nil || ok {
		return err
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("%w: building the base image %s needs mmdebstrap; install it (`apt-get install mmdebstrap`) or pass a base you have with --base", errdefs.ErrFailedPrecondition, b.Tag())
	}
	fmt.Fprintf(progress, "building base %s from Debian %s packages (%s) with mmdebstrap...\n", b.Tag(), b.Suite, strings.Join(b.Packages, " "))
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=minbase", "--include="+strings.Join(b.Packages, ","), b.Suite, "-", b.Mirror)
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(&stderr, prefixWriter{progress, "  mmdebstrap: "})
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	rc, importErr := cli.ImageImport(ctx, dimage.ImportSource{Source: out, SourceName: "-"}, b.Tag(), dimage.ImportOptions{})
	if importErr == nil {
		_, importErr = io.Copy(io.Discard, rc)
		rc.Close()
	}
	waitErr := cmd.Wait()
	if waitErr != nil {
		return fmt.Errorf("mmdebstrap failed: %w\n%s", waitErr, tail(stderr.String()))
	}
	if importErr != nil {
		return fmt.Errorf("importing the base image: %w", importErr)
	}
	fmt.Fprintf(progress, "base %s ready\n", b.Tag())
	return nil
}

// Build builds im on base unless the daemon already has its tag (built on
// whatever base). It returns the tag.
// labelPrefix is the project's reserved label prefix (container.LabelPrefix).
const labelPrefix = "dsh-container.io/"

func Build(ctx context.Context, cli client.APIClient, im Image, base string, progress io.Writer) (string, error) {
	tag := im.Tag()
	ok, err := Exists(ctx, cli, tag)
	if err != nil {
		return "", err
	}
	if ok {
		fmt.Fprintf(progress, "%s is up to date\n", tag)
		return tag, nil
	}
	// Nothing runs on a base before its root filesystem passes the
	// check: the build's RUN steps are containers of it. A base the
	// daemon does not have yet (one the build pulls) is checked with the
	// result.
	if base != "" {
		if present, err := Exists(ctx, cli, base); err != nil {
			return "", err
		} else if present {
			if err := CheckImage(ctx, cli, base); err != nil {
				return "", fmt.Errorf("the base: %w", err)
			}
		}
	}
	fmt.Fprintf(progress, "building %s...\n", tag)
	buildCtx, err := im.context()
	if err != nil {
		return "", err
	}
	buildArgs := map[string]*string{"BASE": &base}
	for k, v := range im.contract() {
		buildArgs[k] = &v
	}
	resp, err := cli.ImageBuild(ctx, buildCtx, dbuild.ImageBuildOptions{
		Tags:        []string{tag},
		BuildArgs:   buildArgs,
		Remove:      true,
		ForceRemove: true,
		Version:     dbuild.BuilderV1,
		Labels:      map[string]string{labelPrefix + "inputs": strings.TrimPrefix(tag, Repository), labelPrefix + "base": base},
	})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, prefixWriter{progress, "  "}, 0, false, nil); err != nil {
		return "", fmt.Errorf("building %s: %w", tag, err)
	}
	if err := CheckImage(ctx, cli, tag); err != nil {
		// Not left under the tag the runtime looks for.
		if _, rerr := cli.ImageRemove(context.WithoutCancel(ctx), tag, dimage.RemoveOptions{PruneChildren: true}); rerr != nil && !errdefs.IsNotFound(rerr) {
			err = errors.Join(err, fmt.Errorf("removing the refused %s: %w", tag, rerr))
		}
		return "", err
	}
	return tag, nil
}

// context tars the image's embedded build inputs.
func (im Image) context() (io.Reader, error) {
	files, err := im.files()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		data, err := inputs.ReadFile(path.Join(im.Name, f))
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f, Mode: 0o644, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

// Status of one image for doctor.
type Status struct {
	Image   Image
	Tag     string
	Present bool
	// Stale lists older tags of the same image found on the daemon.
	Stale []string
}

// Check reports whether each runner image (for the default base) is among
// refs, the engine's image references, and which stale tags of it are.
func Check(refs []string, ims []Image) []Status {
	var out []Status
	for _, im := range ims {
		st := Status{Image: im, Tag: im.DefaultTag()}
		for _, t := range refs {
			switch {
			case t == st.Tag:
				st.Present = true
			case strings.HasPrefix(t, Repository+im.Name+":"):
				st.Stale = append(st.Stale, t)
			}
		}
		out = append(out, st)
	}
	return out
}

// PruneStale removes the daemon's older tags of im (other build inputs),
// leaving keep. A tag still used by a container stays; it is reported.
func PruneStale(ctx context.Context, cli client.APIClient, im Image, keep string, progress io.Writer) error {
	list, err := cli.ImageList(ctx, dimage.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range list {
		for _, t := range s.RepoTags {
			if t == keep || !strings.HasPrefix(t, Repository+im.Name+":") {
				continue
			}
			if _, err := cli.ImageRemove(ctx, t, dimage.RemoveOptions{PruneChildren: true}); err != nil {
				fmt.Fprintf(progress, "kept stale %s: %v\n", t, err)
				continue
			}
			fmt.Fprintf(progress, "removed stale %s\n", t)
		}
	}
	return nil
}

// ErrMissing reports a runner image that must be built first.
func ErrMissing(tag string) error {
	return fmt.Errorf("%w: runner image %s is missing or stale; build it with `dsh-container images build` (or `make images`)", errdefs.ErrNotFound, tag)
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if p.w == nil {
		return len(b), nil
	}
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(p.w, p.prefix+line); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}
