from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

AdversarialKeysArgs = TypedDict(
    "AdversarialKeysArgs",
    {
        # Key "__proto__".
        "__proto__": str,
        # Key "constructor".
        "constructor": NotRequired[str],
        # Key "toString".
        "toString": str,
        # Key "delete".
        "delete": NotRequired[str],
        # Key "class".
        "class": str,
        # Key "my-key".
        "my-key": NotRequired[str],
        # Key "a.b".
        "a.b": str,
        # Key "with space".
        "with space": NotRequired[str],
        # Key "quote\"d".
        "quote\"d": str,
        # Key "back\\slash".
        "back\\slash": NotRequired[str],
        # Key "new\nline".
        "new\nline": str,
        # Key "*/".
        "*/": NotRequired[str],
        # Key "日本語".
        "日本語": str,
        # Key "café".
        "café": NotRequired[str],
        # Key "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk".
        "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk": str,
        # Key "".
        "": NotRequired[str],
        # Key "1".
        "1": str,
        # Key "0x1".
        "0x1": NotRequired[str],
        # Key "$ref".
        "$ref": str,
        # Key "__private".
        "__private": NotRequired[str],
        # Key "__dunder__".
        "__dunder__": str,
        # Key "_ok".
        "_ok": NotRequired[str],
        # Key "None".
        "None": str,
        # Key "def".
        "def": NotRequired[str],
        # Key "type".
        "type": str,
        # Key "match".
        "match": NotRequired[str],
        # Key "self".
        "self": str,
        # Key "str".
        "str": NotRequired[str],
        # Key "Any".
        "Any": str,
        # Key "key".
        "key": NotRequired[str],
        # Key "__total__".
        "__total__": str,
        # Key "__annotations__".
        "__annotations__": NotRequired[str],
        # Key "__required_keys__".
        "__required_keys__": str,
        # Key "__class__".
        "__class__": NotRequired[str],
        # Key "case".
        "case": str,
        # Key "_".
        "_": NotRequired[str],
    },
)

class IdentifierKeysArgs(TypedDict):
    alpha: str
    beta_2: NotRequired[float]
    Gamma: NotRequired[bool]
    _d: NotRequired[None]
    type: NotRequired[str]
    match: NotRequired[str]
    case: NotRequired[str]
    _: NotRequired[str]
    str: int
    list: NotRequired[str]
    ToolCallError: NotRequired[str]

class NestedKeysArgsMyKey(TypedDict):
    v: NotRequired[str]

class NestedKeysArgsMyKey2(TypedDict):
    v: NotRequired[str]

class NestedKeysArgsMyKey3(TypedDict):
    v: NotRequired[str]

class NestedKeysArgsField(TypedDict):
    v: NotRequired[str]

class NestedKeysArgsField2(TypedDict):
    v: NotRequired[str]

class NestedKeysArgs1(TypedDict):
    v: NotRequired[str]

NestedKeysArgs = TypedDict(
    "NestedKeysArgs",
    {
        "my-key": NotRequired[NestedKeysArgsMyKey],
        "my_key": NotRequired[NestedKeysArgsMyKey2],
        "My Key": NotRequired[NestedKeysArgsMyKey3],
        "日本": NotRequired[NestedKeysArgsField],
        "": NotRequired[NestedKeysArgsField2],
        "1": NotRequired[NestedKeysArgs1],
    },
)

class Tools:
    async def adversarial_keys(self, args: AdversarialKeysArgs) -> str:
        """Property keys that need quoting."""
        ...

    async def identifier_keys(self, args: IdentifierKeysArgs) -> str:
        """Keys that are all plain identifiers."""
        ...

    async def nested_keys(self, args: NestedKeysArgs) -> str:
        """Nested records named from adversarial keys."""
        ...

tools: Tools
