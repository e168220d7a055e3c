package images

// The runner images without Docker: the same Dockerfiles, read as a
// recipe (COPY, LABEL, USER, WORKDIR, CMD, ENV; RUN only installs what an
// offline base already holds), laid over the offline Debian root
// filesystem as two layers, written as an OCI image layout in a tar that
// containerd imports.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
)

// BuildBaseRootfs writes the offline base's root filesystem, as a tar, to
// file (mmdebstrap --variant=minbase with b's packages).
func BuildBaseRootfs(ctx context.Context, b Base, file string, progress io.Writer) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("%w: building the base root filesystem needs mmdebstrap; install it (`apt-get install mmdebstrap`)", errdefs.ErrFailedPrecondition)
	}
	fmt.Fprintf(progress, "building the base root filesystem from Debian %s packages (%s) with mmdebstrap...\n", b.Suite, strings.Join(b.Packages, " "))
	cmd := exec.CommandContext(ctx, "mmdebstrap", "--variant=minbase", "--format=tar", "--include="+strings.Join(b.Packages, ","), b.Suite, file, b.Mirror)
	var stderr bytes.Buffer
	cmd.Stderr = io.MultiWriter(&stderr, prefixWriter{progress, "  mmdebstrap: "})
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mmdebstrap failed: %w\n%s", err, tail(stderr.String()))
	}
	return nil
}

// recipe is what a Dockerfile does on a base that already holds its
// packages.
type recipe struct {
	copies  [][2]string // embedded source → absolute destination
	labels  map[string]string
	env     []string
	user    string
	workdir string
	cmd     []string
}

// parseRecipe reads im's Dockerfile. Instructions other than ARG, FROM,
// RUN, COPY, LABEL, ENV, USER, WORKDIR and CMD are refused, so the two
// build paths cannot drift apart silently. ${VAR} and $VAR expand from the
// ARG defaults, overridden by the build arguments `images build` passes
// (the runner contract), as Docker's build does; COPY sources are globs
// over the embedded build inputs.
func parseRecipe(im Image) (recipe, error) {
	data, err := inputs.ReadFile(path.Join(im.Name, "Dockerfile"))
	if err != nil {
		return recipe{}, err
	}
	r := recipe{labels: map[string]string{}}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue // comments may sit inside a continued instruction too
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		return r, fmt.Errorf("%s/Dockerfile: the last instruction ends in a line continuation", im.Name)
	}
	contract := im.contract()
	vars := map[string]string{}
	expand := func(s string) (string, error) {
		var missing []string
		out := os.Expand(s, func(k string) string {
			v, ok := vars[k]
			if !ok {
				missing = append(missing, k)
			}
			return v
		})
		if len(missing) > 0 {
			return "", fmt.Errorf("%s/Dockerfile: %q uses %s, which no ARG before it declares", im.Name, s, strings.Join(missing, ", "))
		}
		return out, nil
	}
	for _, line := range lines {
		op, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		op = strings.ToUpper(op)
		if op != "RUN" && op != "CMD" && op != "FROM" {
			if arg, err = expand(arg); err != nil {
				return r, err
			}
		}
		switch op {
		case "FROM", "RUN":
			// RUN steps only install packages the offline base holds.
		case "ARG":
			k, v, _ := strings.Cut(arg, "=")
			if c, ok := contract[k]; ok {
				v = c
			}
			vars[k] = strings.Trim(v, `"`)
		case "COPY":
			f := strings.Fields(arg)
			if len(f) < 2 || strings.HasPrefix(f[0], "--") {
				return r, fmt.Errorf("%s/Dockerfile: COPY %q: only COPY <source>... <absolute path> is supported offline", im.Name, arg)
			}
			dst := f[len(f)-1]
			if !path.IsAbs(dst) {
				return r, fmt.Errorf("%s/Dockerfile: COPY %q: the destination must be absolute", im.Name, arg)
			}
			var srcs []string
			for _, pat := range f[:len(f)-1] {
				m, err := fs.Glob(inputs, path.Join(im.Name, pat))
				if err != nil || len(m) == 0 {
					return r, fmt.Errorf("%s/Dockerfile: COPY %s matches no build input", im.Name, pat)
				}
				srcs = append(srcs, m...)
			}
			toDir := strings.HasSuffix(dst, "/") || len(srcs) > 1
			if len(srcs) > 1 && !strings.HasSuffix(dst, "/") {
				return r, fmt.Errorf("%s/Dockerfile: COPY %q: several sources need a destination ending in /", im.Name, arg)
			}
			for _, s := range srcs {
				to := dst
				if toDir {
					to = path.Join(dst, path.Base(s))
				}
				r.copies = append(r.copies, [2]string{strings.TrimPrefix(s, im.Name+"/"), path.Clean(to)})
			}
		case "LABEL":
			k, v, ok := strings.Cut(arg, "=")
			if !ok {
				return r, fmt.Errorf("%s/Dockerfile: LABEL %q: want key=value", im.Name, arg)
			}
			r.labels[strings.Trim(k, `"`)] = strings.Trim(v, `"`)
		case "ENV":
			k, v, ok := strings.Cut(arg, "=")
			if !ok {
				return r, fmt.Errorf("%s/Dockerfile: ENV %q: want key=value", im.Name, arg)
			}
			vars[k] = strings.Trim(v, `"`)
			r.env = append(r.env, k+"="+strings.Trim(v, `"`))
		case "USER":
			r.user = arg
		case "WORKDIR":
			r.workdir = arg
		case "CMD":
			if err := json.Unmarshal([]byte(arg), &r.cmd); err != nil {
				return r, fmt.Errorf("%s/Dockerfile: CMD must be the JSON form: %w", im.Name, err)
			}
		default:
			return r, fmt.Errorf("%s/Dockerfile: %s is not supported by the offline OCI build", im.Name, op)
		}
	}
	return r, nil
}

// blob is one content-addressed file of the layout.
type blob struct {
	mediaType string
	digest    string // sha256:<hex>
	size      int64
	data      []byte // or
	file      string
}

func bytesBlob(mediaType string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{mediaType: mediaType, digest: "sha256:" + hex.EncodeToString(sum[:]), size: int64(len(data)), data: data}
}

func fileBlob(mediaType, file string) (blob, error) {
	f, err := os.Open(file)
	if err != nil {
		return blob{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return blob{}, err
	}
	return blob{mediaType: mediaType, digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), size: n, file: file}, nil
}

func (b blob) descriptor() map[string]any {
	return map[string]any{"mediaType": b.mediaType, "digest": b.digest, "size": b.size}
}

const (
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
)

// WriteOCI writes im, built on the base root filesystem in the tar file
// baseRootfs, as an OCI image layout in a tar to w; containerd's import
// names it im.Tag(). The image holds the same files and configuration as
// the Docker build of the same Dockerfile on the offline base.
func WriteOCI(w io.Writer, im Image, b Base, baseRootfs string) error {
	r, err := parseRecipe(im)
	if err != nil {
		return err
	}
	base, err := fileBlob(mediaLayer, baseRootfs)
	if err != nil {
		return fmt.Errorf("the base root filesystem: %w", err)
	}
	layer, err := recipeLayer(im, r)
	if err != nil {
		return err
	}
	if err := checkOCILayers(baseRootfs, layer); err != nil {
		return err
	}
	tag := im.Tag()
	labels := map[string]string{labelPrefix + "inputs": strings.TrimPrefix(tag, Repository), labelPrefix + "base": b.Tag()}
	for k, v := range r.labels {
		labels[k] = v
	}
	env := append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, r.env...)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config": map[string]any{
			"User": r.user, "WorkingDir": r.workdir, "Cmd": r.cmd, "Env": env, "Labels": labels,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{base.digest, layer.digest}},
	})
	if err != nil {
		return err
	}
	cfg := bytesBlob(mediaConfig, config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        cfg.descriptor(),
		"layers":        []any{base.descriptor(), layer.descriptor()},
	})
	if err != nil {
		return err
	}
	man := bytesBlob(mediaManifest, manifest)
	mdesc := man.descriptor()
	mdesc["annotations"] = map[string]string{
		"io.containerd.image.name":          tag,
		"org.opencontainers.image.ref.name": tag[strings.LastIndexByte(tag, ':')+1:],
	}
	mdesc["platform"] = map[string]string{"architecture": runtime.GOARCH, "os": "linux"}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{mdesc}})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	for _, bl := range []blob{base, layer, cfg, man} {
		name := "blobs/sha256/" + strings.TrimPrefix(bl.digest, "sha256:")
		if bl.file == "" {
			if err := put(name, bl.data); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: bl.size, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		f, err := os.Open(bl.file)
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := put("index.json", index); err != nil {
		return err
	}
	return tw.Close()
}

// checkOCILayers checks the root filesystem the base file and the
// recipe's layer make (CheckRootfs), before anything is written.
func checkOCILayers(baseRootfs string, layer blob) error {
	f, err := os.Open(baseRootfs)
	if err != nil {
		return fmt.Errorf("the base root filesystem: %w", err)
	}
	defer f.Close()
	if err := CheckRootfs(f, bytes.NewReader(layer.data)); err != nil {
		return fmt.Errorf("the base root filesystem %s: %w", baseRootfs, err)
	}
	return nil
}

// recipeLayer is the layer the recipe adds: its copied files, with their
// parent directories, owned by root.
func recipeLayer(im Image, r recipe) (blob, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	var dirs []string
	for _, c := range r.copies {
		for d := path.Dir(strings.TrimPrefix(c[1], "/")); d != "." && d != "/"; d = path.Dir(d) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	slices.Sort(dirs) // parents first
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: epoch}); err != nil {
			return blob{}, err
		}
	}
	for _, c := range r.copies {
		data, err := inputs.ReadFile(path.Join(im.Name, c[0]))
		if err != nil {
			return blob{}, fmt.Errorf("%s/Dockerfile: COPY %s: %w", im.Name, c[0], err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(c[1], "/"), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: epoch}); err != nil {
			return blob{}, err
		}
		if _, err := tw.Write(data); err != nil {
			return blob{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return blob{}, err
	}
	return bytesBlob(mediaLayer, buf.Bytes()), nil
}
