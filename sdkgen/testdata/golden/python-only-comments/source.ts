declare const tools: {
  /** A keyword. */
  "class": (args: { [key: string]: unknown }) => Promise<string>;
  /** Every tool is a comment, so class Tools needs pass. */
  "my-tool": (args: {
    x?: string;
  }) => Promise<string>;
};
