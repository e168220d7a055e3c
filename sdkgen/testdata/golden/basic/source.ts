declare const tools: {
  /**
   * Read a text file.
   *
   * Returns the file's content.
   */
  "read_file": (args: {
    /** File path, relative to the workspace. */
    path: string;
    /** First line to read (1-based). */
    offset?: number;
    limit?: number;
  }) => Promise<string>;
  /** Search files for a regular expression. */
  "search": (args: {
    pattern: string;
    paths?: string[];
    /** Matching options. */
    options?: {
      ignoreCase?: boolean;
      maxResults?: number | null;
    };
  }) => Promise<string>;
  /** Write text to a file, replacing it. */
  "write_file": (args: {
    /** File path, relative to the workspace. */
    path: string;
    content: string;
    /** How to write. */
    mode?: "overwrite" | "append";
  }) => Promise<string>;
};
