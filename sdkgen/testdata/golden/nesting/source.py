from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class DeepArraysArgs(TypedDict):
    grid: list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[Any]]]]]]]]]]]]]]]]

class DeepMapsArgs(TypedDict):
    m: NotRequired[dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, dict[str, Any]]]]]]]]]]]]]]]]]

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: Any

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAAA

class DeepObjectsArgsAAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAAA

class DeepObjectsArgsAAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAAA

class DeepObjectsArgsAAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAAA

class DeepObjectsArgsAAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAAA

class DeepObjectsArgsAAAAA(TypedDict):
    a: DeepObjectsArgsAAAAAA

class DeepObjectsArgsAAAA(TypedDict):
    a: DeepObjectsArgsAAAAA

class DeepObjectsArgsAAA(TypedDict):
    a: DeepObjectsArgsAAAA

class DeepObjectsArgsAA(TypedDict):
    a: DeepObjectsArgsAAA

class DeepObjectsArgsA(TypedDict):
    a: DeepObjectsArgsAA

class DeepObjectsArgs(TypedDict):
    a: DeepObjectsArgsA

class ListCapExactArgs(TypedDict):
    x: NotRequired[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[str]]]]]]]]]]]]]]]]]
    y: NotRequired[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[Any]]]]]]]]]]]]]]]]]

class ListCapUnionArgs(TypedDict):
    x: NotRequired[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[Any]]]]]]]]]]]]]]]]]

class Tools:
    # tools["deep-arrays"](args: DeepArraysArgs) -> str
    #     Arrays of arrays nested 40 levels: Python caps at MaxListNesting, TypeScript at MaxDepth.

    # tools["deep-maps"](args: DeepMapsArgs) -> str
    #     Maps of maps nested 40 levels.

    # tools["deep-objects"](args: DeepObjectsArgs) -> str
    #     Objects nested 40 levels: past MaxDepth the type is unknown.

    # tools["list-cap-exact"](args: ListCapExactArgs) -> str
    #     Exactly 16 nested arrays.

    # tools["list-cap-union"](args: ListCapUnionArgs) -> str
    #     A union at the cap.

    pass

tools: Tools
