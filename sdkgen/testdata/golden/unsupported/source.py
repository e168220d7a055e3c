from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class BooleanSchemasArgs(TypedDict):
    t: Any
    f: NotRequired[Any]

class DeepJsonArgs(TypedDict):
    x: NotRequired[Any]

class DuplicateKeysArgs(TypedDict):
    a: NotRequired[float]
    b: NotRequired[str]

EscapedKeysArgs = TypedDict(
    "EscapedKeysArgs",
    {
        "aé": NotRequired[str],
        "�x": NotRequired[str],
        "😀": NotRequired[str],
    },
)

class MalformedArgsRequiredNotArray(TypedDict):
    a: NotRequired[str]

class MalformedArgsRequiredMixed(TypedDict):
    a: str

class MalformedArgs(TypedDict):
    typeNumber: NotRequired[Any]
    typeUnknown: NotRequired[Any]
    typeArrayBad: NotRequired[Any]
    typeArrayEmpty: NotRequired[Any]
    typeArrayUnknown: NotRequired[Any]
    enumNotArray: NotRequired[Any]
    enumEmpty: NotRequired[Any]
    enumObject: NotRequired[Any]
    enumArray: NotRequired[Any]
    constObject: NotRequired[Any]
    propertiesNotObject: NotRequired[dict[str, Any]]
    requiredNotArray: NotRequired[MalformedArgsRequiredNotArray]
    requiredMixed: NotRequired[MalformedArgsRequiredMixed]
    additionalNumber: NotRequired[dict[str, Any]]
    itemsString: NotRequired[list[Any]]
    anyOfEmpty: NotRequired[Any]
    anyOfNotArray: NotRequired[Any]
    anyOfAndOneOf: NotRequired[Any]
    anyOfWithUnknown: NotRequired[Any]
    allOf: NotRequired[Any]
    allOfWithType: NotRequired[str]
    descriptionNotString: NotRequired[str]
    schemaString: NotRequired[Any]
    schemaNumber: NotRequired[Any]
    schemaNull: NotRequired[Any]
    schemaArray: NotRequired[Any]

class PatternPropertiesArgsPpWithProps(TypedDict):
    a: NotRequired[str]

class PatternPropertiesArgsPpEmpty(TypedDict):
    a: NotRequired[str]

class PatternPropertiesArgs(TypedDict):
    pp: NotRequired[dict[str, Any]]
    ppWithProps: NotRequired[PatternPropertiesArgsPpWithProps]
    ppEmpty: NotRequired[PatternPropertiesArgsPpEmpty]

class RefArgs(TypedDict):
    r: NotRequired[Any]
    withType: NotRequired[Any]

class TupleItemsArgs(TypedDict):
    tuple: NotRequired[list[Any]]
    prefixItems: NotRequired[list[Any]]
    itemsFalse: NotRequired[list[Any]]

class Tools:
    async def boolean_schemas(self, args: BooleanSchemasArgs) -> str:
        """Boolean schemas."""
        ...

    async def deep_json(self, args: DeepJsonArgs) -> str:
        """JSON nested far deeper than the renderer looks."""
        ...

    async def duplicate_keys(self, args: DuplicateKeysArgs) -> str:
        """A repeated key keeps its first position and its last value."""
        ...

    async def escaped_keys(self, args: EscapedKeysArgs) -> str:
        """Keys written with escapes, lone surrogates included."""
        ...

    async def false_root(self, args: Any) -> str:
        """The whole schema is false."""
        ...

    async def invalid_json(self, args: Any) -> str:
        """The schema is not JSON."""
        ...

    async def malformed(self, args: MalformedArgs) -> str:
        """Malformed values."""
        ...

    async def missing_schema(self, args: Any) -> str:
        """No inputSchema at all."""
        ...

    async def pattern_properties(self, args: PatternPropertiesArgs) -> str:
        """patternProperties degrades to an unknown index signature."""
        ...

    async def ref(self, args: RefArgs) -> str:
        """$ref degrades."""
        ...

    async def root_array(self, args: Any) -> str:
        """The schema is an array."""
        ...

    async def root_null(self, args: Any) -> str:
        """The schema is null."""
        ...

    async def root_string(self, args: Any) -> str:
        """The schema is a JSON string."""
        ...

    async def trailing_garbage(self, args: Any) -> str:
        """JSON followed by garbage."""
        ...

    async def true_root(self, args: Any) -> str:
        """The whole schema is true."""
        ...

    async def tuple_items(self, args: TupleItemsArgs) -> str:
        """Tuple items degrade."""
        ...

tools: Tools
