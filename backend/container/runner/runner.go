package runner

import "strconv"

// Identity and places inside every runner container.
const (
	// UID and GID are the fixed non-root identity programs run as.
	UID = 65532
	GID = 65532
	// User is UID:GID, as engines and USER take it.
	User = "65532:65532"
	// WorkDir is the working directory: the tmpfs, the only writable place.
	WorkDir = "/tmp"

	// BridgeDir is where a Unix-socket bridge endpoint's directory is
	// mounted, read-only.
	BridgeDir = "/run/dsh"
	// SocketName is the socket's file name in that directory.
	SocketName = "bridge.sock"
	// BridgeSocket is the socket's path inside the container; a runner
	// started without one uses it.
	BridgeSocket = BridgeDir + "/" + SocketName
)

// Where the runners are installed in their images.
const (
	// InstallDir holds all of the runners' code.
	InstallDir = "/opt/dsh"

	// TypeScriptDir holds the TypeScript runner's modules (protocol.js,
	// values.js, runner.js, main.js); TypeScriptMain is its entry point.
	TypeScriptDir  = InstallDir + "/ts-runner"
	TypeScriptMain = TypeScriptDir + "/main.js"

	// PythonPackage is the Python runner's package, installed in
	// PythonDir: Debian's system site directory, which `python3 -I` (no
	// user site, no PYTHONPATH, no script directory) still searches.
	PythonPackage = "dsh_runner"
	PythonDir     = "/usr/lib/python3/dist-packages"
)

// TypeScriptArgv is the command that starts the TypeScript runner on the
// bridge socket socket, with V8's old-space heap limited to heapMiB MiB
// (0: Node's default).
func TypeScriptArgv(socket string, heapMiB int64) []string {
	argv := []string{"node", "--disable-warning=ExperimentalWarning"}
	if heapMiB > 0 {
		argv = append(argv, "--max-old-space-size="+strconv.FormatInt(heapMiB, 10))
	}
	return append(argv, TypeScriptMain, socket)
}

// PythonArgv is the command that starts the Python runner on the bridge
// socket socket.
func PythonArgv(socket string) []string {
	return []string{"python3", "-I", "-m", PythonPackage, socket}
}
