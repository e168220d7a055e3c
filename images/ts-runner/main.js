#!/usr/bin/env node
// dsh-ts-runner: runs one type-stripped TypeScript program inside a
// throwaway container and bridges its tool calls to the host. This is its
// entry point; the runner is four CommonJS modules, installed together
// (backend/container/runner.TypeScriptDir):
//
//   protocol.js  the wire protocol: identity, the strict frame decoder
//   values.js    the program's values as text and frames, tool arguments
//   runner.js    the run: namespaces, calls, output capture, stack traces
//   main.js      connecting to the host and handing frames to the run
//
// Contract (wire protocol version 1, see portproto/portproto.go; the
// command, paths and user are backend/container/runner's):
//
//   node /opt/dsh/ts-runner/main.js [/run/dsh/bridge.sock]
//
//   1. Connect once to the host over `ws+unix:<sock>:/v1`. On failure: one
//      line on stderr, exit 70.
//   2. Send {"type":"hello","version":1,"language":"typescript",
//      "runner":"dsh-ts-runner/1"} and wait (possibly a long time: warm pool)
//      for the host's "run" frame.
//   3. Every frame from the host is validated with the same rules as
//      portproto.Decode(HostToRunner, ...): only "run" (once, first) and then
//      "result" frames, exact field names, no unknown fields, Go types, ids in
//      1..2^53-1, a result for a call that is in flight. Any violation: one
//      line on stderr, exit 71.
//   4. `program` is JavaScript that evaluates (as a script named program.ts)
//      to an async function; it is called with no arguments. Before that,
//      each binding namespace becomes a null-prototype global of async
//      functions (so `__proto__`, `constructor`, `toString` are ordinary
//      tools) and `console`, process.stdout.write and process.stderr.write
//      are captured as "log" frames. (Namespaces are installed last: one
//      named like an existing global replaces it.)
//   5. A binding call sends {"type":"call","id":n,"global","name","args"}
//      (ids 1, 2, 3...) and settles when the matching "result" arrives, in
//      any order. A failed result rejects with Error(message) whose
//      `.toolName` is the tool's name. The argument must follow the
//      tool-argument rule (see "Tool arguments" below): a value that breaks
//      it rejects the call with TypeError `tools["name"]: <path>: <reason>`
//      and sends nothing.
//   6. The last frame is "done": the completion value (JSON when it is a
//      JSON value nested at most 512 deep, else its util.inspect rendering),
//      or the error {name, message, stack} of a thrown error, an uncaught
//      exception or an unhandled rejection. A thrown non-Error has name
//      "Uncaught" and its util.inspect rendering as message. A program that
//      ends its process before returning — process.exit(n) (Node's own check
//      of the code applies: a bad one throws in the program),
//      process.reallyExit(n), process.abort(), from any callback — has not
//      completed, whatever the status, 0 included: the done frame is an exit,
//      {"ok":false,"exit":{"status":s},"error":{"name":"Exit","message":how,
//      "stack"}}, where s is the status the process would have exited with
//      (the code's low byte: process.exit(256) is 0; process.exitCode when
//      exit() has none; 134 for abort) and how names the call as the program
//      made it ("process.exit(0)", "process.exit() with process.exitCode 4",
//      "process.reallyExit(3)", "process.abort()"). Then the socket is closed
//      and the process exits 0. If the host goes away before that: exit 0
//      quietly.
//
// Stack traces show only program.ts frames; when the run frame carries a
// source map (v3, its "program.ts" lines are the model's own lines) their
// positions are mapped back to the original source. This applies to every
// error.stack, including the ones the program logs itself. The program may
// set its own Error.prepareStackTrace (it is called as usual); setting it to
// anything but a function restores the runner's, and the done frame keeps
// only program.ts frames whatever formatted the stack.
//
// The program's objects never break the runner: what the runner reads of a
// program's value, thrown value or logged value (name, message, stack,
// toJSON-free JSON walk, util.inspect) goes through getters, proxy traps
// and conversions inside try/catch, and whatever throws is replaced by a
// fallback text naming what it threw ("[message unavailable: Error: no]",
// "[uninspectable object: Error: no]"); a custom inspector that throws is
// retried without it. The runner's own frames and calls use builtins
// captured before the program ran, so a program that replaces
// JSON.stringify, Object.prototype.toJSON, String.prototype methods,
// Promise.prototype.then, console, process.exit or process.reallyExit
// changes only what it does itself.
//
// Caps: the host enforces all limits; the runner only avoids sending what
// the host would drop. A log entry's text is cut so its frame fits
// maxFrameBytes. Each entry costs its text's bytes plus 64
// (LOG_ENTRY_OVERHEAD, what the host charges per entry, so empty entries
// count), and once that total exceeds maxLogBytes, or more than 10,000
// entries (MAX_LOG_ENTRIES) were sent, nothing more is logged (the entry
// that crosses either cap is sent, so the host sees the overflow). The done
// value, as encoded in the frame, is at most maxValueBytes bytes: a longer
// one becomes a JSON string holding the longest prefix of its text (its
// JSON text, or its inspect rendering), cut on a character boundary, whose
// encoding fits, with "truncated":true. (The host re-wraps any value longer
// than maxValueBytes as a string, so a prefix of exactly maxValueBytes bytes
// would arrive double-encoded.) The JSON text is produced only up to the
// cap: what follows the cut is not examined, so a value that is JSON up to
// the cap is sent as a truncated JSON prefix. A frame that would still
// exceed maxFrameBytes is cut further.
//
// Not captured: writes that bypass process.stdout/stderr (fs.writeSync(1)).
// A program that kills its own process (process.kill(process.pid, "SIGKILL"))
// ends the container without a done frame: the host reports an exit with the
// container's status. The runner runs the untrusted program in its own
// process: the container is the security boundary, the runner only aims at
// correct, robust behaviour (the host-frame decoder and the `ws` library use
// the realm's builtins as they are: a program that rewrites those breaks
// its own run). It uses nothing but the Node standard library and `ws`,
// writes nothing to disk and opens no network connection.

'use strict';

// Every module loads now, before the program runs: each captures the
// builtins it relies on as it loads.
const { VERSION, LANGUAGE, RUNNER } = require('./protocol.js');
const { Runner, diag, realExit, EXIT_CONNECT } = require('./runner.js');

// The contract's socket (backend/container/runner.BridgeSocket), used when
// no socket is given.
const DEFAULT_SOCKET = '/run/dsh/bridge.sock';

function main(argv) {
  const sock = argv[2] || DEFAULT_SOCKET;
  // The program's environment is exactly the host's fixed set (PATH, HOME,
  // LANG); Docker always adds HOSTNAME, so drop it.
  delete process.env.HOSTNAME;
  require('./prewarm.js').prewarm(); // at pool time, not per run
  let WebSocket;
  let ws;
  try {
    WebSocket = require('ws');
    ws = new WebSocket(`ws+unix:${sock}:/v1`, {
      perMessageDeflate: false,
      maxPayload: 0, // no limit here: the host enforces its own
      skipUTF8Validation: true, // validated by decodeFrame, so a bad frame is a protocol violation (71)
    });
  } catch (err) {
    diag(`cannot connect to ${sock}: ${err && err.message}`);
    realExit(EXIT_CONNECT);
  }
  let opened = false;
  const runner = new Runner(ws);
  ws.on('open', () => {
    opened = true;
    ws.send(JSON.stringify({ type: 'hello', version: VERSION, language: LANGUAGE, runner: RUNNER }));
  });
  ws.on('message', (data, isBinary) => runner.onMessage(data, isBinary));
  ws.on('error', (err) => {
    if (!opened) {
      diag(`cannot connect to ${sock}: ${err && err.message}`);
      realExit(EXIT_CONNECT);
    }
    // ws reports framing violations with WS_ERR_* codes; anything else is
    // the transport going away, which the close handler treats as such.
    if (runner.phase !== 'done' && err && typeof err.code === 'string' && err.code.startsWith('WS_ERR_')) {
      runner.fail(err.message);
    }
  });
  ws.on('close', () => {
    if (!opened) {
      diag(`cannot connect to ${sock}: connection closed`);
      realExit(EXIT_CONNECT);
    }
    realExit(0);
  });
}

if (require.main === module) main(process.argv);
