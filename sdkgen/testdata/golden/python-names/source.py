from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class Tool3dArgs(TypedDict):
    x: NotRequired[str]

class ABArgs3(TypedDict):
    x: NotRequired[str]

class ABArgsArgs(TypedDict):
    x: NotRequired[str]

class ABArgs2Args(TypedDict):
    x: NotRequired[str]

class ABArgs4(TypedDict):
    x: NotRequired[str]

class ABArgs5(TypedDict):
    x: NotRequired[str]

class LongSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSeArgs2(TypedDict):
    x: NotRequired[str]

class LongSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSeArgs(TypedDict):
    another_very_long_property_name_another_very_long_property_name_another_very_long_property_name_: NotRequired[LongSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSeArgs2]

class PathsArgsItem(TypedDict):
    x: NotRequired[str]

class PathsArgsListItem(TypedDict):
    y: NotRequired[str]

class PathsArgsListItem2(TypedDict):
    z: NotRequired[str]

class PathsArgsMapValue(TypedDict):
    w: NotRequired[str]

class PathsArgs(TypedDict):
    item: NotRequired[PathsArgsItem]
    list: NotRequired[list[PathsArgsListItem]]
    List: NotRequired[list[PathsArgsListItem2]]
    map: NotRequired[dict[str, PathsArgsMapValue]]

class ToolsArgs(TypedDict):
    x: NotRequired[str]

class ValueErrorArgs(TypedDict):
    x: NotRequired[str]

class ToolArgs(TypedDict):
    x: NotRequired[str]

class Tools:
    # tools["3d"](args: Tool3dArgs) -> str
    #     Starts with a digit: Tool3dArgs.

    # tools["A.B"](args: ABArgs3) -> str
    #     Also AB.

    async def ABArgs(self, args: ABArgsArgs) -> str:
        """A method whose name a class would take."""
        ...

    async def ABArgs2(self, args: ABArgs2Args) -> str:
        """And the next suffix."""
        ...

    # tools["a-b"](args: ABArgs4) -> str
    #     PascalCases to AB.

    async def a_b(self, args: ABArgs5) -> str:
        """Also AB."""
        ...

    # tools["long-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-"](args: LongSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSegmentSeArgs) -> str
    #     A very long name: derived class names are capped.

    # tools["only-comments"](args: dict[str, Any]) -> str

    async def paths(self, args: PathsArgs) -> str:
        """Nested names from the path, made unique."""
        ...

    async def tools(self, args: ToolsArgs) -> str:
        """The method named like the module variable."""
        ...

    # tools["value-error"](args: ValueErrorArgs) -> str
    #     Derives ValueErrorArgs, not ValueError.

    # tools["日本"](args: ToolArgs) -> str
    #     No ASCII letters: the class falls back to ToolArgs.

tools: Tools
