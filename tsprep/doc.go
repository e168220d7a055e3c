// Package tsprep prepares a TypeScript program for the runner: a linear
// scan refuses programs that nest deeper than MaxNesting or are not
// erasable TypeScript, then esbuild strips the types, in a worker process
// (a Stripper's), never in the caller's: esbuild cannot bound its own
// recursion, and a Go stack overflow or out-of-memory would end the whole
// process. A worker is this executable re-executed; the program serves it
// by calling ServeWorkerIfRequested first thing in main (and a test
// package that strips in-process, from TestMain).
//
// Errors: a *ProgramError is the exception the program gets (its text is
// what the model reads), a *WorkerError a worker that could not run, which
// the caller classes as unavailable. It imports only the standard library
// and esbuild.
package tsprep
