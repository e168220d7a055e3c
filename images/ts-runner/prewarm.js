// prewarm does, while the sandbox waits in the pool, the one-off work a
// run's start would otherwise pay on the request path: Node builds
// process.stdout and process.stderr lazily (for a pipe, a net.Socket and
// the modules behind it: 10-30 ms on a loaded machine), and loads and
// compiles the code behind console.Console, util.inspect and vm's
// compilation with a dynamic-import loader on first use. Nothing here
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
  } catch {
    // the run pays for it instead
  }
}

module.exports = { prewarm };
