package unified

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// result is what an entity operation returns.
type result struct {
	value bson.RawValue
	// iterable says that value is an array of root-level documents: the
	// documents of a cursor, such as find's.
	iterable bool
	// entity is what saveResultAsEntity saves: a cursor; nil for an
	// operation whose result is a value.
	entity any
}

// runnerError is a problem that fails the test whatever the operation
// expects: a bad argument, or something the runner's clients cannot do as a
// driver would.
type runnerError struct{ err error }

func (e *runnerError) Error() string { return e.err.Error() }
func (e *runnerError) Unwrap() error { return e.err }

// usableClient returns the client entity id, or why the test cannot use it.
func (r *testRun) usableClient(where, id string) (*client, error) {
	c, err := entity[*client](r, where, id)
	if err != nil {
		return nil, err
	}
	if c.unusable != "" {
		return nil, &skipError{c.unusable}
	}
	return c, nil
}

// clientOf returns the client entity an entity belongs to, nil for one that
// belongs to none.
func clientOf(ent any) *client {
	switch e := ent.(type) {
	case *client:
		return e
	case *database:
		return e.client
	case *collection:
		return e.db.client
	case *cursor:
		return e.c
	case *session:
		return e.c
	}
	return nil
}

// arguments reads an operation's arguments; a missing arguments document
// is an empty one.
func arguments(where string, args bson.Raw, known []string, unsupported ...string) *object {
	if args == nil {
		args = emptyDoc
	}
	return readObject(where+" arguments", docValue(args), known, unsupported...)
}

var emptyDoc = bson.Raw{5, 0, 0, 0, 0}

// codeCommandNotFound is the server's error code for a command it does not
// have.
const codeCommandNotFound = 59

// codeBadValue is the server's error code for a bad argument, with which the
// test server also refuses what it does not implement.
const codeBadValue = 2

// refusal returns why err says the test server refused what it does not
// implement (a command, an option, an operator, a stage: it names it), ""
// for any other error. Such a refusal skips the test: it tells nothing of
// the client.
func refusal(err error) string {
	var ce *wire.CommandError
	if !errors.As(err, &ce) {
		return ""
	}
	switch {
	case ce.Code == codeCommandNotFound:
		return fmt.Sprintf("a command the test server does not implement (%s)", ce.Message)
	case ce.Code == codeBadValue && strings.HasPrefix(ce.Message, "mongotest does not implement"):
		return fmt.Sprintf("a feature the test server refuses: %s", strings.TrimPrefix(ce.Message, "mongotest "))
	}
	return ""
}

// isNamespaceNotFound reports the error of a command on a collection that
// does not exist.
func isNamespaceNotFound(err error) bool {
	var ce *wire.CommandError
	return errors.As(err, &ce) && ce.Code == codeNamespaceNotFound
}

// readPreference reads a readPreference document: mode, tagSets and
// maxStalenessSeconds.
func readPreference(where string, doc bson.Raw) (topology.ReadPref, error) {
	o := readObject(where, docValue(doc), []string{"mode", "tagSets", "maxStalenessSeconds"}, "hedge")
	mode := o.str("mode", true)
	sets := o.array("tagSets", false)
	stale, hasStale := o.integer("maxStalenessSeconds", false)
	if o.err != nil {
		return topology.ReadPref{}, o.err
	}
	var rp topology.ReadPref
	var err error
	if rp.Mode, err = topology.ParseReadPrefMode(mode); err != nil {
		return rp, fmt.Errorf("%s: %w", where, err)
	}
	for i, s := range sets {
		d, ok := s.DocumentOK()
		if !ok {
			return rp, fmt.Errorf("%s: tagSets[%d]: want a document, got %s", where, i, show(s))
		}
		elems, err := d.Elements()
		if err != nil {
			return rp, fmt.Errorf("%s: tagSets[%d]: %w", where, i, err)
		}
		set := topology.TagSet{}
		for _, e := range elems {
			v, ok := e.Value().StringValueOK()
			if !ok {
				return rp, fmt.Errorf("%s: tagSets[%d].%s: want a string, got %s", where, i, e.Key(), show(e.Value()))
			}
			set = append(set, topology.Tag{Name: e.Key(), Value: v})
		}
		rp.TagSets = append(rp.TagSets, set)
	}
	if hasStale && stale >= 0 {
		rp.MaxStaleness, rp.HasMaxStaleness = time.Duration(stale)*time.Second, true
	}
	if err := rp.Validate(); err != nil {
		return rp, fmt.Errorf("%s: %w", where, err)
	}
	return rp, nil
}

// documentsWithIDs returns the documents of vals with an _id each (see
// withID), and their _ids by index.
func documentsWithIDs(where, field string, vals []bson.RawValue) ([]bson.Raw, bson.D, error) {
	docs := make([]bson.Raw, len(vals))
	ids := bson.D{}
	for i, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, nil, &runnerError{fmt.Errorf("%s: %s[%d]: want a document, got %s", where, field, i, show(v))}
		}
		var id bson.RawValue
		var err error
		if docs[i], id, err = withID(d); err != nil {
			return nil, nil, &runnerError{fmt.Errorf("%s: %s[%d]: %w", where, field, i, err)}
		}
		ids = append(ids, bson.E{Key: strconv.Itoa(i), Value: id})
	}
	return docs, ids, nil
}

// withID returns doc with an _id first, a new ObjectID if it had none, as a
// driver adds one, and the _id.
func withID(doc bson.Raw) (bson.Raw, bson.RawValue, error) {
	if id, err := doc.LookupErr("_id"); err == nil {
		return doc, id, nil
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, bson.RawValue{}, err
	}
	d := bson.D{{Key: "_id", Value: bson.NewObjectID()}}
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
	}
	out, err := bson.Marshal(d)
	if err != nil {
		return nil, bson.RawValue{}, err
	}
	return out, bson.Raw(out).Lookup("_id"), nil
}

// writeErrorOf returns the error a driver raises for a write's reply that
// has write errors (Client.Write's *mongopool.WriteErrors, or a reply of
// RunCommand): the server's error, from the first write error, or from the
// write concern error when there is none.
func writeErrorOf(reply bson.Raw) error {
	var labels []string
	if a, ok := reply.Lookup("errorLabels").ArrayOK(); ok {
		vals, _ := a.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok {
				labels = append(labels, s)
			}
		}
	}
	fromDoc := func(kind string, d bson.Raw) error {
		code, _ := d.Lookup("code").AsInt64OK()
		name, _ := d.Lookup("codeName").StringValueOK()
		msg, _ := d.Lookup("errmsg").StringValueOK()
		return fmt.Errorf("%s: %w", kind, &wire.CommandError{Code: int32(code), CodeName: name, Message: msg, Labels: labels, Raw: reply})
	}
	if a, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := a.Values()
		if len(vals) > 0 {
			d, ok := vals[0].DocumentOK()
			if !ok {
				return fmt.Errorf("a malformed write error in the reply %s", reply)
			}
			return fromDoc("write error", d)
		}
	}
	if d, ok := reply.Lookup("writeConcernError").DocumentOK(); ok {
		return fromDoc("write concern error", d)
	}
	return nil
}

// iterate reads a cursor to its end, from the reply that opened it, with
// getMore commands run by run (a getMore is not retried), and returns its
// documents. batchSize, if not 0, is the getMores'; limit, if positive,
// the most documents the cursor returns: as a driver does, a getMore asks
// for no more than it leaves.
func iterate(first bson.Raw, coll string, batchSize, limit int64, run func(bson.D) (bson.Raw, error)) (result, error) {
	docs := bson.A{}
	id, err := cursorBatch(first, "firstBatch", &docs)
	for err == nil && id != 0 {
		more := bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: coll}}
		n := batchSize
		if left := limit - int64(len(docs)); limit > 0 && (n == 0 || left < n) {
			n = left
		}
		if n > 0 {
			more = append(more, bson.E{Key: "batchSize", Value: n})
		}
		var reply bson.Raw
		if reply, err = run(more); err == nil {
			id, err = cursorBatch(reply, "nextBatch", &docs)
		}
	}
	if err != nil {
		return result{}, err
	}
	_, raw, err := bson.MarshalValue(docs)
	if err != nil {
		return result{}, err
	}
	return result{value: bson.RawValue{Type: bson.TypeArray, Value: raw}, iterable: true}, nil
}

// cursorBatch appends the documents of a cursor reply's batch to docs and
// returns the cursor's id.
func cursorBatch(reply bson.Raw, field string, docs *bson.A) (int64, error) {
	cur, ok := reply.Lookup("cursor").DocumentOK()
	if !ok {
		return 0, fmt.Errorf("a cursor reply without a cursor: %s", reply)
	}
	batch, ok := cur.Lookup(field).ArrayOK()
	id, idOK := cur.Lookup("id").AsInt64OK()
	if !ok || !idOK {
		return 0, fmt.Errorf("a cursor reply without %s or id: %s", field, reply)
	}
	vals, err := batch.Values()
	if err != nil {
		return 0, fmt.Errorf("a malformed batch in %s: %w", reply, err)
	}
	for _, v := range vals {
		d, ok := v.DocumentOK()
		if !ok {
			return 0, fmt.Errorf("a batch with a value that is not a document: %s", show(v))
		}
		*docs = append(*docs, d)
	}
	return id, nil
}

// loadInitialData sets up the collections of initialData through the
// internal client, with a majority write concern: each is dropped (with
// the collections queryable encryption keeps beside it), created with
// createOptions if any, and filled with its documents; with neither, it is
// created empty.
func (r *testRun) loadInitialData(list []bson.RawValue) error {
	majority := bson.D{{Key: "w", Value: "majority"}}
	for i, v := range list {
		where := fmt.Sprintf("initialData[%d]", i)
		o := readObject(where, v, []string{"collectionName", "databaseName", "createOptions", "documents"})
		coll, db := o.str("collectionName", true), o.str("databaseName", true)
		opts := o.document("createOptions", false)
		vals := o.array("documents", true)
		if o.err != nil {
			return o.err
		}
		docs := make(bson.A, len(vals))
		for j, d := range vals {
			if d.Type != bson.TypeEmbeddedDocument {
				return fmt.Errorf("%s: documents[%d]: want a document, got %s", where, j, show(d))
			}
			docs[j] = d
		}
		run := func(cmd bson.D) (bson.Raw, error) {
			reply, err := r.internal.RunCommand(r.ctx, db, append(cmd, bson.E{Key: "writeConcern", Value: majority}))
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s.%v: %w", where, cmd[0].Key, db, cmd[0].Value, err)
			}
			return reply, nil
		}
		for _, name := range []string{coll, "enxcol_." + coll + ".esc", "enxcol_." + coll + ".ecoc"} {
			var ce *wire.CommandError
			if _, err := run(bson.D{{Key: "drop", Value: name}}); err != nil && !(errors.As(err, &ce) && ce.Code == codeNamespaceNotFound) {
				return err
			}
		}
		if opts != nil || len(docs) == 0 {
			cmd := bson.D{{Key: "create", Value: coll}}
			if opts != nil {
				elems, err := opts.Elements()
				if err != nil {
					return fmt.Errorf("%s: createOptions: %w", where, err)
				}
				for _, e := range elems {
					cmd = append(cmd, bson.E{Key: e.Key(), Value: e.Value()})
				}
			}
			if _, err := run(cmd); err != nil {
				return err
			}
		}
		if len(docs) > 0 {
			reply, err := run(bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: docs}})
			if err == nil {
				err = writeErrorOf(reply)
			}
			if err != nil {
				return fmt.Errorf("%s: inserting the documents: %w", where, err)
			}
		}
	}
	return nil
}

// codeNamespaceNotFound is the server's error code for a drop of a
// collection that does not exist (servers before 7.0 reply with it).
const codeNamespaceNotFound = 26

// checkOutcome checks a test's outcome: each collection, read through the
// internal client in _id order, holds exactly the documents listed (in any
// key order, but with the same types and values: the rules of matches do not
// apply).
func (r *testRun) checkOutcome(list []bson.RawValue) error {
	for i, v := range list {
		where := fmt.Sprintf("%s outcome[%d]", r.where, i)
		o := readObject(where, v, []string{"collectionName", "databaseName", "createOptions", "documents"})
		coll, db := o.str("collectionName", true), o.str("databaseName", true)
		want := o.array("documents", true)
		if o.err != nil {
			return o.err
		}
		cmd := bson.D{{Key: "find", Value: coll}, {Key: "filter", Value: bson.D{}},
			{Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "readConcern", Value: bson.D{{Key: "level", Value: "local"}}}}
		run := func(cmd bson.D) (bson.Raw, error) { return r.internal.RunCommand(r.ctx, db, cmd) }
		reply, err := run(cmd)
		var res result
		if err == nil {
			res, err = iterate(reply, coll, 0, 0, run)
		}
		if err != nil {
			return fmt.Errorf("%s: reading %s.%s: %w", where, db, coll, err)
		}
		got, _ := res.value.Array().Values()
		same := len(got) == len(want)
		for j := 0; same && j < len(want); j++ {
			w, ok := want[j].DocumentOK()
			if !ok {
				return fmt.Errorf("%s: documents[%d]: want a document, got %s", where, j, show(want[j]))
			}
			same = sameDocument(w, got[j].Document())
		}
		if !same {
			wantRaw, _ := o.doc.LookupErr("documents")
			return fmt.Errorf("%s: %s.%s holds %s, want %s", where, db, coll, show(res.value), show(wantRaw))
		}
	}
	return nil
}

// sameDocument reports whether two documents have the same keys, in any
// order, with the same values: of the same types, nested documents compared
// the same way, arrays element by element.
func sameDocument(a, b bson.Raw) bool {
	ae, err1 := a.Elements()
	be, err2 := b.Elements()
	if err1 != nil || err2 != nil || len(ae) != len(be) {
		return false
	}
	for _, e := range ae {
		v, err := b.LookupErr(e.Key())
		if err != nil || !sameValue(e.Value(), v) {
			return false
		}
	}
	return true
}

func sameValue(a, b bson.RawValue) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case bson.TypeEmbeddedDocument:
		return sameDocument(a.Document(), b.Document())
	case bson.TypeArray:
		av, err1 := a.Array().Values()
		bv, err2 := b.Array().Values()
		if err1 != nil || err2 != nil || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !sameValue(av[i], bv[i]) {
				return false
			}
		}
		return true
	}
	return a.Equal(b)
}

// withArgs returns d with the arguments named keys that a has, in that
// order, as they are.
func withArgs(d bson.D, a *object, keys ...string) bson.D {
	for _, k := range keys {
		if v, ok := a.value(k, false); ok {
			d = append(d, bson.E{Key: k, Value: v})
		}
	}
	return d
}
