from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class ReadFileArgs(TypedDict):
    # File path, relative to the workspace.
    path: str
    # First line to read (1-based).
    offset: NotRequired[int]
    limit: NotRequired[int]

class SearchArgsOptions(TypedDict):
    ignoreCase: NotRequired[bool]
    maxResults: NotRequired[int | None]

class SearchArgs(TypedDict):
    pattern: str
    paths: NotRequired[list[str]]
    # Matching options.
    options: NotRequired[SearchArgsOptions]

class WriteFileArgs(TypedDict):
    # File path, relative to the workspace.
    path: str
    content: str
    # How to write.
    mode: NotRequired[Literal["overwrite", "append"]]

class Tools:
    async def read_file(self, args: ReadFileArgs) -> str:
        """Read a text file.

        Returns the file's content.
        """
        ...

    async def search(self, args: SearchArgs) -> str:
        """Search files for a regular expression."""
        ...

    async def write_file(self, args: WriteFileArgs) -> str:
        """Write text to a file, replacing it."""
        ...

tools: Tools
