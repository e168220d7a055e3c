package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-container/dsh-container/backend/container/runner"
)

// The offline recipe of each runner carries what the Docker build does:
// every embedded input a COPY glob matches, at the contract's paths, and
// the contract's user and working directory.
func TestParseRecipe(t *testing.T) {
	want := map[string]struct {
		dir  string
		glob string
	}{
		"ts-runner": {runner.TypeScriptDir, "ts-runner/*.js"},
		"py-runner": {runner.PythonDir + "/" + runner.PythonPackage, "py-runner/dsh_runner/*.py"},
	}
	for _, im := range Runners {
		r, err := parseRecipe(im)
		if err != nil {
			t.Fatalf("%s: %v", im.Name, err)
		}
		w := want[im.Name]
		files, err := fs.Glob(inputs, w.glob)
		if err != nil || len(files) < 2 {
			t.Fatalf("%s: inputs %v %v", im.Name, files, err)
		}
		var got, exp []string
		for _, c := range r.copies {
			got = append(got, c[0]+" -> "+c[1])
		}
		for _, f := range files {
			exp = append(exp, strings.TrimPrefix(f, im.Name+"/")+" -> "+w.dir+"/"+path.Base(f))
		}
		slices.Sort(got)
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Errorf("%s copies:\n got %v\nwant %v", im.Name, got, exp)
		}
		if r.user != runner.User || r.workdir != runner.WorkDir {
			t.Errorf("%s: user %q workdir %q", im.Name, r.user, r.workdir)
		}
		if len(r.cmd) == 0 || r.labels["dsh-container.io/image"] != im.Name {
			t.Errorf("%s: cmd %v labels %v", im.Name, r.cmd, r.labels)
		}
	}
}

// WriteOCI's layout is one an importer accepts: every blob named by its
// digest with its size, the manifest naming the config and both layers,
// the config's diff ids the layers' digests, the index naming the tag;
// and the recipe layer holds the runner's files.
func TestWriteOCI(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base.tar")
	var bb bytes.Buffer
	tw := tar.NewWriter(&bb)
	tw.WriteHeader(&tar.Header{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.Close()
	if err := os.WriteFile(base, bb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	im := Runners[0]
	var out bytes.Buffer
	if err := WriteOCI(&out, im, DefaultBase, base); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	for name, data := range files {
		if d, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != d {
				t.Errorf("blob %s has digest %x", name, sum)
			}
		}
	}
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct{ Manifests []desc }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	if got := index.Manifests[0].Annotations["io.containerd.image.name"]; got != im.Tag() {
		t.Fatalf("index names %q, want %q", got, im.Tag())
	}
	blob := func(d desc) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok || int64(len(data)) != d.Size {
			t.Fatalf("blob %s: present %v, size %d, want %d", d.Digest, ok, len(data), d.Size)
		}
		return data
	}
	var man struct {
		Config desc
		Layers []desc
	}
	if err := json.Unmarshal(blob(index.Manifests[0]), &man); err != nil || len(man.Layers) != 2 {
		t.Fatalf("manifest: %v %+v", err, man)
	}
	var cfg struct {
		Config struct {
			User       string
			WorkingDir string
			Labels     map[string]string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.RootFS.DiffIDs, []string{man.Layers[0].Digest, man.Layers[1].Digest}) {
		t.Errorf("diff ids %v, layers %v", cfg.RootFS.DiffIDs, man.Layers)
	}
	if cfg.Config.User != runner.User || cfg.Config.WorkingDir != runner.WorkDir || cfg.Config.Labels["dsh-container.io/inputs"] != strings.TrimPrefix(im.Tag(), Repository) {
		t.Errorf("config %+v", cfg.Config)
	}
	layer := tar.NewReader(bytes.NewReader(blob(man.Layers[1])))
	var names []string
	for {
		h, err := layer.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if !slices.Contains(names, strings.TrimPrefix(runner.TypeScriptMain, "/")) || !slices.Contains(names, "opt/dsh/") {
		t.Errorf("recipe layer holds %v", names)
	}
}
