// Unit tests of the TS runner's protocol decoder, source-map decoder and
// value rendering. Run: node --test images/ts-runner/test/
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const protocol = require('../protocol.js');
const runner = require('../runner.js');
const values = require('../values.js');

const VECTORS = path.join(__dirname, '../../../portproto/testdata/vectors.json');
const LIMITS = { maxLogBytes: 1 << 20, maxValueBytes: 1 << 20, maxFrameBytes: 4 << 20 };

function decodeCode(dir, frame, max = 1 << 20) {
  try {
    protocol.decodeFrame(dir, frame, max);
    return null;
  } catch (err) {
    assert.ok(err instanceof protocol.ProtocolError, `untyped error ${err && err.stack}`);
    return err.code;
  }
}

test('vectors: host-to-runner frames are accepted or rejected as portproto says', () => {
  const { vectors } = JSON.parse(fs.readFileSync(VECTORS, 'utf8'));
  const mine = vectors.filter((v) => v.direction === protocol.HOST_TO_RUNNER);
  assert.ok(mine.length > 0);
  for (const v of mine) {
    let msg;
    let err;
    try {
      msg = protocol.validateHostFrame(Buffer.from(v.frame, 'utf8'));
    } catch (e) {
      err = e;
    }
    if (v.valid) {
      assert.equal(err, undefined, `${v.name}: rejected a valid frame: ${err && err.message}`);
      assert.equal(msg.type, JSON.parse(v.frame).type, v.name);
    } else {
      assert.ok(err instanceof protocol.ProtocolError, `${v.name}: accepted an invalid frame`);
      assert.equal(err.code, v.code, `${v.name}: ${err.message}`);
    }
    // The string form decodes the same way.
    assert.equal(decodeCode(v.direction, v.frame), v.valid ? null : v.code, v.name);
  }
});

test('vectors: runner-to-host frames too (the same decoder checks what the runner sends)', () => {
  const { vectors } = JSON.parse(fs.readFileSync(VECTORS, 'utf8'));
  for (const v of vectors.filter((x) => x.direction === protocol.RUNNER_TO_HOST)) {
    assert.equal(decodeCode(v.direction, v.frame), v.valid ? null : v.code, v.name);
  }
});

const RUN = (over = {}) => JSON.stringify({
  type: 'run', version: 1, program: 'x', bindings: [{ global: 'tools', functions: ['a'] }], limits: LIMITS, ...over,
});
const H2R = (frame, max) => decodeCode(protocol.HOST_TO_RUNNER, frame, max);

test('decoder: Go encoding/json corner cases', () => {
  const cases = [
    // [name, frame, expected code or null]
    ['result ok', '{"type":"result","id":1,"ok":true,"value":{"a":[1,2]}}', null],
    ['failed result without message (Go omits an empty message)', '{"type":"result","id":1,"ok":false}', null],
    ['failed result with null message', '{"type":"result","id":1,"ok":false,"message":null}', null],
    ['null ok is false', '{"type":"result","id":1,"ok":null,"message":"m"}', null],
    ['failed result with null value', '{"type":"result","id":1,"ok":false,"value":null}', 'bad-field'],
    ['id 1.0 is not an int literal', '{"type":"result","id":1.0,"ok":true,"value":1}', 'bad-field'],
    ['id 1e0 is not an int literal', '{"type":"result","id":1e0,"ok":true,"value":1}', 'bad-field'],
    ['id max', `{"type":"result","id":${2 ** 53 - 1},"ok":true,"value":1}`, null],
    ['id 2^53', '{"type":"result","id":9007199254740992,"ok":true,"value":1}', 'bad-field'],
    ['id beyond int64', '{"type":"result","id":99999999999999999999,"ok":true,"value":1}', 'bad-field'],
    ['id null', '{"type":"result","id":null,"ok":true,"value":1}', 'bad-field'],
    ['ok as string', '{"type":"result","id":1,"ok":"true","value":1}', 'bad-field'],
    ['message as number', '{"type":"result","id":1,"ok":false,"message":3}', 'bad-field'],
    ['unknown field', '{"type":"result","id":1,"ok":true,"value":1,"extra":0}', 'bad-field'],
    ['field in another case', '{"type":"result","ID":1,"ok":true,"value":1}', 'bad-field'],
    ['type in another case', '{"Type":"result","id":1,"ok":true,"value":1}', 'bad-field'],
    ['no type', '{"id":1}', 'bad-type'],
    ['numeric type', '{"type":1}', 'bad-type'],
    ['unknown type', '{"type":"nope"}', 'bad-type'],
    ['runner frame toward the runner', '{"type":"done","ok":true}', 'bad-type'],
    ['null frame', 'null', 'bad-type'],
    ['array frame', '[1]', 'not-json'],
    ['string frame', '"x"', 'not-json'],
    ['trailing garbage', '{"type":"result"} x', 'not-json'],
    ['NaN literal', '{"type":"result","id":1,"ok":true,"value":NaN}', 'not-json'],
    ['BOM', '\ufeff{"type":"result","id":1,"ok":true,"value":1}', 'not-json'],
    ['run', RUN(), null],
    ['run without bindings and program', JSON.stringify({ type: 'run', version: 1, limits: LIMITS }), null],
    ['run null bindings', RUN({ bindings: null }), null],
    ['run null functions', RUN({ bindings: [{ global: 't', functions: null }] }), null],
    ['run version 1.0', RUN().replace('"version":1', '"version":1.0'), 'bad-field'],
    ['run version missing', JSON.stringify({ type: 'run', program: '', bindings: [], limits: LIMITS }), 'bad-version'],
    ['run limits missing', JSON.stringify({ type: 'run', version: 1, program: '', bindings: [] }), 'bad-field'],
    ['run limits only frame bytes', JSON.stringify({ type: 'run', version: 1, limits: { maxFrameBytes: 4096 } }), null],
    ['run negative log bytes', RUN({ limits: { ...LIMITS, maxLogBytes: -1 } }), 'bad-field'],
    ['run fractional limit', RUN().replace('"maxLogBytes":1048576', '"maxLogBytes":1048576.5'), 'bad-field'],
    ['run exponent limit', RUN().replace('"maxLogBytes":1048576', '"maxLogBytes":1e6'), 'bad-field'],
    ['run unknown limits field', RUN({ limits: { ...LIMITS, extra: 1 } }), 'bad-field'],
    ['run unknown binding field', RUN({ bindings: [{ global: 't', functions: [], x: 1 }] }), 'bad-field'],
    ['run binding as array', RUN({ bindings: [['t']] }), 'bad-field'],
    ['run null binding', RUN({ bindings: [null] }), 'bad-field'],
    ['run empty function name', RUN({ bindings: [{ global: 't', functions: [''] }] }), 'bad-field'],
    ['run null function name', RUN({ bindings: [{ global: 't', functions: [null] }] }), 'bad-field'],
    ['run numeric function name', RUN({ bindings: [{ global: 't', functions: [1] }] }), 'bad-field'],
    ['run long function name', RUN({ bindings: [{ global: 't', functions: ['é'.repeat(513)] }] }), 'bad-field'],
    ['run 1024-byte function name', RUN({ bindings: [{ global: 't', functions: ['é'.repeat(512)] }] }), null],
    ['run global with newline', RUN({ bindings: [{ global: 'tools\n', functions: [] }] }), 'bad-field'],
    ['run odd names', RUN({ bindings: [{ global: '_T1', functions: ['__proto__', 'constructor', 'my-tool', 'a b', '☃'] }] }), null],
    ['run sourceMap number', RUN({ sourceMap: 1 }), 'bad-field'],
    ['run program null', RUN({ program: null }), null],
    ['duplicate keys: the last wins', '{"type":"result","id":0,"id":2,"ok":true,"value":1}', null],
  ];
  for (const [name, frame, code] of cases) assert.equal(H2R(frame), code, name);
});

test('decoder: decoded messages carry Go zero values and raw presence', () => {
  const r = protocol.validateHostFrame('{"type":"result","id":7,"ok":true,"value":null}');
  assert.deepEqual(r, { type: 'result', id: 7, ok: true, value: null, message: '' });
  const f = protocol.validateHostFrame('{"type":"result","id":7,"ok":false}');
  assert.equal(Object.hasOwn(f, 'value'), false);
  const run = protocol.validateHostFrame(JSON.stringify({ type: 'run', version: 1, limits: { maxFrameBytes: 5000 } }));
  assert.deepEqual(run, {
    type: 'run', version: 1, program: '', sourceMap: '', bindings: [], limits: { maxLogBytes: 0, maxValueBytes: 0, maxFrameBytes: 5000 },
  });
});

test('decoder: size and UTF-8', () => {
  const frame = '{"type":"result","id":1,"ok":true,"value":"' + 'x'.repeat(5000) + '"}';
  assert.equal(H2R(frame, 4096), 'too-large');
  assert.equal(H2R(frame, 0), null);
  const bad = Buffer.concat([Buffer.from('{"type":"result","id":1,"ok":true,"value":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
  assert.equal(decodeCode(protocol.HOST_TO_RUNNER, bad), 'not-utf8');
  // An encoded surrogate (ED A0 80) is not UTF-8 for Go either.
  const sur = Buffer.concat([Buffer.from('{"type":"result","id":1,"ok":true,"value":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]);
  assert.equal(decodeCode(protocol.HOST_TO_RUNNER, sur), 'not-utf8');
  assert.equal(decodeCode(protocol.HOST_TO_RUNNER, '{"type":"result","id":1,"ok":true,"value":"\ud800"}'), 'not-utf8');
  // An escaped lone surrogate is valid JSON text (Go reads it as U+FFFD).
  assert.equal(H2R('{"type":"result","id":1,"ok":true,"value":"\\ud800"}'), null);
});

test('decoder: never throws anything but ProtocolError on junk', () => {
  const seeds = [RUN(), '{"type":"result","id":1,"ok":true,"value":[{"a":"}"}]}', '{"type":"result","id":1,"ok":false,"message":"m"}'];
  let n = 0;
  for (const seed of seeds) {
    for (let i = 0; i < seed.length; i++) {
      for (const patch of ['', '"', '}', ']', '1.5', 'null', '\\', '{', ',']) {
        const frame = seed.slice(0, i) + patch + seed.slice(i + 1);
        decodeCode(protocol.HOST_TO_RUNNER, frame);
        n++;
      }
    }
  }
  assert.ok(n > 1000);
});

// --- source maps

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
function vlq(v) {
  let u = v < 0 ? (-v << 1) | 1 : v << 1;
  let s = '';
  do {
    let d = u & 31;
    u >>>= 5;
    if (u > 0) d |= 32;
    s += B64[d];
  } while (u > 0);
  return s;
}

test('source map: VLQ decoding', () => {
  assert.deepEqual(runner.decodeVLQ('AAAA'), [0, 0, 0, 0]);
  assert.deepEqual(runner.decodeVLQ('gB'), [16]);
  assert.deepEqual(runner.decodeVLQ('D'), [-1]);
  for (const v of [0, 1, -1, 15, 16, -16, 1000, -123456, 2 ** 29]) assert.deepEqual(runner.decodeVLQ(vlq(v)), [v]);
  assert.throws(() => runner.decodeVLQ('g'), /truncated/);
  assert.throws(() => runner.decodeVLQ('A!'), /base64/);
});

test('source map: positions map by greatest lower bound on the line', () => {
  // generated line 1: col 2 -> original line 4 col 0, col 8 -> original 4 col 6; line 0 unmapped.
  const mappings = ';' + vlq(2) + vlq(0) + vlq(4) + vlq(0) + ',' + vlq(6) + vlq(0) + vlq(0) + vlq(6) + ';' + vlq(0) + vlq(0) + vlq(1) + vlq(-6) + ',' + vlq(3);
  const lines = runner.parseSourceMap(JSON.stringify({ version: 3, sources: ['program.ts'], names: [], mappings }));
  assert.equal(runner.mapPosition(lines, 1, 1), null);
  assert.equal(runner.mapPosition(lines, 2, 1), null); // before the first segment
  assert.deepEqual(runner.mapPosition(lines, 2, 3), { line: 5, column: 1 });
  assert.deepEqual(runner.mapPosition(lines, 2, 8), { line: 5, column: 1 });
  assert.deepEqual(runner.mapPosition(lines, 2, 9), { line: 5, column: 7 });
  assert.deepEqual(runner.mapPosition(lines, 2, 50), { line: 5, column: 7 });
  assert.deepEqual(runner.mapPosition(lines, 3, 1), { line: 6, column: 1 });
  assert.equal(runner.mapPosition(lines, 3, 4), null); // an unmapped segment
  assert.equal(runner.mapPosition(lines, 9, 1), null);
  // The vector's map parses.
  assert.deepEqual(runner.parseSourceMap('{"version":3,"sources":["program.ts"],"mappings":"AAAA","names":[]}'), [[[0, 0, 0, 0]]]);
  assert.throws(() => runner.parseSourceMap('{"version":2,"mappings":""}'));
});

// --- values

test('values: JSON values cross as JSON, everything else as inspect', () => {
  const frame = (v, limits = LIMITS) => JSON.parse(values.doneValueFrame(v, limits));
  assert.deepEqual(frame(undefined), { type: 'done', ok: true });
  assert.deepEqual(frame(null), { type: 'done', ok: true, valueKind: 'json', value: null });
  const plain = { a: [1, 'two', true, null, { b: -0.5 }], u: undefined, n: Object.assign(Object.create(null), { k: 1 }) };
  assert.deepEqual(frame(plain).value, { a: [1, 'two', true, null, { b: -0.5 }], n: { k: 1 } });
  assert.deepEqual(frame([undefined, 1]).value, [null, 1]);
  const inspected = [
    [new Map([['a', 1]]), "Map(1) { 'a' => 1 }"],
    [NaN, 'NaN'],
    [10n, '10n'],
    [new Date(0), '1970-01-01T00:00:00.000Z'],
    [new (class Point { constructor() { this.x = 1; } })(), 'Point { x: 1 }'],
    [{ f() {} }, '{ f: [Function: f] }'],
    [[Infinity], '[ Infinity ]'],
  ];
  for (const [v, want] of inspected) assert.deepEqual(frame(v), { type: 'done', ok: true, valueKind: 'inspect', value: want });
  const cyc = { a: 1 };
  cyc.self = cyc;
  assert.equal(frame(cyc).valueKind, 'inspect');
  const shared = { s: 1 };
  assert.deepEqual(frame({ x: shared, y: shared }).value, { x: { s: 1 }, y: { s: 1 } });
  const throwing = { get x() { throw new Error('no'); } };
  assert.equal(frame(throwing).valueKind, 'inspect');
});

test('values: a value longer than maxValueBytes becomes a string prefix whose encoding fits', () => {
  const limits = { ...LIMITS, maxValueBytes: 10 };
  const done = (v) => JSON.parse(values.doneValueFrame(v, limits));
  const rawLen = (v) => Buffer.byteLength(JSON.stringify(done(v).value));
  assert.deepEqual(done('abcdefgh'), { type: 'done', ok: true, valueKind: 'json', value: 'abcdefgh' }); // 10 bytes of JSON
  assert.deepEqual(done('abcdefghi'), { type: 'done', ok: true, valueKind: 'json', value: '"abcdef', truncated: true });
  assert.deepEqual(done('ééééé'), { type: 'done', ok: true, valueKind: 'json', value: '"ééé', truncated: true });
  assert.deepEqual(done([1, 2, 3, 4, 5, 6]), { type: 'done', ok: true, valueKind: 'json', value: '[1,2,3,4', truncated: true });
  assert.deepEqual(done(new Map([[1, 2]])), { type: 'done', ok: true, valueKind: 'inspect', value: 'Map(1) {', truncated: true });
  assert.deepEqual(done(Symbol()), { type: 'done', ok: true, valueKind: 'inspect', value: 'Symbol()' }); // 10 bytes encoded
  assert.deepEqual(done(new Set()), { type: 'done', ok: true, valueKind: 'inspect', value: 'Set(0) {', truncated: true }); // 11 bytes encoded
  for (const v of ['abcdefghi', 'ééééé', '😀😀😀', [1, 2, 3, 4, 5, 6], new Map([[1, 2]]), new Set()]) assert.ok(rawLen(v) <= 10, String(v));
  assert.deepEqual(JSON.parse(values.doneValueFrame('abc', { ...LIMITS, maxValueBytes: 0 })), { type: 'done', ok: true, valueKind: 'json', value: '', truncated: true });
  // A frame limit below the value limit still bounds the frame.
  const tight = { maxLogBytes: 0, maxValueBytes: 1 << 20, maxFrameBytes: 4096 };
  const frame = values.doneValueFrame('"'.repeat(100000), tight);
  assert.ok(Buffer.byteLength(frame) <= 4096, `${Buffer.byteLength(frame)}`);
  assert.equal(JSON.parse(frame).truncated, true);
  protocol.decodeFrame(protocol.RUNNER_TO_HOST, frame, 4096);
});

test('values: an error done fits the frame', () => {
  const tight = { maxLogBytes: 0, maxValueBytes: 0, maxFrameBytes: 4096 };
  const err = new Error('m'.repeat(3000));
  err.stack = 's'.repeat(10000);
  const frame = values.doneErrorFrame(err, tight);
  assert.ok(Buffer.byteLength(frame) <= 4096);
  const done = protocol.decodeFrame(protocol.RUNNER_TO_HOST, frame, 4096);
  assert.equal(done.error.message, 'm'.repeat(3000));
  assert.ok(done.error.stack.startsWith('sss'));
  assert.deepEqual(JSON.parse(values.doneErrorFrame('x', LIMITS)), { type: 'done', ok: false, error: { name: 'Uncaught', message: "'x'" } });
});

test('text: cutForJSON respects character boundaries', () => {
  assert.equal(values.cutForJSON('abc', 2), 'ab');
  assert.equal(values.cutForJSON('a"b', 2), 'a');
  assert.equal(values.cutForJSON('a"b', 3), 'a"');
  assert.equal(values.cutForJSON('\u0001x', 6), '\u0001');
  assert.equal(values.cutForJSON('😀😀', 7), '😀');
  assert.equal(values.cutForJSON('😀😀', 8), '😀😀');
  for (const s of ['x"\\\n\t\u0001é€😀\u2028', 'plain']) {
    for (let b = 0; b < 40; b++) {
      const cut = values.cutForJSON(s, b);
      assert.ok(Buffer.byteLength(JSON.stringify(cut)) - 2 <= b);
      assert.ok(s.startsWith(cut) && cut.isWellFormed());
    }
  }
});

// --- hostile program objects: the renderers never throw and say what broke

const hostile = {
  // A proxy whose every trap throws.
  proxy: () => new Proxy({}, Object.fromEntries(['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf'].map((t) => [t, () => { throw new Error(`trap ${t}`); }]))),
  revoked: () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  },
  // An object whose custom inspector throws.
  inspector: () => ({ a: 1, [require('node:util').inspect.custom]() { throw new Error('no inspect'); } }),
};

test('values: hostile objects cross as JSON or a rendering, never an exception', () => {
  const frame = (v, limits = LIMITS) => {
    const text = values.doneValueFrame(v, limits);
    protocol.decodeFrame(protocol.RUNNER_TO_HOST, text, limits.maxFrameBytes);
    return JSON.parse(text);
  };
  const inspect = (value) => ({ type: 'done', ok: true, valueKind: 'inspect', value });
  const cases = [
    ['getter that throws', { get x() { throw new Error('no'); } }, inspect('{ x: [Getter] }')],
    ['proxy whose traps throw', hostile.proxy(), inspect('{}')],
    ['revoked proxy', hostile.revoked(), inspect('<Revoked Proxy>')],
    // (Symbol keys are not part of a value's JSON, as with JSON.stringify.)
    ['custom inspector that throws, on a JSON object', hostile.inspector(), { type: 'done', ok: true, valueKind: 'json', value: { a: 1 } }],
    ['custom inspector that throws', new (class Q { constructor() { this.q = 1; } [require('node:util').inspect.custom]() { throw new Error('no'); } })(), inspect('Q { q: 1 }')],
    ['toJSON is not called', { a: 1, toJSON() { throw new Error('called'); } }, inspect('{ a: 1, toJSON: [Function: toJSON] }')],
    ['Symbol.toPrimitive is not called', { a: 1, [Symbol.toPrimitive]() { throw new Error('called'); } }, { type: 'done', ok: true, valueKind: 'json', value: { a: 1 } }],
    ['512 levels are JSON', JSON.parse('['.repeat(512) + ']'.repeat(512)), { type: 'done', ok: true, valueKind: 'json', value: JSON.parse('['.repeat(512) + ']'.repeat(512)) }],
    ['513 levels are not', JSON.parse('['.repeat(513) + ']'.repeat(513)), inspect('[ [ [ [Array] ] ] ]')],
  ];
  for (const [name, v, want] of cases) assert.deepEqual(frame(v), want, name);
  // A prototype chain whose traps throw: util.inspect itself fails, twice.
  assert.deepEqual(frame(Object.create(hostile.proxy())), inspect('[uninspectable object: Error: trap getOwnPropertyDescriptor]'));
  // Huge renderings are produced only up to the cap, quickly.
  const limits = { ...LIMITS, maxValueBytes: 1000 };
  const x = new Array(1000).fill(1);
  const y = new Array(1000).fill(x);
  const bomb = new Array(1000).fill(y); // 10^9 numbers
  for (const [name, v, prefix] of [['sparse 2^32-1', new Array(2 ** 32 - 1), '[null,null,'], ['shared arrays', bomb, '[[[1,1,']]) {
    const start = Date.now();
    const done = frame(v, limits);
    assert.ok(Date.now() - start < 2000, name);
    assert.equal(done.valueKind, 'json', name);
    assert.equal(done.truncated, true, name);
    assert.ok(done.value.startsWith(prefix), name);
    assert.ok(Buffer.byteLength(JSON.stringify(done.value)) <= 1000, name);
  }
});

test('errors: hostile thrown values end as a named error with a useful message', () => {
  const error = (v) => {
    const text = values.doneErrorFrame(v, LIMITS);
    protocol.decodeFrame(protocol.RUNNER_TO_HOST, text, LIMITS.maxFrameBytes);
    return JSON.parse(text).error;
  };
  const withGetter = (key, get) => {
    const e = new Error('boom');
    Object.defineProperty(e, key, { get, configurable: true });
    return e;
  };
  const prim = new Error('x');
  prim.message = { [Symbol.toPrimitive]() { throw new Error('prim'); } };
  const odd = new Error('odd');
  odd.name = { toString() { return 'Named'; } };
  const arrayStack = new Error('arr');
  Object.defineProperty(arrayStack, 'stack', { value: ['not', 'a', 'string'] });
  const foreign = new Error('foreign');
  Object.defineProperty(foreign, 'stack', { value: 'Error: foreign\n    at run (/opt/dsh/ts-runner/runner.js:1:1)\n    at program.ts:3:9\n    at node:internal/x:1:1' });
  const cases = [
    ['name getter throws', withGetter('name', () => { throw new Error('no name'); }), 'Error', 'boom'],
    ['message getter throws', withGetter('message', () => { throw new TypeError('no message'); }), 'Error', '[message unavailable: TypeError: no message]'],
    ['message conversion throws', prim, 'Error', '[message unavailable: Error: prim]'],
    ['name is an object', odd, 'Named', 'odd'],
    ['stack getter throws', withGetter('stack', () => { throw new Error('no stack'); }), 'Error', 'boom'],
    ['a proxy of an error', new Proxy(new RangeError('r'), {}), 'RangeError', 'r'],
    ['proxy whose traps throw', hostile.proxy(), 'Uncaught', '{}'],
    ['revoked proxy', hostile.revoked(), 'Uncaught', '<Revoked Proxy>'],
    ['custom inspector throws', hostile.inspector(), 'Uncaught', "{\n  a: 1,\n  [Symbol(nodejs.util.inspect.custom)]: [Function: [nodejs.util.inspect.custom]]\n}"],
    ['a symbol', Symbol('s'), 'Uncaught', 'Symbol(s)'],
    ['a non-string stack', arrayStack, 'Error', 'arr'],
  ];
  for (const [name, v, wantName, wantMessage] of cases) {
    const e = error(v);
    assert.deepEqual([e.name, e.message], [wantName, wantMessage], name);
    assert.ok(!(e.stack || '').includes('/ts-runner/'), name);
  }
  assert.equal(error(arrayStack).stack, undefined);
  // Only program.ts frames survive a stack formatted elsewhere.
  assert.equal(error(foreign).stack, 'Error: foreign\n    at program.ts:3:9');
  // thrownText itself never throws.
  assert.equal(values.thrownText(hostile.proxy()), '{}');
  assert.equal(values.thrownText(withGetter('message', () => { throw new Error('x'); })), 'an unreadable value');
  assert.equal(values.thrownText('x'.repeat(1000)).length, 200);
});

// --- the tool-argument rule

test('arguments: JSON values cross exactly', () => {
  const text = (v, max = 1 << 20) => {
    const r = values.argsJSON(v, max);
    assert.equal(r.reason, undefined, r.reason && `${values.argsPath(r.node)}: ${r.reason}`);
    return r.text;
  };
  assert.equal(text({ a: [1, 2.5, 'x', true, false, null, { b: [] }], neg0: -0, 'é': '😀' }), '{"a":[1,2.5,"x",true,false,null,{"b":[]}],"neg0":0,"é":"😀"}');
  assert.equal(text(Object.assign(Object.create(null), { k: 1 })), '{"k":1}');
  assert.equal(text({ get x() { return 1; } }), '{"x":1}');
  assert.equal(text(Object.defineProperty({ a: 1 }, 'hidden', { value: () => 1, enumerable: false })), '{"a":1}');
  assert.equal(text(new Proxy({ a: 1 }, { get: (t, k) => (k === 'a' ? 2 : undefined) })), '{"a":2}');
  const shared = { s: 1 };
  assert.equal(text([shared, shared], 100), '[{"s":1},{"s":1}]');
  assert.equal(text(JSON.parse('['.repeat(512) + ']'.repeat(512))), '['.repeat(512) + ']'.repeat(512));
  assert.equal(text('s'), '"s"');
  // The walk stops only when the text certainly exceeds the budget.
  assert.equal(text(['éé', [1]], 10), '["éé",[1]]');
});

test('arguments: lossy values are rejected with a path', () => {
  const reject = (v, max = 1 << 20) => {
    const r = values.argsJSON(v, max);
    assert.notEqual(r.reason, undefined, `accepted: ${r.text}`);
    return `${values.argsPath(r.node)}: ${r.reason}`;
  };
  const cyc = { a: 1 };
  cyc.self = cyc;
  const { proxy: revoked, revoke } = Proxy.revocable({}, {});
  revoke();
  class Point { constructor() { this.x = 1; } }
  class MyArray extends Array {}
  const cases = [
    [{ items: [1, 2, 3, NaN] }, 'args.items[3]: NaN is not JSON'],
    [{ x: Infinity }, 'args.x: Infinity is not JSON'],
    [[-Infinity], 'args[0]: -Infinity is not JSON'],
    [NaN, 'args: NaN is not JSON'],
    [{ when: new Date(0) }, 'args.when: a Date is not JSON (use .toISOString())'],
    [{ opts: undefined }, 'args.opts: undefined is not JSON'],
    [[1, undefined], 'args[1]: undefined is not JSON'],
    [{ 'a b': { x: new Map() } }, 'args["a b"].x: a Map is not JSON'],
    [[new Set()], 'args[0]: a Set is not JSON'],
    [{ w: new WeakMap() }, 'args.w: a WeakMap is not JSON'],
    [{ fn: () => 1 }, 'args.fn: a function is not JSON'],
    [{ toJSON() { return 1; } }, 'args.toJSON: a function is not JSON'],
    [cyc, 'args.self: circular reference'],
    [[[1], [2, [cyc]]], 'args[1][1][0].self: circular reference'],
    [10n, 'args: a BigInt is not JSON'],
    [{ s: Symbol('s') }, 'args.s: a Symbol is not JSON'],
    [new Point(), 'args: an instance of Point is not JSON'],
    [new MyArray(), 'args: an instance of MyArray (a subclass of Array) is not JSON'],
    [Object.create({}), 'args: an object with a custom prototype is not JSON'],
    [{ u: new Uint8Array(2) }, 'args.u: a Uint8Array is not JSON'],
    [{ b: Buffer.from('x') }, 'args.b: a Buffer is not JSON'],
    [{ ab: new ArrayBuffer(1) }, 'args.ab: an ArrayBuffer is not JSON'],
    [[1, , 3], 'args[1]: a hole in a sparse array is not JSON'], // eslint-disable-line no-sparse-arrays
    [new Array(2 ** 32 - 1), 'args[0]: a hole in a sparse array is not JSON'],
    [{ s: 'a\ud800' }, 'args.s: a string with a lone surrogate is not JSON'],
    [{ '\udc00': 1 }, 'args: key "\\udc00" has a lone surrogate'],
    [{ [Symbol('k')]: 1 }, 'args: a Symbol key (Symbol(k)) is not JSON'],
    [{ [Symbol.toPrimitive]() { return 1; } }, 'args: a Symbol key (Symbol(Symbol.toPrimitive)) is not JSON'],
    [{ s: new String('x') }, 'args.s: a String object is not JSON (use a string)'],
    [{ p: Promise.resolve(1) }, 'args.p: a Promise is not JSON (await it first)'],
    [{ e: new Error('x') }, 'args.e: an Error is not JSON'],
    [{ r: /x/ }, 'args.r: a RegExp is not JSON'],
    [{ get x() { throw new Error('boom'); } }, 'args.x: reading it threw Error: boom'],
    [new Proxy({}, { ownKeys() { throw new Error('keys'); } }), 'args: listing its keys threw Error: keys'],
    [{ p: new Proxy({}, { getPrototypeOf() { throw new RangeError('proto'); } }) }, 'args.p: reading its prototype threw RangeError: proto'],
    [{ p: revoked }, "args.p: reading its prototype threw TypeError: Cannot perform 'getPrototypeOf' on a proxy that has been revoked"],
    [new Proxy([1], { get(t, k) { if (k === '0') throw new Error('elem'); return Reflect.get(t, k); } }), 'args[0]: reading it threw Error: elem'],
    [{ $ref: [1, { 'é': null, ok: NaN }] }, 'args.$ref[1].ok: NaN is not JSON'],
    [{ x: { 'é': NaN } }, 'args.x["é"]: NaN is not JSON'],
    [{ 'q"': NaN }, 'args["q\\""]: NaN is not JSON'],
    [{ s: 'x'.repeat(5000) }, 'args: too large: the call frame would exceed the 4096-byte frame limit', 4096],
    // 10 characters, 12 bytes: the walk counts characters (a lower bound);
    // the call itself checks the frame's exact size.
    [['éé', [1]], 'args: too large: the call frame would exceed the 9-byte frame limit', 9],
  ];
  for (const [v, want, max] of cases) assert.equal(reject(v, max), want);
  // A deep path is cut; so is a long key.
  let deep = [];
  for (let i = 0; i < 600; i++) deep = [deep];
  const got = reject(deep);
  assert.ok(got.startsWith('args[0][0][0]') && got.endsWith('…: nested deeper than 512 levels'), got);
  assert.equal(got.split(': ')[0].length, 200);
  assert.equal(reject({ ['k'.repeat(5000)]: { x: NaN } }), `args.${'k'.repeat(194)}…: NaN is not JSON`);
  // Shared arrays whose text would be 10^9 numbers are rejected once the
  // text reaches the cap: the walk reads each number it writes ("1," is 2
  // bytes), never the 10^9 a full walk would (counted, not timed).
  let reads = 0;
  const x = new Array(1000).fill(1);
  for (let i = 0; i < x.length; i++) Object.defineProperty(x, i, { get() { reads++; return 1; }, enumerable: true, configurable: true });
  assert.equal(reject(new Array(1000).fill(new Array(1000).fill(x))), 'args: too large: the call frame would exceed the 1048576-byte frame limit');
  assert.ok(reads > 0 && reads <= (1 << 20) / 2, `${reads} numbers read`);
});
