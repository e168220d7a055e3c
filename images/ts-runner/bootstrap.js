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
//      `.toolName` is the tool's name.
//   6. The last frame is "done": the completion value (JSON when it is a
//      JSON value, else its util.inspect rendering), or the error {name,
//      message, stack} of a thrown error, an uncaught exception or an
//      unhandled rejection. A thrown non-Error has name "Uncaught" and its
//      util.inspect rendering as message. Then the socket is closed and the
//      process exits 0. If the host goes away before that: exit 0 quietly.
//
// Stack traces show only program.ts frames; when the run frame carries a
// source map (v3, its "program.ts" lines are the model's own lines) their
// positions are mapped back to the original source. This applies to every
// error.stack, including the ones the program logs itself.
//
// Caps: the host enforces all limits; the runner only avoids sending what
// the host would drop. A log entry's text is cut so its frame fits
// maxFrameBytes; once the total log text exceeds maxLogBytes nothing more is
// logged (the entry that crosses the cap is sent, so the host sees the
// overflow). The done value, as encoded in the frame, is at most
// maxValueBytes bytes: a longer one becomes a JSON string holding the
// longest prefix of its text (its JSON text, or its inspect rendering), cut
// on a character boundary, whose encoding fits, with "truncated":true. (The
// host re-wraps any value longer than maxValueBytes as a string, so a
// prefix of exactly maxValueBytes bytes would arrive double-encoded.) A
// frame that would still exceed maxFrameBytes is cut further.
//
// Not captured: writes that bypass process.stdout/stderr (fs.writeSync(1)),
// and process.exit() ends the container without a done frame (the host
// reports the exit). The runner runs the untrusted program in its own
// process: the container is the security boundary, this file only aims at
// correct, robust behaviour. It uses nothing but the Node standard library
// and `ws`, writes nothing to disk and opens no network connection.

'use strict';

const fs = require('node:fs');
const util = require('node:util');
const vm = require('node:vm');
const { isUtf8 } = require('node:buffer');
const { StringDecoder } = require('node:string_decoder');

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
    obj = JSON.parse(text);
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

function rewritePositions(frame) {
  return frame.replace(/program\.ts:(\d+):(\d+)/g, (all, l, c) => {
    if (!sourceMapLines) return all;
    const p = mapPosition(sourceMapLines, Number(l), Number(c));
    return p ? `${PROGRAM_FILE}:${p.line}:${p.column}` : PROGRAM_FILE;
  });
}

// Installed as Error.prepareStackTrace: V8's format, keeping only the
// program's frames, with positions mapped to the original source.
function prepareStackTrace(error, callsites) {
  let header;
  try {
    header = Error.prototype.toString.call(error);
  } catch {
    header = 'Error';
  }
  const lines = [header];
  for (const cs of callsites) {
    let frame;
    try {
      frame = String(cs);
    } catch {
      continue;
    }
    if (frame.includes(PROGRAM_FILE)) lines.push(`    at ${rewritePositions(frame)}`);
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------
// Values and text.

// jsonText returns the JSON text of v when v is a JSON value (plain objects
// with Object.prototype or a null prototype, arrays, strings, finite
// numbers, booleans, null; undefined members are skipped and undefined
// array elements become null, as JSON.stringify does), else undefined.
function jsonText(v, path) {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'string':
      return JSON.stringify(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'number':
      return Number.isFinite(v) ? JSON.stringify(v) : undefined;
    case 'object':
      break;
    default:
      return undefined;
  }
  if (path.has(v)) return undefined; // cycle
  const proto = Object.getPrototypeOf(v);
  const parts = [];
  path.add(v);
  try {
    if (Array.isArray(v)) {
      if (proto !== Array.prototype) return undefined;
      for (let i = 0; i < v.length; i++) {
        const e = v[i];
        const t = e === undefined ? 'null' : jsonText(e, path);
        if (t === undefined) return undefined;
        parts.push(t);
      }
      return `[${parts.join(',')}]`;
    }
    if (proto !== Object.prototype && proto !== null) return undefined;
    for (const key of Object.keys(v)) {
      const e = v[key];
      if (e === undefined) continue;
      const t = jsonText(e, path);
      if (t === undefined) return undefined;
      parts.push(`${JSON.stringify(key)}:${t}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    path.delete(v);
  }
}

function safeInspect(v) {
  try {
    return util.inspect(v);
  } catch (err) {
    try {
      return `[uninspectable value: ${err && err.message}]`;
    } catch {
      return '[uninspectable value]';
    }
  }
}

function safeString(get, fallback) {
  try {
    const v = get();
    return v === undefined ? fallback : String(v);
  } catch {
    return fallback;
  }
}

function isError(v) {
  try {
    return util.types.isNativeError(v) || v instanceof Error;
  } catch {
    return false;
  }
}

// cutForJSON returns the longest prefix of s (never splitting a surrogate
// pair) whose JSON string encoding, quotes excluded, fits in budget bytes.
function cutForJSON(s, budget) {
  if (budget <= 0) return '';
  if (s.length * 6 <= budget) return s;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let w;
    let pair = false;
    if (c === 0x22 || c === 0x5c) w = 2;
    else if (c < 0x20) w = c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6;
    else if (c < 0x80) w = 1;
    else if (c < 0x800) w = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      w = 4;
      pair = true;
    } else if (c >= 0xd800 && c <= 0xdfff) w = 6;
    else w = 3;
    if (n + w > budget) return s.slice(0, i);
    n += w;
    if (pair) i++;
  }
  return s;
}

const byteLength = (s) => Buffer.byteLength(s, 'utf8');

/** doneValueFrame renders the done frame of a program that returned v. */
function doneValueFrame(v, limits) {
  if (v === undefined) return '{"type":"done","ok":true}';
  let kind = 'json';
  let text;
  try {
    text = jsonText(v, new Set());
  } catch {
    text = undefined; // a throwing getter, a proxy trap, a stack overflow
  }
  if (text === undefined) {
    kind = 'inspect';
    text = safeInspect(v).toWellFormed();
  }
  // The value as it appears in the frame (its "raw" JSON) is what the host
  // measures against maxValueBytes.
  let raw = kind === 'json' ? text : JSON.stringify(text);
  let truncated = false;
  if (byteLength(raw) > limits.maxValueBytes) {
    truncated = true;
    raw = JSON.stringify(cutForJSON(text, limits.maxValueBytes - 2));
  }
  const render = () => `{"type":"done","ok":true,"valueKind":"${kind}","value":${raw}${truncated ? ',"truncated":true' : ''}}`;
  let frame = render();
  if (byteLength(frame) > limits.maxFrameBytes) {
    truncated = true;
    raw = JSON.stringify(cutForJSON(text, limits.maxFrameBytes - byteLength(`{"type":"done","ok":true,"valueKind":"${kind}","value":"","truncated":true}`)));
    frame = render();
  }
  return frame;
}

/** doneErrorFrame renders the done frame of a program that threw err. */
function doneErrorFrame(err, limits) {
  let name;
  let message;
  let stack;
  if (isError(err)) {
    name = safeString(() => err.name, 'Error');
    message = safeString(() => err.message, '');
    stack = safeString(() => err.stack, '');
  } else {
    name = 'Uncaught';
    message = safeInspect(err);
    stack = '';
  }
  name = cutForJSON(name.toWellFormed(), MAX_NAME_BYTES);
  message = message.toWellFormed();
  stack = stack.toWellFormed();
  const render = () => JSON.stringify({ type: 'done', ok: false, error: stack === '' ? { name, message } : { name, message, stack } });
  let frame = render();
  if (byteLength(frame) > limits.maxFrameBytes) {
    let budget = limits.maxFrameBytes - byteLength(JSON.stringify({ type: 'done', ok: false, error: { name, message: '', stack: '' } }));
    message = cutForJSON(message, budget);
    budget -= byteLength(JSON.stringify(message)) - 2;
    stack = cutForJSON(stack, budget);
    frame = render();
  }
  return frame;
}

// ---------------------------------------------------------------------------
// The runner.

const CONSOLE_LEVELS = {
  log: 'log', info: 'info', warn: 'warn', error: 'error', debug: 'debug',
  trace: 'debug', dir: 'log', dirxml: 'log', table: 'log', group: 'log', groupCollapsed: 'log',
  count: 'log', timeEnd: 'log', timeLog: 'log', assert: 'error',
};

class Runner {
  constructor(ws) {
    this.ws = ws;
    this.phase = 'await-run'; // then 'running', then 'done'
    this.limits = null;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject, error, name }
    this.logBytes = 0;
    this.logsClosed = false;
  }

  send(text) {
    this.ws.send(text, () => {});
  }

  fail(reason) {
    diag(`protocol violation: ${reason}`);
    process.exit(EXIT_PROTOCOL);
  }

  onMessage(data, isBinary) {
    if (this.phase === 'done') return;
    if (isBinary) return this.fail('binary frame (the protocol uses text frames only)');
    let msg;
    try {
      msg = validateHostFrame(Array.isArray(data) ? Buffer.concat(data) : data);
    } catch (err) {
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
      Object.defineProperty(err, 'message', { value: msg.message, writable: true, configurable: true, enumerable: false });
      err.toolName = call.name;
      call.reject(err);
    }
  }

  emitLog(source, level, text) {
    if (this.phase !== 'running' || this.logsClosed) return;
    const entry = level === undefined ? { type: 'log', source, text: '' } : { type: 'log', source, level, text: '' };
    entry.text = cutForJSON(String(text).toWellFormed(), this.limits.maxFrameBytes - byteLength(JSON.stringify(entry)));
    this.logBytes += byteLength(entry.text);
    this.send(JSON.stringify(entry));
    if (this.logBytes > this.limits.maxLogBytes) this.logsClosed = true;
  }

  makeConsole() {
    let level = 'log';
    const sink = { write: (chunk) => { this.emitLog('console', level, String(chunk).replace(/\n$/, '')); return true; } };
    const inner = new console.Console({ stdout: sink, stderr: sink, ignoreErrors: false, colorMode: false, groupIndentation: 2 });
    const capture = {};
    const names = new Set([...Object.keys(inner), ...Object.keys(console)]);
    for (const name of names) {
      if (typeof inner[name] !== 'function') {
        capture[name] = console[name]; // console.Console, inspector-only methods
        continue;
      }
      const method = inner[name];
      const lvl = CONSOLE_LEVELS[name] || 'log';
      capture[name] = { [name](...args) {
        const saved = level;
        level = lvl;
        try {
          return method(...args);
        } finally {
          level = saved;
        }
      } }[name];
    }
    return capture;
  }

  patchStream(stream, source) {
    const decoder = new StringDecoder('utf8');
    stream.write = (chunk, encoding, cb) => {
      if (typeof encoding === 'function') {
        cb = encoding;
        encoding = undefined;
      }
      let text;
      if (typeof chunk === 'string') {
        text = encoding && Buffer.isEncoding(encoding) && !/^utf-?8$/i.test(encoding) ? Buffer.from(chunk, encoding).toString('utf8') : chunk;
      } else if (chunk instanceof Uint8Array) {
        text = decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      } else {
        throw new TypeError(`The "chunk" argument must be of type string or an instance of Buffer or Uint8Array. Received ${safeInspect(chunk)}`);
      }
      if (text !== '') this.emitLog(source, undefined, text);
      if (typeof cb === 'function') process.nextTick(cb);
      return true;
    };
  }

  makeNamespace(global, functions) {
    const ns = Object.create(null);
    for (const name of functions) {
      const runner = this;
      const fn = { async [name](args) {
        // Created here, synchronously, so a rejection's stack shows the call site.
        const error = new Error();
        return runner.call(global, name, args, error);
      } }[name];
      Object.defineProperty(ns, name, { value: fn, enumerable: true, writable: false, configurable: false });
    }
    return ns;
  }

  call(global, name, args, error) {
    let argsText;
    try {
      argsText = args === undefined ? 'null' : JSON.stringify(args);
    } catch (err) {
      throw new TypeError(`${global}.${name}: arguments are not JSON-serializable: ${err && err.message}`);
    }
    if (argsText === undefined) throw new TypeError(`${global}.${name}: arguments are not JSON-serializable (${typeof args})`);
    const id = this.nextId;
    const frame = `{"type":"call","id":${id},"global":${JSON.stringify(global)},"name":${JSON.stringify(name)},"args":${argsText}}`;
    const size = byteLength(frame);
    if (size > this.limits.maxFrameBytes) {
      throw new TypeError(`${global}.${name}: arguments too large: the call frame is ${size} bytes, the limit is ${this.limits.maxFrameBytes}`);
    }
    if (this.phase !== 'running') return new Promise(() => {}); // settled: nothing more goes out
    this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, error, name });
      this.send(frame);
    });
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
    Error.prepareStackTrace = prepareStackTrace;
    let fn;
    try {
      globalThis.console = this.makeConsole();
      this.patchStream(process.stdout, 'stdout');
      this.patchStream(process.stderr, 'stderr');
      for (const b of run.bindings) globalThis[b.global] = this.makeNamespace(b.global, b.functions);
      const options = { filename: PROGRAM_FILE };
      if (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) {
        // `await import("node:fs")` works as in a module; Node flags this
        // option as experimental, a warning the program has no use for.
        options.importModuleDynamically = vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
        const emitWarning = process.emitWarning;
        process.emitWarning = function (warning, ...rest) {
          const text = typeof warning === 'string' ? warning : warning && warning.message;
          if (typeof text === 'string' && text.includes('vm.USE_MAIN_CONTEXT_DEFAULT_LOADER')) return undefined;
          return emitWarning.call(this, warning, ...rest);
        };
      }
      fn = vm.runInThisContext(run.program, options);
      if (typeof fn !== 'function') throw new TypeError(`the program evaluated to ${typeof fn}, not a function`);
    } catch (err) {
      return this.finish(() => doneErrorFrame(err, this.limits));
    }
    let result;
    try {
      result = fn();
    } catch (err) {
      return this.finish(() => doneErrorFrame(err, this.limits));
    }
    Promise.resolve(result).then(
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
      frame = JSON.stringify({ type: 'done', ok: false, error: { name: 'Error', message: `runner: cannot render the outcome: ${err && err.message}` } });
    }
    this.phase = 'done';
    this.ws.send(frame, () => {
      this.ws.close(1000);
      setTimeout(() => process.exit(0), CLOSE_GRACE_MS);
    });
  }
}

// diag writes one line to the real stderr (not captured, not buffered).
function diag(text) {
  try {
    fs.writeSync(2, `${RUNNER}: ${String(text).replace(/\n/g, ' ')}\n`);
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
    process.exit(EXIT_CONNECT);
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
      process.exit(EXIT_CONNECT);
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
      process.exit(EXIT_CONNECT);
    }
    process.exit(0);
  });
}

module.exports = {
  ProtocolError,
  decodeFrame,
  validateHostFrame,
  parseSourceMap,
  mapPosition,
  decodeVLQ,
  jsonText,
  cutForJSON,
  doneValueFrame,
  doneErrorFrame,
  HOST_TO_RUNNER,
  RUNNER_TO_HOST,
};

if (require.main === module) main(process.argv);
