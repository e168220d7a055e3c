package containerd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	runcoptions "github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/containers"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
)

// Shims.
const (
	runcShim  = "io.containerd.runc.v2"
	runscShim = "io.containerd.runsc.v1"
)

// RunscArgs are the flags gVisor needs here: the bridge is a host Unix
// socket (--host-uds=open), the sandbox has no network (--network=none),
// and the container's seccomp profile applies inside the sandbox
// (--oci-seccomp; without it runsc ignores the profile, and the runtime
// gives gVisor the profile seccomp.ForGVisor adapts).
var RunscArgs = []string{"--host-uds=open", "--network=none", "--oci-seccomp"}

// ociRuntime is one way to run a container: a shim and its options.
type ociRuntime struct {
	// name is what Spec.OCIRuntime says: runc, crun or runsc.
	name string
	shim string
	// binary is the OCI runtime the shim runs ("" for the shim's own).
	binary string
	// args are the flags the runtime is given (runsc's, through its
	// wrapper).
	args    []string
	options typeurl.Any
}

var lookPath = exec.LookPath

// detectRuntimes finds the OCI runtimes installed on this host: runc
// (the runc v2 shim's default), crun as the runc v2 shim's binary, and
// runsc, through gVisor's own shim when it is installed with a
// configuration carrying RunscArgs, else through the runc v2 shim with a
// wrapper that adds RunscArgs (Debian ships runsc without its shim). The
// host running the driver is the host running containerd: the shims run
// beside it.
func detectRuntimes(stateDir string, log *slog.Logger) map[string]ociRuntime {
	out := map[string]ociRuntime{}
	if _, err := lookPath("runc"); err == nil {
		out["runc"] = ociRuntime{name: "runc", shim: runcShim}
	}
	if p, err := lookPath("crun"); err == nil {
		out["crun"] = runcWith("crun", p, nil)
	}
	if p, err := lookPath("runsc"); err == nil {
		if _, err := lookPath("containerd-shim-runsc-v1"); err == nil && runscConfigured(runscConfig) {
			out["runsc"] = ociRuntime{name: "runsc", shim: runscShim, args: RunscArgs}
		} else if w, err := runscWrapper(stateDir, p); err == nil {
			out["runsc"] = runcWith("runsc", w, RunscArgs)
		} else {
			log.Warn("runsc is installed but its wrapper could not be written; --runtime runsc is unavailable", "err", err)
		}
	}
	return out
}

// runscConfig is where gVisor's shim reads runsc's flags from.
const runscConfig = "/etc/containerd/runsc.toml"

// runscConfigured reports that gVisor's shim configuration sets RunscArgs.
func runscConfigured(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	s := strings.ReplaceAll(string(data), " ", "")
	return strings.Contains(s, `host-uds="open"`) && strings.Contains(s, `network="none"`) &&
		(strings.Contains(s, `oci-seccomp="true"`) || strings.Contains(s, `oci-seccomp=true`))
}

func runcWith(name, binary string, args []string) ociRuntime {
	opts, err := typeurl.MarshalAny(&runcoptions.Options{BinaryName: binary})
	if err != nil {
		// Cannot happen: the type is registered by its package.
		panic(fmt.Sprintf("containerd: encoding runc options: %v", err))
	}
	return ociRuntime{name: name, shim: runcShim, binary: binary, args: args, options: opts}
}

// runscWrapper writes (once) an executable that runs runsc with RunscArgs:
// the runc v2 shim takes a binary name, not arguments.
func runscWrapper(stateDir, runsc string) (string, error) {
	path := filepath.Join(stateDir, "runsc")
	script := fmt.Sprintf("#!/bin/sh\n# Written by dsh-container: runsc with the flags its sandboxes need.\nexec %s %s \"$@\"\n", runsc, strings.Join(RunscArgs, " "))
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, []byte(script)) {
		return path, nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, nil
}

// containerRuntime is the runtime a container record names.
func containerRuntime(rt ociRuntime) containers.RuntimeInfo {
	return containers.RuntimeInfo{Name: rt.shim, Options: rt.options}
}

func runtimeNames(m map[string]ociRuntime) []string {
	return slices.Sorted(maps.Keys(m))
}

// runtimeFor resolves Spec.OCIRuntime ("" is runc). A runtime this host
// does not have fails closed.
func (d *Driver) runtimeFor(name string) (ociRuntime, error) {
	if name == "" {
		name = "runc"
	}
	if rt, ok := d.runtimes[name]; ok {
		return rt, nil
	}
	hint := map[string]string{
		"runc":  "install runc (`apt-get install runc`)",
		"crun":  "install crun (`apt-get install crun`)",
		"runsc": "install gVisor's runsc (`apt-get install runsc`)",
	}[name]
	if hint == "" {
		hint = "the containerd driver runs runc, crun and runsc"
	}
	have := strings.Join(runtimeNames(d.runtimes), ", ")
	if have == "" {
		have = "none"
	}
	return ociRuntime{}, fmt.Errorf("%w: OCI runtime %q is not installed on this host (have: %s); %s", errdefs.ErrNotImplemented, name, have, hint)
}

// shimError names a shim or runtime binary containerd could not run:
// fail closed, with the fix. (A command missing from the image is not
// one: it passes through.)
func (d *Driver) shimError(rt ociRuntime, err error) error {
	msg := err.Error()
	missing := strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory")
	shimBinary := "containerd-shim-" + strings.ReplaceAll(strings.TrimPrefix(rt.shim, "io.containerd."), ".", "-")
	what := ""
	switch {
	case !missing:
	case strings.Contains(msg, shimBinary):
		what = "the shim " + shimBinary
	case rt.binary != "" && strings.Contains(msg, rt.binary):
		what = rt.binary
	}
	if what != "" {
		return fmt.Errorf("%w: containerd cannot run %s for OCI runtime %s (%v); install it where containerd runs", errdefs.ErrNotImplemented, what, rt.name, err)
	}
	return d.translate(err)
}

// nodeRuntimes are the runtimes Options.NodeRuntimes names, as the shims
// on containerd's host find them: runc (the runc v2 shim's default), crun
// (its binary by name), runsc (through the wrapper in stateDir, which runs
// the runsc on that host's PATH with RunscArgs).
func nodeRuntimes(stateDir string, names []string) (map[string]ociRuntime, error) {
	out := map[string]ociRuntime{}
	for _, n := range names {
		switch n {
		case "runc":
			out[n] = ociRuntime{name: n, shim: runcShim}
		case "crun":
			out[n] = runcWith(n, "crun", nil)
		case "runsc":
			w, err := runscWrapper(stateDir, "runsc")
			if err != nil {
				return nil, fmt.Errorf("the runsc wrapper: %w", err)
			}
			out[n] = runcWith(n, w, RunscArgs)
		default:
			return nil, fmt.Errorf("%w: node runtime %q: the containerd driver runs runc, crun and runsc", errdefs.ErrInvalidArgument, n)
		}
	}
	return out, nil
}

// copyInit copies the static init into stateDir (once; again when it
// changed) and returns the copy's path.
func copyInit(stateDir, src string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("the static init %s: %w", src, err)
	}
	path := filepath.Join(stateDir, "init")
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return path, nil
	}
	// A temporary file of its own: drivers of several processes share
	// the state directory.
	f, err := os.CreateTemp(stateDir, "init-*.tmp")
	if err != nil {
		return "", fmt.Errorf("copying the static init into %s: %w", stateDir, err)
	}
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(0o755), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("copying the static init into %s: %w", stateDir, err)
	}
	return path, nil
}
