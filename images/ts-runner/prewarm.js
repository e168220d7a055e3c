// prewarm does, while the sandbox waits in the pool, the one-off work a
// run's start would otherwise pay on the request path: Node builds
// process.stdout and process.stderr lazily (for a pipe, a net.Socket and
// the modules behind it: 10-30 ms on a loaded machine), and loads and
// compiles the code behind console.Console, util.inspect and vm's
// compilation with a dynamic-import loader on first use, and the runner's
// own decoder and renderers are compiled on their first call. Nothing here
// changes what a program sees: the streams are the ones the run patches
// anyway, the console built here is dropped, and the compiled function is
// never called. A failure only means the run pays the cost itself.

'use strict';

const util = require('node:util');
const vm = require('node:vm');

function prewarm() {
  try {
    void process.stdout;
    void process.stderr;
    const sink = { write: () => true };
    const c = new console.Console({ stdout: sink, stderr: sink, ignoreErrors: false, colorMode: false, groupIndentation: 2 });
    c.log('%s %d %o', 'x', 1, { a: [1, 'x', { b: null }] });
    util.inspect({ a: [1, 'x', { b: null, c: new Map([[1, 2]]) }], e: new Error('x') }, { depth: 4 });
    const options = { filename: 'dsh-prewarm.js' };
    if (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) {
      options.importModuleDynamically = vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
    }
    vm.runInThisContext('(async () => {\nreturn 1;\n})', options);
    JSON.parse(JSON.stringify({ type: 'done', ok: true, value: [1, 'x'] }));
    // The runner's own first calls: decoding a run and a result frame (the
    // first validateHostFrame alone took 1-11 ms), the source map, the done
    // frames. All pure functions of their arguments.
    const { validateHostFrame } = require('./protocol.js');
    const { doneValueFrame, doneErrorFrame } = require('./values.js');
    const { parseSourceMap } = require('./runner.js');
    const limits = { maxLogBytes: 1 << 16, maxValueBytes: 1 << 16, maxFrameBytes: 1 << 20 };
    validateHostFrame(Buffer.from(JSON.stringify({
      type: 'run', version: 1, program: '(async () => {\n  return 1;\n})', sourceMap: '{"version":3,"sources":["program.ts"],"mappings":";AAAA,SAAO;"}',
      bindings: [{ global: 'tools', functions: ['a', 'b'] }], limits,
    })));
    validateHostFrame(Buffer.from('{"type":"result","id":1,"ok":true,"value":{"a":[1,"x",null]}}'));
    validateHostFrame(Buffer.from('{"type":"result","id":2,"ok":false,"message":"no"}'));
    parseSourceMap('{"version":3,"sources":["program.ts"],"mappings":";AAAA,SAAO;AACA,IAAI"}');
    doneValueFrame({ a: [1, 'x', null], b: 1.5 }, limits);
    doneValueFrame(undefined, limits);
    doneErrorFrame(new Error('x'), limits);
    // ws parses the first frame it receives (the run frame) with code it
    // has not compiled yet: 1-2 ms on an idle machine. A throwaway
    // Receiver takes that frame now.
    const { Receiver } = require('ws');
    const payload = Buffer.from('{"type":"result","id":1,"ok":true,"value":null}');
    const r = new Receiver({ isServer: false, skipUTF8Validation: true, maxPayload: 0 });
    r.on('message', () => {});
    r.write(Buffer.concat([Buffer.from([0x81, payload.length]), payload]));
  } catch {
    // the run pays for it instead
  }
}

module.exports = { prewarm };
