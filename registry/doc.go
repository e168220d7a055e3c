// Package registry is the tool registry of Code Mode: it holds the host's
// tools, decides how they are presented to a model, and executes the model's
// calls — native ones, and the calls a model-written program makes through
// the reserved run_code tool.
//
// # Tools, scopes and the pipeline
//
// A Tool has a name, a description, a JSON Schema for its arguments and an
// Execute function returning content Blocks (text, image, or any other
// type). A tool may also declare an OutputSchema (MCP's outputSchema) and
// Annotations, and return a structured value besides its content through
// ExecuteOutput; a Result carries it as StructuredContent. Register rejects the reserved name run_code. A Scope stacks
// Restriction layers (Allow, Deny, any predicate); lookup and execution
// share it, so the model is offered exactly what it can call. run_code is
// outside the layers: no restriction can remove Code Mode's only entry
// point.
//
// Every call — native, run_code itself, and every sub-call of a program —
// goes through one pipeline: arguments normalized to canonical JSON
// (NormalizeArguments) → pre-execute hooks → guards (the first denial is
// final) → the tool → post-execute hooks → result observers, which get an
// immutable copy. Execute never panics and never returns a Go error: an
// unknown or hidden tool, invalid arguments, a denial, a tool error or a
// panic are all error Results, with the cause in Result.Err (errdefs
// classes, *DeniedError, *CodeRunFailedError).
//
// # Modes and assembly
//
// The Mode (ModeNative, the default; ModeCode; ModeBoth) shapes Assemble's
// output: native offers the visible tools' schemas; code offers only
// run_code plus the "tools:sdk" prompt section, the SDK sdkgen renders for
// the visible tools (sorted, byte-stable, never run_code); both offers both.
// The SDK's language is the runtime's: two tables keyed by
// backend.Language pick the SDK's language and run_code's description and
// code-parameter description, so the prompt and the transport always
// speak one language. Code Mode with no runtime, or with a runtime whose
// language has no renderer, fails loudly naming the known languages;
// ModeNative never needs a runtime. The section is rendered once per
// Assemble, into one string that starts with run_code's description: the
// section is its end, and Assembly.MCPTools gives run_code that string as
// its description, so an SDK of megabytes is held once, not copied for
// MCP (sdkgen.RenderOptions.Prefix).
//
// # Progressive disclosure: the SDK index and describe_tools
//
// WithSDK chooses what the SDK section carries: SDKFull (the default),
// every tool's declaration; SDKIndex, sdkgen's index, one line per tool
// grouped by Tool.Source; SDKAuto, the index when the full SDK would be
// longer than WithSDKAutoThreshold bytes (DefaultSDKAutoThreshold), which
// it tells by rendering the full SDK only until it passes the threshold
// (sdkgen.RenderOptions.Limit), never the whole of a large one. With
// the index, a second reserved tool, describe_tools, is offered next to
// run_code: {"names": [...]} returns exactly what sdkgen renders as the
// declaration block (FormatSource) of those tools, in the runtime's
// language. Like run_code it cannot be registered and no restriction
// hides it; it sees only the tools the call's scope can see (a hidden
// name is as unknown as a name nobody registered) and goes through the
// pipeline like any call. Programs never see it: their bindings are the
// scope's tools, nothing more.
//
// # run_code and the dispatch bridge
//
// run_code takes {"code": string}. Executing it runs the program on the
// backend.Runtime with one binding namespace, "tools", holding every tool
// the call's scope can see. Each binding call from the program is
// normalized (lossy values such as NaN, Infinity, lone surrogates and
// duplicate keys reject the call before dispatch), numbered
// "<parent>:code:<n>" in issue order with the run_code call as parent, and
// executed on the runtime's goroutine. The runtime owns the order: it
// invokes a run's bindings one at a time, in the order the program issued
// the calls (backend.BindingFunc), so Promise.all / asyncio.gather gain
// fewer model round trips, not parallelism; a binding invoked while another
// runs is rejected unexecuted. A sub-call's text content resolves the binding as
// one string, non-text blocks become placeholders such as
// "[image: image/png, 1234 bytes]", and a tool error or a denial rejects
// the binding with its message. A tool with an OutputSchema resolves the
// binding to its structured value instead — the type the SDK declares for
// it — and a result of such a tool without one rejects the binding. A run-scoped context is cancelled when the
// outer context is and when the run settles; once it is done no sub-call
// starts (a late one rejects with ErrCallAbandoned), and settlement waits
// for the in-flight call, so no sub-call outlives Execute.
//
// A completed program's result is its captured output — log lines, then
// the returned value — as text, with the runtime's full backend.RunResult
// in Result.CodeRun and a result Card. A program that fails (exception,
// timeout, abort, OOM, exit) is an error result carrying a
// *CodeRunFailedError; a runtime misuse error from Run goes through the
// same error boundary as any tool error. PresentCall gives the call card:
// generic, kind execute, titled with the program text.
//
// # Events
//
// Each sub-call emits one Event of type "tool/code-dispatch" to the sink
// set WithEventSink: parent and child ids, tool, normalized arguments,
// isError and a summary of the result. Events stay out of the model's
// context; they are emitted before run_code's Execute returns. Without a
// sink runs work the same.
//
// Sub-calls carry no additionalContext: injecting it mid-program would
// break the adjacency of the run_code call and its result, and one program
// can produce many; supporting it needs a plural channel first.
//
// The package depends only on the backend seam and sdkgen, never on a
// concrete runtime; package registrytest provides an in-memory one.
package registry
