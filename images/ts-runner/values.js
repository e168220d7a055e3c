// How the TS runner turns the program's values into text and frames: the
// done frame of a value or of a thrown error (JSON when the value is JSON,
// else its util.inspect rendering; only program.ts frames in a stack; cut
// to the caps), fallback texts for objects that throw when read, and the
// tool-argument rule (argsJSON).
//
// The program's objects never break the runner: what it reads of a
// program's value, thrown value or logged value (name, message, stack,
// toJSON-free JSON walk, util.inspect) goes through getters, proxy traps and
// conversions inside try/catch, and whatever throws is replaced by a
// fallback text naming what it threw ("[message unavailable: Error: no]",
// "[uninspectable object: Error: no]"); a custom inspector that throws is
// retried without it.

'use strict';

const util = require('node:util');
const { MAX_NAME_BYTES } = require('./protocol.js');

// Builtins, captured when the runner loads, before the program runs:
// everything this module does with the program's values goes through these,
// never through a property the program can replace. Frames are built from
// JSON.stringify'd primitive strings (it consults toJSON only on objects).
const ReflectApply = Reflect.apply;
const {
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
const JSONStringify = JSON.stringify;
const NumberIsFinite = Number.isFinite;
const ObjectKeys = Object.keys;
const StringCtor = String;
const ObjectPrototypeHasOwnProperty = uncurry(Object.prototype.hasOwnProperty);
const ObjectPrototypeIsPrototypeOf = uncurry(Object.prototype.isPrototypeOf);
const StringPrototypeCharCodeAt = uncurry(String.prototype.charCodeAt);
const StringPrototypeIndexOf = uncurry(String.prototype.indexOf);
const StringPrototypeIsWellFormed = uncurry(String.prototype.isWellFormed);
const StringPrototypeSlice = uncurry(String.prototype.slice);
const StringPrototypeToWellFormed = uncurry(String.prototype.toWellFormed);
const TypedArrayPrototype = ReflectGetPrototypeOf(Uint8Array.prototype);
const TypedArrayPrototypeGetSymbolToStringTag = uncurry(ReflectGetOwnPropertyDescriptor(TypedArrayPrototype, Symbol.toStringTag).get);
const BufferByteLength = Buffer.byteLength;
const utilInspect = util.inspect;
const {
  isArrayBuffer, isBigIntObject, isBooleanObject, isDataView, isDate, isGeneratorObject, isMap,
  isModuleNamespaceObject, isNativeError, isNumberObject, isPromise, isRegExp, isSet, isSharedArrayBuffer,
  isStringObject, isSymbolObject, isTypedArray, isWeakMap, isWeakSet,
} = util.types;

// The file name the program's frames carry (the host type-strips the
// model's source into it); every other frame is the runner's or Node's.
const PROGRAM_FILE = 'program.ts';

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

/**
 * errorFrame renders a failed done frame, cut to fit maxFrameBytes; with
 * exitStatus (an integer 0..255) it is an exit's ("exit":{"status":n}).
 */
function errorFrame(name, message, stack, limits, exitStatus) {
  const max = limits.maxFrameBytes;
  name = cutForJSON(wellFormed(name, MAX_NAME_BYTES), MAX_NAME_BYTES);
  message = wellFormed(message, max);
  stack = wellFormed(stack, max);
  const exit = exitStatus === undefined ? '' : `"exit":{"status":${exitStatus}},`;
  const head = `{"type":"done","ok":false,${exit}"error":{"name":${JSONStringify(name)},"message":`;
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

/**
 * doneErrorFrame renders the done frame of a program that threw err or,
 * with exitStatus (0..255), of one that exited before returning: err then
 * says how (its message: "process.exit(0)") and where (its stack).
 */
function doneErrorFrame(err, limits, exitStatus) {
  if (!isError(err)) return errorFrame('Uncaught', safeInspect(err), '', limits, exitStatus);
  const name = errorName(err);
  const message = textOf(err, 'message') ?? '';
  let stack = '';
  try {
    const s = err.stack;
    if (typeof s === 'string') stack = programStack(StringPrototypeSlice(s, 0, limits.maxFrameBytes));
  } catch {
    // a stack getter, or a prepareStackTrace the program set, that throws
  }
  return errorFrame(name, message, stack, limits, exitStatus);
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

module.exports = {
  PROGRAM_FILE,
  THROWN_CHARS,
  byteLength,
  capText,
  valueJSON,
  safeInspect,
  thrownText,
  textOf,
  errorName,
  programStack,
  cutForJSON,
  wellFormed,
  doneValueFrame,
  errorFrame,
  doneErrorFrame,
  argsJSON,
  argsPath,
};
