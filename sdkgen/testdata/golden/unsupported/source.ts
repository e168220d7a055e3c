declare const tools: {
  /** Boolean schemas. */
  "boolean_schemas": (args: {
    t: unknown;
    f?: unknown;
  }) => Promise<string>;
  /** JSON nested far deeper than the renderer looks. */
  "deep_json": (args: {
    x?: unknown;
  }) => Promise<string>;
  /** A repeated key keeps its first position and its last value. */
  "duplicate_keys": (args: {
    a?: number;
    b?: string;
  }) => Promise<string>;
  /** Keys written with escapes, lone surrogates included. */
  "escaped_keys": (args: {
    "aé"?: string;
    "�x"?: string;
    "😀"?: string;
  }) => Promise<string>;
  /** The whole schema is false. */
  "false_root": (args: unknown) => Promise<string>;
  /** The schema is not JSON. */
  "invalid_json": (args: unknown) => Promise<string>;
  /** Malformed values. */
  "malformed": (args: {
    typeNumber?: unknown;
    typeUnknown?: unknown;
    typeArrayBad?: unknown;
    typeArrayEmpty?: unknown;
    typeArrayUnknown?: unknown;
    enumNotArray?: unknown;
    enumEmpty?: unknown;
    enumObject?: unknown;
    enumArray?: unknown;
    constObject?: unknown;
    propertiesNotObject?: { [key: string]: unknown };
    requiredNotArray?: {
      a?: string;
    };
    requiredMixed?: {
      a: string;
    };
    additionalNumber?: { [key: string]: unknown };
    itemsString?: unknown[];
    anyOfEmpty?: unknown;
    anyOfNotArray?: unknown;
    anyOfAndOneOf?: unknown;
    anyOfWithUnknown?: unknown;
    allOf?: unknown;
    allOfWithType?: string;
    descriptionNotString?: string;
    schemaString?: unknown;
    schemaNumber?: unknown;
    schemaNull?: unknown;
    schemaArray?: unknown;
  }) => Promise<string>;
  /** No inputSchema at all. */
  "missing_schema": (args: unknown) => Promise<string>;
  /** patternProperties degrades to an unknown index signature. */
  "pattern_properties": (args: {
    pp?: { [key: string]: unknown };
    ppWithProps?: {
      a?: string;
      [key: string]: unknown;
    };
    ppEmpty?: {
      a?: string;
    };
  }) => Promise<string>;
  /** $ref degrades. */
  "ref": (args: {
    r?: unknown;
    withType?: unknown;
  }) => Promise<string>;
  /** The schema is an array. */
  "root_array": (args: unknown) => Promise<string>;
  /** The schema is null. */
  "root_null": (args: unknown) => Promise<string>;
  /** The schema is a JSON string. */
  "root_string": (args: unknown) => Promise<string>;
  /** JSON followed by garbage. */
  "trailing_garbage": (args: unknown) => Promise<string>;
  /** The whole schema is true. */
  "true_root": (args: unknown) => Promise<string>;
  /** Tuple items degrade. */
  "tuple_items": (args: {
    tuple?: unknown[];
    prefixItems?: unknown[];
    itemsFalse?: unknown[];
  }) => Promise<string>;
};
