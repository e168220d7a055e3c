// Package manifest reads tool manifests — the MCP tool shape plus a
// command — and runs command tools.
//
// # Format
//
// A manifest is a JSON object with a "tools" array:
//
//	{"tools": [{
//	  "name": "search",
//	  "description": "Search the docs",
//	  "inputSchema": {"type": "object"},
//	  "command": ["/bin/sh", "./search.sh"],
//	  "timeoutMs": 30000,
//	  "maxOutputBytes": 1048576
//	}]}
//
// Unknown fields are errors. For SDK rendering a bare JSON array of tools
// or a single tool object is accepted too, and "command" may be absent.
// Command elements that start with "./" are resolved against the
// manifest's folder, so a manifest and its scripts travel together.
//
//   - timeoutMs (optional): the wall time of one call in milliseconds.
//     Default 30000 (30 s), at most 600000 (10 min); 0 and negative values
//     are errors (there is no way to turn the timeout off). A call that
//     runs out of time is rejected with `tool "NAME" timed out after 30s`.
//   - maxOutputBytes (optional): how much of the tool's stdout a call
//     returns. Default 1048576 (1 MiB), at most 16777216 (16 MiB).
//
// # Command tools
//
// A command tool runs its argv directly (no shell) with the call's JSON
// arguments on stdin and the host process's environment. Its stdout is
// the result text; a non-zero exit rejects the call with its stderr as the
// message (or "tool "NAME" exited with status N" when stderr is empty).
// Invalid UTF-8 in either becomes U+FFFD.
//
// Tools are host programs the operator configured: trusted code. The
// program that calls them is not. It may call a tool as often as it likes
// with arguments of its choosing, so every call is bounded:
//
//   - Output. A result keeps the first maxOutputBytes of stdout (cut back
//     to a whole UTF-8 character) followed by a newline and one marker line,
//     "[dsh-container: output truncated: the tool printed N bytes, the cap
//     is M]", N counting everything the tool printed. A rejection message
//     keeps the first 16 KiB of stderr (MaxMessageBytes) followed by
//     "… (N more bytes cut)". Past a cap the host keeps reading, so the tool
//     never blocks on a full pipe, but discards what it reads: one call
//     holds at most maxOutputBytes + 16 KiB of output.
//   - Time and processes. Each call runs in a new process group. When the
//     call ends — normally, at timeoutMs, or when its context is cancelled
//     — the whole group is sent SIGKILL, so nothing the tool started in its
//     group outlives the call: a background child (`sleep 1000 &`, a daemon
//     that keeps stdout open) neither stalls the call nor survives it. The
//     tool's own process also gets SIGKILL if the host process dies
//     (Linux parent-death signal).
//
// Not covered: a process that leaves the tool's process group (setsid,
// setpgid, a double fork through a daemon manager) escapes the group kill
// and keeps running. If it holds the tool's stdout or stderr open, the call
// gives up on it 2 s after the tool exits and is rejected; the process
// itself is not killed. The parent-death signal reaches only the tool's
// own process, not its children, when the host crashes. Confining tools
// completely (a cgroup per call, a container) is the operator's choice of
// command. Command tools run only on Linux.
package manifest
