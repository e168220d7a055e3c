package tsprep

import "fmt"

// erasableError reports TypeScript that needs more than removing types:
// the program runs type-stripped, so only erasable TypeScript is allowed
// (seed 001: the strip-only type-strip rejects enum and namespaces, and
// the SDK tells the model so).
type erasableError struct {
	line, col int
	what, fix string
}

func (e *erasableError) Error() string {
	return fmt.Sprintf("%d:%d: TypeScript %s is not supported: programs run type-stripped, so only erasable TypeScript is allowed (%s)", e.line, e.col, e.what, e.fix)
}

// erasableCheck watches a program's tokens for non-erasable constructs:
// enum (unless declared ambient), namespace and module declarations with
// bodies (unless ambient), constructor parameter properties, decorators,
// `import x = ...` and `export =`. It sees only tokens (strings, comments
// and templates are skipped by the scanner), so it recognizes these by
// their shape.
type erasableCheck struct {
	prev [3]tok // the last three tokens, prev[0] the latest
	// ctorDepth is the parenthesis depth inside a constructor's parameter
	// list (0 outside one).
	ctorDepth int
}

type tok struct {
	text      string
	line, col int
}

func isWord(t string) bool { return t != "" && isIdentStart(t[0]) && t[0] != '@' }

var accessModifiers = map[string]bool{"public": true, "private": true, "protected": true, "readonly": true, "override": true}

func (c *erasableCheck) token(text string, line, col int) error {
	p0, p1, p2 := c.prev[0], c.prev[1], c.prev[2]
	c.prev = [3]tok{{text, line, col}, p0, p1}
	fail := func(at tok, what, fix string) error {
		return &erasableError{line: at.line, col: at.col, what: what, fix: fix}
	}
	switch {
	case text[0] == '@' && len(text) > 1:
		return fail(c.prev[0], "decorator "+text, "call the function on the class or method instead")
	case isWord(text) && p0.text == "enum" && p1.text != "declare" && !(p1.text == "const" && p2.text == "declare"):
		return fail(p0, "enum", "use a plain object, or a union of string literals for the type")
	case (text == "{" || text == ".") && (p1.text == "namespace" || p1.text == "module") && (isWord(p0.text) || p0.text == `"`) && p2.text != "declare":
		return fail(p1, p1.text+" declaration", "use a plain object or module-level functions; `declare "+p1.text+"` is fine for types")
	case text == "=" && p1.text == "import" && isWord(p0.text) && p0.text != "type":
		return fail(p1, "import-equals declaration", "use `const x = await import(...)`")
	case text == "=" && p0.text == "export":
		return fail(p0, "export assignment", "programs export nothing: return the value")
	}
	// Parameter properties: `constructor(private x: T)`.
	switch {
	case c.ctorDepth == 0 && text == "(" && p0.text == "constructor":
		c.ctorDepth = 1
	case c.ctorDepth > 0 && text == "(":
		c.ctorDepth++
	case c.ctorDepth > 0 && text == ")":
		c.ctorDepth--
	case c.ctorDepth == 1 && accessModifiers[p0.text] && (isWord(text) || text == "{" || text == "["):
		return fail(p0, "parameter property ("+p0.text+")", "declare the field in the class body and assign it in the constructor")
	}
	return nil
}
