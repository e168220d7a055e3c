package tsprep

import (
	"errors"
	"strings"
	"testing"
)

// Non-erasable TypeScript is rejected before the type-strip, naming the
// construct and its line (issue 18, item 2); erasable TypeScript, and
// JavaScript that merely uses the same words, passes.
func TestCheckProgramRejectsNonErasableTypeScript(t *testing.T) {
	for _, tc := range []struct {
		src, what string
		line, col int
	}{
		{"enum Color { Red, Green }\nreturn Color.Red", "enum", 1, 1},
		{"const x = 1\nconst enum E { A }\nreturn 1", "enum", 2, 7},
		{"export enum E { A }", "enum", 1, 8},
		{"namespace NS { export const a = 1 }\nreturn NS.a", "namespace declaration", 1, 1},
		{"namespace A.B { }", "namespace declaration", 1, 1},
		{"module Legacy { }", "module declaration", 1, 1},
		{"module \"quoted\" { }", "module declaration", 1, 1},
		{"class P {\n  constructor(private x: number) {}\n}", "parameter property (private)", 2, 15},
		{"class P { constructor(a: string, public readonly b = 2) {} }", "parameter property (public)", 1, 34},
		{"class P { constructor(readonly c: number[]) {} }", "parameter property (readonly)", 1, 23},
		{"@sealed\nclass S {}", "decorator @sealed", 1, 1},
		{"class S { @log m() {} }", "decorator @log", 1, 11},
		{"import fs = require('node:fs')", "import-equals declaration", 1, 1},
		{"export = 42", "export assignment", 1, 1},
	} {
		err := checkProgram(tc.src)
		var ee *erasableError
		if !errors.As(err, &ee) {
			t.Errorf("%q: %v, want a non-erasable error", tc.src, err)
			continue
		}
		if ee.what != tc.what || ee.line != tc.line || ee.col != tc.col || !strings.Contains(err.Error(), "only erasable TypeScript") {
			t.Errorf("%q: got %q at %d:%d (%v), want %q at %d:%d", tc.src, ee.what, ee.line, ee.col, err, tc.what, tc.line, tc.col)
		}
	}
}

func TestCheckProgramAcceptsErasableTypeScript(t *testing.T) {
	for _, src := range []string{
		"declare enum E { A }\nreturn 1",
		"declare const enum E { A }",
		"declare namespace NS { const a: number }",
		"declare module \"m\" { export const x: number }",
		"type Color = 'red' | 'green'\ninterface P { enum: string; namespace: number }\nconst p: P = { enum: 'x', namespace: 1 }\nreturn p.enum",
		"const namespace = 1, module = { exports: 2 }\nmodule.exports = namespace\nreturn module.exports",
		"class P {\n  private x: number\n  readonly y = 1\n  constructor(x: number, { a }: { a: number }) { this.x = x + a }\n  public get v() { return this.x }\n}\nreturn new P(1, { a: 2 }).v",
		"const s = \"@decorator enum E {}\"; const r = /@x namespace N {/; // enum E { }\nreturn `${s} @y`",
		"import type { X } from 'x'\nexport const a = 1\nconst b = a == 1 ? 2 : 3",
		"function f(this: Window, readonly: number) { return readonly }",
		"const o = { constructor(private_: number) { return private_ } }",
		"const email = 'a@b.c'",
	} {
		if err := checkProgram(src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}
