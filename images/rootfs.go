package images

// The root filesystem check: what an image may hold where the runtime
// mounts its own filesystems (/dev, /proc, /sys), and device nodes. Our
// images are built from Debian packages, but a base is the user's choice
// (--base), and custom images are coming: a runtime mounting over an
// image's /dev follows what the image put there before it pivots into
// the container (runc CVE-2026-41579: an image whose /dev was a symlink
// made runc write on the host).

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// standardDev are the entries a Debian root filesystem's /dev holds
// (mmdebstrap and debootstrap make them), which a runtime's /dev tmpfs
// hides: character devices by major:minor, symbolic links by target.
var standardDev = map[string]string{
	"console": "c 5:1", "full": "c 1:7", "null": "c 1:3", "ptmx": "c 5:2", "random": "c 1:8",
	"tty": "c 5:0", "urandom": "c 1:9", "zero": "c 1:5",
	"fd": "-> /proc/self/fd", "stdin": "-> /proc/self/fd/0", "stdout": "-> /proc/self/fd/1", "stderr": "-> /proc/self/fd/2",
}

// mountPoints are the directories a runtime mounts its own filesystems
// on.
var mountPoints = []string{"dev", "proc", "sys"}

// fsEntry is what the check keeps of one entry of the root filesystem.
type fsEntry struct {
	typ   byte
	link  string // a symbolic link's target, a hard link's source
	major int64
	minor int64
	// device is set for a device node, and for a hard link to one.
	device bool
}

// layerEntries is what the check keeps of one layer: its whiteouts, its
// opaque directories and the entries it adds that the check is about —
// the mount points and what is under them, and device nodes anywhere.
type layerEntries struct {
	whiteouts, opaque []string
	added             map[string]*fsEntry
}

// rootfsCheck applies layers, lowest first, as overlayfs does, and judges
// the root filesystem they make.
type rootfsCheck struct {
	entries map[string]*fsEntry
}

func newRootfsCheck() *rootfsCheck { return &rootfsCheck{entries: map[string]*fsEntry{}} }

// underMountPoint reports whether p is a mount point or under one.
func underMountPoint(p string) bool {
	top, _, _ := strings.Cut(p, "/")
	return slices.Contains(mountPoints, top)
}

// cleanName is a tar entry's path relative to the root ("" for the root).
func cleanName(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// readLayer reads one layer, an uncompressed or gzip-compressed tar.
func readLayer(r io.Reader) (layerEntries, error) {
	br := bufio.NewReader(r)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return layerEntries{}, err
		}
		defer zr.Close()
		return readTar(zr)
	}
	return readTar(br)
}

func readTar(r io.Reader) (layerEntries, error) {
	l := layerEntries{added: map[string]*fsEntry{}}
	// A hard link names an earlier entry of the same archive: remember
	// which entries are device nodes.
	devices := map[string]*fsEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return l, nil
		}
		if err != nil {
			return l, err
		}
		p := cleanName(h.Name)
		if p == "" {
			continue
		}
		dir, base := path.Split(p)
		dir = strings.TrimSuffix(dir, "/")
		switch {
		case base == ".wh..wh..opq":
			l.opaque = append(l.opaque, dir)
			continue
		case strings.HasPrefix(base, ".wh."):
			l.whiteouts = append(l.whiteouts, path.Join(dir, strings.TrimPrefix(base, ".wh.")))
			continue
		}
		e := &fsEntry{typ: h.Typeflag, link: h.Linkname, major: h.Devmajor, minor: h.Devminor}
		switch h.Typeflag {
		case tar.TypeChar, tar.TypeBlock:
			e.device = true
			devices[p] = e
		case tar.TypeLink:
			e.link = cleanName(h.Linkname)
			if d := devices[e.link]; d != nil {
				e.device, e.major, e.minor = true, d.major, d.minor
				devices[p] = e
			}
		}
		if underMountPoint(p) || e.device {
			l.added[p] = e
		} else {
			// A later entry of the same layer replaces an earlier one.
			delete(l.added, p)
		}
	}
}

// apply lays l over the layers applied before.
func (c *rootfsCheck) apply(l layerEntries) {
	under := func(p, dir string) bool { return dir == "" || p == dir || strings.HasPrefix(p, dir+"/") }
	for _, w := range l.whiteouts {
		c.drop(func(p string) bool { return under(p, w) })
	}
	for _, d := range l.opaque {
		c.drop(func(p string) bool { return p != d && under(p, d) })
	}
	for p, e := range l.added {
		if e.typ != tar.TypeDir {
			// What is not a directory hides what lower layers hold
			// under its path.
			c.drop(func(q string) bool { return strings.HasPrefix(q, p+"/") })
		}
	}
	for p, e := range l.added {
		c.entries[p] = e
	}
}

func (c *rootfsCheck) drop(match func(string) bool) {
	for p := range c.entries {
		if match(p) {
			delete(c.entries, p)
		}
	}
}

// verdict judges the root filesystem the layers make: /dev, /proc and
// /sys, where present, are real directories; /proc and /sys are empty;
// /dev holds directories, files and the standard devices and links only
// (a runtime mounts its own /dev over them): no other device and no
// other symbolic link; there is no device node anywhere else.
// The error, an errdefs.ErrInvalidArgument, names every entry refused.
func (c *rootfsCheck) verdict() error {
	var bad []string
	for _, p := range slices.Sorted(maps.Keys(c.entries)) {
		e := c.entries[p]
		top, rest, _ := strings.Cut(p, "/")
		what := describe(e)
		switch {
		case slices.Contains(mountPoints, top) && rest == "":
			if e.typ != tar.TypeDir {
				bad = append(bad, fmt.Sprintf("/%s is %s, not a directory: a runtime mounting its own /%s there would follow it", p, what, top))
			}
		case top == "proc" || top == "sys":
			bad = append(bad, fmt.Sprintf("/%s (%s): /%s must be empty, the runtime mounts its own there", p, what, top))
		case top == "dev":
			// Directories and files are inert under the runtime's /dev
			// (`docker export` leaves an empty /dev/console file).
			if e.typ == tar.TypeDir || e.typ == tar.TypeReg || e.typ == tar.TypeLink && !e.device {
				continue
			}
			if want, found := standardDev[rest]; found && want == standard(e) {
				continue
			}
			bad = append(bad, fmt.Sprintf("/%s (%s): /dev may hold only directories, files and the standard devices and links (a runtime mounts its own /dev over them)", p, what))
		case e.device:
			bad = append(bad, fmt.Sprintf("/%s (%s): a device node outside /dev", p, what))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	const most = 10
	if len(bad) > most {
		bad = append(bad[:most], fmt.Sprintf("and %d more", len(bad)-most))
	}
	return fmt.Errorf("%w: the image's root filesystem is refused: %s", errdefs.ErrInvalidArgument, strings.Join(bad, "; "))
}

// standard renders an entry the way standardDev names it.
func standard(e *fsEntry) string {
	switch e.typ {
	case tar.TypeChar:
		return fmt.Sprintf("c %d:%d", e.major, e.minor)
	case tar.TypeSymlink:
		return "-> " + e.link
	}
	return ""
}

// describe says what an entry is, for an error.
func describe(e *fsEntry) string {
	switch e.typ {
	case tar.TypeDir:
		return "a directory"
	case tar.TypeSymlink:
		return "a symbolic link to " + e.link
	case tar.TypeLink:
		if e.device {
			return fmt.Sprintf("a hard link to the device node /%s (%d:%d)", e.link, e.major, e.minor)
		}
		return "a hard link to /" + e.link
	case tar.TypeChar:
		return fmt.Sprintf("a character device %d:%d", e.major, e.minor)
	case tar.TypeBlock:
		return fmt.Sprintf("a block device %d:%d", e.major, e.minor)
	case tar.TypeFifo:
		return "a FIFO"
	case tar.TypeReg:
		return "a regular file"
	}
	return fmt.Sprintf("an entry of type %q", e.typ)
}

// CheckRootfs checks the root filesystem that layers make, lowest first,
// each a tar (uncompressed or gzip): see rootfsCheck.verdict.
func CheckRootfs(layers ...io.Reader) error {
	c := newRootfsCheck()
	for i, r := range layers {
		l, err := readLayer(r)
		if err != nil {
			return fmt.Errorf("reading the image's layer %d: %w", i+1, err)
		}
		c.apply(l)
	}
	return c.verdict()
}

// CheckImage checks the root filesystem of a Docker daemon's image ref
// (CheckRootfs), reading it as `docker save` writes it: each layer is
// read as it streams by and its entries kept for the check, then applied
// in the order the archive's manifest gives.
func CheckImage(ctx context.Context, cli client.APIClient, ref string) error {
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		return fmt.Errorf("reading image %s: %w", ref, err)
	}
	defer rc.Close()
	layers := map[string]layerEntries{}
	var manifest []struct{ Layers []string }
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading image %s: %w", ref, err)
		}
		name := cleanName(h.Name)
		switch {
		case name == "manifest.json":
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				return fmt.Errorf("image %s: manifest.json: %w", ref, err)
			}
		case h.Typeflag == tar.TypeReg && (strings.HasSuffix(name, "/layer.tar") || strings.HasPrefix(name, "blobs/")):
			// Blobs are layers, configurations and manifests alike:
			// what does not read as a tar is not a layer.
			if l, err := readLayer(tr); err == nil {
				layers[name] = l
			}
		}
	}
	if len(manifest) != 1 {
		return fmt.Errorf("image %s: the saved archive describes %d images, want 1", ref, len(manifest))
	}
	c := newRootfsCheck()
	for _, name := range manifest[0].Layers {
		l, found := layers[cleanName(name)]
		if !found {
			return fmt.Errorf("image %s: layer %s is missing from the saved archive, or not a tar", ref, name)
		}
		c.apply(l)
	}
	if err := c.verdict(); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return nil
}
