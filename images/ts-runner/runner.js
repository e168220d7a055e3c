// The TS runner's run: one program, from the host's run frame to the done
// frame. Runner installs the binding namespaces (null-prototype objects of
// async functions whose calls become call frames), captures console and
// process.stdout/stderr as log frames under the caps, makes process.exit,
// process.reallyExit and process.abort end the run as an exit (a failed run,
// whatever the status), evaluates the program as program.ts and sends the
// done frame of its outcome. Stack traces show only program.ts frames,
// mapped through the run frame's source map to the model's own lines.
//
// The runner's own frames and calls use builtins captured before the
// program runs, so a program that replaces JSON.stringify,
// Object.prototype.toJSON, String.prototype methods, Promise.prototype.then,
// console or process.exit changes only what it does itself.

'use strict';

const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');
const { StringDecoder } = require('node:string_decoder');
const { RUNNER, isProtocolError, validateHostFrame } = require('./protocol.js');
const { Egress } = require('./egress.js');
const {
  PROGRAM_FILE, THROWN_CHARS, byteLength, capText, safeInspect, thrownText, textOf, errorName,
  cutForJSON, wellFormed, doneValueFrame, errorFrame, doneErrorFrame, argsJSON, argsPath,
} = require('./values.js');

// Builtins, captured when the runner loads, before the program runs (see
// the header).
const ReflectApply = Reflect.apply;
const {
  defineProperty: ReflectDefineProperty,
  getOwnPropertyDescriptor: ReflectGetOwnPropertyDescriptor,
  getPrototypeOf: ReflectGetPrototypeOf,
} = Reflect;
const uncurry = (fn) => (self, ...args) => ReflectApply(fn, self, args);
const NativeError = Error;
const NativePromise = Promise;
const NativeTypeError = TypeError;
const JSONStringify = JSON.stringify;
const StringCtor = String;
const ErrorPrototypeToString = uncurry(Error.prototype.toString);
const PromisePrototypeThen = uncurry(Promise.prototype.then);
const StringPrototypeCharCodeAt = uncurry(String.prototype.charCodeAt);
const StringPrototypeIndexOf = uncurry(String.prototype.indexOf);
const StringPrototypeSlice = uncurry(String.prototype.slice);
const StringPrototypeToLowerCase = uncurry(String.prototype.toLowerCase);
const TypedArrayPrototype = ReflectGetPrototypeOf(Uint8Array.prototype);
const typedArrayGetter = (key) => uncurry(ReflectGetOwnPropertyDescriptor(TypedArrayPrototype, key).get);
const TypedArrayPrototypeGetBuffer = typedArrayGetter('buffer');
const TypedArrayPrototypeGetByteOffset = typedArrayGetter('byteOffset');
const TypedArrayPrototypeGetByteLength = typedArrayGetter('byteLength');
const BufferFrom = Buffer.from;
const BufferIsEncoding = Buffer.isEncoding;
const BufferPrototypeToString = uncurry(Buffer.prototype.toString);
const StringDecoderPrototypeWrite = uncurry(StringDecoder.prototype.write);
const fsWriteSync = fs.writeSync;
const { isPromise, isUint8Array } = util.types;
// process.exit calls process.reallyExit as it finds it: the runner's own
// exit calls the native one directly (no 'exit' listeners of the program
// run after the done frame).
const processReallyExit = process.reallyExit;
const hrtimeBigint = process.hrtime.bigint;
const NumberCtor = Number;
const processNextTick = process.nextTick;
const setTimeoutNative = setTimeout;
// CallSite.prototype.toString, from a call site V8 hands prepareStackTrace.
const CallSiteToString = (() => {
  const saved = Error.prepareStackTrace;
  Error.prepareStackTrace = (_, callsites) => callsites;
  const callsites = new Error().stack;
  Error.prepareStackTrace = saved;
  return uncurry(ReflectGetPrototypeOf(callsites[0]).toString);
})();

/**
 * realExit ends the process whatever the program did to process.exit,
 * process.reallyExit or its 'exit' listeners.
 */
function realExit(code) {
  ReflectApply(processReallyExit, process, [code]);
}

// SIGABRT_STATUS is the status a process killed by SIGABRT leaves through
// the container's init (128+6): what process.abort() would have ended the
// container with.
const SIGABRT_STATUS = 134;

// exitStatus is the status exit(n) leaves a process: the low byte of n as a
// 32-bit integer (process.exit(256) exits 0, process.exit(-1) 255), as Node's
// reallyExit and the kernel have it.
function exitStatus(n) {
  let v;
  try {
    v = NumberCtor(n);
  } catch {
    v = 0; // a Symbol: Node's reallyExit reads it as 0 too
  }
  return (v | 0) & 0xff;
}

// argText renders an exit call's argument as the program wrote it.
function argText(v) {
  if (typeof v === 'string') return JSONStringify(v);
  if (typeof v === 'number' || v === null || v === undefined) return StringCtor(v);
  return capText(safeInspect(v), THROWN_CHARS); // process.reallyExit takes anything
}

const EXIT_CONNECT = 70;
const EXIT_PROTOCOL = 71;
// How long to wait for the host's close handshake after the done frame.
const CLOSE_GRACE_MS = 2000;

// ---------------------------------------------------------------------------
// Source maps (v3) and stack traces.

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_VALUE = new Map([...B64].map((c, i) => [c, i]));

function decodeVLQ(seg) {
  const out = [];
  let value = 0;
  let shift = 0;
  for (const c of seg) {
    const d = B64_VALUE.get(c);
    if (d === undefined) throw new Error(`source map: bad base64 digit ${JSON.stringify(c)}`);
    value += (d & 31) * 2 ** shift;
    if (d & 32) {
      shift += 5;
      if (shift > 30) throw new Error('source map: VLQ overflow');
      continue;
    }
    out.push(value % 2 === 1 ? -Math.floor(value / 2) : Math.floor(value / 2));
    value = 0;
    shift = 0;
  }
  if (shift !== 0) throw new Error('source map: truncated VLQ');
  return out;
}

/**
 * parseSourceMap decodes a v3 source map into, per generated line (0-based),
 * segments [generatedColumn, sourceIndex, sourceLine, sourceColumn] sorted
 * by column (0-based; sourceIndex -1 marks an unmapped range). Throws on a
 * malformed map.
 */
function parseSourceMap(json) {
  const map = JSON.parse(json);
  if (map === null || typeof map !== 'object' || map.version !== 3 || typeof map.mappings !== 'string') {
    throw new Error('source map: not a v3 source map with mappings');
  }
  const lines = [];
  let src = 0;
  let line = 0;
  let col = 0;
  for (const lineText of map.mappings.split(';')) {
    const segs = [];
    let gen = 0;
    for (const segText of lineText.split(',')) {
      if (segText === '') continue;
      const f = decodeVLQ(segText);
      if (f.length === 0) continue;
      gen += f[0];
      if (f.length >= 4) {
        src += f[1];
        line += f[2];
        col += f[3];
        segs.push([gen, src, line, col]);
      } else {
        segs.push([gen, -1, 0, 0]);
      }
    }
    segs.sort((a, b) => a[0] - b[0]);
    lines.push(segs);
  }
  return lines;
}

/**
 * mapPosition maps a 1-based generated line:column through decoded
 * mappings to the 1-based original position, or null when no segment
 * covers it.
 */
function mapPosition(lines, line, column) {
  const segs = lines[line - 1];
  if (!segs || segs.length === 0) return null;
  let lo = 0;
  let hi = segs.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (segs[mid][0] <= column - 1) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (found < 0 || segs[found][1] < 0) return null;
  return { line: segs[found][2] + 1, column: segs[found][3] + 1 };
}

let sourceMapLines = null; // decoded mappings of the running program, if any

const isDigit = (s, i) => {
  const c = StringPrototypeCharCodeAt(s, i);
  return c >= 0x30 && c <= 0x39;
};

// rewritePositions maps each "program.ts:LINE:COLUMN" of a stack frame line
// through the source map.
function rewritePositions(frame) {
  if (!sourceMapLines) return frame;
  const mark = `${PROGRAM_FILE}:`;
  let out = '';
  let from = 0;
  for (;;) {
    const at = StringPrototypeIndexOf(frame, mark, from);
    if (at < 0) return out + StringPrototypeSlice(frame, from);
    const l = at + mark.length;
    let j = l;
    while (isDigit(frame, j)) j++;
    const c = j + 1;
    let k = c;
    while (isDigit(frame, k)) k++;
    if (j === l || StringPrototypeCharCodeAt(frame, j) !== 0x3a || k === c) {
      out += StringPrototypeSlice(frame, from, l);
      from = l;
      continue;
    }
    const p = mapPosition(sourceMapLines, +StringPrototypeSlice(frame, l, j), +StringPrototypeSlice(frame, c, k));
    out += StringPrototypeSlice(frame, from, at) + (p ? `${PROGRAM_FILE}:${p.line}:${p.column}` : PROGRAM_FILE);
    from = k;
  }
}

// errorHeader is the first line of a stack: Error.prototype.toString, or,
// when the error's name or message getter throws, the same built from what
// can be read.
function errorHeader(error) {
  try {
    const h = ErrorPrototypeToString(error);
    if (typeof h === 'string') return h;
  } catch {
    // below
  }
  const name = errorName(error);
  const message = textOf(error, 'message');
  return message === undefined || message === '' ? name : `${name}: ${message}`;
}

// The runner's Error.prepareStackTrace: V8's format, keeping only the
// program's frames, with positions mapped to the original source.
function prepareStackTrace(error, callsites) {
  let out = errorHeader(error);
  const n = callsites.length;
  for (let i = 0; i < n; i++) {
    let frame;
    try {
      frame = CallSiteToString(callsites[i]);
    } catch {
      continue;
    }
    if (StringPrototypeIndexOf(frame, PROGRAM_FILE) >= 0) out += `\n    at ${rewritePositions(frame)}`;
  }
  return out;
}

// installPrepareStackTrace makes Error.prepareStackTrace an accessor the
// program cannot remove: a function it sets is used (Node calls whatever
// the getter returns), anything else (undefined included) gives the
// runner's formatter back, so stacks never fall back to Node's default
// format with the runner's own frames.
function installPrepareStackTrace() {
  let custom;
  ReflectDefineProperty(NativeError, 'prepareStackTrace', {
    __proto__: null,
    configurable: false,
    enumerable: false,
    get() {
      return typeof custom === 'function' ? custom : prepareStackTrace;
    },
    set(v) {
      custom = v;
    },
  });
}
// ---------------------------------------------------------------------------
// The runner.

const CONSOLE_LEVELS = {
  log: 'log', info: 'info', warn: 'warn', error: 'error', debug: 'debug',
  trace: 'debug', dir: 'log', dirxml: 'log', table: 'log', group: 'log', groupCollapsed: 'log',
  count: 'log', timeEnd: 'log', timeLog: 'log', assert: 'error',
};

// What the host charges each log entry on top of its text, and how many
// entries it keeps: the runner stops sending log frames the host would drop.
const LOG_ENTRY_OVERHEAD = 64;
const MAX_LOG_ENTRIES = 10000;

const isUtf8Name = (encoding) => {
  const e = StringPrototypeToLowerCase(encoding);
  return e === 'utf8' || e === 'utf-8';
};

class Runner {
  constructor(ws) {
    this.ws = ws;
    this.phase = 'await-run'; // then 'running', then 'done'
    this.limits = null;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject, error, name }
    this.logBytes = 0;
    this.logEntries = 0;
    this.logsClosed = false;
  }

  send(text) {
    this.ws.send(text, () => {});
  }

  fail(reason) {
    diag(`protocol violation: ${reason}`);
    realExit(EXIT_PROTOCOL);
  }

  onMessage(data, isBinary) {
    if (this.phase === 'done') return;
    const received = this.phase === 'await-run' ? hrtimeBigint() : 0n;
    if (isBinary) return this.fail('binary frame (the protocol uses text frames only)');
    let msg;
    try {
      msg = validateHostFrame(Array.isArray(data) ? Buffer.concat(data) : data);
    } catch (err) {
      // The decoder throws ProtocolError for a bad frame; anything else is a
      // builtin it uses that the program replaced: the program's exception,
      // not the host's fault.
      if (this.phase === 'running' && !isProtocolError(err)) return this.finish(() => doneErrorFrame(err, this.limits));
      return this.fail(err.message);
    }
    if (msg.type === 'run') {
      if (this.phase !== 'await-run') return this.fail('a second run frame');
      this.timings = { received: received, compiled: 0n };
      this.start(msg);
      return;
    }
    if (this.phase !== 'running') return this.fail('a result frame before the run frame');
    if (msg.type !== 'result') {
      if (this.egress === undefined) return this.fail(`a ${msg.type} frame in a run without egress`);
      if (msg.type === 'data' || msg.type === 'close' || msg.type === 'opened' || msg.type === 'ack') return this.egress.onFrame(msg);
      return this.fail(`a ${msg.type} frame`);
    }
    const call = this.pending.get(msg.id);
    if (!call) return this.fail(`a result for id ${msg.id}, which is not in flight`);
    this.pending.delete(msg.id);
    if (msg.ok) {
      call.resolve(msg.value);
    } else {
      const err = call.error; // created when the program made the call, so its stack shows the call site
      ReflectDefineProperty(err, 'message', { __proto__: null, value: msg.message, writable: true, configurable: true, enumerable: false });
      ReflectDefineProperty(err, 'toolName', { __proto__: null, value: call.name, writable: true, configurable: true, enumerable: true });
      call.reject(err);
    }
  }

  emitLog(source, level, text) {
    if (this.phase !== 'running' || this.logsClosed) return;
    const max = this.limits.maxFrameBytes;
    const head = level === undefined ? `{"type":"log","source":"${source}","text":` : `{"type":"log","source":"${source}","level":"${level}","text":`;
    const cut = cutForJSON(wellFormed(text, max), max - byteLength(head) - 3);
    // The host charges each entry LOG_ENTRY_OVERHEAD bytes on top of its
    // text and keeps MAX_LOG_ENTRIES entries: stop sending what it would
    // drop (the entry that crosses is sent).
    this.logEntries++;
    this.logBytes += byteLength(cut) + LOG_ENTRY_OVERHEAD;
    this.send(`${head}${JSONStringify(cut)}}`);
    if (this.logBytes > this.limits.maxLogBytes || this.logEntries > MAX_LOG_ENTRIES) this.logsClosed = true;
  }

  makeConsole() {
    let level = 'log';
    const sink = {
      write: (chunk) => {
        const s = typeof chunk === 'string' ? chunk : StringCtor(chunk);
        this.emitLog('console', level, StringPrototypeCharCodeAt(s, s.length - 1) === 0x0a ? StringPrototypeSlice(s, 0, -1) : s);
        return true;
      },
    };
    const inner = new console.Console({ stdout: sink, stderr: sink, ignoreErrors: false, colorMode: false, groupIndentation: 2 });
    const capture = {};
    const names = new Set([...Object.keys(inner), ...Object.keys(console)]);
    for (const name of names) {
      if (typeof inner[name] !== 'function') {
        capture[name] = console[name]; // console.Console, inspector-only methods
        continue;
      }
      const method = inner[name]; // bound to inner: a program that replaces capture's methods changes only its own calls
      const lvl = CONSOLE_LEVELS[name] || 'log';
      capture[name] = { [name](...args) {
        const saved = level;
        level = lvl;
        try {
          return ReflectApply(method, undefined, args);
        } finally {
          level = saved;
        }
      } }[name];
    }
    return capture;
  }

  // patchStream routes process.stdout/stderr writes (and end, which would
  // otherwise write past the capture) to log frames; the stream stays open.
  patchStream(stream, source) {
    const decoder = new StringDecoder('utf8');
    const write = (chunk, encoding, cb) => {
      if (typeof encoding === 'function') {
        cb = encoding;
        encoding = undefined;
      }
      let text;
      if (typeof chunk === 'string') {
        text = typeof encoding === 'string' && BufferIsEncoding(encoding) && !isUtf8Name(encoding)
          ? BufferPrototypeToString(BufferFrom(chunk, encoding), 'utf8')
          : chunk;
      } else if (isUint8Array(chunk)) {
        const bytes = BufferFrom(TypedArrayPrototypeGetBuffer(chunk), TypedArrayPrototypeGetByteOffset(chunk), TypedArrayPrototypeGetByteLength(chunk));
        text = StringDecoderPrototypeWrite(decoder, bytes);
      } else {
        throw new NativeTypeError(`The "chunk" argument must be of type string or an instance of Buffer or Uint8Array. Received ${capText(safeInspect(chunk), THROWN_CHARS)}`);
      }
      if (text !== '') this.emitLog(source, undefined, text);
      if (typeof cb === 'function') processNextTick(cb);
      return true;
    };
    stream.write = write;
    stream.end = (chunk, encoding, cb) => {
      if (typeof chunk === 'function') {
        cb = chunk;
        chunk = undefined;
      } else if (typeof encoding === 'function') {
        cb = encoding;
        encoding = undefined;
      }
      if (chunk !== undefined && chunk !== null) write(chunk, encoding);
      if (typeof cb === 'function') processNextTick(cb);
      return stream;
    };
  }

  makeNamespace(global, functions) {
    const ns = Object.create(null);
    for (const name of functions) {
      const runner = this;
      const fn = { async [name](args) {
        // Created here, synchronously, so a rejection's stack shows the call site.
        const error = new NativeError();
        // Awaited, not returned: returning a promise from an async function
        // would resolve it through its "then", which the program may replace.
        return await runner.call(global, name, args, error);
      } }[name];
      Object.defineProperty(ns, name, { value: fn, enumerable: true, writable: false, configurable: false });
    }
    return ns;
  }

  call(global, name, args, error) {
    const where = `${global}[${JSONStringify(name)}]`;
    const max = this.limits.maxFrameBytes;
    let argsText = 'null'; // no argument (or undefined) is null
    if (args !== undefined) {
      const r = argsJSON(args, max);
      if (r.reason !== undefined) throw new NativeTypeError(`${where}: ${argsPath(r.node)}: ${r.reason}`);
      argsText = r.text;
    }
    const id = this.nextId;
    const frame = `{"type":"call","id":${id},"global":${JSONStringify(global)},"name":${JSONStringify(name)},"args":${argsText}}`;
    if (byteLength(frame) > max) throw new NativeTypeError(`${where}: args: too large: the call frame would exceed the ${max}-byte frame limit`);
    if (this.phase !== 'running') return new NativePromise(() => {}); // settled: nothing more goes out
    this.nextId++;
    return new NativePromise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, error, name });
      this.send(frame);
    });
  }

  // exit is process.exit as the program sees it. Node's own check of the
  // code runs first (process.exitCode's setter), so a bad code throws in
  // the program; then the run ends as an exit (see exitRun) with the status
  // Node would have exited with: the code, else process.exitCode, else 0.
  exit(code) {
    if (code !== undefined) process.exitCode = code;
    const set = process.exitCode;
    const status = exitStatus(set === undefined || set === null ? 0 : set);
    let how;
    if (code !== undefined) how = `process.exit(${argText(code)})`;
    else if (set === undefined || set === null) how = 'process.exit()';
    else how = `process.exit() with process.exitCode ${argText(set)}`;
    this.exitRun(how, status);
  }

  // exitRun ends the run as an exit before the program returned, whatever
  // the status, 0 included: a failed done frame with "exit":{"status"} and
  // the error Exit whose message says how ("process.exit(0)") and whose
  // stack where. Then it throws that error to stop the program's
  // synchronous code; the done frame is already on its way and nothing more
  // goes out.
  exitRun(how, status) {
    const err = new NativeError(how);
    ReflectDefineProperty(err, 'name', { __proto__: null, value: 'Exit', writable: true, configurable: true, enumerable: false });
    this.finish(() => doneErrorFrame(err, this.limits, status));
    throw err;
  }

  start(run) {
    if (run.egress !== undefined && this.egress === undefined) {
      // Egress first: the proxy listens and the variables are set before
      // the program exists.
      this.phase = 'running';
      this.limits = run.limits;
      this.egress = new Egress((f) => this.send(JSONStringify(f)), (text) => this.emitLog('console', 'warn', text), run.egress, run.limits.maxFrameBytes);
      this.egress.listen((err) => {
        if (err) return this.finish(() => errorFrame('Error', `runner: cannot start the egress proxy: ${err && err.message}`, '', this.limits));
        this.start(run);
      });
      return;
    }
    this.phase = 'running';
    this.limits = run.limits;
    process.on('unhandledRejection', (reason) => this.finish(() => doneErrorFrame(reason, this.limits)));
    process.on('uncaughtException', (err) => this.finish(() => doneErrorFrame(err, this.limits)));
    if (run.sourceMap !== '') {
      try {
        sourceMapLines = parseSourceMap(run.sourceMap);
      } catch {
        sourceMapLines = null; // a debugging aid: run without it
      }
    }
    installPrepareStackTrace();
    let fn;
    try {
      globalThis.console = this.makeConsole();
      this.patchStream(process.stdout, 'stdout');
      this.patchStream(process.stderr, 'stderr');
      const runner = this;
      process.exit = function exit(code) {
        return runner.exit(code);
      };
      process.reallyExit = function reallyExit(code) {
        return runner.exitRun(`process.reallyExit(${argText(code)})`, exitStatus(code));
      };
      process.abort = function abort() {
        return runner.exitRun('process.abort()', SIGABRT_STATUS);
      };
      for (const b of run.bindings) globalThis[b.global] = this.makeNamespace(b.global, b.functions);
      const options = { filename: PROGRAM_FILE };
      if (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) {
        // `await import("node:fs")` works as in a module; Node flags this
        // option as experimental, a warning the program has no use for.
        options.importModuleDynamically = vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
        const emitWarning = process.emitWarning;
        process.emitWarning = function (warning, ...rest) {
          let text;
          try {
            text = typeof warning === 'string' ? warning : warning && warning.message;
          } catch {
            text = undefined; // the program's own warning object: passed on as it is
          }
          if (typeof text === 'string' && StringPrototypeIndexOf(text, 'vm.USE_MAIN_CONTEXT_DEFAULT_LOADER') >= 0) return undefined;
          return ReflectApply(emitWarning, this, [warning, ...rest]);
        };
      }
      fn = vm.runInThisContext(run.program, options);
      if (typeof fn !== 'function') throw new NativeTypeError(`the program evaluated to ${typeof fn}, not a function`);
    } catch (err) {
      return this.finish(() => doneErrorFrame(err, this.limits));
    }
    if (this.timings) this.timings.compiled = hrtimeBigint();
    let result;
    try {
      result = fn();
    } catch (err) {
      return this.finish(() => doneErrorFrame(err, this.limits));
    }
    // Promise.prototype.then as captured: the program may have replaced it.
    const settled = isPromise(result) ? result : new NativePromise((resolve) => resolve(result));
    PromisePrototypeThen(
      settled,
      (value) => this.finish(() => doneValueFrame(value, this.limits)),
      (err) => this.finish(() => doneErrorFrame(err, this.limits)),
    );
  }

  // finish sends the done frame (rendered once, by the first caller), then
  // closes the socket and exits 0 once the frame is written.
  finish(render) {
    if (this.phase !== 'running') return;
    const ended = hrtimeBigint();
    let frame;
    try {
      frame = render();
    } catch (err) {
      frame = errorFrame('Error', `runner: cannot render the outcome: ${thrownText(err)}`, '', this.limits);
    }
    frame = withTimings(frame, this.timings, ended, this.limits);
    this.phase = 'done';
    this.ws.send(frame, () => {
      this.ws.close(1000);
      setTimeoutNative(() => realExit(0), CLOSE_GRACE_MS);
    });
  }
}

// withTimings adds the runner's own phase durations to the done frame (the
// host reports where a run's time went): compile from the run frame's
// arrival to a callable program, evaluate from calling it to its outcome,
// render the outcome's frame. Left out when they would push the frame over
// its limit.
function withTimings(frame, t, ended, limits) {
  if (!t || StringPrototypeSlice(frame, 0, 15) !== '{"type":"done",') return frame;
  const us = (from, to) => (to > from ? NumberCtor((to - from) / 1000n) : 0);
  const compiled = t.compiled || ended;
  const extra = `"timings":{"compileUs":${us(t.received, compiled)},"evaluateUs":${us(compiled, ended)},"renderUs":${us(ended, hrtimeBigint())}},`;
  const max = limits && limits.maxFrameBytes;
  if (max && frame.length * 3 + extra.length > max && byteLength(frame) + extra.length > max) return frame;
  return '{"type":"done",' + extra + StringPrototypeSlice(frame, 15);
}

// diag writes one line to the real stderr (not captured, not buffered).
function diag(text) {
  try {
    fsWriteSync(2, `${RUNNER}: ${String(text).replace(/\n/g, ' ')}\n`);
  } catch {
    // nothing to do
  }
}

module.exports = {
  Runner,
  diag,
  realExit,
  EXIT_CONNECT,
  EXIT_PROTOCOL,
  decodeVLQ,
  parseSourceMap,
  mapPosition,
};
