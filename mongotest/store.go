package mongotest

import (
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// store is the server's data: databases of collections of documents, in
// memory, in insertion order. The commands work on it through with, under
// its lock, so that each command sees and leaves it consistent.
type store struct {
	mu  sync.Mutex
	dbs map[string]map[string]*collection
	// examined counts the documents queries have tested against a filter
	// (Stats.DocumentsExamined).
	examined atomic.Int64

	// txn is set on a transaction's view of the store (see txnstore.go),
	// nil on the store itself.
	txn *transaction

	// The transactions' bookkeeping, on the store itself:
	// clock counts the writes, which set the versions of collections and
	// records; open are the transactions that have not ended; locks are
	// the locks they hold, by lock key (idLock, keyLock).
	clock uint64
	open  map[*transaction]struct{}
	locks map[string]*transaction
	// mutated is set once the statement running under mu has written.
	mutated bool
}

// collection holds documents in insertion order, with the _id index and
// the other indexes.
type collection struct {
	ns string
	// recs are the documents in insertion order; a removed one leaves a
	// nil until compact.
	recs []*record
	dead int // the nils in recs
	head int // recs[:head] are all nil: a scan starts at head
	byID map[string]*record
	// examined is the store's count of documents examined.
	examined *atomic.Int64
	// indexes are the indexes besides _id_, in creation order.
	indexes []*index
	// st is the store the collection is in (nil for a copy frozen for a
	// transaction), ver the store's clock at its last write.
	st  *store
	ver uint64
}

// record is one stored document and its place in recs, and the store's
// clock at its last write.
type record struct {
	doc bson.Raw
	pos int
	ver uint64
}

// The limits of a stored document, as mongod has them.
const (
	// maxStoredDepth is the deepest nesting of documents and arrays a
	// stored document may have.
	maxStoredDepth = 180
)

func (st *store) init() { st.dbs = map[string]map[string]*collection{} }

// writeError is one failed operation of a write command.
type writeError struct {
	index int
	err   *cmdError
}

// with runs f on db.coll under the store's lock. The collection is created
// first if create is set; otherwise f gets nil for a collection that does
// not exist.
func (st *store) with(db, coll string, create bool, f func(c *collection) error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.mutated = false
	return f(st.collection(db, coll, create))
}

// withLazy runs f on db.coll under the store's lock, with the collection
// (nil if it does not exist) and a function that creates it, for a write
// that creates the collection only if it inserts.
func (st *store) withLazy(db, coll string, f func(c *collection, create func() *collection) error) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.mutated = false
	return f(st.collection(db, coll, false), func() *collection { return st.collection(db, coll, true) })
}

// collection returns db.coll, creating it if create is set, or nil.
// st.mu must be held.
func (st *store) collection(db, coll string, create bool) *collection {
	colls := st.dbs[db]
	if c := colls[coll]; c != nil {
		return c
	}
	if t := st.txn; t != nil && !t.seen[db+"."+coll] {
		// A transaction's view copies a collection at its first use.
		t.seen[db+"."+coll] = true
		if c := t.resolve(db, coll); c != nil {
			st.put(db, coll, c)
			return c
		}
	}
	if !create {
		return nil
	}
	examined := &st.examined
	if st.txn != nil {
		examined = &st.txn.live.examined
	}
	c := &collection{ns: db + "." + coll, byID: map[string]*record{}, examined: examined, st: st}
	if st.txn == nil {
		st.clock++
		c.ver = st.clock
	}
	st.put(db, coll, c)
	return c
}

// put adds c to st as db.coll. st.mu must be held.
func (st *store) put(db, coll string, c *collection) {
	colls := st.dbs[db]
	if colls == nil {
		colls = map[string]*collection{}
		st.dbs[db] = colls
	}
	colls[coll] = c
}

// checkStorable checks that doc may be stored, as mongod does: its size,
// its nesting, and its _id, which cannot be an array, a regular expression
// or undefined, nor hold a '$'-prefixed field.
func checkStorable(doc bson.Raw) *cmdError {
	if len(doc) > MaxBSONObjectSize {
		return errorf(codeBSONObjectTooLarge, "object to insert too large. size in bytes: %d, max size: %d", len(doc), MaxBSONObjectSize)
	}
	if depth(docValue(doc), maxStoredDepth) > maxStoredDepth {
		return errorf(codeOverflow, "Document exceeds maximum nesting depth of %d", maxStoredDepth)
	}
	switch id := doc.Lookup("_id"); id.Type {
	case bson.TypeArray:
		return errorf(codeInvalidIDField, "can't use an array for _id")
	case bson.TypeRegex:
		return errorf(codeInvalidIDField, "can't use a regex for _id")
	case bson.TypeUndefined:
		return errorf(codeInvalidIDField, "can't use a undefined for _id")
	case bson.TypeEmbeddedDocument:
		if k := dollarPrefixedKey(id.Document()); k != "" {
			return errorf(codeDollarPrefixedFieldName, "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.", k)
		}
	}
	return nil
}

// dollarPrefixedKey returns the first '$'-prefixed key of doc, at any
// depth (in its documents and arrays), "" if none.
func dollarPrefixedKey(doc bson.Raw) string {
	elems, _ := doc.Elements()
	for _, e := range elems {
		if strings.HasPrefix(e.Key(), "$") {
			return e.Key()
		}
		if d, ok := e.Value().DocumentOK(); ok {
			if k := dollarPrefixedKey(d); k != "" {
				return k
			}
		} else if a, ok := e.Value().ArrayOK(); ok {
			if k := dollarPrefixedKey(bson.Raw(a)); k != "" {
				return k
			}
		}
	}
	return ""
}

// prepareInsert returns doc as the store keeps it: a copy (the message
// buffer is not the store's), with its _id first, a new ObjectID if it has
// none.
func prepareInsert(doc bson.Raw) (bson.Raw, *cmdError) {
	switch {
	case doc.Lookup("_id").Type == 0:
		doc = withID(doc, bson.NewObjectID())
	case commandName(doc) != "_id":
		doc = idFirst(doc) // as mongod stores it
	default:
		doc = slices.Clone(doc)
	}
	if err := checkStorable(doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// add stores doc (prepared by prepareInsert), unless its _id or a key of a
// unique index is taken.
func (c *collection) add(doc bson.Raw) *cmdError {
	id := doc.Lookup("_id")
	idKey := valueKey(id)
	if _, dup := c.byID[idKey]; dup {
		return duplicateKey(c.ns, idIndex, indexKey{vals: []bson.RawValue{id}})
	}
	keys, err := c.uniqueKeys(doc, nil)
	if err != nil {
		return err
	}
	if err := c.st.beforeWrite(c, nil, doc, keys); err != nil {
		return err
	}
	c.addCommitted(doc)
	return nil
}

// addCommitted stores doc, whose _id and unique keys are free, and returns
// its record.
func (c *collection) addCommitted(doc bson.Raw) *record {
	keys, _ := c.uniqueKeys(doc, nil)
	r := &record{doc: doc, pos: len(c.recs)}
	c.recs = append(c.recs, r)
	c.byID[valueKey(doc.Lookup("_id"))] = r
	c.own(keys, r)
	c.st.afterWrite(c, r)
	return r
}

// replace replaces the document of r with doc, which has the same _id,
// unless a key of a unique index is taken by another document.
func (c *collection) replace(r *record, doc bson.Raw) *cmdError {
	if err := checkStorable(doc); err != nil {
		return err
	}
	keys, err := c.uniqueKeys(doc, r)
	if err != nil {
		return err
	}
	if err := c.st.beforeWrite(c, r, doc, keys); err != nil {
		return err
	}
	c.replaceCommitted(r, doc)
	return nil
}

// replaceCommitted replaces the document of r with doc, whose unique keys
// are free.
func (c *collection) replaceCommitted(r *record, doc bson.Raw) {
	keys, _ := c.uniqueKeys(doc, r)
	c.disown(r)
	r.doc = doc
	c.own(keys, r)
	c.st.afterWrite(c, r)
}

// remove removes r.
func (c *collection) remove(r *record) *cmdError {
	if err := c.st.beforeWrite(c, r, nil, nil); err != nil {
		return err
	}
	c.removeCommitted(r)
	return nil
}

// removeCommitted removes r.
func (c *collection) removeCommitted(r *record) {
	c.st.afterWrite(c, nil)
	c.disown(r)
	delete(c.byID, valueKey(r.doc.Lookup("_id")))
	c.recs[r.pos] = nil
	c.dead++
	// Removing the documents one by one from the front, as a queue does,
	// must not make each scan step over all the removed ones.
	for c.head < len(c.recs) && c.recs[c.head] == nil {
		c.head++
	}
	if c.dead > 32 && c.dead > len(c.recs)/2 {
		c.compact()
	}
}

// compact drops the nils of removed documents from recs.
func (c *collection) compact() {
	live := c.recs[:0]
	for _, r := range c.recs {
		if r != nil {
			r.pos = len(live)
			live = append(live, r)
		}
	}
	clear(c.recs[len(live):])
	c.recs, c.dead, c.head = live, 0, 0
}

// uniqueKeys returns the keys doc has in each unique index, or the
// duplicate key error of one taken by a document other than self.
func (c *collection) uniqueKeys(doc bson.Raw, self *record) ([][]indexKey, *cmdError) {
	out := make([][]indexKey, len(c.indexes))
	for i, ix := range c.indexes {
		if !ix.unique {
			continue
		}
		keys, err := ix.keysOf(doc)
		if err != nil {
			return nil, asCmdError(err)
		}
		for _, k := range keys {
			if owner, taken := ix.owners[k.str]; taken && owner != self {
				return nil, duplicateKey(c.ns, ix, k)
			}
		}
		out[i] = keys
	}
	return out, nil
}

// own records r as the owner of keys (from uniqueKeys).
func (c *collection) own(keys [][]indexKey, r *record) {
	for i, ks := range keys {
		for _, k := range ks {
			c.indexes[i].owners[k.str] = r
		}
	}
}

// disown removes the keys r owns in the unique indexes.
func (c *collection) disown(r *record) {
	for _, ix := range c.indexes {
		if !ix.unique {
			continue
		}
		keys, _ := ix.keysOf(r.doc)
		for _, k := range keys {
			if ix.owners[k.str] == r {
				delete(ix.owners, k.str)
			}
		}
	}
}

// matching returns the records that match f, in insertion order; with
// limit > 0, the first limit of them. A filter on _id looks its document up
// rather than scan.
func (c *collection) matching(f *filter, limit int) []*record {
	if c == nil {
		return nil
	}
	if f != nil && f.hasID {
		r := c.byID[f.idKey]
		if r == nil {
			return nil
		}
		c.examined.Add(1)
		if f.match(r.doc) {
			return []*record{r}
		}
		return nil
	}
	var out []*record
	n := 0
	for _, r := range c.recs[c.head:] {
		if r == nil {
			continue
		}
		n++
		if f.match(r.doc) {
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	c.examined.Add(int64(n))
	return out
}

// docs returns the documents of recs.
func docsOf(recs []*record) []bson.Raw {
	out := make([]bson.Raw, len(recs))
	for i, r := range recs {
		out[i] = r.doc
	}
	return out
}

// count returns the number of documents.
func (c *collection) count() int {
	if c == nil {
		return 0
	}
	return len(c.recs) - c.dead
}

// insert adds docs to db.coll, creating the collection if need be, and
// returns how many it inserted. A document without _id gets an ObjectID
// first. A duplicate key is a write error; ordered stops at the first. The
// write errors are indexed from base. When a document meets the lock of an
// open transaction, insert stops there: next is its index in docs (len(docs)
// when all were done), and wait the transaction to wait for.
func (st *store) insert(db, coll string, docs []bson.Raw, ordered bool, base int) (n int, errs []writeError, next int, wait *transaction) {
	next = len(docs)
	st.with(db, coll, true, func(c *collection) error {
		for i, d := range docs {
			d, err := prepareInsert(d)
			if err == nil {
				err = c.add(d)
			}
			if err != nil && err.wait != nil {
				next, wait = i, err.wait
				return nil
			}
			if err != nil {
				errs = append(errs, writeError{base + i, err})
				if ordered {
					break
				}
				continue
			}
			n++
		}
		return nil
	})
	return n, errs, next, wait
}

// find returns the documents of db.coll that match f, in insertion order.
// The slice is the caller's; the documents are shared and never modified.
func (st *store) find(db, coll string, f *filter) []bson.Raw {
	var out []bson.Raw
	st.with(db, coll, false, func(c *collection) error {
		out = docsOf(c.matching(f, 0))
		return nil
	})
	return out
}

// drop removes db.coll and returns the number of indexes it had, 0 if it
// did not exist. A database without collections disappears.
func (st *store) drop(db, coll string) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.changeCatalogLocked(db, coll); err != nil {
		return 0, err
	}
	colls, ok := st.dbs[db]
	if !ok {
		return 0, nil
	}
	c, existed := colls[coll]
	delete(colls, coll)
	if len(colls) == 0 {
		delete(st.dbs, db)
	}
	if !existed {
		return 0, nil
	}
	return len(c.indexes) + 1, nil
}

// dropDatabase removes db and everything in it.
func (st *store) dropDatabase(db string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.changeCatalogLocked(db, ""); err != nil {
		return err
	}
	delete(st.dbs, db)
	return nil
}

// changeCatalogLocked prepares a change of the collection db.coll (of
// every collection of db if coll is ""), other than a write of documents:
// it waits for the open transactions that wrote there (errLocked), freezes
// copies for those that still see the collections as they are, and moves
// their versions on. st.mu is held.
func (st *store) changeCatalogLocked(db, coll string) error {
	if err := st.checkNamespaceLocked(db, coll); err != nil {
		return err
	}
	for name, c := range st.dbs[db] {
		if coll == "" || name == coll {
			st.freezeLocked(c)
			st.clock++
			c.ver = st.clock
		}
	}
	return nil
}

// createIndexes adds the indexes of specs to db.coll that it does not have
// yet, creating the collection if need be: all of them, or none when one
// conflicts or the documents break a unique one.
func (st *store) createIndexes(db, coll string, specs []*index) (before, after int, created bool, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.changeCatalogLocked(db, coll); err != nil {
		return 0, 0, false, err
	}
	c := st.collection(db, coll, false)
	if c == nil {
		c, created = st.collection(db, coll, true), true
	}
	before = len(c.indexes) + 1
	var add []*index
	for _, ix := range specs {
		existing := slices.IndexFunc(append([]*index{idIndex}, c.indexes...), func(o *index) bool { return o.name == ix.name })
		switch {
		case ix.name == "_id_" && (len(ix.fields) != 1 || ix.fields[0][0] != "_id"):
			return 0, 0, false, errorf(codeBadValue, "The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, but found %s instead", formatDoc(ix.key))
		case ix.name == "_id_":
			continue
		case existing > 0:
			// The name is taken: as mongod's _doesSpecConflictWithExisting,
			// the same index is no change, and any other is refused.
			old := c.indexes[existing-1]
			switch ix.compare(old) {
			case indexDifferent:
				return 0, 0, false, errorf(codeIndexKeySpecsConflict, "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
					formatDoc(ix.spec), formatDoc(old.spec))
			case indexEquivalent:
				return 0, 0, false, errorf(codeIndexOptionsConflict, "An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s",
					formatDoc(ix.spec), formatDoc(old.spec))
			}
			continue
		}
		// Another name: an index of the same signature is a conflict.
		if o := slices.IndexFunc(c.indexes, func(o *index) bool { return ix.compare(o) != indexDifferent }); o >= 0 {
			old := c.indexes[o]
			if ix.compare(old) == indexEquivalent {
				return 0, 0, false, errorf(codeIndexOptionsConflict, "An equivalent index already exists with a different name and options. Requested index: %s, existing index: %s",
					formatDoc(ix.spec), formatDoc(old.spec))
			}
			return 0, 0, false, errorf(codeIndexOptionsConflict, "Index already exists with a different name: %s", old.name)
		}
		if slices.ContainsFunc(add, func(o *index) bool { return o.name == ix.name }) {
			continue
		}
		add = append(add, ix)
	}
	for _, ix := range add {
		if !ix.unique {
			continue
		}
		for _, r := range c.recs {
			if r == nil {
				continue
			}
			keys, err := ix.keysOf(r.doc)
			if err != nil {
				clearOwners(add)
				return 0, 0, false, err
			}
			for _, k := range keys {
				if owner, taken := ix.owners[k.str]; taken && owner != r {
					clearOwners(add)
					return 0, 0, false, duplicateKey(c.ns, ix, k)
				}
				ix.owners[k.str] = r
			}
		}
	}
	c.indexes = append(c.indexes, add...)
	return before, len(c.indexes) + 1, created && len(add) > 0, nil
}

// clearOwners empties the key maps of indexes that failed to build.
func clearOwners(ixs []*index) {
	for _, ix := range ixs {
		if ix.owners != nil {
			clear(ix.owners)
		}
	}
}

// indexSpecs returns the specifications of the indexes of db.coll, _id_
// first, and whether the collection exists.
func (st *store) indexSpecs(db, coll string) ([]bson.Raw, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.collection(db, coll, false)
	if c == nil {
		return nil, false
	}
	out := []bson.Raw{idIndex.spec}
	for _, ix := range c.indexes {
		out = append(out, ix.spec)
	}
	return out, true
}

// dropIndexes drops the indexes of db.coll that choose picks among the
// indexes besides _id_, and returns the number of indexes before.
func (st *store) dropIndexes(db, coll string, choose func([]*index) ([]*index, error)) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.changeCatalogLocked(db, coll); err != nil {
		return 0, err
	}
	c := st.collection(db, coll, false)
	if c == nil {
		return 0, errorf(codeNamespaceNotFound, "ns not found %s.%s", db, coll)
	}
	drop, err := choose(c.indexes)
	if err != nil {
		return 0, err
	}
	was := len(c.indexes) + 1
	c.indexes = slices.DeleteFunc(c.indexes, func(ix *index) bool { return slices.Contains(drop, ix) })
	return was, nil
}

// dbInfo describes a database for listDatabases.
type dbInfo struct {
	name  string
	size  int64 // bytes of BSON
	empty bool
}

// databases lists the databases, sorted by name.
func (st *store) databases() []dbInfo {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []dbInfo
	for _, name := range slices.Sorted(maps.Keys(st.dbs)) {
		info := dbInfo{name: name, empty: true}
		for _, c := range st.dbs[name] {
			for _, r := range c.recs {
				if r != nil {
					info.size += int64(len(r.doc))
					info.empty = false
				}
			}
		}
		out = append(out, info)
	}
	return out
}

// collections lists the collections of db, sorted by name.
func (st *store) collections(db string) []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Sorted(maps.Keys(st.dbs[db]))
}

// withID returns a copy of doc with _id: id as its first field.
func withID(doc bson.Raw, id bson.ObjectID) bson.Raw {
	out := make([]byte, 4, len(doc)+1+4+len(id))
	out = append(out, byte(bson.TypeObjectID))
	out = append(out, "_id\x00"...)
	out = append(out, id[:]...)
	out = append(out, doc[4:]...) // the elements and the final NUL
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// idFirst returns a copy of doc with its _id moved to the front.
func idFirst(doc bson.Raw) bson.Raw {
	d := newMdoc(doc)
	d.moveFirst("_id")
	return d.encode()
}
