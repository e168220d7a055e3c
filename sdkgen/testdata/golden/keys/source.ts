declare const tools: {
  /** Property keys that need quoting. */
  "adversarial_keys": (args: {
    /** Key "__proto__". */
    __proto__: string;
    /** Key "constructor". */
    constructor?: string;
    /** Key "toString". */
    toString: string;
    /** Key "delete". */
    delete?: string;
    /** Key "class". */
    class: string;
    /** Key "my-key". */
    "my-key"?: string;
    /** Key "a.b". */
    "a.b": string;
    /** Key "with space". */
    "with space"?: string;
    /** Key "quote\"d". */
    "quote\"d": string;
    /** Key "back\\slash". */
    "back\\slash"?: string;
    /** Key "new\nline". */
    "new\nline": string;
    /** Key "*\/". */
    "*/"?: string;
    /** Key "日本語". */
    "日本語": string;
    /** Key "café". */
    "café"?: string;
    /** Key "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk". */
    kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk: string;
    /** Key "". */
    ""?: string;
    /** Key "1". */
    "1": string;
    /** Key "0x1". */
    "0x1"?: string;
    /** Key "$ref". */
    $ref: string;
    /** Key "__private". */
    __private?: string;
    /** Key "__dunder__". */
    __dunder__: string;
    /** Key "_ok". */
    _ok?: string;
    /** Key "None". */
    None: string;
    /** Key "def". */
    def?: string;
    /** Key "type". */
    type: string;
    /** Key "match". */
    match?: string;
    /** Key "self". */
    self: string;
    /** Key "str". */
    str?: string;
    /** Key "Any". */
    Any: string;
    /** Key "key". */
    key?: string;
    /** Key "__total__". */
    __total__: string;
    /** Key "__annotations__". */
    __annotations__?: string;
    /** Key "__required_keys__". */
    __required_keys__: string;
    /** Key "__class__". */
    __class__?: string;
    /** Key "case". */
    case: string;
    /** Key "_". */
    _?: string;
  }) => Promise<string>;
  /** Keys that are all plain identifiers. */
  "identifier_keys": (args: {
    alpha: string;
    beta_2?: number;
    Gamma?: boolean;
    _d?: null;
    type?: string;
    match?: string;
    case?: string;
    _?: string;
    str: number;
    list?: string;
    ToolCallError?: string;
  }) => Promise<string>;
  /** Nested records named from adversarial keys. */
  "nested_keys": (args: {
    "my-key"?: {
      v?: string;
    };
    my_key?: {
      v?: string;
    };
    "My Key"?: {
      v?: string;
    };
    "日本"?: {
      v?: string;
    };
    ""?: {
      v?: string;
    };
    "1"?: {
      v?: string;
    };
  }) => Promise<string>;
};
