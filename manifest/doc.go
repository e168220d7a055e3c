// Package manifest reads tool manifests — the MCP tool shape plus a
// command — runs command tools, and connects to MCP servers whose tools
// become tools here.
//
// # Format
//
// A manifest is a JSON object with a "tools" array, an "mcpServers"
// object, or both:
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
// # MCP servers
//
// "mcpServers" has the shape agent configurations use:
//
//	{"mcpServers": {
//	  "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], "env": {"DEBUG": "1"}},
//	  "github": {"url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}, "timeoutMs": 60000}
//	}}
//
// A server with "command" speaks MCP over stdio; one with "url" over
// streamable HTTP. "type" ("stdio" or "http") may say so explicitly; the
// deprecated HTTP+SSE transport is refused. ${VAR} and ${VAR:-default} in
// command, args, env values, url and header values are read from the
// host's environment when the manifest is loaded (an unset variable
// without a default is an error, so a missing secret fails the start);
// "./" at the start of command or an argument is the manifest's folder.
// Unknown fields, a server with both or neither of command and url, and
// every malformed value are errors naming the server and the field.
//
// Open starts every server once, at the same time, and lists its tools;
// Close stops them. Each tool is imported as "<server>__<tool>" with its
// input schema, output schema, description and annotations. Two tools
// that map to one name (server "a" tool "b__c" and server "a__b" tool
// "c", or a command tool) fail Open naming both; nothing is dropped. A
// server that cannot start fails Open naming it, with its exit status and
// the end of its stderr.
//
// A call goes to the server with the program's arguments, within the
// server's timeoutMs (default 30000, at most 600000). The result's text
// content is the result text, its structuredContent the structured value
// (a tool with an output schema resolves to it in programs), images,
// audio and resources typed blocks that programs see as placeholders; an
// isError result or a JSON-RPC error from the server (arguments its schema
// rejects, an unknown tool) rejects the call with the server's message,
// and the connection stays. When the server crashes or the connection
// fails, the call in flight is rejected naming the server (with its exit
// status and the end of its stderr) and the next call connects again;
// attempts are at least a second apart, and after a failed one calls fail
// at once with its error until the next attempt is due (backing off to 30
// s). When a server says its tools changed, they are listed again and
// Subscribe's callbacks run; a new list that would collide with another
// tool is refused and logged, the previous one stays. A relisting waits at
// least a second after the last, until the callbacks of the last change
// have returned, and then three times as long as that work (the listing
// and the callbacks) took: a server whose list changes all the time costs
// at most about a quarter of a core. A tool listed again byte for byte is
// the same tool (its JSON is compared by size and hash, not imported
// again), and a changed tool keeps the description or schemas that did
// not change, so a list is held once however often it is listed; after a
// large change the garbage collector runs once the callbacks are done.
//
// A stdio server runs with the host's environment plus "env" under an
// init of ours (this executable re-executed): process 1 of a new PID
// namespace (with a user namespace when the host is not root) with the
// parent-death signal, which starts the server in a process group of its
// own, forwards SIGTERM, SIGINT and SIGHUP to that group, reaps orphans
// and reports how the server ended. When the server exits, the init exits
// and the kernel kills everything left in the namespace, whatever group
// or session it moved to; when this process dies, even by SIGKILL, the
// init gets SIGKILL and the same follows. Where the kernel refuses the
// namespaces (user namespaces switched off), the init is a child
// subreaper instead, logged as a warning: orphans below it are still its
// children, and it kills them all when the server exits or its control
// socket closes (this process died) — unless it is killed itself.
// Stopping a server closes its input, then sends SIGTERM, then kills the
// tree, two seconds apart. The server sees its own PID namespace: its pid
// is 2; /proc is still the host's. Its stderr goes to the log line by
// line, at most 64 KiB at once and 16 KiB a second after that (the
// dropped bytes are counted in the next record); the last 4 KiB are kept
// for error messages, which wait up to a second for the reader to reach
// the end of the stderr of a server that exited.
//
// Servers are operator-configured, but what they send is bounded like a
// hostile peer's, and measured on its bytes before anything is decoded:
//
//   - a tools/list reply at most 16 MiB (MaxServerMessageBytes), a whole
//     list at most 1000 tools, 100 pages and 16 MiB; the host keeps one
//     copy of it: each tool's description and schemas, never the reply;
//   - each schema (input, output, annotations) at most 128 levels deep,
//     100,000 JSON values, 10,000 enum values and 1,000 members of an
//     anyOf, oneOf, allOf or type array (MaxSchema*): a tool past one
//     fails the listing naming the server, the tool and the bound;
//   - every other message (a call's result, a notification) at most 4 MiB
//     (MaxServerResultBytes), 128 levels deep and 100,000 JSON values: a
//     result past one rejects its call naming the bound and the connection
//     stays, anything else past one is dropped and logged. Over stdio a
//     message is read in one pass, holding at most its bound; a stdio
//     message over 16 MiB, or one that cannot be framed, closes the
//     connection (the call in flight says why) and the next call starts
//     the server again. Over streamable HTTP each JSON body and each
//     event's data is read by the same reader and judged by the same
//     check (wireMsg.overBound) before the go-sdk decodes it: a reply
//     past a bound reaches the session as the error for its call, and
//     the connection stays. A JSON body carries one message, as the
//     go-sdk decodes it: anything but whitespace (4 KiB at most) after
//     it, or a body past 16 MiB and 64 KiB, fails the body. An event's fields are read as the
//     go-sdk reads them (values trimmed, wherever they stand in the event:
//     its id is handed on after its data is read); an event stream line
//     that is not data is at most 4 KiB. Tool lists over HTTP are read as
//     over stdio too (one reader, one parse of the reply: listCall.reply);
//   - a tool name at most 256 bytes without control characters, an error
//     message at most 16 KiB.
//
// The client advertises no capabilities, so a server cannot ask for
// roots, sampling or elicitation. HTTP requests carry the manifest's
// headers and follow redirects only on the same scheme and host. Tool
// lists are read with requests of our own beside the go-sdk session (so
// that they are never decoded into Go maps), which the go-sdk's HTTP
// parameter headers (x-mcp-header) do not see.
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
