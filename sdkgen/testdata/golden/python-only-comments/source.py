from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class MyToolArgs(TypedDict):
    x: NotRequired[str]

class Tools:
    # tools["class"](args: dict[str, Any]) -> str
    #     A keyword.

    # tools["my-tool"](args: MyToolArgs) -> str
    #     Every tool is a comment, so class Tools needs pass.

    pass

tools: Tools
