// Package ptree is an immutable (persistent) ordered map from string keys to
// values that keeps, at every node, an associative summary of the entries
// below it.
//
// It is made to hold a client's view of a topology: up to tens of thousands
// of servers keyed by address, where each change touches one or a few
// servers and readers hold on to old versions. An update copies only the
// path from the root to the changed entry (path copying) and shares every
// other node with the version it came from, so it costs O(log n) time and
// memory, never O(n), and no version is ever changed once made: a reader may
// keep and read any version, from any number of goroutines, without locks.
//
// The tree is an AVL tree, whose height is at most about 1.44·log2(n+2)
// whatever the keys, so keys chosen by a hostile server cannot make it
// degrade (a treap or a hash would leave that to chance or to a secret).
//
// The summaries let a reader answer questions about all entries in O(1)
// (Summary) and find the few entries of one kind among many without looking
// at the rest (Walk). They are recomputed only along the copied path.
//
// Costs, for a map of n entries:
//
//   - Len, Summary, Same: O(1).
//   - Get: O(log n), no allocation.
//   - Set, Delete: O(log n) time, O(log n) new nodes (about one per level,
//     a few more when a rotation is needed), and O(log n) calls of Join and
//     Leaf.
//   - All: O(n) for a full pass, O(log n) to the first entry.
//   - Walk: O(k log n) when k entries are reached, plus the work of the
//     callbacks.
//   - FromSorted: O(n).
//
// Recursion depth is O(log n) everywhere.
package ptree

import (
	"fmt"
	"iter"
	"strings"
)

// Summarizer computes the summary of entries: Leaf of one entry, Join of two
// adjacent runs (left's keys all before right's). Join must be associative,
// and the zero S must be its identity (Join(zero, s) == s == Join(s, zero)),
// so that an empty map's summary is the zero S. Both must be pure: the same
// input must always give the same summary, since a summary computed once is
// kept in every version that shares its node.
//
// The methods are called on the zero value of the implementing type, so it
// is typically an empty struct; a nil pointer type would be called as nil.
type Summarizer[V, S any] interface {
	Leaf(key string, v V) S
	Join(left, right S) S
}

// Map is an immutable ordered map from strings to V, with the summary S of
// its entries as computed by F. The zero Map is empty and ready to use.
// Every operation that changes the map returns a new Map and leaves the
// receiver as it was, so a Map may be copied, kept and read by any number
// of goroutines at once.
//
// F is a (typically zero-size) type whose zero value's methods are called:
// var f F; f.Leaf(...).
type Map[V, S any, F Summarizer[V, S]] struct {
	root *node[V, S]
}

// node is one entry and the root of the subtree below it. A node is never
// changed after it is made: it may be shared by any number of versions.
type node[V, S any] struct {
	left, right *node[V, S]
	key         string
	val         V
	// sum is the summary of the whole subtree: left, this entry, right.
	sum S
	// size is the number of entries in the subtree, for Len in O(1).
	size int
	// height is 1 for a node without children. An AVL tree of height h has
	// at least Fib(h+2)-1 nodes, so even 2^63 entries stay below 127.
	height int8
}

func height[V, S any](n *node[V, S]) int8 {
	if n == nil {
		return 0
	}
	return n.height
}

func size[V, S any](n *node[V, S]) int {
	if n == nil {
		return 0
	}
	return n.size
}

// mk makes a node from its parts, which must already be balanced against
// each other (heights differing by at most one), and computes its size,
// height and summary.
func mk[V, S any, F Summarizer[V, S]](key string, val V, l, r *node[V, S]) *node[V, S] {
	var f F
	// Joining with an absent child's zero summary would give the same
	// result, by the identity rule; skipping it saves a call per leaf.
	s := f.Leaf(key, val)
	if l != nil {
		s = f.Join(l.sum, s)
	}
	if r != nil {
		s = f.Join(s, r.sum)
	}
	h := max(height(l), height(r)) + 1
	return &node[V, S]{left: l, right: r, key: key, val: val, sum: s, size: size(l) + size(r) + 1, height: h}
}

// balance makes a node from key, val and the subtrees l and r, whose
// heights may differ by two after one insertion or deletion below, and
// rotates if they do. It builds the rotated nodes directly rather than
// making the unbalanced node first, so that a rotation costs one or two
// more nodes than a plain path copy, not three.
func balance[V, S any, F Summarizer[V, S]](key string, val V, l, r *node[V, S]) *node[V, S] {
	hl, hr := height(l), height(r)
	switch {
	case hl > hr+1:
		if height(l.left) >= height(l.right) {
			// Single right rotation: l comes up.
			return mk[V, S, F](l.key, l.val, l.left, mk[V, S, F](key, val, l.right, r))
		}
		// Double rotation: l's right child comes up.
		lr := l.right
		return mk[V, S, F](lr.key, lr.val,
			mk[V, S, F](l.key, l.val, l.left, lr.left),
			mk[V, S, F](key, val, lr.right, r))
	case hr > hl+1:
		if height(r.right) >= height(r.left) {
			// Single left rotation: r comes up.
			return mk[V, S, F](r.key, r.val, mk[V, S, F](key, val, l, r.left), r.right)
		}
		// Double rotation: r's left child comes up.
		rl := r.left
		return mk[V, S, F](rl.key, rl.val,
			mk[V, S, F](key, val, l, rl.left),
			mk[V, S, F](r.key, r.val, rl.right, r.right))
	}
	return mk[V, S, F](key, val, l, r)
}

// Len returns the number of entries, in O(1).
func (m Map[V, S, F]) Len() int {
	return size(m.root)
}

// Get returns the value of key and whether it is present, in O(log n) and
// without allocating.
func (m Map[V, S, F]) Get(key string) (V, bool) {
	n := m.root
	for n != nil {
		switch c := strings.Compare(key, n.key); {
		case c < 0:
			n = n.left
		case c > 0:
			n = n.right
		default:
			return n.val, true
		}
	}
	var zero V
	return zero, false
}

// Set returns a map in which key has the value v, replacing any value it
// had; m is unchanged. It makes O(log n) new nodes, along the path to key,
// and shares all others with m. It makes new nodes even when v is the value
// key already has, since values of any type cannot be compared; a caller
// that wants an unchanged map to stay Same should check with Get first.
func (m Map[V, S, F]) Set(key string, v V) Map[V, S, F] {
	return Map[V, S, F]{root: insert[V, S, F](m.root, key, v)}
}

func insert[V, S any, F Summarizer[V, S]](n *node[V, S], key string, v V) *node[V, S] {
	if n == nil {
		return mk[V, S, F](key, v, nil, nil)
	}
	switch c := strings.Compare(key, n.key); {
	case c < 0:
		return balance[V, S, F](n.key, n.val, insert[V, S, F](n.left, key, v), n.right)
	case c > 0:
		return balance[V, S, F](n.key, n.val, n.left, insert[V, S, F](n.right, key, v))
	default:
		// Same shape, so no rebalancing; only the summaries above change.
		return mk[V, S, F](key, v, n.left, n.right)
	}
}

// Delete returns a map without key; m is unchanged. It makes O(log n) new
// nodes. If key is absent it returns m itself, with the same root, so that
// Same tells the caller nothing changed.
func (m Map[V, S, F]) Delete(key string) Map[V, S, F] {
	root, found := remove[V, S, F](m.root, key)
	if !found {
		return m
	}
	return Map[V, S, F]{root: root}
}

// remove returns n without key, and whether key was there; if it was not,
// it returns n itself, so that nothing is copied on the way back up.
func remove[V, S any, F Summarizer[V, S]](n *node[V, S], key string) (*node[V, S], bool) {
	if n == nil {
		return nil, false
	}
	switch c := strings.Compare(key, n.key); {
	case c < 0:
		l, found := remove[V, S, F](n.left, key)
		if !found {
			return n, false
		}
		return balance[V, S, F](n.key, n.val, l, n.right), true
	case c > 0:
		r, found := remove[V, S, F](n.right, key)
		if !found {
			return n, false
		}
		return balance[V, S, F](n.key, n.val, n.left, r), true
	}
	switch {
	case n.left == nil:
		return n.right, true
	case n.right == nil:
		return n.left, true
	case n.left.height > n.right.height:
		// Take the neighbour from the taller side, which cannot make this
		// node unbalanced and so saves a rotation here.
		l, last := removeMax[V, S, F](n.left)
		return balance[V, S, F](last.key, last.val, l, n.right), true
	default:
		r, first := removeMin[V, S, F](n.right)
		return balance[V, S, F](first.key, first.val, n.left, r), true
	}
}

// removeMin returns n without its first entry, and the node that held it.
func removeMin[V, S any, F Summarizer[V, S]](n *node[V, S]) (*node[V, S], *node[V, S]) {
	if n.left == nil {
		return n.right, n
	}
	l, first := removeMin[V, S, F](n.left)
	return balance[V, S, F](n.key, n.val, l, n.right), first
}

// removeMax returns n without its last entry, and the node that held it.
func removeMax[V, S any, F Summarizer[V, S]](n *node[V, S]) (*node[V, S], *node[V, S]) {
	if n.right == nil {
		return n.left, n
	}
	r, last := removeMax[V, S, F](n.right)
	return balance[V, S, F](n.key, n.val, n.left, r), last
}

// Summary returns the summary of all entries, in O(1); for an empty map it
// is the zero S.
func (m Map[V, S, F]) Summary() S {
	if m.root == nil {
		var zero S
		return zero
	}
	return m.root.sum
}

// All returns an iterator over the entries in key order (strings compared
// with <). It reads the version m is, whatever is done to the map later,
// and stops early when the loop breaks.
func (m Map[V, S, F]) All() iter.Seq2[string, V] {
	root := m.root
	return func(yield func(string, V) bool) {
		root.all(yield)
	}
}

// all yields the entries of n in order and reports whether to go on.
func (n *node[V, S]) all(yield func(string, V) bool) bool {
	// The right subtree is walked by the loop, not by recursion, so that the
	// stack only grows with left turns.
	for n != nil {
		if !n.left.all(yield) || !yield(n.key, n.val) {
			return false
		}
		n = n.right
	}
	return true
}

// Walk calls visit for entries in key order, but skips every subtree whose
// summary makes descend return false, and every entry whose own Leaf summary
// does; it stops when visit returns false. descend is asked first about the
// whole map's summary, then about smaller and smaller subtrees, so if it
// answers true only for summaries of runs holding something of interest,
// Walk finds k such entries among n in O(k log n) calls instead of n.
// descend should depend only on the summary it is given: for an entry
// without children in the tree its Leaf summary is its subtree's, and Walk
// does not ask twice.
func (m Map[V, S, F]) Walk(descend func(S) bool, visit func(key string, v V) bool) {
	walk[V, S, F](m.root, descend, visit)
}

// walk walks n as Walk does and reports whether to go on.
func walk[V, S any, F Summarizer[V, S]](n *node[V, S], descend func(S) bool, visit func(string, V) bool) bool {
	var f F
	for n != nil && descend(n.sum) {
		if !walk[V, S, F](n.left, descend, visit) {
			return false
		}
		// A node without children has its Leaf summary as its sum, which
		// descend has just accepted: asking again would only cost a call.
		if (n.left == nil && n.right == nil) || descend(f.Leaf(n.key, n.val)) {
			if !visit(n.key, n.val) {
				return false
			}
		}
		n = n.right
	}
	return true
}

// Same reports whether m and o have the same root, in O(1). If it does, the
// maps are certainly equal; if not, they may still hold the same entries
// (built another way, or after setting a key to the value it had).
func (m Map[V, S, F]) Same(o Map[V, S, F]) bool {
	return m.root == o.root
}

// FromSorted builds a map of keys[i] to vals[i] in O(n), faster than n
// calls of Set. The keys must be strictly increasing (compared with <) and
// as many as the values; FromSorted panics if not. keys and vals are not
// kept.
func FromSorted[V, S any, F Summarizer[V, S]](keys []string, vals []V) Map[V, S, F] {
	if len(keys) != len(vals) {
		panic(fmt.Sprintf("ptree.FromSorted: %d keys but %d values", len(keys), len(vals)))
	}
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			panic(fmt.Sprintf("ptree.FromSorted: keys not strictly increasing: keys[%d] = %q, keys[%d] = %q",
				i-1, keys[i-1], i, keys[i]))
		}
	}
	return Map[V, S, F]{root: build[V, S, F](keys, vals)}
}

// build makes a tree of the sorted entries with the middle one at the root.
// The halves differ in size by at most one at every node, so their heights
// differ by at most one too, and the tree is a valid AVL tree.
func build[V, S any, F Summarizer[V, S]](keys []string, vals []V) *node[V, S] {
	if len(keys) == 0 {
		return nil
	}
	mid := len(keys) / 2
	return mk[V, S, F](keys[mid], vals[mid],
		build[V, S, F](keys[:mid], vals[:mid]),
		build[V, S, F](keys[mid+1:], vals[mid+1:]))
}

// Cursor walks a map's entries in key order without allocating, for the
// loops that run on every operation (server selection): unlike All's
// iterator, it keeps its path in an array of its own, on the caller's stack.
//
//	for c := m.Cursor(); c.Next(); {
//		use(c.Key(), c.Value())
//	}
type Cursor[V, S any] struct {
	// stack is the path to the next entries, as deep as a tree of a few
	// hundred million entries may be; a taller one keeps the rest in
	// deeper. (An array deep enough for any tree, 92, zeroed at every
	// walk, cost a selection among 50 servers a quarter of its time.)
	stack  [cursorDepth]*node[V, S]
	deeper []*node[V, S]
	depth  int
	cur    *node[V, S]
}

// cursorDepth is the depth of path a Cursor holds without allocating: an
// AVL tree of height 40 has at least Fib(42)-1 entries, over 2.6x10^8.
const cursorDepth = 40

// Cursor returns a cursor before the first entry of m.
func (m Map[V, S, F]) Cursor() Cursor[V, S] {
	var c Cursor[V, S]
	c.pushLeft(m.root)
	return c
}

// Start sets c, a zero Cursor, before the first entry of m: Cursor without
// the copy of the cursor it returns, for the loops that count nanoseconds.
func (m Map[V, S, F]) Start(c *Cursor[V, S]) {
	c.pushLeft(m.root)
}

// pushLeft pushes n and its chain of left children.
func (c *Cursor[V, S]) pushLeft(n *node[V, S]) {
	for ; n != nil; n = n.left {
		if c.depth < cursorDepth {
			c.stack[c.depth] = n
		} else {
			c.deeper = append(c.deeper[:c.depth-cursorDepth], n)
		}
		c.depth++
	}
}

// Next moves to the next entry and reports whether there is one.
func (c *Cursor[V, S]) Next() bool {
	if c.depth == 0 {
		c.cur = nil
		return false
	}
	c.depth--
	if c.depth < cursorDepth {
		c.cur = c.stack[c.depth]
	} else {
		c.cur = c.deeper[c.depth-cursorDepth]
	}
	c.pushLeft(c.cur.right)
	return true
}

// Key returns the key of the current entry.
func (c *Cursor[V, S]) Key() string { return c.cur.key }

// Value returns the value of the current entry.
func (c *Cursor[V, S]) Value() V { return c.cur.val }

// ValuePtr returns the address of the current entry's value, which the
// caller reads and never changes: the tree's nodes are shared by every
// version of the map. For a large value, it spares the copy that Value makes
// of each entry a loop looks at and then skips.
func (c *Cursor[V, S]) ValuePtr() *V { return &c.cur.val }
