package sdkgen

import "strings"

// The renderers write into one buffer; these return what they write, for
// tests of one piece.

func quoteTS(s string) string {
	var w out
	w.quoteTS(s)
	return string(w.b)
}

func indexLine(t Tool) string {
	r := &renderer{w: &out{}}
	r.indexLine(t)
	return string(r.w.b)
}

func summary(desc string) string { return string(new(renderer).summary(desc)) }

func writeTSMember(b *strings.Builder, t Tool) {
	r := &renderer{w: &out{}}
	r.tsMember(t)
	b.Write(r.w.b)
}

// tsType renders s at indent spaces.
func tsType(s *shape, indent string) string {
	r := &renderer{w: &out{}}
	r.tsType(s, len(indent))
	return string(r.w.b)
}

func fence(lang, source string) string {
	var w out
	w.fenced(lang, func() { w.str(source) })
	return string(w.b)
}

func writeTSDoc(b *strings.Builder, indent, desc string) {
	r := &renderer{w: &out{}}
	r.tsDoc(len(indent), desc)
	b.Write(r.w.b)
}

func writePyDocstring(b *strings.Builder, indent, desc string) {
	r := &renderer{w: &out{}}
	r.pyDocstring(r.w, len(indent), desc)
	b.Write(r.w.b)
}

// newPyModule is an empty stub module.
func newPyModule() *pyModule {
	r := &renderer{w: &out{}}
	return &pyModule{r: r, w: r.w, used: map[string]bool{}, next: map[string]int{}}
}
