declare const tools: {
  /** Count the words of a text. */
  "count_words": (args: {
    text: string;
  }) => Promise<{
    /** How many words. */
    count: number;
    longest?: string | null;
    words: string[];
  }>;
  /** Open issues (a name that is not an identifier, with a structured result). */
  "list-issues": (args: { [key: string]: unknown }) => Promise<{
    id: number;
    title: string;
  }[]>;
  /** An output schema the renderers do not understand. */
  "opaque": (args: { [key: string]: unknown }) => Promise<unknown>;
  /** No output schema: the text result. */
  "plain_text": (args: {
    x?: string;
  }) => Promise<string>;
  /** Search; declares a result map. */
  "search": (args: {
    q: string;
  }) => Promise<{ [key: string]: number }>;
  /** Current weather at a place. */
  "weather": (args: {
    city: string;
  }) => Promise<{
    temperature: number;
    unit: "C" | "F";
    /** Wind at 10 m. */
    wind: {
      speed: number;
      direction?: string;
    };
  }>;
};
