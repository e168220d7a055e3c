from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class ArraysArgsRecordsItem(TypedDict):
    id: int
    tags: NotRequired[list[str]]

class ArraysArgs(TypedDict):
    strings: NotRequired[list[str]]
    untyped: NotRequired[list[Any]]
    matrix: NotRequired[list[list[float]]]
    records: NotRequired[list[ArraysArgsRecordsItem]]
    unionItems: NotRequired[list[str | float]]
    enumItems: NotRequired[list[Literal["a", "b"]]]
    inferred: NotRequired[list[bool]]

class LiteralsArgs(TypedDict):
    color: Literal["red", "green", "blue"]
    mixed: NotRequired[Literal["a", 1, -2, True, False] | float | None]
    quoted: NotRequired[Literal["say \"hi\"", "back\\slash", "new\nline", "tab\there", "\u2028", "emoji 😀", "nul \x00"]]
    big: NotRequired[Literal[12345678901234567890, 0] | float]
    constString: NotRequired[Literal["fixed"]]
    constNumber: NotRequired[Literal[42]]
    constFloat: NotRequired[float]
    constTrue: NotRequired[Literal[True]]
    constNull: NotRequired[None]
    typedEnum: NotRequired[Literal["x", "y"]]

class ObjectsArgsNestedInner(TypedDict):
    # The leaf.
    leaf: str

class ObjectsArgsNested(TypedDict):
    inner: NotRequired[ObjectsArgsNestedInner]

class ObjectsArgsRecordMapValue(TypedDict):
    v: NotRequired[float]

class ObjectsArgsOpenRecord(TypedDict):
    a: NotRequired[str]

class ObjectsArgsSafeIndex(TypedDict):
    a: str
    b: str

class ObjectsArgsOptionalIndex(TypedDict):
    a: NotRequired[str]

class ObjectsArgsUnsafeIndex(TypedDict):
    a: float

class ObjectsArgsInferredObject(TypedDict):
    x: int

class ObjectsArgs(TypedDict):
    # A nested record.
    nested: ObjectsArgsNested
    freeForm: NotRequired[dict[str, Any]]
    emptyProps: NotRequired[dict[str, Any]]
    closedEmpty: NotRequired[dict[str, Any]]
    stringMap: NotRequired[dict[str, str]]
    recordMap: NotRequired[dict[str, ObjectsArgsRecordMapValue]]
    openRecord: NotRequired[ObjectsArgsOpenRecord]
    safeIndex: NotRequired[ObjectsArgsSafeIndex]
    optionalIndex: NotRequired[ObjectsArgsOptionalIndex]
    unsafeIndex: NotRequired[ObjectsArgsUnsafeIndex]
    inferredObject: NotRequired[ObjectsArgsInferredObject]
    undeclared: Any

class PrimitivesArgs(TypedDict):
    s: str
    n: float
    i: int
    b: bool
    z: None
    any: Any
    # No type, only a description.
    described: NotRequired[Any]

class UnionArgsArgsVariant1(TypedDict):
    id: str

class UnionArgsArgsVariant2(TypedDict):
    name: str

class UnionsArgsOneOfVariant1(TypedDict):
    a: str

class UnionsArgsOneOfVariant2(TypedDict):
    b: float

class UnionsArgsNullableObject(TypedDict):
    x: NotRequired[str]

class UnionsArgs(TypedDict):
    nullable: NotRequired[str | None]
    numeric: NotRequired[int | float]
    dup: NotRequired[str | None]
    all: NotRequired[str | float | int | bool | None | list[str] | dict[str, Any]]
    anyOf: NotRequired[str | list[str | None]]
    oneOf: NotRequired[UnionsArgsOneOfVariant1 | UnionsArgsOneOfVariant2 | None]
    nullableObject: NotRequired[UnionsArgsNullableObject | None]
    literalOrNumber: NotRequired[Literal["auto"] | float]

class Tools:
    # tools["array-args"](args: list[int]) -> str
    #     The arguments themselves are an array.

    async def arrays(self, args: ArraysArgs) -> str:
        """Arrays."""
        ...

    async def literals(self, args: LiteralsArgs) -> str:
        """enum and const."""
        ...

    # tools["map-args"](args: dict[str, bool]) -> str
    #     The arguments are a map.

    async def objects(self, args: ObjectsArgs) -> str:
        """Objects, additionalProperties and required."""
        ...

    async def primitives(self, args: PrimitivesArgs) -> str:
        """Every primitive type."""
        ...

    # tools["scalar-args"](args: str) -> str
    #     The arguments themselves are a string.

    # tools["union-args"](args: UnionArgsArgsVariant1 | UnionArgsArgsVariant2) -> str
    #     The arguments are one of two records.

    async def unions(self, args: UnionsArgs) -> str:
        """Type arrays, anyOf and oneOf."""
        ...

tools: Tools
