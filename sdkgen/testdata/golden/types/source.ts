declare const tools: {
  /** The arguments themselves are an array. */
  "array-args": (args: number[]) => Promise<string>;
  /** Arrays. */
  "arrays": (args: {
    strings?: string[];
    untyped?: unknown[];
    matrix?: number[][];
    records?: {
      id: number;
      tags?: string[];
    }[];
    unionItems?: (string | number)[];
    enumItems?: ("a" | "b")[];
    inferred?: boolean[];
  }) => Promise<string>;
  /** enum and const. */
  "literals": (args: {
    color: "red" | "green" | "blue";
    mixed?: "a" | 1 | -2 | 3.5 | 1000.0 | true | false | null;
    quoted?: "say \"hi\"" | "back\\slash" | "new\nline" | "tab\there" | "\u2028" | "emoji 😀" | "nul \u0000";
    big?: 12345678901234567890 | 0 | 100.0;
    constString?: "fixed";
    constNumber?: 42;
    constFloat?: 0.5;
    constTrue?: true;
    constNull?: null;
    typedEnum?: "x" | "y";
  }) => Promise<string>;
  /** The arguments are a map. */
  "map-args": (args: { [key: string]: boolean }) => Promise<string>;
  /** Objects, additionalProperties and required. */
  "objects": (args: {
    /** A nested record. */
    nested: {
      inner?: {
        /** The leaf. */
        leaf: string;
      };
    };
    freeForm?: { [key: string]: unknown };
    emptyProps?: { [key: string]: unknown };
    closedEmpty?: { [key: string]: never };
    stringMap?: { [key: string]: string };
    recordMap?: { [key: string]: {
      v?: number;
    } };
    openRecord?: {
      a?: string;
      [key: string]: unknown;
    };
    safeIndex?: {
      a: string;
      b: string;
      [key: string]: string;
    };
    optionalIndex?: {
      a?: string;
      [key: string]: string | undefined;
    };
    unsafeIndex?: {
      a: number;
      [key: string]: unknown;
    };
    inferredObject?: {
      x: number;
    };
    undeclared: unknown;
  }) => Promise<string>;
  /** Every primitive type. */
  "primitives": (args: {
    s: string;
    n: number;
    i: number;
    b: boolean;
    z: null;
    any: unknown;
    /** No type, only a description. */
    described?: unknown;
  }) => Promise<string>;
  /** The arguments themselves are a string. */
  "scalar-args": (args: string) => Promise<string>;
  /** The arguments are one of two records. */
  "union-args": (args: {
    id: string;
  } | {
    name: string;
  }) => Promise<string>;
  /** Type arrays, anyOf and oneOf. */
  "unions": (args: {
    nullable?: string | null;
    numeric?: number;
    dup?: string | null;
    all?: string | number | boolean | null | string[] | { [key: string]: unknown };
    anyOf?: string | (string | null)[];
    oneOf?: {
      a: string;
    } | {
      b: number;
    } | null;
    nullableObject?: {
      x?: string;
    } | null;
    literalOrNumber?: "auto" | number | 0.5;
  }) => Promise<string>;
};
