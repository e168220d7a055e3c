"""dsh-py-runner: runs one Python program inside a throwaway container and
bridges its tool calls to the host. The package's modules:

- ``protocol``: the wire protocol: identity, the strict frame decoder, the
  frame encoder;
- ``values``: the program's values as text and frames, tool arguments;
- ``runner``: the run: namespaces, calls, output capture, the outcome;
- ``__main__``: connecting to the host and handing the run frame to the run.

Contract (wire protocol version 1, see portproto/portproto.go; the command,
paths and user are backend/container/runner's):

    python3 -I -m dsh_runner [/run/dsh/bridge.sock]

The package is installed in /opt/dsh/py-runner, which a .pth file in the
system site directory puts on sys.path: ``-I`` ignores PYTHON* variables,
the user site and the current directory, not the system site.

1. Connect once to the host over the Unix socket (websockets' sync client,
   ``ws://localhost/v1``, no compression, no size limit, no keepalive pings:
   the host enforces its own limits and may hold a warm runner for a long
   time). On failure: one line on stderr, exit 70.
2. Send {"type":"hello","version":1,"language":"python",
   "runner":"dsh-py-runner/1"} and wait for the host's "run" frame.
3. Every frame from the host is validated with the same rules as
   portproto.Decode(HostToRunner, ...): only "run" (once, first) and then
   "result" frames, exact field names, no unknown fields, Go types, ids in
   1..2^53-1, a result for a call that is in flight. Any violation: one line
   on stderr, exit 71.
4. ``program`` is the model's source, verbatim. It is parsed as
   "program.py" and its module body becomes the body of
   ``async def __dsh_main__():`` (built on the AST, so line numbers and
   string literals stay exact; top-level ``await`` and ``return`` work).
   Names that nested functions declare ``global`` are declared global in the
   wrapper too, so the usual script idiom keeps working. The code runs in a
   fresh globals dict holding only ``__builtins__``, ``__name__ =
   "__main__"``, ``ToolCallError`` and the binding namespaces (a namespace
   named like one of the first three does not replace it), on a fresh
   asyncio event loop. Leading ``from __future__`` imports stay at module level,
   where they are legal. A SyntaxError (parse or compile) fails the run with
   name "SyntaxError" and a message naming the line.
5. A binding namespace supports ``tools.name(args)`` and
   ``tools["odd-name"](args)``; each function takes one argument (default
   None, sent as null) that must follow the tool-argument rule (see "Tool
   arguments" below): a value that breaks it raises TypeError
   ``tools["name"]: <path>: <reason>`` in the program and sends nothing.
   The call sends {"type":"call","id":n,"global","name","args"} (ids 1, 2,
   3...) and awaits the matching "result", in any order. A failed result
   raises ToolCallError(message) with ``tool_name`` (alias ``toolName``).
   In a traceback the program prints, a tool call is one frame,
   ``File "<tools>", in tools.name``: the runner's source never shows.
6. print / sys.stdout become "stdout" log frames (line-buffered: sent at
   each newline, on flush, and at the end), sys.stderr "stderr" frames, and
   the logging module (a handler on the root logger, whose level is set to
   DEBUG) "console" frames with levels debug, info, warn (WARNING) and
   error (ERROR, CRITICAL).
7. The last frame is "done": the value (JSON when json.dumps accepts it,
   else its repr as "inspect"), or the error {name, message, stack} of any
   exception that escaped the program. The stack is the traceback limited
   to program.py frames. A program that ends its process before returning
   has not completed, whatever the status, 0 included: SystemExit escaping
   the program (sys.exit, exit(), quit(), raise SystemExit, from the body or
   a callback on its loop), and os._exit(n) or os.abort() called in the
   runner's own process (any thread; a forked child exits for real). Its
   done frame is an exit, {"ok":false,"exit":{"status":s},"error":{"name",
   "message","stack"}}: s is the status the interpreter would have exited
   with (SystemExit: None 0, an int its low byte, anything else 1;
   os._exit(n): n's low byte; os.abort(): 134, SIGABRT through the
   container's init); the error is "SystemExit" with message "SystemExit:
   <code's str>" ("SystemExit" for none), or "Exit" with message
   "os._exit(n)" / "os.abort()". SystemExit raised in a thread ends only
   that thread, as in Python. KeyboardInterrupt, GeneratorExit and other
   BaseExceptions fail the run like exceptions. Then the socket is closed
   and the process exits 0. If the host goes away before that: exit 0.

The program's objects never break the runner: every name, str, repr and
JSON encoding of a value the program made (its exception and the chain
behind it, its value, its SystemExit code, what it prints or logs) is taken
defensively. Class names come from the type itself (a metaclass property
cannot intercept them), str subclasses are copied to plain str before use,
and whatever raises (a __str__, a __repr__, a metaclass property, a hostile
__eq__, a recursion) is replaced by a fallback text naming what raised, e.g.
"<E str() failed: ValueError: no>" or "<unrepresentable P: RuntimeError:
no>". A log record that cannot be formatted is logged as such, never as a
traceback of the runner.

Caps: the host enforces all limits; the runner only avoids sending what the
host would drop. A log entry's text is cut so its frame fits maxFrameBytes.
Each entry costs its text's bytes plus 64 (LOG_ENTRY_OVERHEAD, what the host
charges per entry, so empty entries count), and once that total exceeds
maxLogBytes, or more than 10,000 entries (MAX_LOG_ENTRIES) were sent,
nothing more is logged (the entry that crosses either cap is sent, so the
host sees the overflow). The done value, as encoded in the frame, is at most
maxValueBytes bytes: a longer one becomes a JSON string holding the longest
prefix of its text (its JSON text, or its repr) whose encoding fits, with
"truncated":true. (The host re-wraps any value longer than maxValueBytes as
a string, so a prefix of exactly maxValueBytes bytes would arrive
double-encoded.) The JSON text is produced only up to the cap: what follows
the cut is not examined, so a value that is JSON up to the cap is sent as a
truncated JSON prefix. Text is made valid UTF-8 (unencodable characters
become "?").

Not captured: writes that bypass sys.stdout/sys.stderr (os.write(1, ...),
subprocesses); a program that kills its own process (os.kill(os.getpid(),
9), posix._exit) ends the container without a done frame: the host reports
an exit with the container's status. The program runs in this process: the container is the security
boundary, the runner only aims at correct, robust behaviour (the runner's
JSON encoders are bound before the program runs, but a program that
rewrites deeper parts of the standard library the runner uses can break its
own run). It uses nothing but the standard library and ``websockets``,
writes nothing to disk and opens no network connection.
"""
