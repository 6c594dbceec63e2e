package unified

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
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
	if c.needsMultiple != "" {
		return nil, &skipError{c.needsMultiple}
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
	}
	return nil
}

// entityOperation runs an operation on an entity.
func (r *testRun) entityOperation(where, name, object string, args bson.Raw) (result, error) {
	ent, ok := r.entities.get(object)
	if !ok {
		return result{}, &runnerError{fmt.Errorf("%s: no entity named %q", where, object)}
	}
	if c := clientOf(ent); c != nil && c.needsMultiple != "" {
		return result{}, &skipError{c.needsMultiple}
	}
	switch e := ent.(type) {
	case *client:
		switch name {
		case "listDatabases":
			return r.listDatabases(where, e, args)
		case "close":
			if args != nil {
				return result{}, &runnerError{fmt.Errorf("%s: close takes no arguments", where)}
			}
			e.close(r.ctx)
			return result{}, nil
		}
	case *database:
		if name == "runCommand" {
			return r.runCommand(where, e, args)
		}
	case *collection:
		switch name {
		case "insertOne":
			return r.insertOne(where, e, args)
		case "insertMany":
			return r.insertMany(where, e, args)
		case "bulkWrite":
			return r.bulkWrite(where, e, args)
		case "find":
			return r.find(where, e, args)
		case "createFindCursor":
			return r.createFindCursor(where, e, args)
		case "aggregate":
			return r.aggregate(where, e, args)
		case "countDocuments":
			return r.countDocuments(where, e, args)
		case "updateOne", "updateMany", "replaceOne":
			return r.update(where, e, args, name)
		case "deleteOne", "deleteMany":
			return r.deleteDocs(where, e, args, name)
		}
	case *cursor:
		if args != nil {
			return result{}, &runnerError{fmt.Errorf("%s: %s takes no arguments", where, name)}
		}
		switch name {
		case "iterateUntilDocumentOrError", "iterateOnce":
			doc, err := e.next(r.ctx, name == "iterateOnce")
			if err != nil || doc == nil {
				return result{}, err
			}
			return result{value: docValue(doc)}, nil
		case "close":
			e.close(r.ctx)
			return result{}, nil
		}
	}
	return result{}, &runnerError{fmt.Errorf("%s: unknown operation %q for a %s", where, name, kindName(ent))}
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

// listDatabases runs the client operation, a retryable read, and returns
// the databases.
func (r *testRun) listDatabases(where string, c *client, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"filter", "nameOnly", "authorizedDatabases", "comment"}, "session")
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	cmd := bson.D{{Key: "listDatabases", Value: 1}}
	elems, _ := a.doc.Elements()
	for _, e := range elems {
		cmd = append(cmd, bson.E{Key: e.Key(), Value: e.Value()})
	}
	reply, err := c.run(r.ctx, opRead, "admin", cmd)
	if err != nil {
		return result{}, err
	}
	dbs, err := reply.LookupErr("databases")
	if err != nil || dbs.Type != bson.TypeArray {
		return result{}, fmt.Errorf("listDatabases replied without a databases array: %s", reply)
	}
	return result{value: dbs, iterable: true}, nil
}

// codeCommandNotFound is the server's error code for a command it does not
// have.
const codeCommandNotFound = 59

// runCommand runs the database operation: the command as it is, on the
// server its read preference selects (the primary by default). A driver does
// not retry it. A command the test server does not have skips the test,
// naming it.
func (r *testRun) runCommand(where string, db *database, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"command", "commandName", "readPreference"}, "session")
	cmd := a.document("command", true)
	name := a.str("commandName", true)
	rp := a.document("readPreference", false)
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return result{}, &runnerError{fmt.Errorf("%s: the command %s is empty or malformed", where, show(docValue(cmd)))}
	}
	if first := elems[0].Key(); first != name {
		return result{}, &runnerError{fmt.Errorf("%s: commandName %q is not the command's name %q", where, name, first)}
	}
	var opts []mongopool.CommandOption
	if rp != nil {
		pref, err := readPreference(where+" readPreference", rp)
		if err != nil {
			return result{}, &runnerError{err}
		}
		opts = append(opts, mongopool.WithReadPreference(pref))
	}
	var d bson.D
	if err := bson.Unmarshal(cmd, &d); err != nil {
		return result{}, &runnerError{fmt.Errorf("%s: %w", where, err)}
	}
	reply, err := db.client.run(r.ctx, opCommand, db.name, d, opts...)
	var ce *wire.CommandError
	if errors.As(err, &ce) && ce.Code == codeCommandNotFound {
		return result{}, &skipError{fmt.Sprintf("the test server does not implement the command %s (%s)", name, ce.Message)}
	}
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(reply)}, nil
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

// insertOne inserts a document, with an _id made by the client if it has
// none, and returns the InsertOneResult.
func (r *testRun) insertOne(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"document"}, "session")
	doc := a.document("document", true)
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	doc, id, err := withID(doc)
	if err != nil {
		return result{}, &runnerError{fmt.Errorf("%s: document: %w", where, err)}
	}
	if err := r.insert(coll, []bson.Raw{doc}, true); err != nil {
		return result{}, err
	}
	out, err := bson.Marshal(bson.D{{Key: "insertedId", Value: id}})
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(out)}, nil
}

// insertMany inserts documents and returns the InsertManyResult.
func (r *testRun) insertMany(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"documents", "ordered"}, "session")
	vals := a.array("documents", true)
	ordered, set := a.boolean("ordered")
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	if !set {
		ordered = true
	}
	docs, ids, err := documentsWithIDs(where, "documents", vals)
	if err != nil {
		return result{}, err
	}
	if err := r.insert(coll, docs, ordered); err != nil {
		return result{}, err
	}
	out, err := bson.Marshal(bson.D{{Key: "insertedIds", Value: ids}})
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(out)}, nil
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

// bulkWrite runs a bulk write of insertOne requests (the only model the
// runner has): one insert command, ordered unless the arguments say not,
// and returns the BulkWriteResult's insertedCount and insertedIds.
func (r *testRun) bulkWrite(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"requests", "ordered"}, "session", "bypassDocumentValidation", "comment", "let")
	reqs := a.array("requests", true)
	ordered, set := a.boolean("ordered")
	if a.err == nil && len(reqs) == 0 {
		a.fail("requests is empty")
	}
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	if !set {
		ordered = true
	}
	vals := make([]bson.RawValue, len(reqs))
	for i, req := range reqs {
		w := fmt.Sprintf("%s requests[%d]", where, i)
		o := readObject(w, req, []string{"insertOne"}, "insertMany", "updateOne", "updateMany", "replaceOne", "deleteOne", "deleteMany")
		model := o.document("insertOne", true)
		if o.err != nil {
			return result{}, &runnerError{o.err}
		}
		m := readObject(w+".insertOne", docValue(model), []string{"document"})
		doc := m.document("document", true)
		if m.err != nil {
			return result{}, &runnerError{m.err}
		}
		vals[i] = docValue(doc)
	}
	docs, ids, err := documentsWithIDs(where, "requests", vals)
	if err != nil {
		return result{}, err
	}
	if err := r.insert(coll, docs, ordered); err != nil {
		return result{}, err
	}
	out, err := bson.Marshal(bson.D{{Key: "insertedCount", Value: int64(len(docs))}, {Key: "insertedIds", Value: ids}})
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(out)}, nil
}

// insert runs an insert command, a retryable write, and turns its write
// errors into an error.
func (r *testRun) insert(coll *collection, docs []bson.Raw, ordered bool) error {
	list := make(bson.A, len(docs))
	for i, d := range docs {
		list[i] = d
	}
	_, err := r.write(coll, bson.D{{Key: "insert", Value: coll.name}, {Key: "documents", Value: list}, {Key: "ordered", Value: ordered}})
	return err
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

// findCommand reads find's arguments (those of createFindCursor too) and
// returns the find command (whose limit the Client's Cursor reads), with
// its batchSize.
func findCommand(where string, coll *collection, args bson.Raw) (cmd bson.D, batchSize int64, err error) {
	a := arguments(where, args, []string{"filter", "sort", "skip", "limit", "batchSize"}, "session")
	filter := a.document("filter", true)
	sortDoc := a.document("sort", false)
	skip, _ := a.integer("skip", false)
	limit, _ := a.integer("limit", false)
	batchSize, hasBatch := a.integer("batchSize", false)
	if a.err == nil && (skip < 0 || batchSize < 0) {
		a.fail("skip and batchSize cannot be negative")
	}
	if a.err != nil {
		return nil, 0, &runnerError{a.err}
	}
	cmd = bson.D{{Key: "find", Value: coll.name}, {Key: "filter", Value: filter}}
	if sortDoc != nil {
		cmd = append(cmd, bson.E{Key: "sort", Value: sortDoc})
	}
	if skip > 0 {
		cmd = append(cmd, bson.E{Key: "skip", Value: skip})
	}
	if limit != 0 {
		cmd = append(cmd, bson.E{Key: "limit", Value: limit})
	}
	if hasBatch {
		cmd = append(cmd, bson.E{Key: "batchSize", Value: batchSize})
	}
	return cmd, batchSize, nil
}

// find runs a find, a retryable read, and iterates its cursor to the end,
// with getMore.
func (r *testRun) find(where string, coll *collection, args bson.Raw) (result, error) {
	cmd, batchSize, err := findCommand(where, coll, args)
	if err != nil {
		return result{}, err
	}
	return r.drain(coll, cmd, batchSize)
}

// drain runs cmd as a cursor of the Client's (a retryable read, whose
// getMores go to its server) and reads it to its end.
func (r *testRun) drain(coll *collection, cmd bson.D, batchSize int64) (result, error) {
	cur, err := r.openCursor(coll, cmd, batchSize)
	if err != nil {
		return result{}, err
	}
	raws, err := cur.All(r.ctx)
	if err != nil {
		return result{}, err
	}
	docs := make(bson.A, len(raws))
	for i, d := range raws {
		docs[i] = d
	}
	_, raw, err := bson.MarshalValue(docs)
	if err != nil {
		return result{}, err
	}
	return result{value: bson.RawValue{Type: bson.TypeArray, Value: raw}, iterable: true}, nil
}

// aggregate runs an aggregation on a collection and iterates its cursor to
// the end. A pipeline that ends with $out or $merge writes: it is not a
// retryable read.
func (r *testRun) aggregate(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"pipeline", "batchSize"}, "session")
	pipeline := a.array("pipeline", true)
	batchSize, hasBatch := a.integer("batchSize", false)
	if a.err == nil && batchSize < 0 {
		a.fail("batchSize cannot be negative")
	}
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	stages := make(bson.A, len(pipeline))
	write := false
	for i, st := range pipeline {
		d, ok := st.DocumentOK()
		if !ok {
			return result{}, &runnerError{fmt.Errorf("%s: pipeline[%d]: want a document, got %s", where, i, show(st))}
		}
		stages[i] = d
		if i == len(pipeline)-1 {
			elems, _ := d.Elements()
			write = len(elems) == 1 && (elems[0].Key() == "$out" || elems[0].Key() == "$merge")
		}
	}
	cursor := bson.D{}
	if hasBatch && !write {
		cursor = append(cursor, bson.E{Key: "batchSize", Value: batchSize})
	}
	cmd := bson.D{{Key: "aggregate", Value: coll.name}, {Key: "pipeline", Value: stages}, {Key: "cursor", Value: cursor}}
	if !write {
		return r.drain(coll, cmd, batchSize)
	}
	c := coll.db.client
	reply, err := c.run(r.ctx, opCommand, coll.db.name, cmd) // on the primary, not retried
	if err != nil {
		return result{}, err
	}
	return iterate(reply, coll.name, batchSize, 0, func(cmd bson.D) (bson.Raw, error) {
		return c.run(r.ctx, opCommand, coll.db.name, cmd)
	})
}

// countDocuments counts the documents that match a filter, by the CRUD
// specification's aggregation: $match, $skip, $limit, then a $group that
// sums; no document out of it means 0.
func (r *testRun) countDocuments(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"filter", "skip", "limit"}, "session")
	filter := a.document("filter", true)
	skip, hasSkip := a.integer("skip", false)
	limit, hasLimit := a.integer("limit", false)
	if a.err == nil && (skip < 0 || limit < 0) {
		a.fail("skip and limit cannot be negative")
	}
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	pipeline := bson.A{bson.D{{Key: "$match", Value: filter}}}
	if hasSkip {
		pipeline = append(pipeline, bson.D{{Key: "$skip", Value: skip}})
	}
	if hasLimit {
		pipeline = append(pipeline, bson.D{{Key: "$limit", Value: limit}})
	}
	pipeline = append(pipeline, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}})
	c := coll.db.client
	reply, err := c.run(r.ctx, opRead, coll.db.name, bson.D{
		{Key: "aggregate", Value: coll.name}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}}, coll.readOptions()...)
	if err != nil {
		return result{}, err
	}
	docs := bson.A{}
	id, err := cursorBatch(reply, "firstBatch", &docs)
	switch {
	case err != nil:
		return result{}, err
	case id != 0 || len(docs) > 1:
		return result{}, fmt.Errorf("countDocuments: the aggregation replied with more than one document: %s", reply)
	case len(docs) == 0:
		return result{value: bson.RawValue{Type: bson.TypeInt64, Value: bsoncore.AppendInt64(nil, 0)}}, nil
	}
	n, err := docs[0].(bson.Raw).LookupErr("n")
	if err != nil || !isNumber(n.Type) {
		return result{}, fmt.Errorf("countDocuments: the aggregation replied without a count: %s", reply)
	}
	return result{value: n}, nil
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

// update runs an update (updateOne, updateMany) or a replaceOne, and returns
// the CRUD specification's UpdateResult: matchedCount, modifiedCount,
// upsertedCount, and upsertedId when a document was upserted. updateMany
// is not a retryable write: the Client sends it once.
func (r *testRun) update(where string, coll *collection, args bson.Raw, name string) (result, error) {
	field := "update"
	if name == "replaceOne" {
		field = "replacement"
	}
	a := arguments(where, args, []string{"filter", field, "upsert", "arrayFilters", "collation", "hint", "comment", "let"}, "session")
	filter := a.document("filter", true)
	u, _ := a.value(field, true)
	if a.err == nil {
		switch {
		case name == "replaceOne" && u.Type != bson.TypeEmbeddedDocument:
			a.fail("replacement: want a document, got %s", show(u))
		case u.Type != bson.TypeEmbeddedDocument && u.Type != bson.TypeArray:
			a.fail("%s: want a document or a pipeline, got %s", field, show(u))
		}
	}
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	st := withArgs(bson.D{{Key: "q", Value: filter}, {Key: "u", Value: u}, {Key: "multi", Value: name == "updateMany"}},
		a, "upsert", "arrayFilters", "collation", "hint")
	reply, err := r.write(coll, withArgs(bson.D{{Key: "update", Value: coll.name}, {Key: "updates", Value: bson.A{st}}}, a, "comment", "let"))
	if err != nil {
		return result{}, err
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	modified, _ := reply.Lookup("nModified").AsInt64OK()
	res := bson.D{}
	upserted, _ := reply.Lookup("upserted").ArrayOK()
	ups, _ := upserted.Values()
	if len(ups) > 0 {
		n -= int64(len(ups)) // n counts the upserted documents too
	}
	res = append(res, bson.E{Key: "matchedCount", Value: n}, bson.E{Key: "modifiedCount", Value: modified},
		bson.E{Key: "upsertedCount", Value: int64(len(ups))})
	if len(ups) > 0 {
		if d, ok := ups[0].DocumentOK(); ok {
			res = append(res, bson.E{Key: "upsertedId", Value: d.Lookup("_id")})
		}
	}
	out, err := bson.Marshal(res)
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(out)}, nil
}

// deleteDocs runs a deleteOne or a deleteMany and returns the CRUD
// specification's DeleteResult: deletedCount. deleteMany is not a retryable
// write: the Client sends it once.
func (r *testRun) deleteDocs(where string, coll *collection, args bson.Raw, name string) (result, error) {
	a := arguments(where, args, []string{"filter", "collation", "hint", "comment", "let"}, "session")
	filter := a.document("filter", true)
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	limit := 0
	if name == "deleteOne" {
		limit = 1
	}
	st := withArgs(bson.D{{Key: "q", Value: filter}, {Key: "limit", Value: limit}}, a, "collation", "hint")
	reply, err := r.write(coll, withArgs(bson.D{{Key: "delete", Value: coll.name}, {Key: "deletes", Value: bson.A{st}}}, a, "comment", "let"))
	if err != nil {
		return result{}, err
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	out, err := bson.Marshal(bson.D{{Key: "deletedCount", Value: n}})
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(out)}, nil
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

// write runs the write command cmd on coll's database as Client.Write does,
// with its write errors turned into an error.
func (r *testRun) write(coll *collection, cmd bson.D) (bson.Raw, error) {
	reply, err := coll.db.client.run(r.ctx, opWrite, coll.db.name, cmd)
	if err == nil {
		err = writeErrorOf(reply)
	}
	if err != nil {
		return nil, err
	}
	return reply, nil
}
