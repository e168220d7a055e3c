// The TS runner's wire protocol (version 1, see portproto/portproto.go): its
// identity in the hello frame and a strict decoder equivalent to
// portproto.Decode, which checks every frame the host sends (and, in the
// tests, every frame the runner sends). The decoder uses the realm's
// builtins as they are: a program that rewrites those breaks its own run
// (see main.js).

'use strict';

const { isUtf8 } = require('node:buffer');

// Builtins, captured when the runner loads, before the program runs.
const ReflectApply = Reflect.apply;
const uncurry = (fn) => (self, ...args) => ReflectApply(fn, self, args);
const JSONParse = JSON.parse;
const ObjectPrototypeIsPrototypeOf = uncurry(Object.prototype.isPrototypeOf);

const VERSION = 1;
const LANGUAGE = 'typescript';
const RUNNER = 'dsh-ts-runner/1';

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
const EGRESS = { ca: 'string', window: 'int' };
const BOTH_WAYS = 'both';
const TIMINGS = { compileUs: 'int', evaluateUs: 'int', renderUs: 'int' };
const MAX_TIMING_US = 24 * 3600 * 1e6;
const PROGRAM_EXIT = { status: 'int' };
const MAX_EXIT_STATUS = 255;
const MESSAGES = {
  hello: { dir: RUNNER_TO_HOST, fields: { type: 'string', version: 'int', language: 'string', runner: 'string' } },
  run: {
    dir: HOST_TO_RUNNER,
    fields: {
      type: 'string', version: 'int', program: 'string', sourceMap: 'string',
      bindings: { list: { object: BINDING } }, limits: { object: LIMITS },
      egress: { pointer: EGRESS },
    },
  },
  call: { dir: RUNNER_TO_HOST, fields: { type: 'string', id: 'int', global: 'string', name: 'string', args: 'raw' } },
  result: { dir: HOST_TO_RUNNER, fields: { type: 'string', id: 'int', ok: 'bool', value: 'raw', message: 'string' } },
  log: { dir: RUNNER_TO_HOST, fields: { type: 'string', source: 'string', level: 'string', text: 'string' } },
  done: {
    dir: RUNNER_TO_HOST,
    fields: { type: 'string', ok: 'bool', value: 'raw', valueKind: 'string', truncated: 'bool', error: { pointer: PROGRAM_ERROR }, exit: { pointer: PROGRAM_EXIT }, timings: { pointer: TIMINGS } },
  },
  // Egress streams (portproto.go): data is base64 text here, decoded by
  // egress.js.
  open: { dir: RUNNER_TO_HOST, fields: { type: 'string', stream: 'int', host: 'string', port: 'int' } },
  opened: { dir: HOST_TO_RUNNER, fields: { type: 'string', stream: 'int', ok: 'bool', message: 'string' } },
  data: { dir: BOTH_WAYS, fields: { type: 'string', stream: 'int', data: 'string' } },
  ack: { dir: HOST_TO_RUNNER, fields: { type: 'string', stream: 'int', bytes: 'int' } },
  close: { dir: BOTH_WAYS, fields: { type: 'string', stream: 'int', message: 'string' } },
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
  // The text already parsed as JSON: the string ends at the first quote
  // not escaped by a backslash. indexOf finds both in native code (a long
  // string, such as an egress data frame's, is not walked char by char).
  let j = i + 1;
  let q = t.indexOf('"', j);
  for (;;) {
    const b = t.indexOf('\\', j);
    if (b === -1 || b > q) return q + 1;
    j = b + 2;
    if (q < j) q = t.indexOf('"', j);
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
      if (m.egress !== undefined && !(m.egress.window >= 1)) throw bad('run: egress window must be positive');
      break;
    }
    case 'open':
    case 'opened':
    case 'data':
    case 'ack':
    case 'close': {
      if (!(m.stream >= 1 && m.stream <= MAX_ID)) throw bad(`id ${m.stream} out of range 1..2^53-1`);
      if (m.type === 'data' && m.data === '') throw bad('data: carries at least one byte');
      if (m.type === 'open') {
        const n = Buffer.byteLength(m.host);
        if (n === 0 || n > 255) throw bad('open: host must be 1..255 bytes');
        if (!(m.port >= 1 && m.port <= 65535)) throw bad(`open: port ${m.port} out of range 1..65535`);
      }
      if (m.type === 'ack' && !(m.bytes >= 1)) throw bad('ack: bytes must be positive');
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
      if (m.timings !== undefined) {
        for (const k of ['compileUs', 'evaluateUs', 'renderUs']) {
          const v = m.timings[k];
          if (v < 0 || v > MAX_TIMING_US) throw bad(`done: timings: ${v} µs is out of range [0, ${MAX_TIMING_US}]`);
        }
      }
      if (m.exit !== undefined) {
        if (m.ok) throw bad('done: an exit is a failed done (ok false, with an error)');
        if (m.exit.status < 0 || m.exit.status > MAX_EXIT_STATUS) throw bad(`done: exit status ${m.exit.status} is out of range [0, ${MAX_EXIT_STATUS}]`);
      }
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
  if (spec.dir !== dir && spec.dir !== BOTH_WAYS) throw new ProtocolError('bad-type', `${JSON.stringify(type)} is not a ${dir} message`);
  const msg = decodeObject(spec.fields, obj, () => text, type);
  validateMessage(msg);
  return msg;
}

/** decodeFrame for frames the host sends to the runner. */
function validateHostFrame(frame, maxFrame = 0) {
  return decodeFrame(HOST_TO_RUNNER, frame, maxFrame);
}

module.exports = {
  VERSION,
  LANGUAGE,
  RUNNER,
  HOST_TO_RUNNER,
  RUNNER_TO_HOST,
  MAX_NAME_BYTES,
  ProtocolError,
  isProtocolError,
  decodeFrame,
  validateHostFrame,
};
