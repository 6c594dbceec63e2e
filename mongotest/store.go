package mongotest

import (
	"encoding/binary"
	"maps"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// store is the server's data: databases of collections of documents, in
// memory, in insertion order. It is what insert, find and the other CRUD
// commands work on.
type store struct {
	mu  sync.Mutex
	dbs map[string]map[string]*collection
}

// collection holds documents in insertion order, and the keys of their
// _id values, which are unique.
type collection struct {
	docs []bson.Raw
	ids  map[string]struct{}
}

func (st *store) init() { st.dbs = map[string]map[string]*collection{} }

// writeError is one failed document of a write command.
type writeError struct {
	index int
	err   *cmdError
}

// insert adds docs to db.coll, creating the collection if need be, and
// returns how many it inserted. A document without _id gets an ObjectID
// first. A duplicate _id is a write error; ordered stops at the first.
func (st *store) insert(db, coll string, docs []bson.Raw, ordered bool) (int, []writeError) {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.collection(db, coll, true)
	n := 0
	var errs []writeError
	for i, d := range docs {
		id, err := d.LookupErr("_id")
		if err != nil {
			d = withID(d, bson.NewObjectID())
			id = d.Lookup("_id")
		} else {
			d = slices.Clone(d) // the message buffer is not ours to keep
		}
		key := valueKey(id)
		if _, dup := c.ids[key]; dup {
			errs = append(errs, writeError{i, errorf(codeDuplicateKey,
				"E11000 duplicate key error collection: %s.%s index: _id_ dup key: { _id: %s }", db, coll, id)})
			if ordered {
				break
			}
			continue
		}
		c.ids[key] = struct{}{}
		c.docs = append(c.docs, d)
		n++
	}
	return n, errs
}

// find returns the documents of db.coll that match f, in insertion order.
// The slice is the caller's; the documents are shared and never modified.
func (st *store) find(db, coll string, f filter) []bson.Raw {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.collection(db, coll, false)
	if c == nil {
		return nil
	}
	var out []bson.Raw
	for _, d := range c.docs {
		if f.match(d) {
			out = append(out, d)
		}
	}
	return out
}

// delete removes the documents of db.coll that match f, at most limit of
// them if limit > 0, and returns how many it removed.
func (st *store) delete(db, coll string, f filter, limit int64) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.collection(db, coll, false)
	if c == nil {
		return 0
	}
	n := 0
	kept := c.docs[:0]
	for _, d := range c.docs {
		if (limit <= 0 || int64(n) < limit) && f.match(d) {
			delete(c.ids, valueKey(d.Lookup("_id")))
			n++
			continue
		}
		kept = append(kept, d)
	}
	clear(c.docs[len(kept):])
	c.docs = kept
	return n
}

// drop removes db.coll and reports whether it existed. A database without
// collections disappears.
func (st *store) drop(db, coll string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	colls, ok := st.dbs[db]
	if !ok {
		return false
	}
	_, existed := colls[coll]
	delete(colls, coll)
	if len(colls) == 0 {
		delete(st.dbs, db)
	}
	return existed
}

// dropDatabase removes db and everything in it.
func (st *store) dropDatabase(db string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.dbs, db)
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
			for _, d := range c.docs {
				info.size += int64(len(d))
				info.empty = false
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

// collection returns db.coll, creating it if create is set, or nil.
// st.mu must be held.
func (st *store) collection(db, coll string, create bool) *collection {
	colls := st.dbs[db]
	if c := colls[coll]; c != nil || !create {
		return c
	}
	if colls == nil {
		colls = map[string]*collection{}
		st.dbs[db] = colls
	}
	c := &collection{ids: map[string]struct{}{}}
	colls[coll] = c
	return c
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
