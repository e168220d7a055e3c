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

// labelPrefix is the project's reserved label prefix (container.LabelPrefix).
const labelPrefix = "dsh-container.io/"

// Build builds im on base unless the daemon already has its tag (built on
// whatever base) and that image passes the root filesystem check
// (CheckImage). It returns the tag.
//
// Nothing is built on an unchecked root filesystem, and nothing unchecked
// is left under the tag the runtime looks for:
//
//   - an image already under the tag is checked too: the tag is a hash of
//     the build inputs, not a record of a check (a binary older than the
//     check built it, or another image was tagged so); one refused is
//     removed from under the tag and built again;
//   - the base is pulled first when the daemon lacks it, checked before
//     any build step runs on it (each RUN step is a container of it), and
//     built on by its image ID, so the build uses the image checked even
//     if the name moves meanwhile;
//   - the image built is checked before it is left under its tag.
func Build(ctx context.Context, cli client.APIClient, im Image, base string, progress io.Writer) (string, error) {
	tag := im.Tag()
	ok, err := Exists(ctx, cli, tag)
	if err != nil {
		return "", err
	}
	if ok {
		err := CheckImage(ctx, cli, tag)
		if err == nil {
			fmt.Fprintf(progress, "%s is up to date\n", tag)
			return tag, nil
		}
		if !errdefs.IsInvalidArgument(err) {
			return "", err
		}
		fmt.Fprintf(progress, "%s is refused, removing it and building it again: %v\n", tag, err)
		if _, err := cli.ImageRemove(ctx, tag, dimage.RemoveOptions{PruneChildren: true}); err != nil && !errdefs.IsNotFound(err) {
			return "", fmt.Errorf("removing the refused %s: %w", tag, err)
		}
	}
	baseID, err := checkedBase(ctx, cli, base, progress)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "building %s...\n", tag)
	buildCtx, err := im.context()
	if err != nil {
		return "", err
	}
	buildArgs := map[string]*string{"BASE": &baseID}
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

// checkedBase returns the image ID of base once its root filesystem passed
// the check, pulling it first when the daemon lacks it: the build then
// names the base by that ID (the legacy builder takes an ID in FROM), so
// what it builds on is what was checked.
func checkedBase(ctx context.Context, cli client.APIClient, base string, progress io.Writer) (string, error) {
	if base == "" {
		return "", fmt.Errorf("%w: no base image to build on", errdefs.ErrInvalidArgument)
	}
	info, err := cli.ImageInspect(ctx, base)
	if errdefs.IsNotFound(err) {
		fmt.Fprintf(progress, "pulling the base %s...\n", base)
		rc, perr := cli.ImagePull(ctx, base, dimage.PullOptions{})
		if perr != nil {
			return "", fmt.Errorf("pulling the base %s: %w", base, perr)
		}
		perr = jsonmessage.DisplayJSONMessagesStream(rc, prefixWriter{progress, "  "}, 0, false, nil)
		rc.Close()
		if perr != nil {
			return "", fmt.Errorf("pulling the base %s: %w", base, perr)
		}
		info, err = cli.ImageInspect(ctx, base)
	}
	if err != nil {
		return "", fmt.Errorf("the base %s: %w", base, err)
	}
	if info.ID == "" {
		return "", fmt.Errorf("the base %s: the daemon gave no image ID", base)
	}
	if err := CheckImage(ctx, cli, info.ID); err != nil {
		return "", fmt.Errorf("the base %s: %w", base, err)
	}
	return info.ID, nil
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
