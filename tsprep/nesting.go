package tsprep

import "fmt"

// MaxNesting bounds how deeply a TypeScript program may nest before the
// host type-strips it. esbuild's parser recurses once per level of nesting
// and keeps every level's AST: 120,000 levels cost it about 1 GiB and a
// deeper program overflows the Go stack, which no recover can catch. Real
// programs stay far below the bound.
const MaxNesting = 256

// nestingError reports where a program first nests deeper than MaxNesting.
type nestingError struct {
	line, col int
}

func (e *nestingError) Error() string {
	return fmt.Sprintf("%d:%d: the program nests deeper than %d levels (brackets, template substitutions, prefix operators, and chains of assignments, ternaries, arrow functions, '**' and statement bodies all count); split it into smaller functions or statements",
		e.line, e.col, MaxNesting)
}

// checkProgram checks a TypeScript program before the type-strip sees it:
// it estimates, without parsing, the deepest recursion a parser reaches on
// src and reports the first place where the estimate passes MaxNesting
// (a *nestingError), and it reports the first construct that is not
// erasable TypeScript (an *erasableError, see erasable.go).
//
// The estimate follows the constructs a recursive-descent parser recurses
// on, not only brackets: every open ( [ { and ${ is a level; inside a level,
// a run of prefix operators (! ~ + - ++ -- typeof void delete await new
// yield ...) adds one per operator until an operand ends it, and a chain of
// right-recursive constructs (assignment operators, ?, =>, **, statement
// keywords such as if/else/for/while) adds one per link until the
// expression or statement ends (',' ';' or a line break that ends a
// statement). Strings, comments, template text and regular expressions are
// skipped. The scan is linear and allocates only its stack of levels.
//
// It over-approximates rather than parses, so it may count a link a parser
// would not recurse on; with a bound this far above what programs need,
// that costs nothing. It may also under-count a construct it does not know
// (a deeply nested type, say); the type-strip's own stack and memory limits
// (see stripper) remain the backstop for those.
func checkProgram(src string) error {
	s := nestScan{src: src, line: 1, levels: []nestLevel{{}}}
	s.run()
	return s.err
}

// nestLevel is one open bracket or template substitution.
type nestLevel struct {
	close  byte // ')' ']' '}' or '`' for a template substitution
	chain  int  // right-recursive links since the expression or statement began
	prefix int  // prefix operators awaiting their operand
}

type nestScan struct {
	src             string
	i, line, lineAt int
	levels          []nestLevel
	// depth is the estimate: one per level above the top, plus every
	// level's chain and prefix counts.
	depth int
	// operand reports that the last token ended an operand (an identifier,
	// literal or closing bracket): a following / divides, a following
	// ++/-- is postfix, and a line break may end the statement.
	operand bool
	newline bool // a line break since the last token
	err     error
	// erasable watches the tokens for TypeScript that is more than
	// types (erasable.go).
	erasable erasableCheck
}

func (s *nestScan) top() *nestLevel { return &s.levels[len(s.levels)-1] }

func (s *nestScan) check(at int) {
	if s.err == nil && s.depth > MaxNesting {
		s.err = &nestingError{line: s.line, col: at - s.lineAt + 1}
	}
}

func (s *nestScan) push(close byte, at int) {
	s.levels = append(s.levels, nestLevel{close: close})
	s.depth++
	s.operand = false
	s.check(at)
}

func (s *nestScan) pop() {
	l := s.top()
	s.depth -= 1 + l.chain + l.prefix
	s.levels = s.levels[:len(s.levels)-1]
}

// reset ends the expression or statement at the current level.
func (s *nestScan) reset() {
	l := s.top()
	s.depth -= l.chain + l.prefix
	l.chain, l.prefix = 0, 0
}

func (s *nestScan) addChain(at int) {
	s.top().chain++
	s.depth++
	s.operand = false
	s.check(at)
}

func (s *nestScan) addPrefix(at int) {
	s.top().prefix++
	s.depth++
	s.operand = false
	s.check(at)
}

// endOperand records an operand: the pending prefix operators apply to it.
func (s *nestScan) endOperand() {
	l := s.top()
	s.depth -= l.prefix
	l.prefix = 0
	s.operand = true
}

// startToken applies automatic semicolon insertion's common case: a line
// break between an operand and a token that cannot continue the expression
// ends the statement.
func (s *nestScan) startToken(continues bool) {
	if s.newline && s.operand && !continues {
		s.reset()
	}
	s.newline = false
}

// token reports one significant token to the erasable check: a word, a
// punctuator or bracket, or a literal (given as `"` or "0").
func (s *nestScan) token(text string, at int) {
	if s.err == nil {
		if err := s.erasable.token(text, s.line, at-s.lineAt+1); err != nil {
			s.err = err
		}
	}
}

func (s *nestScan) lineBreak(at int) {
	s.line++
	s.lineAt = at + 1
	s.newline = true
}

func (s *nestScan) run() {
	src, n := s.src, len(s.src)
	for s.i < n && s.err == nil {
		i := s.i
		c := src[i]
		switch {
		case c == '\n':
			s.lineBreak(i)
			s.i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			s.i++
		case c == '/' && i+1 < n && src[i+1] == '/':
			for s.i < n && src[s.i] != '\n' {
				s.i++
			}
		case c == '/' && i+1 < n && src[i+1] == '*':
			s.i += 2
			for s.i < n && !(src[s.i] == '*' && s.i+1 < n && src[s.i+1] == '/') {
				if src[s.i] == '\n' {
					s.lineBreak(s.i)
				}
				s.i++
			}
			s.i += 2
		case c == '"' || c == '\'':
			s.startToken(false)
			s.token(`"`, i)
			s.i = skipQuoted(src, i, c)
			s.endOperand()
		case c == '`' || c == '}' && s.top().close == '`':
			// A template's text, from its opening backquote or the } that
			// ends a substitution, to the next ${ or the closing backquote.
			if c == '`' {
				s.startToken(false)
			} else {
				s.newline = false
				s.pop()
			}
			j := i + 1
			for j < n && src[j] != '`' && !(src[j] == '$' && j+1 < n && src[j+1] == '{') {
				switch src[j] {
				case '\\':
					j++
				case '\n':
					s.lineBreak(j)
				}
				j++
			}
			if j+1 < n && src[j] == '$' {
				s.i = j + 2
				s.push('`', j)
				continue
			}
			s.i = j + 1
			s.endOperand()
		case c == '(' || c == '[' || c == '{':
			s.startToken(c != '{')
			s.token(src[i:i+1], i)
			s.i++
			switch c {
			case '(':
				s.push(')', i)
			case '[':
				s.push(']', i)
			default:
				s.push('}', i)
			}
		case c == ')' || c == ']' || c == '}':
			s.startToken(true)
			s.token(src[i:i+1], i)
			if len(s.levels) > 1 && s.top().close == c {
				s.pop()
			}
			s.endOperand()
			s.i++
		case c == ',' || c == ';':
			s.startToken(true)
			s.token(src[i:i+1], i)
			s.reset()
			s.operand = false
			s.i++
		case isIdentStart(c):
			j := i
			for j < n && isIdentPart(src[j]) {
				j++
			}
			s.i = j
			s.token(src[i:j], i)
			switch word := src[i:j]; word {
			case "typeof", "void", "delete", "await", "new", "yield":
				s.startToken(false)
				s.addPrefix(i)
			case "if", "else", "for", "while", "do", "with":
				s.startToken(word == "else")
				s.addChain(i)
			case "return", "throw", "case":
				s.startToken(false)
				s.operand = false
			case "in", "of", "instanceof", "extends", "keyof", "satisfies", "as":
				s.startToken(true)
				s.operand = false
			default:
				s.startToken(false)
				s.endOperand()
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && src[i+1] >= '0' && src[i+1] <= '9':
			s.startToken(false)
			s.token("0", i)
			for s.i < n && (isIdentPart(src[s.i]) || src[s.i] == '.') {
				s.i++
			}
			s.endOperand()
		case c == '/' && !s.operand:
			// A regular expression literal.
			s.startToken(false)
			s.i = skipRegexp(src, i)
			s.endOperand()
		default:
			op := punctuator(src[i:])
			s.startToken(op != "!" && op != "~")
			s.token(op, i)
			s.i += len(op)
			switch op {
			case "!", "~", "...":
				s.addPrefix(i)
			case "+", "-", "++", "--":
				if s.operand {
					s.operand = op == "++" || op == "--" // postfix keeps the operand
				} else {
					s.addPrefix(i)
				}
			case "=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", ">>>=", "&=", "|=", "^=", "&&=", "||=", "??=", "?", "=>", "**":
				s.addChain(i)
			default:
				s.operand = false
			}
		}
	}
}

// punctuator returns the operator at the start of s (at least one byte).
func punctuator(s string) string {
	for _, op := range [...]string{">>>=", "...", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=",
		"=>", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "**", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<", ">>"} {
		if len(s) >= len(op) && s[:len(op)] == op {
			if op == "?." && len(s) > 2 && s[2] >= '0' && s[2] <= '9' {
				continue // a ? .5 : b
			}
			return op
		}
	}
	return s[:1]
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c == '#' || c == '@' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// skipQuoted returns the index after the string literal starting at i.
func skipQuoted(src string, i int, quote byte) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case quote, '\n':
			return j + 1
		}
	}
	return len(src)
}

// skipRegexp returns the index after the regular expression literal
// starting at i, flags included.
func skipRegexp(src string, i int) int {
	inClass := false
	j := i + 1
	for ; j < len(src); j++ {
		c := src[j]
		switch {
		case c == '\\':
			j++
		case c == '\n':
			return j
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case c == '/' && !inClass:
			j++
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			return j
		}
	}
	return j
}
