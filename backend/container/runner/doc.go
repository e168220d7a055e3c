// Package runner is the contract between the container runtime and the
// runner images: who a program runs as, where, where the runner's code is
// installed in the image, where it finds the host's bridge, and the command
// that starts it. It is the one place these values live.
//
// The runtime builds each container's command with TypeScriptArgv or
// PythonArgv, runs it as User in WorkDir, and mounts the bridge endpoint's
// directory at BridgeDir. The image build (package images) passes the same
// values to the runner Dockerfiles as build arguments — the COPY
// destinations, USER and WORKDIR — and hashes them into the image tag, so a
// contract change makes new images rather than stale ones that look
// current. The Dockerfiles' ARG defaults and exec-form CMD (which a builder
// cannot substitute) repeat the values for a plain `docker build`; a test
// in package images holds them, and the runners' default socket, to this
// package.
//
// The TypeScript runner is four CommonJS modules in TypeScriptDir (under
// InstallDir), started as `node TypeScriptMain <socket>`. The Python runner
// is the package PythonPackage in PythonDir, Debian's system site
// directory, started as `python3 -I -m dsh_runner <socket>`: -I ignores
// PYTHON* variables, the user site and the current directory, but still
// searches the system site directory. Both are read-only like the rest of
// the root.
//
// The package uses nothing but the standard library, so the runtime, the
// image build, the CLI and the tests can all share it.
package runner
