#!/usr/bin/env node
// dsh-ts-runner bootstrap: runs one type-stripped TypeScript program inside a
// throwaway container and bridges its tool calls to the host.
//
// Contract (wire protocol version 1, see portproto/portproto.go):
//
//   node /opt/dsh/bootstrap.js [/run/dsh/bridge.sock]
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
//      "Uncaught" and its util.inspect rendering as message. process.exit()
//      called by the program ends the run like Python's sys.exit: code 0
//      (or none, with process.exitCode unset or 0) is a successful run
//      without a value, any other code fails it with name "Exit" and message
//      "process.exit(code)" (Node's own check of the code applies: a bad one
//      throws in the program). Then the socket is closed and the process
//      exits 0. If the host goes away before that: exit 0 quietly.
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
// Promise.prototype.then, console or process.exit changes only what it
// does itself.
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
// A program that kills its own process (process.kill, process.abort,
// process.reallyExit) ends the container without a done frame (the host
// reports the exit). The runner runs the untrusted program in its own
// process: the container is the security boundary, this file only aims at
// correct, robust behaviour (the host-frame decoder and the `ws` library use
// the realm's builtins as they are: a program that rewrites those breaks
// its own run). It uses nothing but the Node standard library and `ws`,
// writes nothing to disk and opens no network connection.

'use strict';

const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');
const { isUtf8 } = require('node:buffer');
const { StringDecoder } = require('node:string_decoder');

// ---------------------------------------------------------------------------
// Builtins, captured before the program runs (see the header): everything
// the runner does with the program's values, logs and outcome goes through
// these, never through a property the program can replace. Frames are built
// from JSON.stringify'd primitive strings (it consults toJSON only on
// objects).

const ReflectApply = Reflect.apply;
const {
  defineProperty: ReflectDefineProperty,
  get: ReflectGet,
  getOwnPropertyDescriptor: ReflectGetOwnPropertyDescriptor,
  getPrototypeOf: ReflectGetPrototypeOf,
  ownKeys: ReflectOwnKeys,
} = Reflect;
const uncurry = (fn) => (self, ...args) => ReflectApply(fn, self, args);
const ArrayIsArray = Array.isArray;
const ArrayPrototype = Array.prototype;
const BufferPrototype = Buffer.prototype;
const ErrorPrototype = Error.prototype;
const ObjectPrototype = Object.prototype;
const NativeError = Error;
const NativePromise = Promise;
const NativeTypeError = TypeError;
const JSONParse = JSON.parse;
const JSONStringify = JSON.stringify;
const NumberIsFinite = Number.isFinite;
const ObjectKeys = Object.keys;
const StringCtor = String;
const ErrorPrototypeToString = uncurry(Error.prototype.toString);
const ObjectPrototypeHasOwnProperty = uncurry(Object.prototype.hasOwnProperty);
const ObjectPrototypeIsPrototypeOf = uncurry(Object.prototype.isPrototypeOf);
const PromisePrototypeThen = uncurry(Promise.prototype.then);
const StringPrototypeCharCodeAt = uncurry(String.prototype.charCodeAt);
const StringPrototypeIndexOf = uncurry(String.prototype.indexOf);
const StringPrototypeIsWellFormed = uncurry(String.prototype.isWellFormed);
const StringPrototypeSlice = uncurry(String.prototype.slice);
const StringPrototypeToLowerCase = uncurry(String.prototype.toLowerCase);
const StringPrototypeToWellFormed = uncurry(String.prototype.toWellFormed);
const TypedArrayPrototype = ReflectGetPrototypeOf(Uint8Array.prototype);
const typedArrayGetter = (key) => uncurry(ReflectGetOwnPropertyDescriptor(TypedArrayPrototype, key).get);
const TypedArrayPrototypeGetBuffer = typedArrayGetter('buffer');
const TypedArrayPrototypeGetByteOffset = typedArrayGetter('byteOffset');
const TypedArrayPrototypeGetByteLength = typedArrayGetter('byteLength');
const TypedArrayPrototypeGetSymbolToStringTag = typedArrayGetter(Symbol.toStringTag);
const BufferByteLength = Buffer.byteLength;
const BufferFrom = Buffer.from;
const BufferIsEncoding = Buffer.isEncoding;
const BufferPrototypeToString = uncurry(Buffer.prototype.toString);
const StringDecoderPrototypeWrite = uncurry(StringDecoder.prototype.write);
const fsWriteSync = fs.writeSync;
const utilInspect = util.inspect;
const {
  isArrayBuffer, isBigIntObject, isBooleanObject, isDataView, isDate, isGeneratorObject, isMap,
  isModuleNamespaceObject, isNativeError, isNumberObject, isPromise, isRegExp, isSet, isSharedArrayBuffer,
  isStringObject, isSymbolObject, isTypedArray, isUint8Array, isWeakMap, isWeakSet,
} = util.types;
const processExit = process.exit;
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

/** realExit ends the process whatever the program did to process.exit. */
function realExit(code) {
  ReflectApply(processExit, process, [code]);
}

const VERSION = 1;
const LANGUAGE = 'typescript';
const RUNNER = 'dsh-ts-runner/1';
const DEFAULT_SOCKET = '/run/dsh/bridge.sock';
const PROGRAM_FILE = 'program.ts';
const EXIT_CONNECT = 70;
const EXIT_PROTOCOL = 71;
// How long to wait for the host's close handshake after the done frame.
const CLOSE_GRACE_MS = 2000;

// ---------------------------------------------------------------------------
// Protocol: a strict decoder equivalent to portproto.Decode.

const HOST_TO_RUNNER = 'host-to-runner';
const RUNNER_TO_HOST = 'runner-to-host';
const MAX_ID = 2 ** 53 - 1;
const MAX_NAME_BYTES = 1024;
const MAX_RUNNER_BYTES = 128;
const MIN_FRAME_BYTES = 4096;
const GLOBAL_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A protocol violation; `code` matches portproto's error codes. */
class ProtocolError extends Error {
  constructor(code, reason) {
    super(`portproto: ${code}: ${reason}`);
    this.name = 'ProtocolError';
    this.code = code;
    this.reason = reason;
  }
}

// Field specs mirror the Go structs. A missing field or a JSON null decodes
// to the Go zero value, like encoding/json; 'raw' (json.RawMessage) fields
// are "present" whenever the key is there, even with null; 'pointer'
// objects decode null to absent.
const BINDING = { global: 'string', functions: { list: 'string' } };
const LIMITS = { maxLogBytes: 'int', maxValueBytes: 'int', maxFrameBytes: 'int' };
const PROGRAM_ERROR = { name: 'string', message: 'string', stack: 'string' };
const MESSAGES = {
  hello: { dir: RUNNER_TO_HOST, fields: { type: 'string', version: 'int', language: 'string', runner: 'string' } },
  run: {
    dir: HOST_TO_RUNNER,
    fields: {
      type: 'string', version: 'int', program: 'string', sourceMap: 'string',
      bindings: { list: { object: BINDING } }, limits: { object: LIMITS },
    },
  },
  call: { dir: RUNNER_TO_HOST, fields: { type: 'string', id: 'int', global: 'string', name: 'string', args: 'raw' } },
  result: { dir: HOST_TO_RUNNER, fields: { type: 'string', id: 'int', ok: 'bool', value: 'raw', message: 'string' } },
  log: { dir: RUNNER_TO_HOST, fields: { type: 'string', source: 'string', level: 'string', text: 'string' } },
  done: {
    dir: RUNNER_TO_HOST,
    fields: { type: 'string', ok: 'bool', value: 'raw', valueKind: 'string', truncated: 'bool', error: { pointer: PROGRAM_ERROR } },
  },
};

const ProtocolErrorPrototype = ProtocolError.prototype;
const isProtocolError = (err) => {
  try {
    return ObjectPrototypeIsPrototypeOf(ProtocolErrorPrototype, err);
  } catch {
    return false;
  }
};

const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

// Raw JSON scanning. JSON.parse loses the literal form of numbers, but Go
// decodes an int field only from an integer literal ("1", not "1.0" or
// "1e0"); these helpers find the raw text of an object's members. They run
// only on text JSON.parse already accepted.
function skipWs(t, i) {
  while (i < t.length) {
    const c = t.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}

function skipString(t, i) {
  let j = i + 1;
  for (;;) {
    const c = t.charCodeAt(j);
    if (c === 0x22) return j + 1;
    j += c === 0x5c ? 2 : 1;
  }
}

function skipValue(t, i) {
  const c = t[i];
  if (c === '"') return skipString(t, i);
  if (c === '{' || c === '[') {
    let depth = 0;
    let j = i;
    for (;;) {
      const d = t[j];
      if (d === '"') {
        j = skipString(t, j);
        continue;
      }
      if (d === '{' || d === '[') depth++;
      else if (d === '}' || d === ']') {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
  }
  let j = i;
  while (j < t.length && !',}] \t\n\r'.includes(t[j])) j++;
  return j;
}

// rawMembers returns key -> raw value text of the JSON object at t[i...]
// (the last occurrence of a duplicate key wins, as in JSON.parse and Go).
function rawMembers(t) {
  const out = new Map();
  let i = skipWs(t, 0) + 1;
  for (;;) {
    i = skipWs(t, i);
    if (t[i] === '}') return out;
    const keyEnd = skipString(t, i);
    const key = JSON.parse(t.slice(i, keyEnd));
    i = skipWs(t, skipWs(t, keyEnd) + 1);
    const end = skipValue(t, i);
    out.set(key, t.slice(i, end));
    i = skipWs(t, end);
    if (t[i] === ',') i++;
  }
}

function rawElements(t) {
  const out = [];
  let i = skipWs(t, 0) + 1;
  for (;;) {
    i = skipWs(t, i);
    if (t[i] === ']') return out;
    const end = skipValue(t, i);
    out.push(t.slice(i, end));
    i = skipWs(t, end);
    if (t[i] === ',') i++;
  }
}

const describe = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function decodeValue(spec, value, raw, path) {
  const bad = (want) => new ProtocolError('bad-field', `${path}: cannot decode ${describe(value)} as ${want}`);
  if (spec === 'string') {
    if (value === null) return '';
    if (typeof value !== 'string') throw bad('string');
    return value;
  }
  if (spec === 'bool') {
    if (value === null) return false;
    if (typeof value !== 'boolean') throw bad('bool');
    return value;
  }
  if (spec === 'int') {
    if (value === null) return 0;
    if (typeof value !== 'number') throw bad('integer');
    const text = raw();
    if (!/^-?(0|[1-9][0-9]*)$/.test(text)) throw bad(`integer (literal ${truncate(text)})`);
    const big = BigInt(text);
    if (big < INT64_MIN || big > INT64_MAX) throw bad('64-bit integer');
    return value;
  }
  if (spec.list) {
    if (value === null) return [];
    if (!Array.isArray(value)) throw bad('array');
    let elems;
    const elemRaw = (i) => () => (elems ??= rawElements(raw()))[i];
    return value.map((v, i) => decodeValue(spec.list, v, elemRaw(i), `${path}[${i}]`));
  }
  const fields = spec.object || spec.pointer;
  if (value === null) return spec.pointer ? undefined : decodeObject(fields, {}, raw, path);
  if (typeof value !== 'object' || Array.isArray(value)) throw bad('object');
  return decodeObject(fields, value, raw, path);
}

// decodeObject checks obj's keys exactly (portproto checks the top-level
// keys exactly; nested objects are held to the same rule here) and decodes
// each field.
function decodeObject(fields, obj, raw, path) {
  for (const key of Object.keys(obj)) {
    if (!hasOwn(fields, key)) throw new ProtocolError('bad-field', `${path}: unknown field ${JSON.stringify(truncate(key))}`);
  }
  let members;
  const memberRaw = (key) => () => (members ??= rawMembers(raw())).get(key);
  const out = {};
  for (const [key, spec] of Object.entries(fields)) {
    if (spec === 'raw') {
      if (hasOwn(obj, key)) out[key] = obj[key];
      continue;
    }
    const v = decodeValue(spec, hasOwn(obj, key) ? obj[key] : null, memberRaw(key), path ? `${path}.${key}` : key);
    if (v !== undefined) out[key] = v;
  }
  return out;
}

function truncate(s) {
  return s.length <= 64 ? s : s.slice(0, 64) + '…';
}

function checkID(id) {
  if (!(id >= 1 && id <= MAX_ID)) throw new ProtocolError('bad-field', `id ${id} out of range 1..2^53-1`);
}

function checkName(what, s) {
  const n = Buffer.byteLength(s);
  if (n === 0 || n > MAX_NAME_BYTES) throw new ProtocolError('bad-field', `${what} must be 1..${MAX_NAME_BYTES} bytes`);
}

function validateMessage(m) {
  const bad = (reason) => new ProtocolError('bad-field', reason);
  switch (m.type) {
    case 'hello':
      if (m.version !== VERSION) throw new ProtocolError('bad-version', `runner speaks version ${m.version}, host speaks ${VERSION}`);
      if (m.language !== 'typescript' && m.language !== 'python') throw bad(`hello: unknown language ${JSON.stringify(truncate(m.language))}`);
      if (m.runner === '' || Buffer.byteLength(m.runner) > MAX_RUNNER_BYTES) throw bad(`hello: runner must be 1..${MAX_RUNNER_BYTES} bytes`);
      break;
    case 'run': {
      if (m.version !== VERSION) throw new ProtocolError('bad-version', `host speaks version ${m.version}, runner speaks ${VERSION}`);
      const globals = new Set();
      for (const b of m.bindings) {
        if (!GLOBAL_RE.test(b.global) || b.global.length > MAX_NAME_BYTES) throw bad(`run: binding global ${JSON.stringify(truncate(b.global))} is not an identifier`);
        if (globals.has(b.global)) throw bad(`run: duplicate binding global ${JSON.stringify(b.global)}`);
        globals.add(b.global);
        const names = new Set();
        for (const f of b.functions) {
          checkName('run: function', f);
          if (names.has(f)) throw bad(`run: duplicate function ${JSON.stringify(truncate(f))} in ${b.global}`);
          names.add(f);
        }
      }
      const l = m.limits;
      if (l.maxFrameBytes < MIN_FRAME_BYTES || l.maxLogBytes < 0 || l.maxValueBytes < 0) throw bad('run: limits out of range');
      break;
    }
    case 'call':
      checkID(m.id);
      if (!GLOBAL_RE.test(m.global) || m.global.length > MAX_NAME_BYTES) throw bad(`call: global ${JSON.stringify(truncate(m.global))} is not an identifier`);
      checkName('call: name', m.name);
      if (!hasOwn(m, 'args')) throw bad('call: args is required (use null for none)');
      break;
    case 'result':
      checkID(m.id);
      if (m.ok && !hasOwn(m, 'value')) throw bad('result: ok result needs a value');
      if (!m.ok && hasOwn(m, 'value')) throw bad('result: a failed result carries a message, not a value');
      break;
    case 'log':
      if (m.source === 'console') {
        if (!['log', 'info', 'warn', 'error', 'debug'].includes(m.level)) throw bad(`log: console level ${JSON.stringify(truncate(m.level))} is not one of log, info, warn, error, debug`);
      } else if (m.source === 'stdout' || m.source === 'stderr') {
        if (m.level !== '') throw bad(`log: ${m.source} entries carry no level`);
      } else {
        throw bad(`log: source ${JSON.stringify(truncate(m.source))} is not one of console, stdout, stderr`);
      }
      break;
    case 'done':
      if (m.ok) {
        if (m.error !== undefined) throw bad('done: ok done carries no error');
        if (m.valueKind === '') {
          if (hasOwn(m, 'value')) throw bad('done: value without valueKind');
        } else if (m.valueKind === 'json') {
          if (!hasOwn(m, 'value')) throw bad('done: valueKind json without value');
        } else if (m.valueKind === 'inspect') {
          if (typeof m.value !== 'string') throw bad('done: an inspect value must be a JSON string');
        } else {
          throw bad(`done: unknown valueKind ${JSON.stringify(truncate(m.valueKind))}`);
        }
      } else {
        if (m.error === undefined) throw bad('done: failed done needs an error');
        if (hasOwn(m, 'value') || m.valueKind !== '' || m.truncated) throw bad('done: failed done carries no value');
      }
      break;
  }
}

/**
 * decodeFrame validates and decodes one frame sent in direction dir, with
 * the rules of portproto.Decode. frame is a Buffer/Uint8Array (the bytes of
 * a text frame) or a string; maxFrame bounds its size in bytes (0: no
 * bound). Returns the message with Go zero values filled in; 'raw' fields
 * (args, value) are present only when the frame had them. Throws
 * ProtocolError.
 */
function decodeFrame(dir, frame, maxFrame = 0) {
  let text;
  if (typeof frame === 'string') {
    const n = Buffer.byteLength(frame);
    if (maxFrame > 0 && n > maxFrame) throw new ProtocolError('too-large', `frame of ${n} bytes exceeds the ${maxFrame}-byte limit`);
    if (!frame.isWellFormed()) throw new ProtocolError('not-utf8', 'frame is not valid UTF-8');
    text = frame;
  } else {
    if (maxFrame > 0 && frame.length > maxFrame) throw new ProtocolError('too-large', `frame of ${frame.length} bytes exceeds the ${maxFrame}-byte limit`);
    if (!isUtf8(frame)) throw new ProtocolError('not-utf8', 'frame is not valid UTF-8');
    text = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8');
  }
  let obj;
  try {
    obj = JSONParse(text);
  } catch (err) {
    throw new ProtocolError('not-json', `frame is not a JSON object: ${err.message}`);
  }
  if (obj === null) throw new ProtocolError('bad-type', 'frame has no string "type"');
  if (typeof obj !== 'object' || Array.isArray(obj)) throw new ProtocolError('not-json', `frame is not a JSON object: ${describe(obj)}`);
  // encoding/json matches a key case-insensitively when there is no exact
  // match; mirror that so the error code is the same as the Go side's.
  let type;
  for (const key of Object.keys(obj)) {
    if (key.length === 4 && key.toLowerCase() === 'type') type = obj[key];
  }
  if (typeof type !== 'string') throw new ProtocolError('bad-type', 'frame has no string "type"');
  if (!hasOwn(MESSAGES, type)) throw new ProtocolError('bad-type', `unknown message type ${JSON.stringify(truncate(type))}`);
  const spec = MESSAGES[type];
  if (spec.dir !== dir) throw new ProtocolError('bad-type', `${JSON.stringify(type)} is not a ${dir} message`);
  const msg = decodeObject(spec.fields, obj, () => text, type);
  validateMessage(msg);
  return msg;
}

/** decodeFrame for frames the host sends to the runner. */
function validateHostFrame(frame, maxFrame = 0) {
  return decodeFrame(HOST_TO_RUNNER, frame, maxFrame);
}

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
// Values and text.

// Values and arguments nest at most this many arrays/objects deep (the host
// reads JSON up to 10,000 levels; this keeps the runner's walks shallow).
const MAX_JSON_DEPTH = 512;
// Fallback texts name what was thrown in at most this many characters.
const THROWN_CHARS = 200;
const INSPECT_PLAIN = { __proto__: null, customInspect: false };

const byteLength = (s) => BufferByteLength(s, 'utf8');

function capText(s, n) {
  return s.length <= n ? s : `${StringPrototypeSlice(s, 0, n - 1)}…`;
}

const NOT_JSON = 1;
const OVER = 2;

/**
 * valueJSON returns the JSON text of a program's value v when v is a JSON
 * value (plain objects with Object.prototype or a null prototype, arrays,
 * strings, finite numbers, booleans, null, at most MAX_JSON_DEPTH deep;
 * undefined members are skipped and undefined array elements become null,
 * as JSON.stringify does; toJSON is never called; getters run once), else
 * undefined. The text is produced up to a little more than cap characters:
 * {text, over} says whether it was cut there (what follows the cut is not
 * examined). Throws what a getter or a proxy trap throws.
 */
function valueJSON(v, cap) {
  let text = '';
  const put = (piece) => {
    text += piece;
    return text.length > cap ? OVER : 0;
  };
  const walk = (x, parent, depth) => {
    if (x === null) return put('null');
    switch (typeof x) {
      case 'string':
        return put(JSONStringify(x));
      case 'boolean':
        return put(x ? 'true' : 'false');
      case 'number':
        return NumberIsFinite(x) ? put(JSONStringify(x)) : NOT_JSON;
      case 'object':
        break;
      default:
        return NOT_JSON;
    }
    if (depth >= MAX_JSON_DEPTH) return NOT_JSON;
    for (let n = parent; n !== null; n = n.parent) if (n.value === x) return NOT_JSON; // a cycle
    const node = { __proto__: null, value: x, parent };
    const proto = ReflectGetPrototypeOf(x);
    if (ArrayIsArray(x)) {
      if (proto !== ArrayPrototype) return NOT_JSON;
      const n = x.length;
      let r = put('[');
      for (let i = 0; r === 0 && i < n; i++) {
        if (i > 0) r = put(',');
        if (r === 0) {
          const e = x[i];
          r = e === undefined ? put('null') : walk(e, node, depth + 1);
        }
      }
      return r === 0 ? put(']') : r;
    }
    if (proto !== ObjectPrototype && proto !== null) return NOT_JSON;
    const keys = ObjectKeys(x);
    let r = put('{');
    let first = true;
    for (let i = 0; r === 0 && i < keys.length; i++) {
      const key = keys[i];
      const e = x[key];
      if (e === undefined) continue;
      r = put(`${first ? '' : ','}${JSONStringify(key)}:`);
      first = false;
      if (r === 0) r = walk(e, node, depth + 1);
    }
    return r === 0 ? put('}') : r;
  };
  const r = walk(v, null, 0);
  return r === NOT_JSON ? undefined : { __proto__: null, text, over: r === OVER };
}

/**
 * safeInspect is util.inspect(v); when that throws (a custom inspector, a
 * getter the inspector reads), the rendering without custom inspectors;
 * when even that throws, a fallback text naming what was thrown.
 */
function safeInspect(v) {
  try {
    return utilInspect(v);
  } catch {
    // retried without custom inspectors
  }
  try {
    return utilInspect(v, INSPECT_PLAIN);
  } catch (err) {
    return `[uninspectable ${typeof v}: ${thrownText(err)}]`;
  }
}

/** thrownText is a short "Name: message" of a value thrown while reading a program object. */
function thrownText(e) {
  let text;
  try {
    if (isError(e)) {
      const name = e.name;
      const message = e.message;
      text = typeof name === 'string' && name !== '' ? name : 'Error';
      if (typeof message === 'string' && message !== '') text += `: ${message}`;
    } else {
      text = utilInspect(e, INSPECT_PLAIN);
    }
  } catch {
    text = 'an unreadable value';
  }
  return capText(text, THROWN_CHARS);
}

function isError(v) {
  try {
    return isNativeError(v) || (typeof v === 'object' && v !== null && ObjectPrototypeIsPrototypeOf(ErrorPrototype, v));
  } catch {
    return false; // a proxy whose getPrototypeOf trap throws
  }
}

// textOf reads obj[key] as text: a string as is, undefined as undefined,
// anything else through String(); a getter, proxy trap or conversion that
// throws gives "[<key> unavailable: <what it threw>]".
function textOf(obj, key) {
  try {
    const v = obj[key];
    return v === undefined || typeof v === 'string' ? v : StringCtor(v);
  } catch (err) {
    return `[${key} unavailable: ${thrownText(err)}]`;
  }
}

// errorName is err.name as text, "Error" when it is empty or unreadable.
function errorName(err) {
  try {
    const n = err.name;
    const s = typeof n === 'string' ? n : n === undefined ? '' : StringCtor(n);
    return s === '' ? 'Error' : s;
  } catch {
    return 'Error';
  }
}

// programStack drops the frame lines ("    at ...") of a stack that are not
// the program's: a stack formatted by the program's own
// prepareStackTrace, or in another realm, may list the runner's frames.
function programStack(s) {
  let out = '';
  let first = true;
  let start = 0;
  for (;;) {
    let end = StringPrototypeIndexOf(s, '\n', start);
    const last = end < 0;
    if (last) end = s.length;
    const line = StringPrototypeSlice(s, start, end);
    if (!isFrameLine(line) || StringPrototypeIndexOf(line, PROGRAM_FILE) >= 0) {
      out += first ? line : `\n${line}`;
      first = false;
    }
    if (last) return out;
    start = end + 1;
  }
}

function isFrameLine(line) {
  let i = 0;
  while (i < line.length && (StringPrototypeCharCodeAt(line, i) === 0x20 || StringPrototypeCharCodeAt(line, i) === 0x09)) i++;
  return i > 0 && StringPrototypeSlice(line, i, i + 3) === 'at ';
}

// cutForJSON returns the longest prefix of s (never splitting a surrogate
// pair) whose JSON string encoding, quotes excluded, fits in budget bytes.
function cutForJSON(s, budget) {
  if (budget <= 0) return '';
  if (s.length * 6 <= budget) return s;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = StringPrototypeCharCodeAt(s, i);
    let w;
    let pair = false;
    if (c === 0x22 || c === 0x5c) w = 2;
    else if (c < 0x20) w = c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6;
    else if (c < 0x80) w = 1;
    else if (c < 0x800) w = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (StringPrototypeCharCodeAt(s, i + 1) & 0xfc00) === 0xdc00) {
      w = 4;
      pair = true;
    } else if (c >= 0xd800 && c <= 0xdfff) w = 6;
    else w = 3;
    if (n + w > budget) return StringPrototypeSlice(s, 0, i);
    n += w;
    if (pair) i++;
  }
  return s;
}

// wellFormed is the first n characters of s, lone surrogates replaced.
const wellFormed = (s, n) => StringPrototypeToWellFormed(StringPrototypeSlice(s, 0, n));

/** doneValueFrame renders the done frame of a program that returned v. */
function doneValueFrame(v, limits) {
  if (v === undefined) return '{"type":"done","ok":true}';
  const cap = limits.maxValueBytes;
  let json;
  try {
    json = valueJSON(v, cap);
  } catch {
    json = undefined; // a throwing getter, a proxy trap, a stack overflow
  }
  const kind = json === undefined ? 'inspect' : 'json';
  const over = json !== undefined && json.over;
  const text = json === undefined ? wellFormed(safeInspect(v), cap + 1) : over ? wellFormed(json.text, cap + 1) : json.text;
  // The value as it appears in the frame (its "raw" JSON) is what the host
  // measures against maxValueBytes.
  let raw = kind === 'json' && !over ? text : JSONStringify(text);
  let truncated = over || byteLength(raw) > cap;
  if (truncated) raw = JSONStringify(cutForJSON(text, cap - 2));
  const render = () => `{"type":"done","ok":true,"valueKind":"${kind}","value":${raw}${truncated ? ',"truncated":true' : ''}}`;
  let frame = render();
  if (byteLength(frame) > limits.maxFrameBytes) {
    truncated = true;
    raw = JSONStringify(cutForJSON(text, limits.maxFrameBytes - byteLength(`{"type":"done","ok":true,"valueKind":"${kind}","value":"","truncated":true}`)));
    frame = render();
  }
  return frame;
}

/** errorFrame renders a failed done frame, cut to fit maxFrameBytes. */
function errorFrame(name, message, stack, limits) {
  const max = limits.maxFrameBytes;
  name = cutForJSON(wellFormed(name, MAX_NAME_BYTES), MAX_NAME_BYTES);
  message = wellFormed(message, max);
  stack = wellFormed(stack, max);
  const head = `{"type":"done","ok":false,"error":{"name":${JSONStringify(name)},"message":`;
  const render = () => `${head}${JSONStringify(message)}${stack === '' ? '' : `,"stack":${JSONStringify(stack)}`}}}`;
  let frame = render();
  if (byteLength(frame) > max) {
    let budget = max - byteLength(`${head}"","stack":""}}`);
    message = cutForJSON(message, budget);
    budget -= byteLength(JSONStringify(message)) - 2;
    stack = cutForJSON(stack, budget);
    frame = render();
  }
  return frame;
}

/** doneErrorFrame renders the done frame of a program that threw err. */
function doneErrorFrame(err, limits) {
  if (!isError(err)) return errorFrame('Uncaught', safeInspect(err), '', limits);
  const name = errorName(err);
  const message = textOf(err, 'message') ?? '';
  let stack = '';
  try {
    const s = err.stack;
    if (typeof s === 'string') stack = programStack(StringPrototypeSlice(s, 0, limits.maxFrameBytes));
  } catch {
    // a stack getter, or a prepareStackTrace the program set, that throws
  }
  return errorFrame(name, message, stack, limits);
}

// ---------------------------------------------------------------------------
// Tool arguments.
//
// The rule (the same in both runners): tool arguments must be JSON values
// exactly. Objects (TypeScript: plain objects whose prototype is
// Object.prototype or null, own enumerable string keys; Python: dict with
// str keys), arrays (TypeScript: real Arrays without holes; Python: list),
// strings without lone surrogates, finite numbers (Python: int, float; an
// int beyond the float64 range is not finite for JSON readers), booleans
// and null (Python: None), nested at most 512 arrays/objects deep, without
// cycles, in a call frame of at most maxFrameBytes. A call with no argument
// sends null. Nothing is converted: anything else (TypeScript: NaN,
// Infinity, undefined, Date, Map, Set, BigInt, Symbol, functions, class
// instances, typed arrays, boxed primitives, sparse-array holes; Python:
// NaN, inf, tuples, sets, bytes, non-str keys, custom objects, subclasses of
// the JSON types such as an IntEnum or a str subclass) is rejected before
// any frame is sent: no call frame, no call id consumed. The call raises
// (Python) or rejects with (TypeScript) a TypeError
//
//     tools["NAME"]: <path>: <reason>
//
// naming the first offending value in document order: <path> is "args",
// then ".key" for keys like [A-Za-z_$][A-Za-z0-9_$]*, '["key"]' (JSON-quoted)
// for other keys and "[i]" for indices, cut to 200 characters, e.g.
// 'tools["search"]: args.items[3]: NaN is not JSON' or
// 'tools["search"]: args: key 1 is not a string'. Reading the arguments
// runs getters and proxy traps once (TypeScript); one that throws rejects
// the call with what it threw. Python reads only exact dict/list/str/int/
// float/bool/None objects, so no program code runs.
//
// (TypeScript details: properties are listed with Reflect.ownKeys and read
// with [[Get]]; non-enumerable properties are not data and are skipped, an
// enumerable Symbol-keyed property is rejected; -0 is sent as 0.)

const MAX_PATH_CHARS = 200;

// A path node: the value at `key` of the parent's value (key undefined and
// parent null for the arguments themselves). Null-prototype objects: no
// lookup reaches a prototype the program owns.
const pathNode = (key, parent, value) => ({ __proto__: null, key, parent, value });

function isIdentifier(s) {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = StringPrototypeCharCodeAt(s, i);
    const letter = (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f || c === 0x24;
    if (!letter && (i === 0 || c < 0x30 || c > 0x39)) return false;
  }
  return true;
}

function pathText(node) {
  if (node.parent === null) return 'args';
  const head = pathText(node.parent);
  if (head.length > MAX_PATH_CHARS) return head;
  if (typeof node.key === 'number') return `${head}[${node.key}]`;
  const key = StringPrototypeSlice(node.key, 0, MAX_PATH_CHARS);
  return isIdentifier(key) ? `${head}.${key}` : `${head}[${JSONStringify(key)}]`;
}

/** argsPath is the path text of a node: args, .key, ["key"], [i], at most MAX_PATH_CHARS characters. */
function argsPath(node) {
  return capText(pathText(node), MAX_PATH_CHARS);
}

// instanceText names what an object with prototype proto is an instance of,
// reading only own data properties (no getter runs).
function instanceText(proto) {
  try {
    const c = ReflectGetOwnPropertyDescriptor(proto, 'constructor');
    const ctor = c !== undefined && ObjectPrototypeHasOwnProperty(c, 'value') ? c.value : undefined;
    if (typeof ctor === 'function') {
      const n = ReflectGetOwnPropertyDescriptor(ctor, 'name');
      const name = n !== undefined && ObjectPrototypeHasOwnProperty(n, 'value') ? n.value : undefined;
      if (typeof name === 'string' && name !== '') return `an instance of ${capText(name, 60)}`;
    }
  } catch {
    // a proxy in the prototype chain
  }
  return 'an object with a custom prototype';
}

// builtinNotJSON says why a built-in object (by its internal slots, which
// no program code can fake) is not JSON; undefined for anything else.
function builtinNotJSON(x) {
  if (isDate(x)) return 'a Date is not JSON (use .toISOString())';
  if (isMap(x)) return 'a Map is not JSON';
  if (isSet(x)) return 'a Set is not JSON';
  if (isWeakMap(x)) return 'a WeakMap is not JSON';
  if (isWeakSet(x)) return 'a WeakSet is not JSON';
  if (isRegExp(x)) return 'a RegExp is not JSON';
  if (isPromise(x)) return 'a Promise is not JSON (await it first)';
  if (isNativeError(x)) return 'an Error is not JSON';
  if (isTypedArray(x)) return `a ${ReflectGetPrototypeOf(x) === BufferPrototype ? 'Buffer' : TypedArrayPrototypeGetSymbolToStringTag(x)} is not JSON`;
  if (isArrayBuffer(x)) return 'an ArrayBuffer is not JSON';
  if (isSharedArrayBuffer(x)) return 'a SharedArrayBuffer is not JSON';
  if (isDataView(x)) return 'a DataView is not JSON';
  if (isStringObject(x)) return 'a String object is not JSON (use a string)';
  if (isNumberObject(x)) return 'a Number object is not JSON (use a number)';
  if (isBooleanObject(x)) return 'a Boolean object is not JSON (use a boolean)';
  if (isBigIntObject(x)) return 'a BigInt object is not JSON';
  if (isSymbolObject(x)) return 'a Symbol object is not JSON';
  if (isGeneratorObject(x)) return 'a generator is not JSON';
  if (isModuleNamespaceObject(x)) return 'a module namespace object is not JSON';
  return undefined;
}

/**
 * argsJSON returns {text}, the JSON text of a tool call's arguments under
 * the rule above, or {node, reason} for the first value that breaks it. It
 * stops as soon as the text certainly exceeds maxBytes (a character is at
 * least a byte).
 */
function argsJSON(args, maxBytes) {
  const root = pathNode(undefined, null, args);
  const tooLarge = { __proto__: null, node: root, reason: `too large: the call frame would exceed the ${maxBytes}-byte frame limit` };
  const reject = (node, reason) => ({ __proto__: null, node, reason });
  const threw = (node, what, err) => reject(node, `${what} threw ${thrownText(err)}`);
  let text = '';
  const put = (piece) => {
    text += piece;
    return text.length > maxBytes;
  };
  const walk = (x, node, depth) => {
    switch (typeof x) {
      case 'string':
        if (!StringPrototypeIsWellFormed(x)) return reject(node, 'a string with a lone surrogate is not JSON');
        return put(JSONStringify(x)) ? tooLarge : undefined;
      case 'number':
        if (!NumberIsFinite(x)) return reject(node, x !== x ? 'NaN is not JSON' : x > 0 ? 'Infinity is not JSON' : '-Infinity is not JSON');
        return put(JSONStringify(x)) ? tooLarge : undefined;
      case 'boolean':
        return put(x ? 'true' : 'false') ? tooLarge : undefined;
      case 'undefined':
        return reject(node, 'undefined is not JSON');
      case 'bigint':
        return reject(node, 'a BigInt is not JSON');
      case 'symbol':
        return reject(node, 'a Symbol is not JSON');
      case 'function':
        return reject(node, 'a function is not JSON');
      case 'object':
        if (x === null) return put('null') ? tooLarge : undefined;
        break;
      default:
        return reject(node, `a value of type ${typeof x} is not JSON`);
    }
    for (let n = node.parent; n !== null; n = n.parent) if (n.value === x) return reject(node, 'circular reference');
    if (depth >= MAX_JSON_DEPTH) return reject(node, `nested deeper than ${MAX_JSON_DEPTH} levels`);
    const builtin = builtinNotJSON(x);
    if (builtin !== undefined) return reject(node, builtin);
    let proto;
    let array;
    try {
      proto = ReflectGetPrototypeOf(x);
      array = ArrayIsArray(x);
    } catch (err) {
      return threw(node, 'reading its prototype', err);
    }
    if (array) {
      if (proto !== ArrayPrototype) return reject(node, `${instanceText(proto)} (a subclass of Array) is not JSON`);
      let n;
      try {
        n = x.length;
      } catch (err) {
        return threw(node, 'reading its length', err);
      }
      if (typeof n !== 'number') return reject(node, 'an array whose length is not a number is not JSON');
      if (put('[')) return tooLarge;
      for (let i = 0; i < n; i++) {
        const child = pathNode(i, node, undefined);
        let e;
        try {
          if (!ObjectPrototypeHasOwnProperty(x, i)) return reject(child, 'a hole in a sparse array is not JSON');
          e = x[i];
        } catch (err) {
          return threw(child, 'reading it', err);
        }
        child.value = e;
        if (i > 0 && put(',')) return tooLarge;
        const r = walk(e, child, depth + 1);
        if (r !== undefined) return r;
      }
      return put(']') ? tooLarge : undefined;
    }
    if (proto !== ObjectPrototype && proto !== null) return reject(node, `${instanceText(proto)} is not JSON`);
    let keys;
    try {
      keys = ReflectOwnKeys(x);
    } catch (err) {
      return threw(node, 'listing its keys', err);
    }
    if (put('{')) return tooLarge;
    let first = true;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      let desc;
      try {
        desc = ReflectGetOwnPropertyDescriptor(x, key);
      } catch (err) {
        return threw(node, 'reading its keys', err);
      }
      if (desc === undefined || !desc.enumerable) continue;
      if (typeof key === 'symbol') return reject(node, `a Symbol key (${capText(StringCtor(key), 60)}) is not JSON`);
      if (!StringPrototypeIsWellFormed(key)) return reject(node, `key ${JSONStringify(capText(key, 60))} has a lone surrogate`);
      const child = pathNode(key, node, undefined);
      let e;
      try {
        e = ReflectGet(x, key);
      } catch (err) {
        return threw(child, 'reading it', err);
      }
      child.value = e;
      if (put(`${first ? '' : ','}${JSONStringify(key)}:`)) return tooLarge;
      first = false;
      const r = walk(e, child, depth + 1);
      if (r !== undefined) return r;
    }
    return put('}') ? tooLarge : undefined;
  };
  const r = walk(args, root, 0);
  return r !== undefined ? r : { __proto__: null, text };
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
      this.start(msg);
      return;
    }
    if (this.phase !== 'running') return this.fail('a result frame before the run frame');
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

  // exit is process.exit as the program sees it: the run ends like
  // Python's sys.exit (0: a successful run without a value; anything else:
  // name "Exit", message "process.exit(code)"). Node's own check of the
  // code runs first (process.exitCode's setter), so a bad code throws in
  // the program. Then it throws to stop the program's synchronous code; the
  // done frame is already on its way and nothing more goes out.
  exit(code) {
    if (code !== undefined) process.exitCode = code;
    const set = process.exitCode;
    const status = set === undefined || set === null ? 0 : +set;
    const err = new NativeError(`process.exit(${status})`);
    ReflectDefineProperty(err, 'name', { __proto__: null, value: 'Exit', writable: true, configurable: true, enumerable: false });
    this.finish(() => (status === 0 ? '{"type":"done","ok":true}' : doneErrorFrame(err, this.limits)));
    throw err;
  }

  start(run) {
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
    let frame;
    try {
      frame = render();
    } catch (err) {
      frame = errorFrame('Error', `runner: cannot render the outcome: ${thrownText(err)}`, '', this.limits);
    }
    this.phase = 'done';
    this.ws.send(frame, () => {
      this.ws.close(1000);
      setTimeoutNative(() => realExit(0), CLOSE_GRACE_MS);
    });
  }
}

// diag writes one line to the real stderr (not captured, not buffered).
function diag(text) {
  try {
    fsWriteSync(2, `${RUNNER}: ${String(text).replace(/\n/g, ' ')}\n`);
  } catch {
    // nothing to do
  }
}

function main(argv) {
  const sock = argv[2] || DEFAULT_SOCKET;
  // The program's environment is exactly the host's fixed set (PATH, HOME,
  // LANG); Docker always adds HOSTNAME, so drop it.
  delete process.env.HOSTNAME;
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

module.exports = {
  ProtocolError,
  decodeFrame,
  validateHostFrame,
  parseSourceMap,
  mapPosition,
  decodeVLQ,
  valueJSON,
  argsJSON,
  argsPath,
  thrownText,
  safeInspect,
  cutForJSON,
  doneValueFrame,
  doneErrorFrame,
  HOST_TO_RUNNER,
  RUNNER_TO_HOST,
};

if (require.main === module) main(process.argv);
