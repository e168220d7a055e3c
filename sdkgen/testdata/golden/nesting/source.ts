declare const tools: {
  /** Arrays of arrays nested 40 levels: Python caps at MaxListNesting, TypeScript at MaxDepth. */
  "deep-arrays": (args: {
    grid: unknown[][][][][][][][][][][][][][][][][][][][][][][][][][][][][][][][];
  }) => Promise<string>;
  /** Maps of maps nested 40 levels. */
  "deep-maps": (args: {
    m?: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: { [key: string]: unknown } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } } };
  }) => Promise<string>;
  /** Objects nested 40 levels: past MaxDepth the type is unknown. */
  "deep-objects": (args: {
    a: {
      a: {
        a: {
          a: {
            a: {
              a: {
                a: {
                  a: {
                    a: {
                      a: {
                        a: {
                          a: {
                            a: {
                              a: {
                                a: {
                                  a: {
                                    a: {
                                      a: {
                                        a: {
                                          a: {
                                            a: {
                                              a: {
                                                a: {
                                                  a: {
                                                    a: {
                                                      a: {
                                                        a: {
                                                          a: {
                                                            a: {
                                                              a: {
                                                                a: {
                                                                  a: {
                                                                    a: unknown;
                                                                  };
                                                                };
                                                              };
                                                            };
                                                          };
                                                        };
                                                      };
                                                    };
                                                  };
                                                };
                                              };
                                            };
                                          };
                                        };
                                      };
                                    };
                                  };
                                };
                              };
                            };
                          };
                        };
                      };
                    };
                  };
                };
              };
            };
          };
        };
      };
    };
  }) => Promise<string>;
  /** Exactly 16 nested arrays. */
  "list-cap-exact": (args: {
    x?: string[][][][][][][][][][][][][][][][];
    y?: string[][][][][][][][][][][][][][][][][];
  }) => Promise<string>;
  /** A union at the cap. */
  "list-cap-union": (args: {
    x?: (string[] | { [key: string]: string } | null)[][][][][][][][][][][][][][][][];
  }) => Promise<string>;
};
