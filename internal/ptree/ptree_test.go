package ptree

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// stat is the summary the tests use. first makes Join order-sensitive: a
// Join that swapped its arguments, or a tree that summed its entries out of
// order, would get it wrong.
type stat struct {
	count, sum int
	sevens     int    // entries whose value is a multiple of 7
	first      string // key of the first such entry, if sevens > 0
}

type statF struct{}

func (statF) Leaf(key string, v int) stat {
	s := stat{count: 1, sum: v}
	if v%7 == 0 {
		s.sevens, s.first = 1, key
	}
	return s
}

func (statF) Join(l, r stat) stat {
	s := stat{count: l.count + r.count, sum: l.sum + r.sum, sevens: l.sevens + r.sevens, first: l.first}
	if l.sevens == 0 {
		s.first = r.first
	}
	return s
}

type testMap = Map[int, stat, statF]

// checkTree checks every node of m: keys in order, the AVL balance, and the
// stored height, size and summary against those recomputed from the
// children.
func checkTree(t testing.TB, m testMap) {
	t.Helper()
	var f statF
	var rec func(n *node[int, stat], lo, hi *string) (h int8, size int, sum stat)
	rec = func(n *node[int, stat], lo, hi *string) (int8, int, stat) {
		if n == nil {
			return 0, 0, stat{}
		}
		if lo != nil && n.key <= *lo || hi != nil && n.key >= *hi {
			t.Fatalf("key %q out of order (bounds %v, %v)", n.key, lo, hi)
		}
		hl, sl, suml := rec(n.left, lo, &n.key)
		hr, sr, sumr := rec(n.right, &n.key, hi)
		if d := int(hl) - int(hr); d < -1 || d > 1 {
			t.Fatalf("node %q unbalanced: heights %d, %d", n.key, hl, hr)
		}
		h := max(hl, hr) + 1
		size := sl + sr + 1
		sum := f.Join(f.Join(suml, f.Leaf(n.key, n.val)), sumr)
		if n.height != h || n.size != size || n.sum != sum {
			t.Fatalf("node %q stores height %d, size %d, sum %+v; want %d, %d, %+v",
				n.key, n.height, n.size, n.sum, h, size, sum)
		}
		return h, size, sum
	}
	rec(m.root, nil, nil)
}

// checkModel checks that m holds exactly the entries of model, through
// every reading method.
func checkModel(t testing.TB, m testMap, model map[string]int) {
	t.Helper()
	if m.Len() != len(model) {
		t.Fatalf("Len = %d, want %d", m.Len(), len(model))
	}
	keys := slices.Sorted(maps.Keys(model))
	var f statF
	var want stat
	for _, k := range keys {
		want = f.Join(want, f.Leaf(k, model[k]))
		if v, ok := m.Get(k); !ok || v != model[k] {
			t.Fatalf("Get(%q) = %d, %v; want %d, true", k, v, ok, model[k])
		}
	}
	if got := m.Summary(); got != want {
		t.Fatalf("Summary = %+v, want %+v", got, want)
	}
	if v, ok := m.Get("absent\xff"); ok || v != 0 {
		t.Fatalf("Get(absent) = %d, %v", v, ok)
	}
	i := 0
	for k, v := range m.All() {
		if i >= len(keys) || k != keys[i] || v != model[k] {
			t.Fatalf("All entry %d = %q:%d, want %q", i, k, v, keys[min(i, len(keys)-1)])
		}
		i++
	}
	if i != len(keys) {
		t.Fatalf("All gave %d entries, want %d", i, len(keys))
	}
	// Walk with a predicate that holds of a run whenever it holds of any
	// entry in it gives the same entries whatever the shape of the tree.
	var sevens []string
	for _, k := range keys {
		if model[k]%7 == 0 {
			sevens = append(sevens, k)
		}
	}
	var got []string
	m.Walk(func(s stat) bool { return s.sevens > 0 }, func(k string, v int) bool {
		if v != model[k] {
			t.Fatalf("Walk visited %q:%d, want value %d", k, v, model[k])
		}
		got = append(got, k)
		return true
	})
	if !slices.Equal(got, sevens) {
		t.Fatalf("Walk(sevens) = %q, want %q", got, sevens)
	}
	// Walk that descends everywhere visits everything, and stops when told.
	got = got[:0]
	stop := len(keys) / 2
	m.Walk(func(stat) bool { return true }, func(k string, _ int) bool {
		got = append(got, k)
		return len(got) < stop
	})
	if want := keys[:min(max(stop, 1), len(keys))]; !slices.Equal(got, want) {
		t.Fatalf("Walk(all, stop at %d) = %q, want %q", stop, got, want)
	}
}

// randomKey draws from a small space, so that operations collide, with keys
// of different lengths, so that string order differs from numeric order.
func randomKey(r *rand.Rand, space int) string {
	return fmt.Sprintf("%x", r.IntN(space))
}

func TestModel(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		space := 1 + r.IntN(300)
		var m testMap
		model := map[string]int{}
		for step := range 300 {
			k := randomKey(r, space)
			switch op := r.IntN(10); {
			case op < 6:
				v := r.IntN(50) - 10
				m = m.Set(k, v)
				model[k] = v
			case op < 9:
				old := m
				m = m.Delete(k)
				if _, ok := model[k]; !ok && !m.Same(old) {
					t.Fatalf("seed %d step %d: Delete of absent %q changed the root", seed, step, k)
				}
				delete(model, k)
			default:
				v, ok := m.Get(k)
				if w, wok := model[k]; v != w || ok != wok {
					t.Fatalf("seed %d step %d: Get(%q) = %d, %v; want %d, %v", seed, step, k, v, ok, w, wok)
				}
			}
			checkTree(t, m)
			checkModel(t, m, model)
		}
	}
}

// TestSortedInput feeds keys in the orders that unbalance naive trees: the
// height must stay within the AVL bound.
func TestSortedInput(t *testing.T) {
	const n = 1 << 14
	bound := int8(1.4405*math.Log2(n+2) - 0.3277)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%08d", i)
	}
	orders := map[string][]string{
		"ascending":  keys,
		"descending": reversed(keys),
		"zigzag":     zigzag(keys),
	}
	for name, order := range orders {
		var m testMap
		for i, k := range order {
			m = m.Set(k, i)
		}
		checkTree(t, m)
		if h := m.root.height; h > bound {
			t.Errorf("%s: height %d > AVL bound %d", name, h, bound)
		}
		// Deleting every other key, from one end, must keep it balanced.
		for i := 0; i < n; i += 2 {
			m = m.Delete(keys[i])
		}
		checkTree(t, m)
		if m.Len() != n/2 {
			t.Errorf("%s: Len after deletes = %d, want %d", name, m.Len(), n/2)
		}
	}
}

func reversed(keys []string) []string {
	out := slices.Clone(keys)
	slices.Reverse(out)
	return out
}

// zigzag orders keys from both ends toward the middle.
func zigzag(keys []string) []string {
	out := make([]string, 0, len(keys))
	for i, j := 0, len(keys)-1; i <= j; i, j = i+1, j-1 {
		out = append(out, keys[i])
		if i != j {
			out = append(out, keys[j])
		}
	}
	return out
}

func TestZeroMap(t *testing.T) {
	var m testMap
	checkModel(t, m, nil)
	if m.Summary() != (stat{}) {
		t.Errorf("empty Summary = %+v", m.Summary())
	}
	if d := m.Delete("x"); !d.Same(m) {
		t.Error("Delete on the empty map made a new root")
	}
	if !m.Same(testMap{}) {
		t.Error("two empty maps are not Same")
	}
	for range m.All() {
		t.Error("All on the empty map yielded")
	}
}

func TestSetReplaces(t *testing.T) {
	m := testMap{}.Set("a", 1).Set("b", 14).Set("c", 3)
	m2 := m.Set("b", 4)
	if v, _ := m2.Get("b"); v != 4 || m2.Len() != 3 {
		t.Errorf("after replace: b = %d, Len = %d", v, m2.Len())
	}
	if v, _ := m.Get("b"); v != 14 {
		t.Errorf("old version changed: b = %d", v)
	}
	if m2.Summary().sevens != 0 || m.Summary().first != "b" {
		t.Errorf("summaries: new %+v, old %+v", m2.Summary(), m.Summary())
	}
	if m2.Same(m) {
		t.Error("Set made no new root")
	}
	checkTree(t, m2)
}

// TestPersistence keeps every version made along random operations and
// checks at the end that none has changed.
func TestPersistence(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var versions []testMap
	var models []map[string]int
	var m testMap
	model := map[string]int{}
	for range 2000 {
		k := randomKey(r, 500)
		if r.IntN(3) == 0 {
			m = m.Delete(k)
			delete(model, k)
		} else {
			v := r.IntN(100)
			m = m.Set(k, v)
			model[k] = v
		}
		versions = append(versions, m)
		models = append(models, maps.Clone(model))
	}
	for i, v := range versions {
		checkTree(t, v)
		checkModel(t, v, models[i])
	}
}

// TestConcurrentReaders reads old versions from several goroutines while
// new ones are made from them; under -race it shows that no published node
// is written.
func TestConcurrentReaders(t *testing.T) {
	keys := make([]string, 2000)
	vals := make([]int, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("host%05d:27017", i)
		vals[i] = i
	}
	base := FromSorted[int, stat, statF](keys, vals)
	want := base.Summary()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				n := 0
				for k, v := range base.All() {
					if v != vals[n] || k != keys[n] {
						t.Errorf("reader %d: entry %d = %q:%d", g, n, k, v)
						return
					}
					n++
				}
				if base.Summary() != want {
					t.Errorf("reader %d pass %d: summary changed", g, i)
					return
				}
			}
		})
	}
	wg.Go(func() {
		m := base
		r := rand.New(rand.NewPCG(1, 2))
		for range 5000 {
			k := keys[r.IntN(len(keys))]
			if r.IntN(2) == 0 {
				m = m.Delete(k)
			} else {
				m = m.Set(k, -1)
			}
		}
	})
	wg.Wait()
}

// TestWalkPrunes checks that Walk looks at O(log n) nodes per entry it
// finds, not at all of them.
func TestWalkPrunes(t *testing.T) {
	const n = 10000
	keys := make([]string, n)
	vals := make([]int, n)
	marked := []int{17, 5003, 9998}
	for i := range keys {
		keys[i] = fmt.Sprintf("host%05d.example.net:27017", i)
		vals[i] = 1
	}
	var want []string
	for _, i := range marked {
		vals[i] = 7
		want = append(want, keys[i])
	}
	sorted := FromSorted[int, stat, statF](keys, vals)
	var random testMap
	for _, i := range rand.New(rand.NewPCG(3, 3)).Perm(n) {
		random = random.Set(keys[i], vals[i])
	}
	for name, m := range map[string]testMap{"FromSorted": sorted, "Set": random} {
		calls := 0
		var got []string
		m.Walk(func(s stat) bool {
			calls++
			return s.sevens > 0
		}, func(k string, _ int) bool {
			got = append(got, k)
			return true
		})
		if !slices.Equal(got, want) {
			t.Errorf("%s: visited %q, want %q", name, got, want)
		}
		// Along each marked entry's path, descend sees each node's subtree,
		// its own entry and its other child: three calls per level.
		bound := min(3*64, len(marked)*3*int(m.root.height))
		t.Logf("%s: height %d, %d descend calls (bound %d)", name, m.root.height, calls, bound)
		if calls > bound {
			t.Errorf("%s: %d descend calls, want <= %d", name, calls, bound)
		}
	}
	// Stopping after the first find must not look further.
	calls := 0
	sorted.Walk(func(s stat) bool { calls++; return s.sevens > 0 },
		func(string, int) bool { return false })
	if calls > 3*int(sorted.root.height) {
		t.Errorf("early stop: %d descend calls", calls)
	}
}

func TestFromSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for n := range 300 {
		model := map[string]int{}
		for len(model) < n {
			model[randomKey(r, 4*n+10)] = r.IntN(30)
		}
		keys := slices.Sorted(maps.Keys(model))
		vals := make([]int, n)
		var bySet testMap
		for i, k := range keys {
			vals[i] = model[k]
		}
		for _, i := range r.Perm(n) {
			bySet = bySet.Set(keys[i], vals[i])
		}
		m := FromSorted[int, stat, statF](keys, vals)
		checkTree(t, m)
		checkModel(t, m, model)
		if m.Summary() != bySet.Summary() || !slices.Equal(collect(m), collect(bySet)) {
			t.Fatalf("n=%d: FromSorted differs from Set", n)
		}
		// The result must be an ordinary map for later updates.
		if n > 0 {
			m = m.Delete(keys[0]).Set("zz", 7)
			delete(model, keys[0])
			model["zz"] = 7
			checkTree(t, m)
			checkModel(t, m, model)
		}
	}
}

func collect(m testMap) []string {
	var out []string
	for k, v := range m.All() {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	return out
}

func TestFromSortedPanics(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		vals []int
		want string
	}{
		{"lengths", []string{"a", "b"}, []int{1}, "2 keys but 1 values"},
		{"equal", []string{"a", "b", "b"}, []int{1, 2, 3}, `keys[1] = "b", keys[2] = "b"`},
		{"decreasing", []string{"b", "a"}, []int{1, 2}, "not strictly increasing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.HasPrefix(msg, "ptree.FromSorted: ") || !strings.Contains(msg, tt.want) {
					t.Errorf("panic %q, want one containing %q", msg, tt.want)
				}
			}()
			FromSorted[int, stat, statF](tt.keys, tt.vals)
		})
	}
}

var sink testMap

func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	const n = 10000
	r := rand.New(rand.NewPCG(9, 9))
	var m testMap
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("host%05d.example.net:27017", 2*i)
	}
	for _, i := range r.Perm(n) {
		m = m.Set(keys[i], i)
	}
	h := int(m.root.height)
	limit := min(40, 2*h)
	t.Logf("height %d, node limit %d", h, limit)

	var maxSet, maxNew, maxDel float64
	for i, k := range keys {
		if a := testing.AllocsPerRun(1, func() { _, _ = m.Get(k) }); a != 0 {
			t.Fatalf("Get(%q) allocates %v", k, a)
		}
		maxSet = max(maxSet, testing.AllocsPerRun(1, func() { sink = m.Set(k, -i) }))
		absent := fmt.Sprintf("host%05d.example.net:27017", 2*i+1)
		maxNew = max(maxNew, testing.AllocsPerRun(1, func() { sink = m.Set(absent, i) }))
		maxDel = max(maxDel, testing.AllocsPerRun(1, func() { sink = m.Delete(k) }))
		if a := testing.AllocsPerRun(1, func() { sink = m.Delete(absent) }); a != 0 {
			t.Fatalf("Delete(absent %q) allocates %v", absent, a)
		}
	}
	t.Logf("most allocations: Set existing %v, Set new %v, Delete %v", maxSet, maxNew, maxDel)
	if maxSet > float64(limit) || maxNew > float64(limit) || maxDel > float64(limit) {
		t.Errorf("allocations over %d: Set existing %v, Set new %v, Delete %v", limit, maxSet, maxNew, maxDel)
	}
}

// FuzzMap decodes its input into operations on a small key space and
// checks every version against a model.
func FuzzMap(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 0, 2, 3, 0, 3, 4, 2, 2, 0})
	f.Add([]byte("\x00a\x07\x00b\x0e\x00c\x15\x02b\x00\x01a\x01"))
	asc := make([]byte, 0, 3*40)
	for i := range 40 {
		asc = append(asc, 0, byte(i), byte(i))
	}
	f.Add(asc)
	f.Fuzz(func(t *testing.T, data []byte) {
		var m testMap
		model := map[string]int{}
		var versions []testMap
		var models []map[string]int
		for len(data) >= 3 {
			op, kb, vb := data[0], data[1], data[2]
			data = data[3:]
			// Keys of different lengths, ending in a byte that may be
			// beyond ASCII, so that order is by bytes, not by runes.
			k := strings.Repeat("k", int(kb>>6)) + string([]byte{(kb & 0x3f) * 4})
			v := int(int8(vb))
			switch op % 4 {
			case 0, 1:
				m = m.Set(k, v)
				model[k] = v
			case 2:
				old := m
				m = m.Delete(k)
				if _, ok := model[k]; !ok && !m.Same(old) {
					t.Fatalf("Delete of absent %q changed the root", k)
				}
				delete(model, k)
			case 3:
				got, ok := m.Get(k)
				if w, wok := model[k]; got != w || ok != wok {
					t.Fatalf("Get(%q) = %d, %v; want %d, %v", k, got, ok, w, wok)
				}
			}
			checkTree(t, m)
			versions = append(versions, m)
			models = append(models, maps.Clone(model))
		}
		for i, v := range versions {
			checkModel(t, v, models[i])
		}
		if len(data) > 0 {
			// Trailing bytes build a map at once, checked against Set.
			keys := slices.Sorted(maps.Keys(model))
			vals := make([]int, len(keys))
			for i, k := range keys {
				vals[i] = model[k]
			}
			fs := FromSorted[int, stat, statF](keys, vals)
			checkTree(t, fs)
			checkModel(t, fs, model)
		}
	})
}

// benchMap is a map of n server-like addresses, built in random order.
func benchMap(n int) (testMap, []string) {
	r := rand.New(rand.NewPCG(11, 11))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("shard%02d-node%04d.db.example.net:27017", i%50, i)
	}
	var m testMap
	for _, i := range r.Perm(n) {
		m = m.Set(keys[i], i)
	}
	r.Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return m, keys
}

func BenchmarkGet(b *testing.B) {
	m, keys := benchMap(10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := m.Get(keys[i%len(keys)]); !ok {
			b.Fatal("missing")
		}
		i++
	}
}

// BenchmarkSet replaces the value of an existing key: the map stays at
// 10,000 entries, as a topology does when a server's description changes.
func BenchmarkSet(b *testing.B) {
	m, keys := benchMap(10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = m.Set(keys[i%len(keys)], i)
		i++
	}
}

// BenchmarkSetNew adds a key that is not there.
func BenchmarkSetNew(b *testing.B) {
	m, keys := benchMap(10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = m.Set(keys[i%len(keys)]+"x", i)
		i++
	}
}

func BenchmarkDelete(b *testing.B) {
	m, keys := benchMap(10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = m.Delete(keys[i%len(keys)])
		i++
	}
}

func BenchmarkFromSorted(b *testing.B) {
	_, keys := benchMap(10000)
	slices.Sort(keys)
	vals := make([]int, len(keys))
	b.ReportAllocs()
	for b.Loop() {
		sink = FromSorted[int, stat, statF](keys, vals)
	}
}

// A cursor visits what All does, in the same order, and allocates nothing.
func TestCursor(t *testing.T) {
	var m testMap
	for i := range 1000 {
		m = m.Set(fmt.Sprintf("k%04d", (i*7919)%1000), i)
	}
	var want []string
	for k := range m.All() {
		want = append(want, k)
	}
	var got []string
	for c := m.Cursor(); c.Next(); {
		if v, _ := m.Get(c.Key()); v != c.Value() {
			t.Fatalf("cursor at %s has %d, Get has %d", c.Key(), c.Value(), v)
		}
		got = append(got, c.Key())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the cursor visited %d keys, not those of All", len(got))
	}
	var empty testMap
	if c := empty.Cursor(); c.Next() {
		t.Fatal("a cursor of an empty map has an entry")
	}
	allocs := testing.AllocsPerRun(20, func() {
		n := 0
		for c := m.Cursor(); c.Next(); {
			n += c.Value()
		}
	})
	if allocs != 0 {
		t.Fatalf("a walk with a cursor allocates %v times", allocs)
	}
}

// A path deeper than the cursor's array goes on in its slice, in order. No
// AVL tree that fits in memory is that tall, so the tree is made by hand: a
// chain of entries 0, 2, 4, ..., each the left child of the next, each with
// a leaf on its right (1, 3, 5, ...), so that the path shrinks and grows
// again at every depth. The cursor only follows left and right pointers.
func TestCursorDeeperThanItsArray(t *testing.T) {
	const n = 3*cursorDepth + 5
	key := func(v int) string { return fmt.Sprintf("k%04d", v) }
	var chain *node[int, stat]
	for i := range n {
		leaf := &node[int, stat]{key: key(2*i + 1), val: 2*i + 1}
		chain = &node[int, stat]{left: chain, right: leaf, key: key(2 * i), val: 2 * i}
	}
	m := testMap{root: chain}
	var got []int
	for c := m.Cursor(); c.Next(); {
		if got = append(got, *c.ValuePtr()); len(got) > 2*n {
			t.Fatalf("walked more than the %d entries: %v", 2*n, got)
		}
		if c.Value() != *c.ValuePtr() || c.Key() != key(c.Value()) {
			t.Fatalf("entry %q: Value %d, ValuePtr %d", c.Key(), c.Value(), *c.ValuePtr())
		}
	}
	want := make([]int, 2*n)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("walked %v\nwant %v", got, want)
	}
}
