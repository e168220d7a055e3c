declare const tools: {
  /** Starts with a digit: Tool3dArgs. */
  "3d": (args: {
    x?: string;
  }) => Promise<string>;
  /** Also AB. */
  "A.B": (args: {
    x?: string;
  }) => Promise<string>;
  /** A method whose name a class would take. */
  "ABArgs": (args: {
    x?: string;
  }) => Promise<string>;
  /** And the next suffix. */
  "ABArgs2": (args: {
    x?: string;
  }) => Promise<string>;
  /** PascalCases to AB. */
  "a-b": (args: {
    x?: string;
  }) => Promise<string>;
  /** Also AB. */
  "a_b": (args: {
    x?: string;
  }) => Promise<string>;
  /** A very long name: derived class names are capped. */
  "long-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-segment-": (args: {
    another_very_long_property_name_another_very_long_property_name_another_very_long_property_name_?: {
      x?: string;
    };
  }) => Promise<string>;
  "only-comments": (args: { [key: string]: unknown }) => Promise<string>;
  /** Nested names from the path, made unique. */
  "paths": (args: {
    item?: {
      x?: string;
    };
    list?: {
      y?: string;
    }[];
    List?: {
      z?: string;
    }[];
    map?: { [key: string]: {
      w?: string;
    } };
  }) => Promise<string>;
  /** The method named like the module variable. */
  "tools": (args: {
    x?: string;
  }) => Promise<string>;
  /** Derives ValueErrorArgs, not ValueError. */
  "value-error": (args: {
    x?: string;
  }) => Promise<string>;
  /** No ASCII letters: the class falls back to ToolArgs. */
  "日本": (args: {
    x?: string;
  }) => Promise<string>;
};
