declare const tools: {
  /**
   * \@param x not a tag
   *   \@returns nor this
   * mid-line @see is fine
   * {@link foo}
   */
  "at_tags": (args: {
    /**
     * \@param x not a tag
     *   \@returns nor this
     * mid-line @see is fine
     * {@link foo}
     */
    p?: string;
  }) => Promise<string>;
  /** C:\path\to\file and \n not a newline and trailing \ */
  "backslashes": (args: {
    /** C:\path\to\file and \n not a newline and trailing \ */
    p?: string;
  }) => Promise<string>;
  /** Ends the comment *\/ early? And /* opens one. **\/ and *\/*\/ */
  "comment_close": (args: {
    /** Ends the comment *\/ early? And /* opens one. **\/ and *\/*\/ */
    p?: string;
  }) => Promise<string>;
  /** nul � bell � esc � del � nel � ff � vt � */
  "controls": (args: {
    /** nul � bell � esc � del � nel � ff � vt � */
    p?: string;
  }) => Promise<string>;
  "empty": (args: {
    p?: string;
  }) => Promise<string>;
  /**
   * Usage:
   *   - first
   *     - nested
   *
   *   code block
   */
  "indented": (args: {
    /**
     * Usage:
     *   - first
     *     - nested
     *
     *   code block
     */
    p?: string;
  }) => Promise<string>;
  /**
   * Example:
   * ```ts
   * await tools["x"]({})
   * ```
   * and ````four```` backticks
   */
  "markdown": (args: {
    /**
     * Example:
     * ```ts
     * await tools["x"]({})
     * ```
     * and ````four```` backticks
     */
    p?: string;
  }) => Promise<string>;
  /**
   * Line one
   * Line two
   * Line three
   * Line four
   * Line five
   *
   *
   * After blanks
   */
  "newlines": (args: {
    /**
     * Line one
     * Line two
     * Line three
     * Line four
     * Line five
     *
     *
     * After blanks
     */
    p?: string;
  }) => Promise<string>;
  /** ends with three quotes """ */
  "python_close": (args: {
    /** ends with three quotes """ */
    p?: string;
  }) => Promise<string>;
  /** " */
  "quote_only": (args: {
    /** " */
    p?: string;
  }) => Promise<string>;
  /** Triple """ quotes and a trailing quote" */
  "quotes": (args: {
    /** Triple """ quotes and a trailing quote" */
    p?: string;
  }) => Promise<string>;
  /**
   * col1	col2
   * 	indented with a tab
   */
  "tabs": (args: {
    /**
     * col1	col2
     * 	indented with a tab
     */
    p?: string;
  }) => Promise<string>;
  /** 日本語の説明 — café ✓ 😀 family 👨 👩 👧 bidi  evil  bom   zwsp */
  "unicode": (args: {
    /** 日本語の説明 — café ✓ 😀 family 👨 👩 👧 bidi  evil  bom   zwsp */
    p?: string;
  }) => Promise<string>;
  /**   leading blank lines and trailing spaces */
  "whitespace": (args: {
    /**   leading blank lines and trailing spaces */
    p?: string;
  }) => Promise<string>;
};
