from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class DupArgs(TypedDict):
    x: NotRequired[str]

class Tools:
    # tools[""](args: dict[str, Any]) -> str
    #     Tool named "".

    # tools["$dollar"](args: dict[str, Any]) -> str
    #     Tool named "$dollar".

    # tools["*/"](args: dict[str, Any]) -> str
    #     Tool named "*/".

    # tools["-"](args: dict[str, Any]) -> str
    #     Tool named "-".

    # tools["/*"](args: dict[str, Any]) -> str
    #     Tool named "/*".

    # tools["1st"](args: dict[str, Any]) -> str
    #     Tool named "1st".

    # tools["Any"](args: dict[str, Any]) -> str
    #     Tool named "Any".

    # tools["None"](args: dict[str, Any]) -> str
    #     Tool named "None".

    async def ToolCallError(self, args: dict[str, Any]) -> str:
        """Tool named "ToolCallError"."""
        ...

    async def Tools(self, args: dict[str, Any]) -> str:
        """Tool named "Tools"."""
        ...

    # tools["Union"](args: dict[str, Any]) -> str
    #     Tool named "Union".

    async def _(self, args: dict[str, Any]) -> str:
        """Tool named "_"."""
        ...

    # tools["__init__"](args: dict[str, Any]) -> str
    #     Tool named "__init__".

    # tools["__private"](args: dict[str, Any]) -> str
    #     Tool named "__private".

    # tools["__proto__"](args: dict[str, Any]) -> str
    #     Tool named "__proto__".

    async def _private(self, args: dict[str, Any]) -> str:
        """Tool named "_private"."""
        ...

    # tools["a-"](args: dict[str, Any]) -> str
    #     Tool named "a-".

    # tools["a.b"](args: dict[str, Any]) -> str
    #     Tool named "a.b".

    async def a_(self, args: dict[str, Any]) -> str:
        """Tool named "a_"."""
        ...

    # tools["async"](args: dict[str, Any]) -> str
    #     Tool named "async".

    # tools["back\\slash"](args: dict[str, Any]) -> str
    #     Tool named "back\\slash".

    # tools["café"](args: dict[str, Any]) -> str
    #     Tool named "café".

    async def case(self, args: dict[str, Any]) -> str:
        """Tool named "case"."""
        ...

    # tools["class"](args: dict[str, Any]) -> str
    #     Tool named "class".

    async def constructor(self, args: dict[str, Any]) -> str:
        """Tool named "constructor"."""
        ...

    async def delete(self, args: dict[str, Any]) -> str:
        """Tool named "delete"."""
        ...

    async def dup(self, args: DupArgs) -> str:
        """A first"""
        ...

    # tools["emoji😀"](args: dict[str, Any]) -> str
    #     Tool named "emoji😀".

    async def hasOwnProperty(self, args: dict[str, Any]) -> str:
        """Tool named "hasOwnProperty"."""
        ...

    # tools["list"](args: dict[str, Any]) -> str
    #     Tool named "list".

    async def match(self, args: dict[str, Any]) -> str:
        """Tool named "match"."""
        ...

    # tools["my-tool"](args: dict[str, Any]) -> str
    #     Tool named "my-tool".

    # tools["new\nline"](args: dict[str, Any]) -> str
    #     Tool named "new\nline".

    async def print(self, args: dict[str, Any]) -> str:
        """Tool named "print"."""
        ...

    # tools["quote\"d"](args: dict[str, Any]) -> str
    #     Tool named "quote\"d".

    async def self(self, args: dict[str, Any]) -> str:
        """Tool named "self"."""
        ...

    # tools["single'quote"](args: dict[str, Any]) -> str
    #     Tool named "single'quote".

    # tools["str"](args: dict[str, Any]) -> str
    #     Tool named "str".

    # tools["tab\there"](args: dict[str, Any]) -> str
    #     Tool named "tab\there".

    async def then(self, args: dict[str, Any]) -> str:
        """Tool named "then"."""
        ...

    async def toString(self, args: dict[str, Any]) -> str:
        """Tool named "toString"."""
        ...

    async def tools(self, args: dict[str, Any]) -> str:
        """Tool named "tools"."""
        ...

    async def type(self, args: dict[str, Any]) -> str:
        """Tool named "type"."""
        ...

    async def valueOf(self, args: dict[str, Any]) -> str:
        """Tool named "valueOf"."""
        ...

    # tools["with space"](args: dict[str, Any]) -> str
    #     Tool named "with space".

    async def xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx(self, args: dict[str, Any]) -> str:
        """Tool named "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"."""
        ...

    # tools["Ünïcødé_name"](args: dict[str, Any]) -> str
    #     Tool named "Ünïcødé_name".

    # tools["\u2028sep"](args: dict[str, Any]) -> str
    #     Tool named "
    #     sep".

    # tools["日本語"](args: dict[str, Any]) -> str
    #     Tool named "日本語".

tools: Tools
