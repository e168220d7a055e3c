declare const tools: {};
