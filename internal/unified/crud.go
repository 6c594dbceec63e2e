package unified

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/wire"
)

// This file has the entity operations of the CRUD, index management,
// enumeration and run command specifications: each builds the commands a
// driver sends and runs them as the Client's reads (Read, Cursor), writes
// (Write) or commands (RunCommand), in the operation's session if it names
// one, with its entity's read preference, read concern and write concern
// (outside a transaction), and returns the specification's result as a
// document.

// entityOperation runs an operation on an entity.
func (r *testRun) entityOperation(where, name, object string, args bson.Raw) (result, error) {
	ent, ok := r.entities.get(object)
	if !ok {
		return result{}, &runnerError{fmt.Errorf("%s: no entity named %q", where, object)}
	}
	if c := clientOf(ent); c != nil && c.unusable != "" {
		return result{}, &skipError{c.unusable}
	}
	if why, ok := refusedOperations[name]; ok {
		return result{}, &skipError{fmt.Sprintf("%s: the runner has no %s operation: %s", where, name, why)}
	}
	for arg, why := range refusedArguments {
		if _, err := args.LookupErr(arg); err == nil {
			return result{}, &skipError{fmt.Sprintf("%s: the runner does not take the argument %s: %s", where, arg, why)}
		}
	}
	switch e := ent.(type) {
	case *client:
		return r.clientOperation(where, name, e, args)
	case *database:
		return r.databaseOperation(where, name, e, args)
	case *collection:
		return r.collectionOperation(where, name, e, args)
	case *session:
		return r.sessionOperation(where, name, e, args)
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

// refusedArguments are the arguments of operations the runner does not
// take, on purpose: a test that has one skips, with the reason given here.
var refusedArguments = map[string]string{
	"rawData": "an option for MongoDB's own use, which the CRUD specification says drivers should not implement unless asked to",
}

// refusedOperations are the operations of the format the runner does not
// run, on purpose: a test that has one skips, with the reason given here.
var refusedOperations = map[string]string{
	"clientBulkWrite":    "the client-level bulk write (MongoClient.bulkWrite) is not implemented by the project's client (the test server has the bulkWrite command, as MongoDB 8.0)",
	"createChangeStream": "the project has no change streams",
	"watch":              "the project has no change streams",
	"mapReduce":          "mapReduce is deprecated, and the CRUD specification has no such operation",
	"getSnapshotTime":    "the project has no snapshot reads",
}

func (r *testRun) clientOperation(where, name string, c *client, args bson.Raw) (result, error) {
	switch name {
	case "listDatabases", "listDatabaseObjects", "listDatabaseNames":
		return r.listDatabases(where, name, c, args)
	case "dropDatabase":
		return r.dropDatabase(where, c, args)
	case "close":
		if args != nil {
			return result{}, &runnerError{fmt.Errorf("%s: close takes no arguments", where)}
		}
		c.close(r.ctx)
		return result{}, nil
	}
	return result{}, &runnerError{fmt.Errorf("%s: unknown operation %q for a client", where, name)}
}

func (r *testRun) databaseOperation(where, name string, db *database, args bson.Raw) (result, error) {
	switch name {
	case "runCommand":
		return r.runCommand(where, db, args)
	case "runCursorCommand", "createCommandCursor":
		return r.runCursorCommand(where, name, db, args)
	case "aggregate":
		return r.aggregate(where, db.client, db.name, int32(1), db.nsOptions, args)
	case "createCollection":
		return r.createCollection(where, db, args)
	case "dropCollection":
		return r.dropCollection(where, db, args)
	case "listCollections", "listCollectionObjects", "listCollectionNames":
		return r.listCollections(where, name, db, args)
	case "modifyCollection":
		return r.modifyCollection(where, db, args)
	}
	return result{}, &runnerError{fmt.Errorf("%s: unknown operation %q for a database", where, name)}
}

func (r *testRun) collectionOperation(where, name string, coll *collection, args bson.Raw) (result, error) {
	switch name {
	case "insertOne":
		return r.insertOne(where, coll, args)
	case "insertMany":
		return r.insertMany(where, coll, args)
	case "bulkWrite":
		return r.bulkWrite(where, coll, args)
	case "updateOne", "updateMany", "replaceOne":
		return r.update(where, coll, args, name)
	case "deleteOne", "deleteMany":
		return r.deleteDocs(where, coll, args, name)
	case "findOneAndUpdate", "findOneAndReplace", "findOneAndDelete":
		return r.findAndModify(where, coll, args, name)
	case "find", "findOne":
		return r.find(where, coll, args, name == "findOne")
	case "createFindCursor":
		return r.createFindCursor(where, coll, args)
	case "aggregate":
		return r.aggregate(where, coll.db.client, coll.db.name, coll.name, coll.nsOptions, args)
	case "countDocuments":
		return r.countDocuments(where, coll, args)
	case "estimatedDocumentCount", "count":
		return r.count(where, coll, args, name)
	case "distinct":
		return r.distinct(where, coll, args)
	case "createIndex":
		return r.createIndex(where, coll, args)
	case "dropIndex", "dropIndexes":
		return r.dropIndex(where, coll, args, name)
	case "listIndexes", "listIndexNames":
		return r.listIndexes(where, coll, args, name)
	case "drop":
		return r.drop(where, coll.db, coll.name, coll.nsOptions, args)
	}
	return result{}, &runnerError{fmt.Errorf("%s: unknown operation %q for a collection", where, name)}
}

// docResult returns d as a document result.
func docResult(d bson.D) (result, error) {
	out, err := bson.Marshal(d)
	if err != nil {
		return result{}, err
	}
	return result{value: docValue(out)}, nil
}

// unacknowledgedResult is the result of an unacknowledged write: the CRUD
// specification's results say only that it was not acknowledged.
func unacknowledgedResult() (result, error) {
	return docResult(bson.D{{Key: "acknowledged", Value: false}})
}

// int64Result returns n as a result.
func int64Result(n int64) result {
	return result{value: bson.RawValue{Type: bson.TypeInt64, Value: bsoncore.AppendInt64(nil, n)}}
}

// listDatabases runs the client operation listDatabases (listDatabaseObjects
// too), a retryable read, and returns the databases, or their names
// (listDatabaseNames, which asks for nameOnly).
func (r *testRun) listDatabases(where, name string, c *client, args bson.Raw) (result, error) {
	known := []string{"filter", "authorizedDatabases", "comment", "session"}
	if name != "listDatabaseNames" {
		known = append(known, "nameOnly")
	}
	a := arguments(where, args, known)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := bson.D{{Key: "listDatabases", Value: 1}}
	if name == "listDatabaseNames" {
		cmd = append(cmd, bson.E{Key: "nameOnly", Value: true})
	}
	cmd = withArgs(cmd, a, "filter", "nameOnly", "authorizedDatabases", "comment")
	reply, err := c.run(r.ctx, opRead, "admin", cmd, s.options()...)
	if err != nil {
		return result{}, err
	}
	dbs, err := reply.LookupErr("databases")
	if err != nil || dbs.Type != bson.TypeArray {
		return result{}, fmt.Errorf("listDatabases replied without a databases array: %s", reply)
	}
	if name == "listDatabaseNames" {
		return names(dbs.Array())
	}
	return result{value: dbs, iterable: true}, nil
}

// names returns the names of the documents of a list (of databases,
// collections, indexes) as an array of strings.
func names(list bson.RawArray) (result, error) {
	vals, err := list.Values()
	if err != nil {
		return result{}, err
	}
	out := bson.A{}
	for _, v := range vals {
		n, ok := v.Document().Lookup("name").StringValueOK()
		if !ok {
			return result{}, fmt.Errorf("a listed document without a name: %s", show(v))
		}
		out = append(out, n)
	}
	_, raw, err := bson.MarshalValue(out)
	if err != nil {
		return result{}, err
	}
	return result{value: bson.RawValue{Type: bson.TypeArray, Value: raw}}, nil
}

// runCommand runs the database operation: the command as it is, on the
// server its read preference selects (the primary by default), in its
// session if it names one. A driver does not retry it.
func (r *testRun) runCommand(where string, db *database, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"command", "commandName", "readPreference", "session"})
	d, err := commandArg(where, a)
	if err != nil {
		return result{}, err
	}
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	opts := s.options()
	if rp := a.document("readPreference", false); rp != nil {
		pref, err := readPreference(where+" readPreference", rp)
		if err != nil {
			return result{}, &runnerError{err}
		}
		opts = append(opts, mongopool.WithReadPreference(pref))
	} else if s.inTransaction() {
		// It runs with the transaction's read preference.
		if rp := s.txnReadPref(); rp != nil {
			opts = append(opts, mongopool.WithReadPreference(*rp))
		}
	}
	reply, err := db.client.run(r.ctx, opCommand, db.name, d, opts...)
	if err != nil {
		if ce := (*wire.CommandError)(nil); errors.As(err, &ce) && ce.Code == codeCommandNotFound {
			return result{}, &skipError{fmt.Sprintf("the test server does not implement the command %s (%s)", d[0].Key, ce.Message)}
		}
		return result{}, err
	}
	return result{value: docValue(reply)}, nil
}

// commandArg reads the command and commandName arguments of runCommand and
// runCursorCommand.
func commandArg(where string, a *object) (bson.D, error) {
	cmd := a.document("command", true)
	name := a.str("commandName", true)
	if a.err != nil {
		return nil, &runnerError{a.err}
	}
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return nil, &runnerError{fmt.Errorf("%s: the command %s is empty or malformed", where, show(docValue(cmd)))}
	}
	if first := elems[0].Key(); first != name {
		return nil, &runnerError{fmt.Errorf("%s: commandName %q is not the command's name %q", where, name, first)}
	}
	var d bson.D
	if err := bson.Unmarshal(cmd, &d); err != nil {
		return nil, &runnerError{fmt.Errorf("%s: %w", where, err)}
	}
	return d, nil
}

// insertOne inserts a document, with an _id made by the client if it has
// none, and returns the InsertOneResult.
func (r *testRun) insertOne(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"document", "session", "comment", "bypassDocumentValidation"})
	doc := a.document("document", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	doc, id, err := withID(doc)
	if err != nil {
		return result{}, &runnerError{fmt.Errorf("%s: document: %w", where, err)}
	}
	cmd := withArgs(insertCommand(coll, []bson.Raw{doc}, true), a, "bypassDocumentValidation", "comment")
	if _, err := r.write(coll, s, cmd); err != nil {
		return result{}, err
	}
	if coll.unacknowledged(s) {
		return unacknowledgedResult()
	}
	return docResult(bson.D{{Key: "insertedId", Value: id}})
}

// insertMany inserts documents and returns the InsertManyResult; with an
// error, the result of what it inserted, as bulkWrite does.
func (r *testRun) insertMany(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"documents", "ordered", "session", "comment", "bypassDocumentValidation"})
	vals := a.array("documents", true)
	ordered, set := a.boolean("ordered")
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	if !set {
		ordered = true
	}
	if len(vals) == 0 {
		return result{}, errors.New("insertMany: no documents to insert") // a client error, as the CRUD specification has it
	}
	docs, ids, err := documentsWithIDs(where, "documents", vals)
	if err != nil {
		return result{}, err
	}
	list := make([]bulkRequest, len(docs))
	for i, d := range docs {
		list[i] = bulkRequest{kind: "insert", st: d, index: i, id: ids[i].Value.(bson.RawValue)}
	}
	res, err := r.runBulk(coll, s, list, ordered, a)
	if err != nil || coll.unacknowledged(s) {
		return res, err
	}
	return docResult(bson.D{{Key: "insertedIds", Value: ids}})
}

// insertCommand returns the insert command of docs.
func insertCommand(coll *collection, docs []bson.Raw, ordered bool) bson.D {
	list := make(bson.A, len(docs))
	for i, d := range docs {
		list[i] = d
	}
	return bson.D{{Key: "insert", Value: coll.name}, {Key: "documents", Value: list}, {Key: "ordered", Value: ordered}}
}

// write runs the write command cmd on coll's database as Client.Write does,
// in the session s, with the collection's write concern, and its write
// errors turned into an error.
func (r *testRun) write(coll *collection, s *session, cmd bson.D) (bson.Raw, error) {
	reply, err := coll.db.client.run(r.ctx, opWrite, coll.db.name, coll.writeCommand(cmd, s), s.options()...)
	if err == nil {
		err = writeErrorOf(reply)
	}
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// checkUpdate checks an update (a document of update operators, or a
// pipeline) or a replacement (a document without them), as a driver checks
// them before sending them.
func checkUpdate(where string, u bson.RawValue, replacement bool) error {
	if replacement {
		d, ok := u.DocumentOK()
		if !ok {
			return &runnerError{fmt.Errorf("%s: replacement: want a document, got %s", where, show(u))}
		}
		if e, err := d.IndexErr(0); err == nil && strings.HasPrefix(e.Key(), "$") {
			return fmt.Errorf("a replacement document cannot have update operators (%s)", e.Key())
		}
		return nil
	}
	switch u.Type {
	case bson.TypeArray:
		return nil
	case bson.TypeEmbeddedDocument:
		e, err := u.Document().IndexErr(0)
		if err != nil {
			return errors.New("an update document cannot be empty")
		}
		if !strings.HasPrefix(e.Key(), "$") {
			return fmt.Errorf("an update document must have update operators, not %s", e.Key())
		}
		return nil
	}
	return &runnerError{fmt.Errorf("%s: update: want a document or a pipeline, got %s", where, show(u))}
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
	known := []string{"filter", field, "upsert", "collation", "hint", "comment", "let", "session", "bypassDocumentValidation"}
	if name != "replaceOne" {
		known = append(known, "arrayFilters")
	}
	if name != "updateMany" {
		known = append(known, "sort")
	}
	a := arguments(where, args, known)
	filter := a.document("filter", true)
	u, _ := a.value(field, true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	if err := checkUpdate(where, u, name == "replaceOne"); err != nil {
		return result{}, err
	}
	st := withArgs(bson.D{{Key: "q", Value: filter}, {Key: "u", Value: u}, {Key: "multi", Value: name == "updateMany"}},
		a, "upsert", "arrayFilters", "collation", "hint", "sort")
	cmd := withArgs(bson.D{{Key: "update", Value: coll.name}, {Key: "updates", Value: bson.A{st}}, {Key: "ordered", Value: true}},
		a, "bypassDocumentValidation", "comment", "let")
	reply, err := r.write(coll, s, cmd)
	if err != nil {
		return result{}, err
	}
	if coll.unacknowledged(s) {
		return unacknowledgedResult()
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	modified, _ := reply.Lookup("nModified").AsInt64OK()
	upserted, _ := reply.Lookup("upserted").ArrayOK()
	ups, _ := upserted.Values()
	n -= int64(len(ups)) // n counts the upserted documents too
	res := bson.D{{Key: "matchedCount", Value: n}, {Key: "modifiedCount", Value: modified},
		{Key: "upsertedCount", Value: int64(len(ups))}}
	if len(ups) > 0 {
		if d, ok := ups[0].DocumentOK(); ok {
			res = append(res, bson.E{Key: "upsertedId", Value: d.Lookup("_id")})
		}
	}
	return docResult(res)
}

// deleteDocs runs a deleteOne or a deleteMany and returns the CRUD
// specification's DeleteResult: deletedCount. deleteMany is not a retryable
// write: the Client sends it once.
func (r *testRun) deleteDocs(where string, coll *collection, args bson.Raw, name string) (result, error) {
	a := arguments(where, args, []string{"filter", "collation", "hint", "comment", "let", "session"})
	filter := a.document("filter", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	limit := 0
	if name == "deleteOne" {
		limit = 1
	}
	st := withArgs(bson.D{{Key: "q", Value: filter}, {Key: "limit", Value: limit}}, a, "collation", "hint")
	cmd := withArgs(bson.D{{Key: "delete", Value: coll.name}, {Key: "deletes", Value: bson.A{st}}, {Key: "ordered", Value: true}},
		a, "comment", "let")
	reply, err := r.write(coll, s, cmd)
	if err != nil {
		return result{}, err
	}
	if coll.unacknowledged(s) {
		return unacknowledgedResult()
	}
	n, _ := reply.Lookup("n").AsInt64OK()
	return docResult(bson.D{{Key: "deletedCount", Value: n}})
}

// bulkRequest is a request of a bulkWrite: its kind (insert, update,
// delete), its statement, and its index in the requests.
type bulkRequest struct {
	kind  string
	st    any
	index int
	id    bson.RawValue // an insert's _id
}

// bulkWrite runs a bulk write, in order: each run of requests of the same
// kind is one insert, update or delete command; an ordered bulk write stops
// at the first command with write errors. It returns the BulkWriteResult,
// and with an error the result of the commands that ran (the
// BulkWriteException's writeResult), which expectError's expectResult
// matches.
func (r *testRun) bulkWrite(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"requests", "ordered", "session", "bypassDocumentValidation", "comment", "let"})
	reqs := a.array("requests", true)
	ordered, set := a.boolean("ordered")
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	if !set {
		ordered = true
	}
	if len(reqs) == 0 {
		return result{}, errors.New("bulkWrite: no requests") // a client error, as the CRUD specification has it
	}
	var list []bulkRequest
	for i, req := range reqs {
		br, err := readBulkRequest(fmt.Sprintf("%s requests[%d]", where, i), req)
		if err != nil {
			return result{}, err
		}
		br.index = i
		list = append(list, br)
	}
	return r.runBulk(coll, s, list, ordered, a)
}

// runBulk runs the requests of a bulk write in order, each run of requests
// of the same kind one command (with the arguments of a that apply to
// it), and returns the BulkWriteResult; after an error, a *bulkWriteError
// with the result of what the commands wrote.
func (r *testRun) runBulk(coll *collection, s *session, list []bulkRequest, ordered bool, a *object) (result, error) {
	res := bulkResult{insertedIDs: bson.D{}, upsertedIDs: bson.D{}}
	var errs []error
	for start := 0; start < len(list); {
		end := start + 1
		for end < len(list) && list[end].kind == list[start].kind {
			end++
		}
		batch := list[start:end]
		start = end
		cmd := bulkCommand(coll, batch, ordered)
		cmd = withArgs(cmd, a, "comment", "let")
		if batch[0].kind != "delete" {
			cmd = withArgs(cmd, a, "bypassDocumentValidation")
		}
		reply, err := coll.db.client.runRaw(r.ctx, opWrite, coll.db.name, coll.writeCommand(cmd, s), s.options()...)
		if we := (*mongopool.WriteErrors)(nil); errors.As(err, &we) {
			reply, err = we.Reply, nil
		}
		if wce := (*mongopool.WriteConcernError)(nil); errors.As(err, &wce) {
			reply, err = wce.Reply, nil
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		failed := res.add(batch, reply)
		if werr := writeErrorOf(reply); werr != nil {
			errs = append(errs, werr)
			if ordered && failed {
				break
			}
		}
	}
	if coll.unacknowledged(s) && len(errs) == 0 {
		return unacknowledgedResult()
	}
	out, err := res.doc()
	if err != nil {
		return result{}, err
	}
	if len(errs) > 0 {
		return result{}, &bulkWriteError{err: errors.Join(errs...), result: out}
	}
	return result{value: docValue(out)}, nil
}

// readBulkRequest reads a request of bulkWrite: a write model.
func readBulkRequest(where string, req bson.RawValue) (bulkRequest, error) {
	o := readObject(where, req, []string{"insertOne", "updateOne", "updateMany", "replaceOne", "deleteOne", "deleteMany"})
	if o.err != nil {
		return bulkRequest{}, &runnerError{o.err}
	}
	elems, _ := o.doc.Elements()
	if len(elems) != 1 {
		return bulkRequest{}, &runnerError{fmt.Errorf("%s: a request has one key, its model, got %s", where, show(req))}
	}
	model := elems[0].Key()
	w := where + "." + model
	switch model {
	case "insertOne":
		m := readObject(w, elems[0].Value(), []string{"document"})
		doc := m.document("document", true)
		if m.err != nil {
			return bulkRequest{}, &runnerError{m.err}
		}
		doc, id, err := withID(doc)
		if err != nil {
			return bulkRequest{}, &runnerError{fmt.Errorf("%s: %w", w, err)}
		}
		return bulkRequest{kind: "insert", st: doc, id: id}, nil
	case "updateOne", "updateMany", "replaceOne":
		field := "update"
		if model == "replaceOne" {
			field = "replacement"
		}
		known := []string{"filter", field, "upsert", "collation", "hint"}
		if model != "replaceOne" {
			known = append(known, "arrayFilters")
		}
		if model != "updateMany" {
			known = append(known, "sort")
		}
		m := readObject(w, elems[0].Value(), known)
		filter := m.document("filter", true)
		u, _ := m.value(field, true)
		if m.err != nil {
			return bulkRequest{}, &runnerError{m.err}
		}
		if err := checkUpdate(w, u, model == "replaceOne"); err != nil {
			return bulkRequest{}, err
		}
		st := withArgs(bson.D{{Key: "q", Value: filter}, {Key: "u", Value: u}, {Key: "multi", Value: model == "updateMany"}},
			m, "upsert", "arrayFilters", "collation", "hint", "sort")
		return bulkRequest{kind: "update", st: st}, nil
	default: // deleteOne, deleteMany
		m := readObject(w, elems[0].Value(), []string{"filter", "collation", "hint"})
		filter := m.document("filter", true)
		if m.err != nil {
			return bulkRequest{}, &runnerError{m.err}
		}
		limit := 0
		if model == "deleteOne" {
			limit = 1
		}
		return bulkRequest{kind: "delete", st: withArgs(bson.D{{Key: "q", Value: filter}, {Key: "limit", Value: limit}}, m, "collation", "hint")}, nil
	}
}

// bulkCommand returns the command of a run of requests of one kind.
func bulkCommand(coll *collection, batch []bulkRequest, ordered bool) bson.D {
	sts := make(bson.A, len(batch))
	for i, b := range batch {
		sts[i] = b.st
	}
	name, field := "insert", "documents"
	switch batch[0].kind {
	case "update":
		name, field = "update", "updates"
	case "delete":
		name, field = "delete", "deletes"
	}
	return bson.D{{Key: name, Value: coll.name}, {Key: field, Value: sts}, {Key: "ordered", Value: ordered}}
}

// bulkResult adds up the replies of a bulk write's commands.
type bulkResult struct {
	inserted, matched, modified, deleted, upserted int64
	insertedIDs, upsertedIDs                       bson.D
}

// add takes in the reply of the command of batch, and reports whether it
// has write errors.
func (b *bulkResult) add(batch []bulkRequest, reply bson.Raw) bool {
	n, _ := reply.Lookup("n").AsInt64OK()
	failedAt := map[int]bool{}
	if a, ok := reply.Lookup("writeErrors").ArrayOK(); ok {
		vals, _ := a.Values()
		for _, v := range vals {
			if i, ok := v.Document().Lookup("index").AsInt64OK(); ok {
				failedAt[int(i)] = true
			}
		}
	}
	switch batch[0].kind {
	case "insert":
		b.inserted += n
		for i, req := range batch {
			if !failedAt[i] && int64(i) < n+int64(len(failedAt)) {
				b.insertedIDs = append(b.insertedIDs, bson.E{Key: strconv.Itoa(req.index), Value: req.id})
			}
		}
	case "update":
		modified, _ := reply.Lookup("nModified").AsInt64OK()
		upserted, _ := reply.Lookup("upserted").ArrayOK()
		ups, _ := upserted.Values()
		b.matched += n - int64(len(ups))
		b.modified += modified
		b.upserted += int64(len(ups))
		for _, u := range ups {
			d := u.Document()
			i, _ := d.Lookup("index").AsInt64OK()
			if int(i) < len(batch) {
				b.upsertedIDs = append(b.upsertedIDs, bson.E{Key: strconv.Itoa(batch[i].index), Value: d.Lookup("_id")})
			}
		}
	case "delete":
		b.deleted += n
	}
	return len(failedAt) > 0
}

// doc returns the BulkWriteResult.
func (b *bulkResult) doc() (bson.Raw, error) {
	return bson.Marshal(bson.D{
		{Key: "deletedCount", Value: b.deleted}, {Key: "insertedCount", Value: b.inserted},
		{Key: "matchedCount", Value: b.matched}, {Key: "modifiedCount", Value: b.modified},
		{Key: "upsertedCount", Value: b.upserted}, {Key: "insertedIds", Value: b.insertedIDs},
		{Key: "upsertedIds", Value: b.upsertedIDs},
	})
}

// bulkWriteError is a bulk write's error (its commands' write errors and
// write concern errors, or the error that stopped it) with the result of
// what it wrote.
type bulkWriteError struct {
	err    error
	result bson.Raw
}

func (e *bulkWriteError) Error() string { return e.err.Error() }
func (e *bulkWriteError) Unwrap() error { return e.err }

// findAndModify runs findOneAndUpdate, findOneAndReplace or findOneAndDelete
// as a findAndModify command, and returns the document it found or wrote
// (returnDocument), null if none.
func (r *testRun) findAndModify(where string, coll *collection, args bson.Raw, name string) (result, error) {
	known := []string{"filter", "projection", "sort", "collation", "hint", "comment", "let", "session"}
	field := ""
	switch name {
	case "findOneAndUpdate":
		field = "update"
		known = append(known, "update", "arrayFilters")
	case "findOneAndReplace":
		field = "replacement"
		known = append(known, "replacement")
	}
	if field != "" {
		known = append(known, "upsert", "returnDocument", "bypassDocumentValidation")
	}
	a := arguments(where, args, known)
	filter := a.document("filter", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := bson.D{{Key: "findAndModify", Value: coll.name}, {Key: "query", Value: filter}}
	if field == "" {
		cmd = append(cmd, bson.E{Key: "remove", Value: true})
	} else {
		u, _ := a.value(field, true)
		ret := a.str("returnDocument", false)
		if a.err != nil {
			return result{}, &runnerError{a.err}
		}
		if err := checkUpdate(where, u, name == "findOneAndReplace"); err != nil {
			return result{}, err
		}
		switch strings.ToLower(ret) {
		case "", "before", "after":
		default:
			return result{}, &runnerError{fmt.Errorf("%s: returnDocument %q is neither Before nor After", where, ret)}
		}
		cmd = append(cmd, bson.E{Key: "update", Value: u}, bson.E{Key: "new", Value: strings.EqualFold(ret, "after")})
		cmd = withArgs(cmd, a, "upsert", "arrayFilters", "bypassDocumentValidation")
	}
	if p, ok := a.value("projection", false); ok {
		cmd = append(cmd, bson.E{Key: "fields", Value: p})
	}
	cmd = withArgs(cmd, a, "sort", "collation", "hint", "comment", "let")
	reply, err := r.write(coll, s, cmd)
	if err != nil {
		return result{}, err
	}
	if coll.unacknowledged(s) {
		return result{value: bson.RawValue{Type: bson.TypeNull}}, nil // nothing is known
	}
	v, err := reply.LookupErr("value")
	if err != nil {
		return result{}, fmt.Errorf("findAndModify replied without a value: %s", reply)
	}
	return result{value: v}, nil
}

// findOptions are the arguments of find that go to the find command as they
// are.
var findOptions = []string{"sort", "projection", "hint", "comment", "let", "allowDiskUse", "max", "min", "maxTimeMS",
	"returnKey", "showRecordId", "collation", "noCursorTimeout", "allowPartialResults"}

// findCommand reads find's arguments (those of findOne and
// createFindCursor too) and returns the find command (whose limit the
// Client's Cursor reads), with its batchSize and session.
func (r *testRun) findCommand(where string, coll *collection, args bson.Raw, one bool) (cmd bson.D, batchSize int64, s *session, err error) {
	known := append([]string{"filter", "skip", "session"}, findOptions...)
	if !one {
		known = append(known, "limit", "batchSize", "cursorType", "maxAwaitTimeMS")
	}
	a := arguments(where, args, known, "timeoutMode")
	filter := a.document("filter", true)
	skip, _ := a.integer("skip", false)
	limit, _ := a.integer("limit", false)
	batchSize, hasBatch := a.integer("batchSize", false)
	cursorType := a.str("cursorType", false)
	if a.err == nil && (skip < 0 || batchSize < 0) {
		a.fail("skip and batchSize cannot be negative")
	}
	if s, err = r.sessionArg(where, a); err != nil {
		return nil, 0, nil, err
	}
	cmd = bson.D{{Key: "find", Value: coll.name}, {Key: "filter", Value: filter}}
	cmd = withArgs(cmd, a, findOptions...)
	if skip > 0 {
		cmd = append(cmd, bson.E{Key: "skip", Value: skip})
	}
	switch {
	case one:
		cmd = append(cmd, bson.E{Key: "limit", Value: int64(1)}, bson.E{Key: "singleBatch", Value: true})
	case limit < 0:
		cmd = append(cmd, bson.E{Key: "limit", Value: -limit}, bson.E{Key: "singleBatch", Value: true})
	case limit > 0:
		cmd = append(cmd, bson.E{Key: "limit", Value: limit})
	}
	if hasBatch {
		if limit > 0 && batchSize == limit {
			// Or the server would leave the cursor open after the
			// first batch (the CRUD specification).
			batchSize = limit + 1
		}
		cmd = append(cmd, bson.E{Key: "batchSize", Value: batchSize})
	}
	switch cursorType {
	case "", "nonTailable":
	case "tailable":
		cmd = append(cmd, bson.E{Key: "tailable", Value: true})
	case "tailableAwait":
		cmd = append(cmd, bson.E{Key: "tailable", Value: true}, bson.E{Key: "awaitData", Value: true})
	default:
		return nil, 0, nil, &runnerError{fmt.Errorf("%s: unknown cursorType %q", where, cursorType)}
	}
	return coll.readCommand(cmd, s), batchSize, s, nil
}

// find runs a find and iterates its cursor to the end; findOne returns its
// document, null if none.
func (r *testRun) find(where string, coll *collection, args bson.Raw, one bool) (result, error) {
	cmd, batchSize, s, err := r.findCommand(where, coll, args, one)
	if err != nil {
		return result{}, err
	}
	res, err := r.drain(coll.db.client, coll.db.name, cmd, batchSize, withGetMoreComment(coll.readOptions(s), cmd))
	if err != nil || !one {
		return res, err
	}
	vals, _ := res.value.Array().Values()
	if len(vals) == 0 {
		return result{value: bson.RawValue{Type: bson.TypeNull}}, nil
	}
	return result{value: vals[0]}, nil
}

// withGetMoreComment returns opts with the comment of cmd, if any, for its
// getMores too, as the CRUD specification has find and aggregate send it.
func withGetMoreComment(opts []mongopool.CommandOption, cmd bson.D) []mongopool.CommandOption {
	for _, e := range cmd {
		if e.Key == "comment" {
			return append(opts, mongopool.WithGetMoreComment(e.Value))
		}
	}
	return opts
}

// drain runs cmd as a cursor of the Client's (a retryable read, whose
// getMores go to its server) and reads it to its end.
func (r *testRun) drain(c *client, db string, cmd bson.D, batchSize int64, opts []mongopool.CommandOption) (result, error) {
	cur, err := r.openCursor(c, db, cmd, batchSize, opts)
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

// aggregate runs an aggregation on a collection, or on a database (target
// 1), and iterates its cursor to the end. A pipeline that ends with $out or
// $merge writes: it is not a retryable read, and runs on the primary.
func (r *testRun) aggregate(where string, c *client, db string, target any, nso nsOptions, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"pipeline", "batchSize", "session", "let", "allowDiskUse", "comment", "collation",
		"bypassDocumentValidation", "maxTimeMS", "hint"}, "maxAwaitTimeMS", "timeoutMode")
	pipeline := a.array("pipeline", true)
	batchSize, hasBatch := a.integer("batchSize", false)
	if a.err == nil && batchSize < 0 {
		a.fail("batchSize cannot be negative")
	}
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
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
	cmd := bson.D{{Key: "aggregate", Value: target}, {Key: "pipeline", Value: stages}, {Key: "cursor", Value: cursor}}
	cmd = withArgs(cmd, a, "let", "allowDiskUse", "comment", "collation", "bypassDocumentValidation", "maxTimeMS", "hint")
	cmd = nso.readCommand(cmd, s)
	if !write {
		return r.drain(c, db, cmd, batchSize, withGetMoreComment(nso.readOptions(s), cmd))
	}
	cmd = nso.writeCommand(cmd, s)
	opts := s.options()
	reply, err := c.run(r.ctx, opCommand, db, cmd, opts...) // on the primary, not retried
	if err != nil {
		return result{}, err
	}
	coll, _ := target.(string)
	return iterate(reply, coll, batchSize, 0, func(cmd bson.D) (bson.Raw, error) {
		return c.run(r.ctx, opCommand, db, cmd, opts...)
	})
}

// countDocuments counts the documents that match a filter, by the CRUD
// specification's aggregation: $match, $skip, $limit, then a $group that
// sums; no document out of it means 0.
func (r *testRun) countDocuments(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"filter", "skip", "limit", "session", "comment", "collation", "hint", "maxTimeMS"})
	filter := a.document("filter", true)
	skip, hasSkip := a.integer("skip", false)
	limit, hasLimit := a.integer("limit", false)
	if a.err == nil && (skip < 0 || limit < 0) {
		a.fail("skip and limit cannot be negative")
	}
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	pipeline := bson.A{bson.D{{Key: "$match", Value: filter}}}
	if hasSkip {
		pipeline = append(pipeline, bson.D{{Key: "$skip", Value: skip}})
	}
	if hasLimit {
		pipeline = append(pipeline, bson.D{{Key: "$limit", Value: limit}})
	}
	pipeline = append(pipeline, bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: 1}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}})
	cmd := bson.D{{Key: "aggregate", Value: coll.name}, {Key: "pipeline", Value: pipeline}, {Key: "cursor", Value: bson.D{}}}
	cmd = coll.readCommand(withArgs(cmd, a, "comment", "collation", "hint", "maxTimeMS"), s)
	reply, err := coll.db.client.run(r.ctx, opRead, coll.db.name, cmd, coll.readOptions(s)...)
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
		return int64Result(0), nil
	}
	n, err := docs[0].(bson.Raw).LookupErr("n")
	if err != nil || !isNumber(n.Type) {
		return result{}, fmt.Errorf("countDocuments: the aggregation replied without a count: %s", reply)
	}
	return result{value: n}, nil
}

// count runs estimatedDocumentCount, or the deprecated count, as a count
// command, and returns its n.
func (r *testRun) count(where string, coll *collection, args bson.Raw, name string) (result, error) {
	known := []string{"comment", "maxTimeMS", "session"}
	if name == "count" {
		known = append(known, "filter", "skip", "limit", "collation", "hint")
	}
	a := arguments(where, args, known)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := bson.D{{Key: "count", Value: coll.name}}
	if q, ok := a.value("filter", false); ok {
		cmd = append(cmd, bson.E{Key: "query", Value: q})
	}
	cmd = coll.readCommand(withArgs(cmd, a, "skip", "limit", "collation", "hint", "comment", "maxTimeMS"), s)
	reply, err := coll.db.client.run(r.ctx, opRead, coll.db.name, cmd, coll.readOptions(s)...)
	if err != nil {
		return result{}, err
	}
	n, err := reply.LookupErr("n")
	if err != nil || !isNumber(n.Type) {
		return result{}, fmt.Errorf("count replied without n: %s", reply)
	}
	return result{value: n}, nil
}

// distinct runs a distinct command and returns its values.
func (r *testRun) distinct(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"fieldName", "filter", "session", "collation", "comment", "hint", "maxTimeMS"})
	field := a.str("fieldName", true)
	filter := a.document("filter", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := bson.D{{Key: "distinct", Value: coll.name}, {Key: "key", Value: field}, {Key: "query", Value: filter}}
	cmd = coll.readCommand(withArgs(cmd, a, "collation", "comment", "hint", "maxTimeMS"), s)
	reply, err := coll.db.client.run(r.ctx, opRead, coll.db.name, cmd, coll.readOptions(s)...)
	if err != nil {
		return result{}, err
	}
	v, err := reply.LookupErr("values")
	if err != nil || v.Type != bson.TypeArray {
		return result{}, fmt.Errorf("distinct replied without values: %s", reply)
	}
	return result{value: v}, nil
}

// createIndex creates an index (createIndexes) and returns its name: the
// one given, or the one made of its keys, as the index management
// specification says.
func (r *testRun) createIndex(where string, coll *collection, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"keys", "name", "unique", "sparse", "session", "comment", "maxTimeMS",
		"expireAfterSeconds", "partialFilterExpression", "collation", "hidden", "commitQuorum"})
	keys := a.document("keys", true)
	name := a.str("name", false)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	if name == "" {
		elems, err := keys.Elements()
		if err != nil || len(elems) == 0 {
			return result{}, &runnerError{fmt.Errorf("%s: keys %s is empty or malformed", where, show(docValue(keys)))}
		}
		var parts []string
		for _, e := range elems {
			v := e.Value()
			val := ""
			if str, ok := v.StringValueOK(); ok {
				val = str
			} else if n, ok := v.AsInt64OK(); ok {
				val = strconv.FormatInt(n, 10)
			} else {
				val = strings.Trim(show(v), `"`)
			}
			parts = append(parts, e.Key(), val)
		}
		name = strings.Join(parts, "_")
	}
	index := withArgs(bson.D{{Key: "key", Value: keys}, {Key: "name", Value: name}}, a,
		"unique", "sparse", "expireAfterSeconds", "partialFilterExpression", "collation", "hidden")
	cmd := withArgs(bson.D{{Key: "createIndexes", Value: coll.name}, {Key: "indexes", Value: bson.A{index}}}, a,
		"commitQuorum", "comment", "maxTimeMS")
	if _, err := r.write(coll, s, cmd); err != nil {
		return result{}, err
	}
	return result{value: bson.RawValue{Type: bson.TypeString, Value: bsoncore.AppendString(nil, name)}}, nil
}

// dropIndex drops an index by its name (dropIndexes: all but _id's).
func (r *testRun) dropIndex(where string, coll *collection, args bson.Raw, name string) (result, error) {
	known := []string{"session", "comment", "maxTimeMS"}
	if name == "dropIndex" {
		known = append(known, "name")
	}
	a := arguments(where, args, known)
	index := a.str("name", name == "dropIndex")
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	if name == "dropIndexes" {
		index = "*"
	}
	cmd := withArgs(bson.D{{Key: "dropIndexes", Value: coll.name}, {Key: "index", Value: index}}, a, "comment", "maxTimeMS")
	_, err = r.write(coll, s, cmd)
	return result{}, err
}

// listIndexes lists a collection's indexes (a retryable read, with a
// cursor), or their names (listIndexNames).
func (r *testRun) listIndexes(where string, coll *collection, args bson.Raw, name string) (result, error) {
	a := arguments(where, args, []string{"session", "batchSize", "comment", "maxTimeMS"}, "timeoutMode")
	batchSize, _ := a.integer("batchSize", false)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cursor := bson.D{}
	if batchSize > 0 {
		cursor = append(cursor, bson.E{Key: "batchSize", Value: batchSize})
	}
	cmd := withArgs(bson.D{{Key: "listIndexes", Value: coll.name}, {Key: "cursor", Value: cursor}}, a, "comment", "maxTimeMS")
	res, err := r.drain(coll.db.client, coll.db.name, cmd, batchSize, s.options())
	if err != nil || name == "listIndexes" {
		return res, err
	}
	return names(res.value.Array())
}

// drop drops a collection; one that does not exist is no error, as the
// CRUD specification says.
func (r *testRun) drop(where string, db *database, coll string, nso nsOptions, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"session", "comment"}, "encryptedFields")
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := nso.writeCommand(withArgs(bson.D{{Key: "drop", Value: coll}}, a, "comment"), s)
	_, err = db.client.run(r.ctx, opWrite, db.name, cmd, s.options()...) // once: not a retryable write
	if isNamespaceNotFound(err) {
		err = nil
	}
	return result{}, err
}

// dropDatabase is the client operation that drops a database.
func (r *testRun) dropDatabase(where string, c *client, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"database", "session", "comment"})
	name := a.str("database", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	_, err = c.run(r.ctx, opWrite, name, withArgs(bson.D{{Key: "dropDatabase", Value: 1}}, a, "comment"), s.options()...) // once: not a retryable write
	return result{}, err
}

// dropCollection is the database operation that drops a collection.
func (r *testRun) dropCollection(where string, db *database, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"collection", "session", "comment"}, "encryptedFields")
	coll := a.str("collection", true)
	if a.err != nil {
		return result{}, &runnerError{a.err}
	}
	rest, err := without(args, "collection")
	if err != nil {
		return result{}, err
	}
	return r.drop(where, db, coll, db.nsOptions, rest)
}

// without returns args without the key.
func without(args bson.Raw, key string) (bson.Raw, error) {
	elems, err := args.Elements()
	if err != nil {
		return nil, err
	}
	d := bson.D{}
	for _, e := range elems {
		if e.Key() != key {
			d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	return bson.Marshal(d)
}

// createOptions are the arguments of createCollection that the create
// command takes as they are.
var createOptions = []string{"capped", "size", "max", "validator", "validationLevel", "validationAction", "viewOn",
	"pipeline", "collation", "storageEngine", "indexOptionDefaults", "timeseries", "expireAfterSeconds",
	"changeStreamPreAndPostImages", "clusteredIndex", "comment"}

// createCollection creates a collection and returns it: saveResultAsEntity
// makes a collection entity of it, with the database's options.
func (r *testRun) createCollection(where string, db *database, args bson.Raw) (result, error) {
	a := arguments(where, args, append([]string{"collection", "session"}, createOptions...), "encryptedFields")
	name := a.str("collection", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := db.writeCommand(withArgs(bson.D{{Key: "create", Value: name}}, a, createOptions...), s)
	if _, err := db.client.run(r.ctx, opWrite, db.name, cmd, s.options()...); err != nil { // once: not a retryable write
		return result{}, err
	}
	return result{entity: &collection{db: db, name: name, nsOptions: db.nsOptions}}, nil
}

// modifyCollection changes a collection's options (collMod).
func (r *testRun) modifyCollection(where string, db *database, args bson.Raw) (result, error) {
	mods := []string{"validator", "validationLevel", "validationAction", "index", "expireAfterSeconds",
		"changeStreamPreAndPostImages", "comment"}
	a := arguments(where, args, append([]string{"collection", "session"}, mods...))
	name := a.str("collection", true)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cmd := db.writeCommand(withArgs(bson.D{{Key: "collMod", Value: name}}, a, mods...), s)
	_, err = db.client.run(r.ctx, opCommand, db.name, cmd, s.options()...)
	return result{}, err
}

// listCollections lists a database's collections (a retryable read, with a
// cursor), or their names (listCollectionNames, which asks for nameOnly).
func (r *testRun) listCollections(where, name string, db *database, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"filter", "session", "batchSize", "comment", "authorizedCollections", "maxTimeMS"},
		"timeoutMode")
	batchSize, _ := a.integer("batchSize", false)
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	cursor := bson.D{}
	if batchSize > 0 {
		cursor = append(cursor, bson.E{Key: "batchSize", Value: batchSize})
	}
	cmd := bson.D{{Key: "listCollections", Value: 1}, {Key: "cursor", Value: cursor}}
	if name == "listCollectionNames" {
		cmd = append(cmd, bson.E{Key: "nameOnly", Value: true})
	}
	cmd = withArgs(cmd, a, "filter", "comment", "authorizedCollections", "maxTimeMS")
	res, err := r.drain(db.client, db.name, cmd, batchSize, s.options())
	if err != nil || name != "listCollectionNames" {
		return res, err
	}
	return names(res.value.Array())
}

// runCursorCommand runs a command that returns a cursor, as the run command
// specification's runCursorCommand (in the session the operation names, on
// the server its read preference selects, the getMores with its batchSize
// and maxTimeMS), and iterates it to the end; createCommandCursor returns
// the cursor, unread.
func (r *testRun) runCursorCommand(where, name string, db *database, args bson.Raw) (result, error) {
	a := arguments(where, args, []string{"command", "commandName", "readPreference", "session", "batchSize", "maxTimeMS",
		"cursorType", "comment"}, "timeoutMode")
	cmd, err := commandArg(where, a)
	if err != nil {
		return result{}, err
	}
	batchSize, _ := a.integer("batchSize", false)
	maxTime, hasMaxTime := a.integer("maxTimeMS", false)
	switch t := a.str("cursorType", false); t {
	case "", "nonTailable", "tailable", "tailableAwait":
	default:
		a.fail("unknown cursorType %q", t)
	}
	s, err := r.sessionArg(where, a)
	if err != nil {
		return result{}, err
	}
	opts := s.options()
	if v, ok := a.value("comment", false); ok {
		opts = append(opts, mongopool.WithGetMoreComment(v))
	}
	if rp := a.document("readPreference", false); rp != nil {
		pref, err := readPreference(where+" readPreference", rp)
		if err != nil {
			return result{}, &runnerError{err}
		}
		opts = append(opts, mongopool.WithReadPreference(pref))
	}
	if hasMaxTime {
		opts = append(opts, mongopool.WithMaxAwaitTime(time.Duration(maxTime)*time.Millisecond))
	}
	if name == "runCursorCommand" {
		return r.drain(db.client, db.name, cmd, batchSize, opts)
	}
	return r.newCursor(db.client, db.name, cmd, batchSize, opts)
}
