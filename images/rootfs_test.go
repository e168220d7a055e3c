package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	dbuild "github.com/docker/docker/api/types/build"
	dimage "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// entry is one tar entry of a crafted layer.
type entry struct {
	name string
	typ  byte
	link string
	dev  [2]int64
}

func dir(name string) entry          { return entry{name: name, typ: tar.TypeDir} }
func file(name string) entry         { return entry{name: name, typ: tar.TypeReg} }
func symlink(name, to string) entry  { return entry{name: name, typ: tar.TypeSymlink, link: to} }
func hardlink(name, to string) entry { return entry{name: name, typ: tar.TypeLink, link: to} }
func chr(name string, a, b int64) entry {
	return entry{name: name, typ: tar.TypeChar, dev: [2]int64{a, b}}
}
func blk(name string, a, b int64) entry {
	return entry{name: name, typ: tar.TypeBlock, dev: [2]int64{a, b}}
}

func layer(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Devmajor: e.dev[0], Devminor: e.dev[1], Mode: 0o755}
		if e.typ == tar.TypeReg {
			h.Size = 1
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte("x"))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// debianDev is /dev as mmdebstrap writes it (the offline base's tar),
// with empty /proc and /sys.
func debianDev() []entry {
	return []entry{
		dir("./"), dir("./dev/"), chr("./dev/console", 5, 1), symlink("./dev/fd", "/proc/self/fd"), chr("./dev/full", 1, 7),
		chr("./dev/null", 1, 3), chr("./dev/ptmx", 5, 2), dir("./dev/pts/"), chr("./dev/random", 1, 8), dir("./dev/shm/"),
		symlink("./dev/stderr", "/proc/self/fd/2"), symlink("./dev/stdin", "/proc/self/fd/0"), symlink("./dev/stdout", "/proc/self/fd/1"),
		chr("./dev/tty", 5, 0), chr("./dev/urandom", 1, 9), chr("./dev/zero", 1, 5), dir("./proc/"), dir("./sys/"),
		dir("./usr/"), dir("./usr/bin/"), file("./usr/bin/python3"), symlink("./bin", "usr/bin"), symlink("./etc/mtab", "/proc/self/mounts"),
	}
}

func check(t *testing.T, layers ...[]byte) error {
	t.Helper()
	var rs []io.Reader
	for _, l := range layers {
		rs = append(rs, bytes.NewReader(l))
	}
	return CheckRootfs(rs...)
}

func TestCheckRootfsAccepts(t *testing.T) {
	for name, layers := range map[string][][]byte{
		"a Debian root":                          {layer(t, debianDev()...)},
		"no /dev, /proc or /sys at all":          {layer(t, dir("usr/"), file("usr/x"))},
		"an empty /dev (docker build)":           {layer(t, dir("dev/"), dir("proc/"), dir("sys/"))},
		"a FIFO and a socket-less root":          {layer(t, entry{name: "tmp/fifo", typ: tar.TypeFifo})},
		"a device removed by a later layer":      {layer(t, blk("opt/sda", 8, 0)), layer(t, file("opt/.wh.sda"))},
		"a /dev symlink whited out and replaced": {layer(t, symlink("dev", "/tmp")), layer(t, file(".wh.dev"), dir("dev/"))},
		"an opaque /dev":                         {layer(t, dir("dev/"), symlink("dev/null", "/proc/sys/kernel/core_pattern")), layer(t, dir("dev/"), file("dev/.wh..wh..opq"), chr("dev/null", 1, 3))},
		"a regular file linked twice":            {layer(t, file("usr/a"), hardlink("usr/b", "usr/a"))},
		"gzip":                                   {gz(t, layer(t, debianDev()...))},
		"docker export's /dev/console file":      {layer(t, append(debianDev(), file("dev/console"), file(".dockerenv"))...)},
	} {
		t.Run(name, func(t *testing.T) {
			if err := check(t, layers...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCheckRootfsRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		layers [][]byte
		want   []string
	}{
		"/dev a symlink":                                {[][]byte{layer(t, symlink("dev", "/proc/1/root/tmp"))}, []string{"/dev is a symbolic link to /proc/1/root/tmp, not a directory"}},
		"/dev a symlink, later":                         {[][]byte{layer(t, debianDev()...), layer(t, file(".wh.dev"), symlink("dev", "../../run"))}, []string{"/dev is a symbolic link to ../../run"}},
		"/dev replaced by a symlink without a whiteout": {[][]byte{layer(t, debianDev()...), layer(t, symlink("./dev", "/tmp"))}, []string{"/dev is a symbolic link to /tmp"}},
		"/proc a symlink":                               {[][]byte{layer(t, symlink("proc", "/tmp/p"))}, []string{"/proc is a symbolic link"}},
		"/sys a file":                                   {[][]byte{layer(t, file("sys"))}, []string{"/sys is a regular file"}},
		"/dev a hard link":                              {[][]byte{layer(t, file("x"), hardlink("dev", "x"))}, []string{"/dev is a hard link to /x"}},
		"/dev/null a symlink":                           {[][]byte{layer(t, dir("dev/"), symlink("dev/null", "/proc/sys/kernel/core_pattern"))}, []string{"/dev/null (a symbolic link to /proc/sys/kernel/core_pattern)"}},
		"/dev/null another device":                      {[][]byte{layer(t, dir("dev/"), chr("dev/null", 1, 1))}, []string{"/dev/null (a character device 1:1)"}},
		"/dev/fd elsewhere":                             {[][]byte{layer(t, symlink("dev/fd", "/etc"))}, []string{"/dev/fd (a symbolic link to /etc)"}},
		"a block device in /dev":                        {[][]byte{layer(t, blk("dev/sda", 8, 0))}, []string{"/dev/sda (a block device 8:0)"}},
		"a FIFO in /dev":                                {[][]byte{layer(t, entry{name: "dev/initctl", typ: tar.TypeFifo})}, []string{"/dev/initctl (a FIFO)"}},
		"something in /proc":                            {[][]byte{layer(t, dir("proc/"), symlink("proc/self", "/"))}, []string{"/proc/self (a symbolic link to /): /proc must be empty"}},
		"something in /sys":                             {[][]byte{layer(t, dir("sys/fs/"))}, []string{"/sys/fs (a directory): /sys must be empty"}},
		"a device elsewhere":                            {[][]byte{layer(t, chr("usr/share/mem", 1, 1))}, []string{"/usr/share/mem (a character device 1:1): a device node outside /dev"}},
		"a hard link to a device":                       {[][]byte{layer(t, debianDev()...), layer(t, chr("opt/n", 1, 3), hardlink("opt/m", "opt/n"), file("opt/.wh.n"))}, []string{"/opt/m (a hard link to the device node /opt/n (1:3))"}},
		"a Debian /dev under gzip, one bad entry":       {[][]byte{gz(t, layer(t, append(debianDev(), symlink("./dev/core", "/proc/kcore"))...))}, []string{"/dev/core (a symbolic link to /proc/kcore)"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := check(t, c.layers...)
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("%v, want InvalidArgument", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
	// Many bad entries: the first ten, and a count.
	var es []entry
	for i := range 15 {
		es = append(es, chr("opt/d"+string(rune('a'+i)), 1, 1))
	}
	if err := check(t, layer(t, es...)); err == nil || !strings.Contains(err.Error(), "and 5 more") {
		t.Errorf("15 devices: %v", err)
	}
	// Not a tar.
	if err := check(t, []byte(strings.Repeat("not a tar ", 100))); err == nil || errdefs.IsInvalidArgument(err) {
		t.Errorf("garbage: %v", err)
	}
}

// WriteOCI refuses a base whose /dev is a symlink before it writes
// anything.
func TestWriteOCIChecksTheBase(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base.tar")
	if err := os.WriteFile(base, layer(t, dir("etc/"), symlink("dev", "/run/host")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := WriteOCI(&out, Runners[0], DefaultBase, base)
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "/dev is a symbolic link to /run/host") || !strings.Contains(err.Error(), base) {
		t.Fatalf("%v", err)
	}
	if out.Len() != 0 {
		t.Fatalf("%d bytes written before the refusal", out.Len())
	}
	// The same base with a Debian /dev is written.
	if err := os.WriteFile(base, layer(t, debianDev()...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteOCI(&out, Runners[0], DefaultBase, base); err != nil || out.Len() == 0 {
		t.Fatalf("%v, %d bytes", err, out.Len())
	}
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// savedImage is `docker save` of one image made of layers, in the
// archive layout of Docker 20.10 (<id>/layer.tar, manifest.json last).
func savedImage(layers ...[]byte) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	var names []string
	put := func(name string, data []byte) {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
		tw.Write(data)
	}
	for i := range layers {
		names = append(names, fmt.Sprintf("%02d/layer.tar", len(layers)-i))
	}
	// The archive holds the layers in any order (here the reverse): the
	// manifest gives theirs.
	for i := len(layers) - 1; i >= 0; i-- {
		put(names[i], layers[i])
	}
	put("config.json", []byte(`{"rootfs":{"type":"layers"}}`))
	m, _ := json.Marshal([]map[string]any{{"Config": "config.json", "Layers": names}})
	put("manifest.json", m)
	tw.Close()
	return b.Bytes()
}

// buildAPI fakes what Build asks of the daemon: the images it has (each
// saved as its layers, found by name or by its ID, "id:" and the name it
// was first stored under), what a pull finds in the registry, the build,
// the removal; calls records the calls in order.
type buildAPI struct {
	client.APIClient // nil: any other call panics
	images           map[string][][]byte
	registry         map[string][][]byte
	built, removed   []string
	buildLayers      [][]byte
	buildArgs        []string // each build's BASE
	calls            []string
}

func (a *buildAPI) layers(ref string) ([][]byte, bool) {
	l, found := a.images[strings.TrimPrefix(ref, "id:")]
	return l, found
}

func (a *buildAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (dimage.InspectResponse, error) {
	a.calls = append(a.calls, "inspect "+ref)
	if _, found := a.layers(ref); !found {
		return dimage.InspectResponse{}, errdefs.ErrNotFound
	}
	return dimage.InspectResponse{ID: "id:" + strings.TrimPrefix(ref, "id:")}, nil
}

func (a *buildAPI) ImagePull(_ context.Context, ref string, _ dimage.PullOptions) (io.ReadCloser, error) {
	a.calls = append(a.calls, "pull "+ref)
	l, found := a.registry[ref]
	if !found {
		return nil, errdefs.ErrNotFound
	}
	a.images[ref] = l
	return io.NopCloser(strings.NewReader(`{"status":"pulled"}`)), nil
}

func (a *buildAPI) ImageSave(_ context.Context, refs []string, _ ...client.ImageSaveOption) (io.ReadCloser, error) {
	a.calls = append(a.calls, "save "+refs[0])
	l, _ := a.layers(refs[0])
	return io.NopCloser(bytes.NewReader(savedImage(l...))), nil
}

func (a *buildAPI) ImageBuild(_ context.Context, _ io.Reader, o dbuild.ImageBuildOptions) (dbuild.ImageBuildResponse, error) {
	tag := o.Tags[0]
	a.calls = append(a.calls, "build "+tag)
	a.built = append(a.built, tag)
	base := *o.BuildArgs["BASE"]
	a.buildArgs = append(a.buildArgs, base)
	l, _ := a.layers(base)
	a.images[tag] = append(slices.Clone(l), a.buildLayers...)
	return dbuild.ImageBuildResponse{Body: io.NopCloser(strings.NewReader(`{"stream":"built\n"}`))}, nil
}

func (a *buildAPI) ImageRemove(_ context.Context, ref string, _ dimage.RemoveOptions) ([]dimage.DeleteResponse, error) {
	a.calls = append(a.calls, "remove "+ref)
	a.removed = append(a.removed, ref)
	delete(a.images, ref)
	return nil, nil
}

// Build checks the base before anything runs on it, and the image it
// built before leaving it under the runtime's tag.
func TestBuildChecksTheRootfs(t *testing.T) {
	ctx := context.Background()
	im := Runners[1]
	good := layer(t, debianDev()...)
	bad := layer(t, dir("etc/"), symlink("dev", "/run/host"))

	api := &buildAPI{images: map[string][][]byte{"base:bad": {good, bad}}}
	if _, err := Build(ctx, api, im, "base:bad", io.Discard); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "the base base:bad: image id:base:bad") || !strings.Contains(err.Error(), "/dev is a symbolic link") {
		t.Fatalf("a bad base: %v", err)
	}
	if len(api.built) != 0 {
		t.Fatalf("built %v on a refused base", api.built)
	}

	// A good base, a build whose layer breaks /dev: refused, and the tag
	// removed.
	api = &buildAPI{images: map[string][][]byte{"base:good": {good}}, buildLayers: [][]byte{layer(t, file("opt/x"), chr("opt/mem", 1, 1))}}
	if _, err := Build(ctx, api, im, "base:good", io.Discard); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "/opt/mem (a character device 1:1)") {
		t.Fatalf("a bad build: %v", err)
	}
	if !slices.Equal(api.built, []string{im.Tag()}) || !slices.Equal(api.removed, []string{im.Tag()}) {
		t.Fatalf("built %v, removed %v", api.built, api.removed)
	}

	// A good base and build: the tag stays. The base's second layer
	// mends its first: the layers apply in the manifest's order. The
	// build names the base by the ID that was checked.
	fixed := layer(t, file(".wh.dev"), dir("dev/"))
	api = &buildAPI{images: map[string][][]byte{"base:good": {good, bad, fixed}}, buildLayers: [][]byte{layer(t, file("opt/x"))}}
	if tag, err := Build(ctx, api, im, "base:good", io.Discard); err != nil || tag != im.Tag() || len(api.removed) != 0 {
		t.Fatalf("a good build: %q, %v, removed %v", tag, err, api.removed)
	}
	if !slices.Equal(api.buildArgs, []string{"id:base:good"}) {
		t.Fatalf("built on %q, want the checked ID", api.buildArgs)
	}
}

// A base the daemon lacks is pulled, then checked before the build: a bad
// one never has a build step run on it.
func TestBuildChecksAPulledBaseFirst(t *testing.T) {
	ctx := context.Background()
	im := Runners[0]
	good := layer(t, debianDev()...)
	bad := layer(t, dir("etc/"), symlink("dev", "/run/host"))
	const ref = "registry.example/base:1"

	api := &buildAPI{images: map[string][][]byte{}, registry: map[string][][]byte{ref: {good, bad}}}
	_, err := Build(ctx, api, im, ref, io.Discard)
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "the base "+ref) || !strings.Contains(err.Error(), "/dev is a symbolic link to /run/host") {
		t.Fatalf("a pulled bad base: %v", err)
	}
	if len(api.built) != 0 {
		t.Fatalf("built %v on a refused base (calls %q)", api.built, api.calls)
	}
	want := []string{"inspect " + im.Tag(), "inspect " + ref, "pull " + ref, "inspect " + ref, "save id:" + ref}
	if !slices.Equal(api.calls, want) {
		t.Fatalf("calls %q, want %q", api.calls, want)
	}

	api = &buildAPI{images: map[string][][]byte{}, registry: map[string][][]byte{ref: {good}}}
	if tag, err := Build(ctx, api, im, ref, io.Discard); err != nil || tag != im.Tag() || !slices.Equal(api.buildArgs, []string{"id:" + ref}) {
		t.Fatalf("a pulled good base: %q, %v, built on %q (calls %q)", tag, err, api.buildArgs, api.calls)
	}
	// A base no registry has fails before any build.
	api = &buildAPI{images: map[string][][]byte{}, registry: map[string][][]byte{}}
	if _, err := Build(ctx, api, im, ref, io.Discard); !errdefs.IsNotFound(err) || len(api.built) != 0 {
		t.Fatalf("a missing base: %v, built %v", err, api.built)
	}
}

// An image already under the runtime's tag is checked too (the tag is a
// hash of the build inputs, not a record of a check): a good one is left
// as it is, a refused one is removed from under the tag and built again.
func TestBuildChecksAnImageUpToDate(t *testing.T) {
	ctx := context.Background()
	im := Runners[1]
	good := layer(t, debianDev()...)
	bad := layer(t, dir("etc/"), symlink("dev", "/run/host"))

	api := &buildAPI{images: map[string][][]byte{im.Tag(): {good}, "base:good": {good}}}
	var out bytes.Buffer
	if tag, err := Build(ctx, api, im, "base:good", &out); err != nil || tag != im.Tag() || len(api.built) != 0 || !strings.Contains(out.String(), "is up to date") {
		t.Fatalf("a good image up to date: %q, %v, built %v, %q", tag, err, api.built, out.String())
	}
	if !slices.Contains(api.calls, "save "+im.Tag()) {
		t.Fatalf("the image up to date was not checked: calls %q", api.calls)
	}

	api = &buildAPI{images: map[string][][]byte{im.Tag(): {good, bad}, "base:good": {good}}, buildLayers: [][]byte{layer(t, file("opt/x"))}}
	out.Reset()
	tag, err := Build(ctx, api, im, "base:good", &out)
	if err != nil || tag != im.Tag() || !slices.Equal(api.removed, []string{im.Tag()}) || !slices.Equal(api.built, []string{im.Tag()}) {
		t.Fatalf("a refused image up to date: %q, %v, removed %v, built %v", tag, err, api.removed, api.built)
	}
	if !strings.Contains(out.String(), "is refused, removing it and building it again") || !strings.Contains(out.String(), "/dev is a symbolic link to /run/host") {
		t.Errorf("progress %q", out.String())
	}
	// What is under the tag now is the build, which passes.
	if err := CheckImage(ctx, api, im.Tag()); err != nil {
		t.Fatal(err)
	}
}
