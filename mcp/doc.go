// Package mcp serves Code Mode as an MCP server, over stdio or streamable
// HTTP, on the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// An agent with many MCP tools usually makes one model round trip per
// call. Behind this server the model writes one program against all of
// them instead: tools/list offers run_code, whose input is {"code":
// string} and whose description carries the generated SDK of every tool
// (TypeScript or Python, the runtime's language), and a call runs the
// program in a fresh container where each `await tools["name"](args)`
// goes through the registry's pipeline back to the host.
//
// The mode decides tools/list: registry.ModeCode (the default) offers
// run_code only, registry.ModeBoth run_code and every tool natively,
// registry.ModeNative the tools only (a plain MCP aggregator; no runtime
// needed). Tools come from WithTools and, when they can change (the tools
// of upstream MCP servers), WithToolSource: each change rebuilds the
// registry and the SDK, and the go-sdk server sends
// notifications/tools/list_changed. A call keeps the tool set it started
// with. A rebuild first registers the new tools (a tool refused leaves
// everything as it was) and lets calls use them, so the previous tools
// are held only by calls still running on them; then it renders the SDK,
// once per change, into one string shared by the registry's section and
// run_code's description. In code mode a large previous generation is
// collected, and its memory given back, before the next SDK renders: the
// server holds one tool list and its SDK, and a second list only while
// the tool source decodes it. tools/list pages hold the go-sdk's default
// 1000 tools: a smaller page would bound what one listing encodes in
// native mode, but clients that do not follow nextCursor (some do not)
// would lose tools without a word; in code mode the list is run_code and
// describe_tools.
//
// WithSDK chooses what run_code's description carries: the full SDK (the
// default), the SDK index (one line per tool, grouped by the MCP server it
// comes from), or, with registry.SDKAuto, the index once the full SDK
// would pass a byte threshold. With the index, tools/list offers
// describe_tools next to run_code: {"names": [...]} returns the full
// declarations of just those tools, exactly as the full SDK declares
// them. In both mode the native tools keep their own schemas.
//
// MCP needs a native tool's input schema to be an object of type
// "object": a schema without a top-level "type" gets one, a schema of
// another type is offered as {"type":"object"} (logged). "type" is the
// key spelt exactly so, the last of repeated keys winning, as the go-sdk
// reads it ({"Type":"object"} has none). A tool the go-sdk still refuses
// (its AddTool panics, say on a schema nested deeper than it decodes) is
// left out with a log line naming it; the server and the other tools go
// on.
//
// A run_code result is one text content block — the program's logs, then
// its value rendered for a model, as the registry renders them — plus
// structuredContent {value, logs, error} (registry.RunCodeOutput; run_code
// declares its schema). A failed program is an error result naming its
// failure kind and message; a run that could not start (admission full,
// no image) an error result with the reason and no structured content.
// When the call carries a progress token, the program's log entries
// stream as notifications/progress while it runs, through a bounded queue
// that never blocks the run (ProgressQueue). Cancelling the call
// (notifications/cancelled, or over HTTP the request going away) cancels
// the run: the runtime kills and removes its container. Close aborts
// every call in flight.
//
// A native call's result carries the tool's content (text, images,
// audio; other blocks as placeholder text), its structured content and
// isError.
package mcp
