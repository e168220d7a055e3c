// End-to-end tests of the TS runner: a fake host serves the bridge on a Unix
// socket, spawns main.js as a child process and drives it through the
// protocol. Every frame the runner sends is checked with the strict decoder
// (direction runner-to-host). Run: node --test images/ts-runner/test/
'use strict';

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { WebSocketServer } = require('ws');

const protocol = require('../protocol.js');

const MAIN = path.join(__dirname, '..', 'main.js');
const LIMITS = { maxLogBytes: 1 << 20, maxValueBytes: 1 << 20, maxFrameBytes: 4 << 20 };
const TOOLS = ['search', 'fail', 'echo', '__proto__', 'constructor', 'toString', 'my-tool'];

// wrap turns a program body into what the host sends: the body of an async
// arrow function, one line below the wrapper's head (as prepare.go does).
const wrap = (body) => `(async () => {\n${body}\n})`;

// At most this many runner processes at a time, across concurrent tests:
// more only thrashes a small machine.
const MAX_CHILDREN = Math.max(2, Math.min(6, os.availableParallelism() * 2));
let children = 0;
const waiting = [];
async function acquireChild() {
  if (children >= MAX_CHILDREN) await new Promise((resolve) => waiting.push(resolve));
  children++;
}
function releaseChild() {
  children--;
  if (waiting.length) waiting.shift()();
}

// A default tool implementation: echo returns its args, fail rejects,
// search returns a structured value.
function defaultOnCall(call, reply) {
  switch (call.name) {
    case 'fail':
      return reply({ ok: false, message: `no luck with ${JSON.stringify(call.args)}` });
    case 'search':
      return reply({ ok: true, value: { hits: [{ id: 1, title: 'one' }, { id: 2, title: 'twö' }], query: call.args } });
    default:
      return reply({ ok: true, value: { name: call.name, args: call.args } });
  }
}

/**
 * host runs one program under a fake host and resolves with everything the
 * runner sent. Options: body (wrapped) or program, sourceMap, bindings,
 * limits, onCall(call, reply, ctx), runDelayMs, onHello(ws) (take over
 * after hello: send the run frame and answer calls yourself), socket,
 * timeoutMs, egress (the run frame's) with onEgress(msg, ws) (the
 * runner's open, data and close frames).
 */
async function host(opts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-ts-'));
  const sock = path.join(dir, 'bridge.sock');
  const limits = opts.limits || LIMITS;
  const server = http.createServer();
  const wss = new WebSocketServer({ server, path: '/v1', perMessageDeflate: false });
  await new Promise((resolve) => server.listen(sock, resolve));
  const out = { frames: [], hello: null, calls: [], logs: [], done: null, violations: [], afterDone: [], exitCode: null, stderr: '', stdout: '' };
  wss.on('connection', (ws) => {
    const ctx = { ws, sent: 0 };
    ws.on('message', (data, isBinary) => {
      const text = data.toString('utf8');
      out.frames.push(text);
      if (out.done) out.afterDone.push(text);
      let msg;
      try {
        assert.equal(isBinary, false, 'binary frame');
        msg = protocol.decodeFrame(protocol.RUNNER_TO_HOST, data, limits.maxFrameBytes);
      } catch (err) {
        out.violations.push(`${err.message} in ${text.slice(0, 200)}`);
        return;
      }
      if (msg.type === 'hello') {
        out.hello = JSON.parse(text);
        if (opts.onHello) return opts.onHello(ws);
        const run = JSON.stringify({
          type: 'run', version: 1, program: opts.program ?? wrap(opts.body),
          ...(opts.sourceMap && { sourceMap: opts.sourceMap }),
          ...(opts.egress && { egress: opts.egress }),
          bindings: opts.bindings || [{ global: 'tools', functions: TOOLS }],
          limits,
        });
        setTimeout(() => ws.send(run), opts.runDelayMs || 0);
      } else if (msg.type === 'call') {
        out.calls.push(JSON.parse(text));
        const reply = (r) => ws.send(JSON.stringify({ type: 'result', id: msg.id, ...r }));
        if (!opts.onHello) (opts.onCall || defaultOnCall)(JSON.parse(text), reply, ctx);
      } else if (msg.type === 'log') {
        out.logs.push(JSON.parse(text));
      } else if (msg.type === 'done') {
        out.done = JSON.parse(text);
        // The runner's own timings vary run to run: kept apart.
        out.timings = out.done.timings;
        delete out.done.timings;
      } else if (opts.onEgress) {
        opts.onEgress(JSON.parse(text), ws);
      }
    });
  });
  await acquireChild();
  const child = spawn(process.execPath, [MAIN, opts.socket || sock], {
    env: { PATH: process.env.PATH || '/usr/bin:/bin', HOME: os.tmpdir(), LANG: 'C.UTF-8' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (d) => { out.stdout += d; });
  child.stderr.on('data', (d) => { out.stderr += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs || 60000);
  out.exitCode = await new Promise((resolve) => child.on('exit', (code, signal) => resolve(signal || code)));
  releaseChild();
  clearTimeout(timer);
  for (const c of wss.clients) c.terminate();
  await new Promise((resolve) => wss.close(resolve));
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
  return out;
}

// ok asserts a clean run: exit 0, valid frames, done last, nothing on stderr.
function ok(out) {
  assert.deepEqual(out.violations, [], 'runner sent invalid frames');
  assert.equal(out.exitCode, 0, `exit ${out.exitCode}, stderr: ${out.stderr}`);
  assert.ok(out.done, 'no done frame');
  assert.deepEqual(out.afterDone, [], 'frames after done');
  assert.equal(out.stderr, '');
  assert.equal(out.stdout, '');
  return out.done;
}

// The runs are independent processes: run the tests side by side.
describe('runner', { concurrency: 4 }, () => {
  test('hello, then a JSON value', async () => {
    const out = await host({ body: 'return { a: [1, "two", true, null], n: 1.5, s: "é😀" };' });
    assert.deepEqual(out.hello, { type: 'hello', version: 1, language: 'typescript', runner: 'dsh-ts-runner/1' });
    assert.equal(out.frames[0], '{"type":"hello","version":1,"language":"typescript","runner":"dsh-ts-runner/1"}');
    assert.deepEqual(ok(out), { type: 'done', ok: true, valueKind: 'json', value: { a: [1, 'two', true, null], n: 1.5, s: 'é😀' } });
    // The done frame carries the runner's phase durations, in µs.
    assert.deepEqual(Object.keys(out.timings).sort(), ['compileUs', 'evaluateUs', 'renderUs']);
    for (const v of Object.values(out.timings)) assert.ok(Number.isInteger(v) && v >= 0 && v < 60e6, JSON.stringify(out.timings));
  });

  test('no value, null value, a warm-pool wait before the run frame', async () => {
    const [none, nul] = await Promise.all([host({ body: 'const x = 1;', runDelayMs: 300 }), host({ body: 'return null;' })]);
    assert.deepEqual(ok(none), { type: 'done', ok: true });
    assert.deepEqual(ok(nul), { type: 'done', ok: true, valueKind: 'json', value: null });
  });

  test('top-level await, and dynamic import of Node modules', async () => {
    const out = await host({
      body: 'const v = await new Promise((r) => setTimeout(() => r(21), 20));\nconst { createHash } = await import("node:crypto");\nreturn [v * 2, createHash("sha256").update("x").digest("hex").slice(0, 8)];',
    });
    assert.deepEqual(ok(out), { type: 'done', ok: true, valueKind: 'json', value: [42, '2d711642'] });
    assert.deepEqual(out.logs, []); // no ExperimentalWarning about the loader
  });

  test('logs of every source and level', async () => {
    const out = await host({
      body: [
        'console.log("log", 1, { a: 1 });',
        'console.info("info %s", "x");',
        'console.warn("warn");',
        'console.error(new Error("shown").message);',
        'console.debug("debug");',
        'console.trace("traced");',
        'console.dir({ deep: { er: { est: 1 } } }, { depth: 0 });',
        'console.log();',
        'process.stdout.write("raw out\\n");',
        'process.stderr.write(Buffer.from("raw err"));',
        'process.stdout.write("");',
        'console.group("g"); console.log("inside"); console.groupEnd();',
        'console.assert(1 === 2, "nope");',
        'console.table([{ a: 1 }]);',
      ].join('\n'),
    });
    ok(out);
    const logs = out.logs.map(({ type, ...rest }) => rest);
    const trace = logs.find((l) => l.text.startsWith('Trace: traced'));
    assert.deepEqual(trace && trace.level, 'debug');
    assert.match(trace.text, /^Trace: traced\n {4}at program\.ts:7:9$/);
    assert.deepEqual(logs.filter((l) => l !== trace && l.text !== undefined && !l.text.includes('┌')), [
      { source: 'console', level: 'log', text: 'log 1 { a: 1 }' },
      { source: 'console', level: 'info', text: 'info x' },
      { source: 'console', level: 'warn', text: 'warn' },
      { source: 'console', level: 'error', text: 'shown' },
      { source: 'console', level: 'debug', text: 'debug' },
      { source: 'console', level: 'log', text: '{ deep: [Object] }' },
      { source: 'console', level: 'log', text: '' },
      { source: 'stdout', text: 'raw out\n' },
      { source: 'stderr', text: 'raw err' },
      { source: 'console', level: 'log', text: 'g' },
      { source: 'console', level: 'log', text: '  inside' },
      { source: 'console', level: 'error', text: 'Assertion failed: nope' },
    ]);
    assert.ok(logs.some((l) => l.level === 'log' && l.text.includes('┌')), 'console.table output');
  });

  test('a tool call round trip with structured args and value', async () => {
    const out = await host({ body: 'const r = await tools.search({ q: "x", n: [1, 2], nested: { ok: true } });\nreturn r;' });
    const done = ok(out);
    assert.deepEqual(out.calls, [{ type: 'call', id: 1, global: 'tools', name: 'search', args: { q: 'x', n: [1, 2], nested: { ok: true } } }]);
    assert.deepEqual(done.value, { hits: [{ id: 1, title: 'one' }, { id: 2, title: 'twö' }], query: { q: 'x', n: [1, 2], nested: { ok: true } } });
  });

  test('undefined args cross as null; the namespace is null-prototype with odd names as members', async () => {
    const out = await host({
      body: [
        'const a = await tools.echo();',
        'const b = await tools["__proto__"](1);',
        'const c = await tools.constructor({ x: 2 });',
        'const d = await tools.toString("s");',
        'const e = await tools["my-tool"]([3]);',
        'return { a, b, c, d, e, proto: Object.getPrototypeOf(tools) === null, keys: Object.keys(tools),',
        '  isAsync: tools.echo.constructor.name, name: tools["my-tool"].name };',
      ].join('\n'),
    });
    const done = ok(out);
    assert.deepEqual(out.calls.map((c) => [c.id, c.name, c.args]), [[1, 'echo', null], [2, '__proto__', 1], [3, 'constructor', { x: 2 }], [4, 'toString', 's'], [5, 'my-tool', [3]]]);
    assert.deepEqual(done.value, {
      a: { name: 'echo', args: null },
      b: { name: '__proto__', args: 1 },
      c: { name: 'constructor', args: { x: 2 } },
      d: { name: 'toString', args: 's' },
      e: { name: 'my-tool', args: [3] },
      proto: true,
      keys: TOOLS,
      isAsync: 'AsyncFunction',
      name: 'my-tool',
    });
  });

  test('a rejected call is an Error with toolName, caught by the program', async () => {
    const out = await host({
      body: [
        'try {',
        '  await tools.fail({ why: 1 });',
        '} catch (e) {',
        '  return { isError: e instanceof Error, message: e.message, toolName: e.toolName, stack: e.stack };',
        '}',
      ].join('\n'),
    });
    const { value } = ok(out);
    assert.equal(value.isError, true);
    assert.equal(value.message, 'no luck with {"why":1}');
    assert.equal(value.toolName, 'fail');
    // The stack points at the call site (body line 2 is line 3 of the wrapped text: no source map here).
    assert.equal(value.stack, 'Error: no luck with {"why":1}\n    at program.ts:3:15');
  });

  test('an uncaught rejected call fails the run', async () => {
    const out = await host({ body: 'await tools.fail(null);\nreturn 1;' });
    assert.deepEqual(ok(out), {
      type: 'done', ok: false, error: { name: 'Error', message: 'no luck with null', stack: 'Error: no luck with null\n    at program.ts:2:13' },
    });
  });

  test('Promise.all with results in reverse order', async () => {
    const held = [];
    const out = await host({
      body: [
        'const names = ["a", "b", "c", "d"];',
        'const r = await Promise.all(names.map((n, i) => tools.echo({ n, i })));',
        'return r.map((x) => x.n).join("");',
      ].join('\n'),
      onCall(call, reply) {
        held.push([call, reply]);
        if (held.length === 4) {
          for (const [c, rep] of held.reverse()) rep({ ok: true, value: c.args });
          held.length = 0;
        }
      },
    });
    const done = ok(out);
    assert.deepEqual(out.calls.map((c) => c.id), [1, 2, 3, 4]);
    assert.deepEqual(out.calls.map((c) => c.args.n), ['a', 'b', 'c', 'd']);
    // Each call resolved with its own result despite the order.
    assert.deepEqual(done, { type: 'done', ok: true, valueKind: 'json', value: 'abcd' });
  });

  test('arguments that are not JSON are rejected in the program with a path; nothing is sent', async () => {
    // (the protocol test covers the rule in full; here each rejection must
    // reach the program as a TypeError and send nothing)
    const cases = [
      ['{ items: [1, 2, 3, NaN] }', 'tools["echo"]: args.items[3]: NaN is not JSON'],
      ['{ when: new Date(0) }', 'tools["echo"]: args.when: a Date is not JSON (use .toISOString())'],
      ['{ opts: undefined }', 'tools["echo"]: args.opts: undefined is not JSON'],
      ['{ "a b": { x: new Map() } }', 'tools["echo"]: args["a b"].x: a Map is not JSON'],
      ['{ fn: () => 1 }', 'tools["echo"]: args.fn: a function is not JSON'],
      ['cyc', 'tools["echo"]: args.self: circular reference'],
      ['10n', 'tools["echo"]: args: a BigInt is not JSON'],
      ['Symbol("s")', 'tools["echo"]: args: a Symbol is not JSON'],
      ['[1, , 3]', 'tools["echo"]: args[1]: a hole in a sparse array is not JSON'],
      ['{ get x() { throw new Error("getter") } }', 'tools["echo"]: args.x: reading it threw Error: getter'],
      ['"x".repeat(5000)', 'tools["echo"]: args: too large: the call frame would exceed the 4096-byte frame limit'],
      ['{ s: "\\ud800" }', 'tools["my-tool"]: args.s: a string with a lone surrogate is not JSON'],
    ];
    const out = await host({
      limits: { ...LIMITS, maxFrameBytes: 4096 },
      body: [
        'const errs = [];',
        'const cyc = { a: 1 }; cyc.self = cyc;',
        ...cases.map(([v, want]) => `try { await tools${want.includes('my-tool') ? '["my-tool"]' : '.echo'}(${v}); errs.push("sent"); } catch (e) { errs.push(e.constructor.name + ": " + e.message); }`),
        'errs.push((await tools.echo("after")).args);',
        'return errs;',
      ].join('\n'),
    });
    const done = ok(out);
    assert.deepEqual(done.value, [...cases.map(([, want]) => `TypeError: ${want}`), 'after']);
    // Nothing was sent for the rejected calls, and no id was used.
    assert.deepEqual(out.calls.map((c) => [c.id, c.args]), [[1, 'after']]);
  });

  test('hostile programs end as exceptions or renderings, never break the runner', async () => {
    // [name, body, check(done, out)]. Every run must end with a valid done
    // frame, nothing on stderr, and no runner frame anywhere.
    const error = (name, message, stack) => (done) => {
      assert.equal(done.ok, false, JSON.stringify(done));
      assert.equal(done.exit, undefined, 'an exception is not an exit');
      assert.deepEqual([done.error.name, done.error.message], [name, message]);
      if (stack !== undefined) assert.match(done.error.stack || '', stack);
    };
    const value = (v, kind = 'json') => (done) => assert.deepEqual(done, { type: 'done', ok: true, valueKind: kind, value: v });
    const cases = [
      ['name getter throws',
        'const e = new Error("boom"); Object.defineProperty(e, "name", { get() { throw new Error("no name"); } }); throw e;',
        error('Error', 'boom', /^Error: boom\n {4}at program\.ts:2:11$/)],
      ['message getter throws',
        'const e = new Error("boom"); Object.defineProperty(e, "message", { get() { throw new TypeError("no message"); } }); throw e;',
        error('Error', '[message unavailable: TypeError: no message]', /^Error: \[message unavailable: TypeError: no message\]\n {4}at program\.ts:2:11$/)],
      ['message with a Symbol.toPrimitive that throws',
        'const e = new Error("x"); e.message = { [Symbol.toPrimitive]() { throw new Error("prim"); } }; throw e;',
        error('Error', '[message unavailable: Error: prim]')],
      ['prepareStackTrace that throws',
        'Error.prepareStackTrace = () => { throw new Error("pst"); };\nthrow new RangeError("r");',
        (done) => assert.deepEqual(done.error, { name: 'RangeError', message: 'r' })],
      ['prepareStackTrace set to undefined',
        'Error.prepareStackTrace = undefined;\nthrow new Error("x");',
        error('Error', 'x', /^Error: x\n {4}at program\.ts:3:7$/)],
      ['prepareStackTrace of its own, with every frame',
        'Error.prepareStackTrace = (e, cs) => String(e) + cs.map((c) => "\\n    at " + c).join("");\nconst s = new Error("mine").stack;\nif (!s.includes("ts-runner/runner.js")) throw new Error("expected the runner frames here");\nthrow new Error("x");',
        error('Error', 'x', /^Error: x\n {4}at program\.ts:5:7$/)],
      ['prepareStackTrace returning call sites',
        'Error.prepareStackTrace = (e, cs) => cs;\nconst cs = new Error().stack;\nif (typeof cs[0].getLineNumber !== "function") throw new Error("no call sites");\nthrow new Error("x");',
        (done) => assert.deepEqual(done.error, { name: 'Error', message: 'x' })],
      ['a proxy whose traps throw',
        'throw new Proxy({}, { get() { throw new Error("g"); }, getPrototypeOf() { throw new Error("p"); }, ownKeys() { throw new Error("k"); } });',
        (done) => assert.deepEqual(done.error, { name: 'Uncaught', message: '{}' })],
      ['a revoked proxy',
        'const { proxy, revoke } = Proxy.revocable({}, {}); revoke(); throw proxy;',
        (done) => assert.deepEqual(done.error, { name: 'Uncaught', message: '<Revoked Proxy>' })],
      ['process.exit with a bad code', 'try { process.exit("x"); } catch (e) { return [e.code, e.name]; }',
        value(['ERR_INVALID_ARG_TYPE', 'TypeError'])],
      ['a value with a getter that throws', 'return { get x() { throw new Error("no"); } };', value('{ x: [Getter] }', 'inspect')],
      // (Returning it makes the async function read its "then": the program's own TypeError.)
      ['a value that is a revoked proxy', 'const { proxy, revoke } = Proxy.revocable({}, {}); revoke(); return proxy;',
        error('TypeError', "Cannot perform 'get' on a proxy that has been revoked", /^TypeError: .*\n {4}at program\.ts:2:\d+$/)],
      ['a value that holds a revoked proxy', 'const { proxy, revoke } = Proxy.revocable({}, {}); revoke(); return [proxy];', value('[ <Revoked Proxy> ]', 'inspect')],
      ['a value whose inspector throws',
        'class Q { q = 1; [Symbol.for("nodejs.util.inspect.custom")]() { throw new Error("no"); } }\nreturn new Q();', value('Q { q: 1 }', 'inspect')],
      ['a huge sparse array', 'return new Array(2 ** 32 - 1);', (done) => {
        assert.equal(done.truncated, true);
        assert.ok(done.value.startsWith('[null,null,'));
      }],
      ['console.log of hostile objects',
        'console.log(new Proxy({}, { get() { throw new Error("g"); } }));\n' +
        'try { console.log({ [Symbol.for("nodejs.util.inspect.custom")]() { throw new Error("no inspect"); } }); } catch (e) { console.log("caught " + e.message); }\n' +
        'try { console.log("%d", { [Symbol.toPrimitive]() { throw new Error("no number"); } }); } catch (e) { console.log("caught " + e.message); }\n' +
        'return "logged";',
        (done, out) => {
          value('logged')(done);
          assert.deepEqual(out.logs.map((l) => l.text), ['{}', 'caught no inspect', 'caught no number']);
        }],
      ['console methods overwritten',
        'console.log = () => { throw new Error("mine"); };\nconsole.table([{ a: 1 }]);\nconsole.error("still");\ntry { console.log("x"); } catch (e) { return e.message; }',
        (done, out) => {
          value('mine')(done);
          assert.ok(out.logs.some((l) => l.text.includes('┌')));
          assert.ok(out.logs.some((l) => l.text === 'still' && l.level === 'error'));
        }],
      ['stdout ended by the program', 'process.stdout.end("bye\\n");\nprocess.stdout.write("still here\\n");\nreturn 1;',
        (done, out) => {
          value(1)(done);
          assert.deepEqual(out.logs.map((l) => [l.source, l.text]), [['stdout', 'bye\n'], ['stdout', 'still here\n']]);
        }],
      ['the exits replaced by the program',
        'process.exit = () => "mine";\nprocess.reallyExit = () => {};\nprocess.abort = () => {};\nreturn process.exit(0);',
        value('mine')],
      ['builtins replaced by the program',
        [
          'Object.prototype.toJSON = function () { return "hijacked"; };',
          'Array.prototype.toJSON = function () { return "hijacked"; };',
          'JSON.stringify = () => { throw new Error("no stringify"); };',
          'String.prototype.toWellFormed = () => { throw new Error("no toWellFormed"); };',
          'Promise.prototype.then = function () { throw new Error("no then"); };',
          'console.log("logged", { a: [1] });',
          'const r = await tools.echo({ a: [1, { b: 2 }] });',
          'return { r, list: [1, 2] };',
        ].join('\n'),
        (done, out) => {
          value({ r: { name: 'echo', args: { a: [1, { b: 2 }] } }, list: [1, 2] })(done);
          assert.deepEqual(out.calls.map((c) => c.args), [{ a: [1, { b: 2 }] }]);
          assert.deepEqual(out.logs.map((l) => l.text), ['logged { a: [ 1 ] }']);
        }],
      // The host-frame decoder uses the realm's builtins: one the program
      // broke ends the run as the program's exception, not a protocol violation.
      ['a builtin the decoder uses, replaced',
        'String.prototype.slice = function () { throw new Error("no slice"); };\nawait tools.echo(1);\nreturn "unreached";',
        error('Error', 'no slice', /^Error: no slice\n {4}at String\.slice \(program\.ts:2:46\)$/)],
      ['an error thrown with toJSON on every object',
        'Object.prototype.toJSON = () => 1;\nthrow new Error("plain");',
        error('Error', 'plain', /^Error: plain\n {4}at program\.ts:3:7$/)],
      ['stack overflow while logging',
        'let n = 0;\nfunction f() { n++; console.log("depth " + n); f(); }\ntry { f(); } catch (e) { return ["caught", e.message]; }',
        (done, out) => {
          value(['caught', 'Maximum call stack size exceeded'])(done);
          assert.equal(out.logs.length, 10001);
        }],
    ];
    const outs = await Promise.all(cases.map(([, body]) => host({ body })));
    cases.forEach(([name, , check], i) => {
      const out = outs[i];
      const done = ok(out);
      for (const f of out.frames) assert.doesNotMatch(f, /\/ts-runner\//, name);
      try {
        check(done, out);
      } catch (err) {
        err.message = `${name}: ${err.message}`;
        throw err;
      }
    });
  });

  test('a program that exits before returning has not completed, whatever the status', async () => {
    // [name, body, status, how, stack]: the done frame is an exit, never a
    // completed run, 0 included, from any callback; the runner itself
    // still exits 0 after it.
    const cases = [
      ['process.exit(0)', 'process.exit(0);\nreturn "unreached";', 0, 'process.exit(0)', /^Exit: process\.exit\(0\)\n {4}at program\.ts:2:9$/],
      ['process.exit()', 'process.exit();', 0, 'process.exit()'],
      ['process.exit(3), with logs around it', 'console.log("before");\nprocess.exit(3);\nconsole.log("after");', 3, 'process.exit(3)',
        /^Exit: process\.exit\(3\)\n {4}at program\.ts:3:9$/],
      ['process.exit(0) in a timer', 'setTimeout(() => process.exit(0), 5);\nawait new Promise((r) => setTimeout(r, 2000));\nreturn "unreached";', 0, 'process.exit(0)'],
      ['process.exit(2) in a timer', 'setTimeout(() => process.exit(2), 5);\nawait new Promise((r) => setTimeout(r, 2000));', 2, 'process.exit(2)'],
      ['process.exit(0) in a tool call\'s callback', 'await tools.echo(1).then(() => process.exit(0));\nreturn "unreached";', 0, 'process.exit(0)'],
      ['process.exit(0) caught by the program', 'try { process.exit(0); } catch {}\nreturn "after";', 0, 'process.exit(0)'],
      ['process.exitCode then process.exit()', 'process.exitCode = 4;\nprocess.exit();', 4, 'process.exit() with process.exitCode 4'],
      ['process.exitCode 0 then process.exit()', 'process.exitCode = 0;\nprocess.exit();', 0, 'process.exit() with process.exitCode 0'],
      ['process.exit(256) is status 0', 'process.exit(256);', 0, 'process.exit(256)'],
      ['process.exit(-1) is status 255', 'process.exit(-1);', 255, 'process.exit(-1)'],
      ['process.exit("7")', 'process.exit("7");', 7, 'process.exit("7")'],
      ['process.reallyExit(0)', 'process.reallyExit(0);\nreturn "unreached";', 0, 'process.reallyExit(0)'],
      ['process.reallyExit(5)', 'process.reallyExit(5);', 5, 'process.reallyExit(5)'],
      ['process.abort()', 'process.abort();\nreturn "unreached";', 134, 'process.abort()', /^Exit: process\.abort\(\)\n {4}at program\.ts:2:9$/],
    ];
    const outs = await Promise.all(cases.map(([, body]) => host({ body })));
    cases.forEach(([name, , status, how, stack], i) => {
      const out = outs[i];
      try {
        const done = ok(out);
        assert.equal(done.ok, false, JSON.stringify(done));
        assert.deepEqual(done.exit, { status });
        assert.deepEqual([done.error.name, done.error.message], ['Exit', how]);
        if (stack !== undefined) assert.match(done.error.stack || '', stack);
        for (const f of out.frames) assert.doesNotMatch(f, /\/ts-runner\//);
        if (name.includes('logs')) assert.deepEqual(out.logs.map((l) => l.text), ['before']);
      } catch (err) {
        err.message = `${name}: ${err.message}`;
        throw err;
      }
    });
  });

  // --- source maps: a hand-written map of a type-stripped program.

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

  // sourceMap encodes segments [genLine, genCol, origLine, origCol] (0-based).
  function sourceMap(segments) {
    const byLine = [];
    for (const [gl, gc, ol, oc] of segments) (byLine[gl] ||= []).push([gc, ol, oc]);
    let prevOl = 0;
    let prevOc = 0;
    const lines = [];
    for (let gl = 0; gl < byLine.length; gl++) {
      let prevGc = 0;
      lines.push((byLine[gl] || []).sort((a, b) => a[0] - b[0]).map(([gc, ol, oc]) => {
        const seg = vlq(gc - prevGc) + vlq(0) + vlq(ol - prevOl) + vlq(oc - prevOc);
        prevGc = gc;
        prevOl = ol;
        prevOc = oc;
        return seg;
      }).join(','));
    }
    return JSON.stringify({ version: 3, sources: ['program.ts'], names: [], mappings: lines.join(';') });
  }

  test('stack traces name the original line through the source map', async () => {
    // The model wrote (1-based lines):
    //   1 // the model's program
    //   2
    //   3 type Hit = { n: number };
    //   4
    //   5 const hit: Hit = { n: 1 };
    //   6 console.log(new Error("logged").stack);
    //   7 function boom(h: Hit): never {
    //   8   throw new Error("boom " + h.n);
    //   9 }
    //  10 boom(hit);
    // The host stripped the types, dropped the blank and type-only lines and
    // wrapped the body; the map sends each generated line back.
    const program = [
      '(async () => {',
      'const hit = { n: 1 };',
      'console.log(new Error("logged").stack);',
      'function boom(h) {',
      '  throw new Error("boom " + h.n);',
      '}',
      'boom(hit);',
      '})',
    ].join('\n');
    const map = sourceMap([
      [1, 0, 4, 0],
      [2, 0, 5, 0], [2, 12, 5, 12],
      [3, 0, 6, 0],
      [4, 2, 7, 2], [4, 8, 7, 8],
      [5, 0, 8, 0],
      [6, 0, 9, 0],
    ]);
    const out = await host({ program, sourceMap: map });
    const done = ok(out);
    assert.deepEqual(out.logs.map((l) => l.text), ['Error: logged\n    at program.ts:6:13']);
    assert.equal(done.ok, false);
    assert.deepEqual(done.error, {
      name: 'Error',
      message: 'boom 1',
      stack: 'Error: boom 1\n    at boom (program.ts:8:9)\n    at program.ts:10:1',
    });
    assert.doesNotMatch(done.error.stack, /\/ts-runner\/|node:/);
  });

  test('without a source map, positions are those of the program text', async () => {
    const out = await host({ body: 'null.x;' });
    const done = ok(out);
    assert.equal(done.error.name, 'TypeError');
    assert.match(done.error.message, /Cannot read properties of null/);
    assert.match(done.error.stack, /^TypeError: Cannot read properties of null \(reading 'x'\)\n {4}at program\.ts:2:6$/);
  });

  test('thrown non-Errors, unhandled rejections and uncaught exceptions fail the run', async () => {
    const outs = await Promise.all([
      host({ body: 'throw { code: 7 };' }),
      host({ body: 'Promise.reject(new RangeError("late"));\nawait new Promise((r) => setTimeout(r, 200));\nreturn 1;' }),
      host({ body: 'setTimeout(() => { throw new SyntaxError("in a timer"); }, 5);\nawait new Promise((r) => setTimeout(r, 200));' }),
      host({ program: '(async () => {\n  let = ;\n})' }),
      host({ program: '42' }),
    ]);
    const [obj, rej, unc, syntax, notFn] = outs.map((o) => ok(o).error);
    assert.deepEqual(obj, { name: 'Uncaught', message: '{ code: 7 }' });
    assert.deepEqual([rej.name, rej.message], ['RangeError', 'late']);
    assert.match(rej.stack, /^RangeError: late\n {4}at program\.ts:2:16$/);
    assert.deepEqual([unc.name, unc.message], ['SyntaxError', 'in a timer']);
    assert.equal(syntax.name, 'SyntaxError');
    assert.deepEqual([notFn.name, notFn.message], ['TypeError', 'the program evaluated to number, not a function']);
  });

  test('values that are not JSON cross as their inspect rendering', async () => {
    // (doneValueFrame's unit test covers more kinds of values.)
    const cases = [
      ['return new Map([["a", 1]]);', "Map(1) { 'a' => 1 }"],
      ['class P { constructor() { this.x = 1; } }\nreturn new P();', 'P { x: 1 }'],
      ['const c = { a: 1, n: NaN }; c.self = c;\nreturn c;', '<ref *1> { a: 1, n: NaN, self: [Circular *1] }'],
    ];
    const outs = await Promise.all(cases.map(([body]) => host({ body })));
    cases.forEach(([body, want], i) => assert.deepEqual(ok(outs[i]), { type: 'done', ok: true, valueKind: 'inspect', value: want }, body));
  });

  test('a value over maxValueBytes is truncated', async () => {
    const limits = { ...LIMITS, maxValueBytes: 1000 };
    const [big, small] = await Promise.all([host({ limits, body: 'return "é".repeat(3000);' }), host({ limits, body: 'return "é".repeat(100);' })]);
    const done = ok(big);
    assert.equal(done.truncated, true);
    assert.equal(done.valueKind, 'json');
    assert.ok(Buffer.byteLength(JSON.stringify(done.value)) <= 1000);
    assert.equal(done.value, '"' + 'é'.repeat(498));
    assert.deepEqual(ok(small), { type: 'done', ok: true, valueKind: 'json', value: 'é'.repeat(100) });
  });

  test('logs stop once their total crosses maxLogBytes; a long entry is cut to the frame', async () => {
    const limits = { maxLogBytes: 200, maxValueBytes: 1000, maxFrameBytes: 4096 };
    const [out, long] = await Promise.all([
      host({ limits, body: 'for (let i = 0; i < 50; i++) console.log("line " + String(i).padStart(3, "0") + " ".repeat(20));\nreturn "finished";' }),
      host({ limits: { ...limits, maxLogBytes: 1 << 20 }, body: 'console.log("y".repeat(10000));\nprocess.stdout.write("\\n".repeat(5000));' }),
    ]);
    const done = ok(out);
    assert.equal(done.value, 'finished');
    // 28 bytes each plus 64 per entry: the 3rd entry crosses 200 and is the last one sent.
    assert.deepEqual(out.logs.map((l) => l.text.slice(0, 8)), ['line 000', 'line 001', 'line 002']);
    ok(long);
    assert.equal(long.logs.length, 2);
    for (const f of long.frames) assert.ok(Buffer.byteLength(f) <= 4096, `${Buffer.byteLength(f)}`);
    assert.match(long.logs[0].text, /^y{4000,}$/);
    assert.match(long.logs[1].text, /^\n{1000,}$/);
  });

  test('empty log entries count: the per-entry overhead and the 10,000-entry cap', async () => {
    const [many, small] = await Promise.all([
      host({ body: 'for (let i = 0; i < 50000; i++) console.log("");\nreturn "done";' }),
      host({ limits: { ...LIMITS, maxLogBytes: 640 }, body: 'for (let i = 0; i < 100; i++) console.log();\nreturn "done";' }),
    ]);
    assert.equal(ok(many).value, 'done');
    assert.equal(many.logs.length, 10001);
    assert.equal(ok(small).value, 'done');
    assert.equal(small.logs.length, 11); // 11 * 64 > 640
  });

  // --- protocol violations and the transport

  const RUN = (body) => JSON.stringify({ type: 'run', version: 1, program: wrap(body), bindings: [{ global: 'tools', functions: ['echo'] }], limits: LIMITS });

  test('protocol violations exit 71', async () => {
    const hang = 'await new Promise((r) => setTimeout(r, 5000));';
    // answer sends the run frame, then answers each call with make(call).
    const answer = (body, make) => (ws) => {
      ws.send(RUN(body));
      ws.on('message', (d) => {
        const m = JSON.parse(d);
        if (m.type === 'call') for (const r of make(m)) ws.send(JSON.stringify(r));
      });
    };
    const cases = [
      ['a result for an id not in flight', /id 2, which is not in flight/,
        answer(`await tools.echo(1);\n${hang}`, (m) => [{ type: 'result', id: m.id + 1, ok: true, value: 1 }])],
      ['a result settled twice', /id 1, which is not in flight/,
        answer(`await tools.echo(1);\n${hang}`, (m) => [{ type: 'result', id: m.id, ok: true, value: 1 }, { type: 'result', id: m.id, ok: true, value: 1 }])],
      ['an ok result without a value', /ok result needs a value/,
        answer('await tools.echo(1);', (m) => [{ type: 'result', id: m.id, ok: true }])],
      ['a failed result with a value', /carries a message, not a value/,
        answer('await tools.echo(1);', (m) => [{ type: 'result', id: m.id, ok: false, value: 1, message: 'm' }])],
      ['a result before the run frame', /before the run frame/, (ws) => ws.send('{"type":"result","id":1,"ok":true,"value":1}')],
      ['a second run frame', /a second run frame/, (ws) => { ws.send(RUN(hang)); ws.send(RUN('')); }],
      ['a run frame of another version', /bad-version/, (ws) => ws.send(JSON.stringify({ type: 'run', version: 2, program: '', bindings: [], limits: LIMITS }))],
      ['junk', /not-json/, (ws) => ws.send('not json')],
      ['a binary frame', /binary frame/, (ws) => ws.send(Buffer.from(RUN('return 1;')), { binary: true })],
      ['invalid UTF-8', /not-utf8/, (ws) => ws.send(Buffer.from([0x7b, 0xff, 0x7d]), { binary: false })],
      ['a runner-side message', /bad-type/, (ws) => ws.send('{"type":"call","id":1,"global":"tools","name":"a","args":{}}')],
    ];
    const outs = await Promise.all(cases.map(([, , onHello]) => host({ body: 'return 1;', onHello })));
    cases.forEach(([name, reason], i) => {
      const out = outs[i];
      assert.equal(out.exitCode, 71, `${name}: exit ${out.exitCode}`);
      assert.match(out.stderr, /^dsh-ts-runner\/1: protocol violation: .+\n$/, name);
      assert.match(out.stderr, reason, name);
      assert.equal(out.done, null, name);
    });
  });

  test('the host going away before done: exit 0, quietly', async () => {
    const [out, early] = await Promise.all([
      host({ body: 'return 1;', onHello: (ws) => { ws.send(RUN('await new Promise((r) => setTimeout(r, 5000));')); setTimeout(() => ws.close(), 100); } }),
      host({ body: 'return 1;', onHello: (ws) => ws.terminate() }),
    ]);
    assert.equal(out.exitCode, 0);
    assert.equal(out.stderr, '');
    assert.equal(out.done, null);
    assert.equal(early.exitCode, 0);
    assert.equal(early.stderr, '');
  });

  test('egress: unacknowledged bytes never exceed the window, the upload arrives whole', async () => {
    // The host acknowledges nothing until the runner has the whole window
    // unacknowledged (the first pause: exactly WINDOW bytes received), then
    // only ACK bytes at a time: each time, the runner may send that much and
    // no more. WINDOW is no multiple of a read or a frame's piece. The
    // runner sent what it had read and paused after (up to a 64 KiB read
    // past the window), and after a small ack resumed the socket and sent a
    // whole read again.
    const WINDOW = 100000;
    const ACK = 7777;
    const N = 300000;
    const sink = { bytes: 0, unacked: 0, firstPause: 0, acks: 0, over: [], pieces: [] };
    const onEgress = (msg, ws) => {
      if (msg.type === 'open') {
        ws.send(JSON.stringify({ type: 'opened', stream: msg.stream, ok: true, message: '' }));
      } else if (msg.type === 'data') {
        const b = Buffer.from(msg.data, 'base64');
        sink.pieces.push(b);
        sink.bytes += b.length;
        sink.unacked += b.length;
        if (sink.unacked > WINDOW) sink.over.push(`${sink.unacked} bytes unacknowledged after ${sink.bytes} received`);
        if (sink.bytes === N) {
          const sum = require('node:crypto').createHash('sha256').update(Buffer.concat(sink.pieces)).digest('hex');
          ws.send(JSON.stringify({ type: 'data', stream: msg.stream, data: Buffer.from(`received ${N} sha256 ${sum}\n`).toString('base64') }));
          ws.send(JSON.stringify({ type: 'close', stream: msg.stream }));
        } else if (sink.unacked >= WINDOW) {
          if (sink.acks === 0) sink.firstPause = sink.bytes;
          sink.acks++;
          // Back to ACK bytes of room (exactly ACK when the runner kept
          // to the window).
          const n = sink.unacked - WINDOW + ACK;
          sink.unacked -= n;
          ws.send(JSON.stringify({ type: 'ack', stream: msg.stream, bytes: n }));
        }
      }
    };
    const out = await host({
      egress: { window: WINDOW },
      onEgress,
      body: [
        'const net = await import("node:net");',
        'const { createHash } = await import("node:crypto");',
        `const payload = Buffer.alloc(${N});`,
        'for (let i = 0; i < payload.length; i++) payload[i] = (i * 7 + (i >> 8)) & 255;',
        'const u = new URL(process.env.HTTPS_PROXY);',
        'const sock = net.connect(Number(u.port), u.hostname);',
        'let got = "";',
        'await new Promise((resolve, reject) => {',
        '  sock.on("data", (d) => { got += d.toString("latin1"); });',
        '  sock.on("error", reject);',
        '  sock.on("close", resolve);',
        // The head and the payload in one write: the proxy holds what came
        // with the head until the tunnel opens, and counts it too.
        '  sock.write(Buffer.concat([Buffer.from("CONNECT upload.test:443 HTTP/1.1\\r\\n\\r\\n"), payload]));',
        '});',
        'return { got, sha256: createHash("sha256").update(payload).digest("hex") };',
      ].join('\n'),
    });
    const done = ok(out);
    assert.deepEqual(sink.over, [], `the runner exceeded the ${WINDOW}-byte window`);
    assert.equal(sink.firstPause, WINDOW, 'bytes received before the runner paused');
    assert.ok(sink.acks >= Math.floor((N - WINDOW) / ACK), `${sink.acks} acks`);
    assert.equal(done.value.got, `HTTP/1.1 200 Connection Established\r\n\r\nreceived ${N} sha256 ${done.value.sha256}\n`);
  });

  test('no socket: exit 70 with one line on stderr', async () => {
    const out = await host({ body: 'return 1;', socket: path.join(os.tmpdir(), 'does-not-exist', 'bridge.sock') });
    assert.equal(out.exitCode, 70);
    assert.match(out.stderr, /^dsh-ts-runner\/1: cannot connect to .*does-not-exist\/bridge\.sock: .+\n$/);
  });
});
