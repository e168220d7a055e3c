"""dsh-container: run programs on a dsh-container daemon with tools
defined in this process.

    from dsh_container import Client
    c = Client("http://127.0.0.1:8080", token="...")
    print(c.run("python", 'return await tools.greet({"name": "Ada"})',
                tools={"greet": lambda a: "hello " + a["name"]}).value)
"""

from .client import (  # noqa: F401
    PROTOCOL,
    Client,
    ConnectionLostError,
    FrameError,
    LogEntry,
    ProtocolError,
    RefusedError,
    Report,
    Tool,
    decode_frame,
)

__all__ = [
    "PROTOCOL",
    "Client",
    "ConnectionLostError",
    "FrameError",
    "LogEntry",
    "ProtocolError",
    "RefusedError",
    "Report",
    "Tool",
    "decode_frame",
]
