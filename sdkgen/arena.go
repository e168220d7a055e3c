package sdkgen

// arena holds what one tool's schemas are parsed and mapped into — JSON
// values, shapes and the slices between them — and hands the same memory
// to the next tool (reset): rendering a thousand tools allocates about
// what the largest of them needs, not a tree per tool for the collector
// to find (issue 24 §7). Nothing may keep a value or shape of a tool past
// the next reset.
type arena struct {
	vals   pool[jvalue]
	ptrs   pool[*jvalue]
	strs   pool[string]
	shapes pool[shape]
	fields pool[field]
	alts   pool[*shape]

	// The stacks a JSON object's or array's members, and a union's
	// alternatives, gather on before they are copied, at their final
	// number, into the pools.
	keyStack []string
	valStack []*jvalue
	altStack []*shape

	unescaped []byte            // a string with escapes, being decoded
	sets      []map[string]bool // sets for large objects, free for reuse
}

// reset makes the arena's memory free for the next tool.
func (a *arena) reset() {
	a.vals.reset()
	a.ptrs.reset()
	a.strs.reset()
	a.shapes.reset()
	a.fields.reset()
	a.alts.reset()
}

// set returns an empty set of strings; putSet gives it back.
func (a *arena) set() map[string]bool {
	if n := len(a.sets); n > 0 {
		s := a.sets[n-1]
		a.sets = a.sets[:n-1]
		return s
	}
	return map[string]bool{}
}

// putSet gives back a set from set. A large one is dropped rather than
// cleared (clearing costs its capacity, on every later use).
func (a *arena) putSet(s map[string]bool) {
	if len(s) > 1024 {
		return
	}
	clear(s)
	a.sets = append(a.sets, s)
}

// pool hands out values and slices of T from chunks it keeps: reset makes
// them all free again, without freeing the chunks.
type pool[T any] struct {
	chunks [][]T
	i, n   int // the chunk in use, and how much of it is
}

// poolChunk is the length of a pool's chunks; a longer slice gets a chunk
// of its own.
const poolChunk = 512

// take returns a zeroed slice of k values of T.
func (p *pool[T]) take(k int) []T {
	if k == 0 {
		return nil
	}
	for p.i < len(p.chunks) {
		c := p.chunks[p.i]
		if p.n+k <= len(c) {
			s := c[p.n : p.n+k : p.n+k]
			p.n += k
			clear(s)
			return s
		}
		p.i++
		p.n = 0
	}
	c := make([]T, max(k, poolChunk))
	p.chunks = append(p.chunks, c)
	p.i, p.n = len(p.chunks)-1, k
	return c[:k:k]
}

// one returns a pointer to a zeroed T.
func (p *pool[T]) one() *T { return &p.take(1)[0] }

func (p *pool[T]) reset() { p.i, p.n = 0, 0 }
