from typing import Any, Literal, NotRequired, TypedDict, Union

class ToolCallError(Exception):
    """Raised when a tool call fails; tool_name names the tool."""

    tool_name: str

class AtTagsArgs(TypedDict):
    # @param x not a tag
    #   @returns nor this
    # mid-line @see is fine
    # {@link foo}
    p: NotRequired[str]

class BackslashesArgs(TypedDict):
    # C:\path\to\file and \n not a newline and trailing \
    p: NotRequired[str]

class CommentCloseArgs(TypedDict):
    # Ends the comment */ early? And /* opens one. **/ and */*/
    p: NotRequired[str]

class ControlsArgs(TypedDict):
    # nul � bell � esc � del � nel � ff � vt �
    p: NotRequired[str]

class EmptyArgs(TypedDict):
    p: NotRequired[str]

class IndentedArgs(TypedDict):
    # Usage:
    #   - first
    #     - nested
    #
    #   code block
    p: NotRequired[str]

class MarkdownArgs(TypedDict):
    # Example:
    # ```ts
    # await tools["x"]({})
    # ```
    # and ````four```` backticks
    p: NotRequired[str]

class NewlinesArgs(TypedDict):
    # Line one
    # Line two
    # Line three
    # Line four
    # Line five
    #
    #
    # After blanks
    p: NotRequired[str]

class PythonCloseArgs(TypedDict):
    # ends with three quotes """
    p: NotRequired[str]

class QuoteOnlyArgs(TypedDict):
    # "
    p: NotRequired[str]

class QuotesArgs(TypedDict):
    # Triple """ quotes and a trailing quote"
    p: NotRequired[str]

class TabsArgs(TypedDict):
    # col1	col2
    # 	indented with a tab
    p: NotRequired[str]

class UnicodeArgs(TypedDict):
    # 日本語の説明 — café ✓ 😀 family 👨 👩 👧 bidi  evil  bom   zwsp
    p: NotRequired[str]

class WhitespaceArgs(TypedDict):
    #   leading blank lines and trailing spaces
    p: NotRequired[str]

class Tools:
    async def at_tags(self, args: AtTagsArgs) -> str:
        """@param x not a tag
          @returns nor this
        mid-line @see is fine
        {@link foo}
        """
        ...

    async def backslashes(self, args: BackslashesArgs) -> str:
        """C:\\path\\to\\file and \\n not a newline and trailing \\"""
        ...

    async def comment_close(self, args: CommentCloseArgs) -> str:
        """Ends the comment */ early? And /* opens one. **/ and */*/"""
        ...

    async def controls(self, args: ControlsArgs) -> str:
        """nul � bell � esc � del � nel � ff � vt �"""
        ...

    async def empty(self, args: EmptyArgs) -> str:
        ...

    async def indented(self, args: IndentedArgs) -> str:
        """Usage:
          - first
            - nested

          code block
        """
        ...

    async def markdown(self, args: MarkdownArgs) -> str:
        """Example:
        ```ts
        await tools["x"]({})
        ```
        and ````four```` backticks
        """
        ...

    async def newlines(self, args: NewlinesArgs) -> str:
        """Line one
        Line two
        Line three
        Line four
        Line five


        After blanks
        """
        ...

    async def python_close(self, args: PythonCloseArgs) -> str:
        """ends with three quotes \"\"\""""
        ...

    async def quote_only(self, args: QuoteOnlyArgs) -> str:
        """\""""
        ...

    async def quotes(self, args: QuotesArgs) -> str:
        """Triple \"\"" quotes and a trailing quote\""""
        ...

    async def tabs(self, args: TabsArgs) -> str:
        """col1\tcol2
        \tindented with a tab
        """
        ...

    async def unicode(self, args: UnicodeArgs) -> str:
        """日本語の説明 — café ✓ 😀 family 👨 👩 👧 bidi  evil  bom   zwsp"""
        ...

    async def whitespace(self, args: WhitespaceArgs) -> str:
        """  leading blank lines and trailing spaces"""
        ...

tools: Tools
