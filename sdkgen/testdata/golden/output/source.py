from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class CountWordsArgs(TypedDict):
    text: str

class CountWordsOutput(TypedDict):
    # How many words.
    count: int
    longest: NotRequired[str | None]
    words: list[str]

class ListIssuesOutputItem(TypedDict):
    id: int
    title: str

class PlainTextArgs(TypedDict):
    x: NotRequired[str]

class SearchArgs(TypedDict):
    q: str

class WeatherArgs(TypedDict):
    city: str

class WeatherOutputWind(TypedDict):
    speed: float
    direction: NotRequired[str]

class WeatherOutput(TypedDict):
    temperature: float
    unit: Literal["C", "F"]
    # Wind at 10 m.
    wind: WeatherOutputWind

class Tools:
    async def count_words(self, args: CountWordsArgs) -> CountWordsOutput:
        """Count the words of a text."""
        ...

    # tools["list-issues"](args: dict[str, Any]) -> list[ListIssuesOutputItem]
    #     Open issues (a name that is not an identifier, with a structured result).

    async def opaque(self, args: dict[str, Any]) -> Any:
        """An output schema the renderers do not understand."""
        ...

    async def plain_text(self, args: PlainTextArgs) -> str:
        """No output schema: the text result."""
        ...

    async def search(self, args: SearchArgs) -> dict[str, int]:
        """Search; declares a result map."""
        ...

    async def weather(self, args: WeatherArgs) -> WeatherOutput:
        """Current weather at a place."""
        ...

tools: Tools
