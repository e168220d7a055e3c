// Package portproto is the wire protocol between the host and a runner
// inside a container.
//
// Transport: one websocket connection per sandbox, text frames only, one
// JSON object per frame, each with a "type" field. The runner dials the
// address the container runtime gives it in its command line: the bridge
// endpoint the driver supplied for that sandbox (container.Endpoint). For
// the Docker and containerd drivers it is a Unix socket in a private
// directory on the host, bind-mounted read-only into the container at
// /run/dsh (package runner has the path). The runner connects while its
// container starts — for a warm-pool sandbox, before any program exists —
// and says hello; the program follows in the run frame. The host accepts
// that one connection and closes every later one unread. Version 1
// exchange:
//
//	runner → host  hello  {type, version, language, runner}   first frame, on connect
//	host → runner  run    {type, version, program, sourceMap?, bindings, limits}
//	runner → host  call   {type, id, global, name, args}      any number, ids increasing
//	host → runner  result {type, id, ok, value? | message?}   one per accepted call
//	runner → host  log    {type, source, level?, text}        any number
//	runner → host  done   {type, ok, value?, valueKind?, truncated?, error?, exit?}  last frame
//
// A failed done carries the program's error; one that also carries "exit"
// ({status}) says the program ended its own process before returning
// (process.exit, sys.exit, os._exit…, at any status, 0 included): the run
// failed with kind exit, error.message saying how ("process.exit(0)",
// "SystemExit: bye", "os._exit(3)") and error.stack where. A runner that
// cannot send it (its process was killed, or exited beneath the runner)
// sends no done at all: the host reports the container's exit status.
//
// Egress streams, only in a run whose run frame carries "egress" (see
// RunEgress; egress decides each connection):
//
//	runner → host  open   {type, stream, host, port}      a CONNECT the program made; stream ids increase
//	host → runner  opened {type, stream, ok, message?}    the host connected, or refused (message)
//	both ways      data   {type, stream, data}            bytes of the stream, base64, ≥ 1 byte
//	host → runner  ack    {type, stream, bytes}           the host wrote that many of the runner's bytes upstream
//	both ways      close  {type, stream, message?}        the stream is over (either end; no half-close)
//
// The runner keeps at most RunEgress.Window bytes of a stream unacknowledged
// (it stops reading the program's socket until an ack); the host closes a
// stream that exceeds it. The host's data frames need no ack: it writes
// them with the bridge's write timeout, as it writes results.
//
// The host treats the runner as hostile: every decoder here rejects unknown
// types, unknown fields, wrong field types, out-of-range values, invalid
// UTF-8 and frames over the size limit. Of duplicate keys in a frame the
// last is kept (the session protocol refuses them). Decoding never panics. The same
// rules are written down as JSON test vectors in testdata/vectors.json,
// replayed by this package's tests and by each runner's own test.
package portproto
