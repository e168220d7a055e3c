declare const tools: {
  /** Tool named "". */
  "": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "$dollar". */
  "$dollar": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "*\/". */
  "*/": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "-". */
  "-": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "/*". */
  "/*": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "1st". */
  "1st": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "Any". */
  "Any": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "None". */
  "None": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "ToolCallError". */
  "ToolCallError": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "Tools". */
  "Tools": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "Union". */
  "Union": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "_". */
  "_": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "__init__". */
  "__init__": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "__private". */
  "__private": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "__proto__". */
  "__proto__": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "_private". */
  "_private": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "a-". */
  "a-": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "a.b". */
  "a.b": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "a_". */
  "a_": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "async". */
  "async": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "back\\slash". */
  "back\\slash": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "café". */
  "café": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "case". */
  "case": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "class". */
  "class": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "constructor". */
  "constructor": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "delete". */
  "delete": (args: { [key: string]: unknown }) => Promise<string>;
  /** A first */
  "dup": (args: {
    x?: string;
  }) => Promise<string>;
  /** Tool named "emoji😀". */
  "emoji😀": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "hasOwnProperty". */
  "hasOwnProperty": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "list". */
  "list": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "match". */
  "match": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "my-tool". */
  "my-tool": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "new\nline". */
  "new\nline": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "print". */
  "print": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "quote\"d". */
  "quote\"d": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "self". */
  "self": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "single'quote". */
  "single'quote": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "str". */
  "str": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "tab\there". */
  "tab\there": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "then". */
  "then": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "toString". */
  "toString": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "tools". */
  "tools": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "type". */
  "type": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "valueOf". */
  "valueOf": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "with space". */
  "with space": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx". */
  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "Ünïcødé_name". */
  "Ünïcødé_name": (args: { [key: string]: unknown }) => Promise<string>;
  /**
   * Tool named "
   * sep".
   */
  "\u2028sep": (args: { [key: string]: unknown }) => Promise<string>;
  /** Tool named "日本語". */
  "日本語": (args: { [key: string]: unknown }) => Promise<string>;
};
