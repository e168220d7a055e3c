"""The Python runner's entry point: ``python3 -I -m dsh_runner [socket]``
connects to the host's bridge, says hello and hands the run frame to the
runner (see the package's docstring for the contract)."""

import logging
import os
import sys

from .protocol import LANGUAGE, RUNNER, VERSION, dumps
from .runner import Runner, ToolCallError, diag  # noqa: F401 - ToolCallError: see below

# ToolCallError says it belongs to __main__ (see runner.py), as it did when
# the runner was one script: pickle looks it up here.

# The contract's socket (backend/container/runner.BridgeSocket), used when
# no socket is given.
DEFAULT_SOCKET = "/run/dsh/bridge.sock"
EXIT_CONNECT = 70
# How long to wait for the host's close handshake after the done frame.
CLOSE_TIMEOUT = 2.0


def main(argv):
    sock = argv[1] if len(argv) > 1 else DEFAULT_SOCKET
    # The program's environment is exactly the host's fixed set (PATH,
    # HOME, LANG); Docker always adds HOSTNAME, so drop it.
    os.environ.pop("HOSTNAME", None)
    try:
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.client import unix_connect

        # A logger outside the logging tree: websockets' own debug output
        # must never reach the program's captured logs.
        quiet = logging.Logger("dsh-runner-websockets", logging.CRITICAL + 1)
        quiet.propagate = False
        ws = unix_connect(
            sock,
            uri="ws://localhost/v1",
            compression=None,
            max_size=None,
            ping_interval=None,
            close_timeout=CLOSE_TIMEOUT,
            proxy=None,
            logger=quiet,
        )
    except Exception as e:
        diag(f"cannot connect to {sock}: {type(e).__name__}: {e}")
        return EXIT_CONNECT
    runner = Runner(ws, ConnectionClosed)
    runner.send(dumps({"type": "hello", "version": VERSION, "language": LANGUAGE, "runner": RUNNER}))
    msg = runner.receive()
    if msg["type"] != "run":
        runner.violation("a result frame before the run frame")
    runner.run(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
