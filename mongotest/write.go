package mongotest

import (
	"bytes"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The write commands: insert, update, delete, create, drop and
// dropDatabase. Each statement of a write command that fails is a write
// error of the reply, as in mongod; ordered (the default) stops at the
// first.

// insert runs {insert: coll, documents: [...], ordered}, the documents
// coming from the body or from a "documents" document sequence.
func (s *Server) insert(req *request) (bson.D, error) {
	if err := checkFields(req, "documents", "ordered", "bypassDocumentValidation"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	docs, err := writeBatchArg(req, "documents")
	if err != nil {
		return nil, err
	}
	ordered, err := boolArg(req.body, "ordered", true)
	if err != nil {
		return nil, err
	}
	n, errs := s.insertDocs(req, coll, docs, ordered)
	return withWriteErrors(bson.D{{Key: "n", Value: int32(n)}}, errs), nil
}

// insertDocs inserts docs in coll of req.db, as insert's statements, and
// returns how many it inserted and the write errors of the others.
func (s *Server) insertDocs(req *request, coll string, docs []bson.Raw, ordered bool) (int, []writeError) {
	st := s.storeOf(req)
	n, errs, done := 0, []writeError(nil), 0
	for {
		k, e, next, wait := st.insert(req.db, coll, docs[done:], ordered, done)
		n, errs, done = n+k, append(errs, e...), done+next
		if wait == nil || (ordered && len(errs) > 0) {
			break
		}
		if err := wait.wait(req); err != nil {
			errs = append(errs, writeError{done, asCmdError(err)})
			break
		}
	}
	return n, errs
}

// updateStatementFields are the fields of one statement of update.
var updateStatementFields = []string{"q", "u", "multi", "upsert", "arrayFilters", "collation", "hint", "upsertSupplied", "sort", "c"}

// update runs {update: coll, updates: [{q, u, multi, upsert, sort}],
// ordered}: the reply counts the documents matched (n, with the upserted
// ones) and modified (nModified), and lists the upserted _id values.
func (s *Server) update(req *request) (bson.D, error) {
	if err := checkFields(req, "updates", "ordered", "bypassDocumentValidation", "let"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	stmts, err := writeBatchArg(req, "updates")
	if err != nil {
		return nil, err
	}
	fields := updateStatementFields
	if s.cfg.maxWireVersion < wireVersion80 {
		// sort is an option of MongoDB 8.0, unknown to older versions.
		fields = slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return f == "sort" })
	}
	for _, st := range stmts {
		if err := checkDocFields(st, "update.updates", false, fields); err != nil {
			return nil, err
		}
	}
	ordered, err := boolArg(req.body, "ordered", true)
	if err != nil {
		return nil, err
	}
	var n, modified int
	var upserted bson.A
	var errs []writeError
	for i, st := range stmts {
		res, err := s.updateOne(req, coll, st)
		if isInterruption(err) {
			return nil, err // fails the batch, as in mongod
		}
		if err != nil {
			errs = append(errs, writeError{i, asCmdError(err)})
			if ordered {
				break
			}
			continue
		}
		n += res.matched
		modified += res.modified
		if res.upsertedID.Type != 0 {
			n++
			upserted = append(upserted, bson.D{{Key: "index", Value: int32(i)}, {Key: "_id", Value: res.upsertedID}})
		}
	}
	d := bson.D{{Key: "n", Value: int32(n)}, {Key: "nModified", Value: int32(modified)}}
	if len(upserted) > 0 {
		d = append(d, bson.E{Key: "upserted", Value: upserted})
	}
	return withWriteErrors(d, errs), nil
}

// wireVersion80 is the maxWireVersion of MongoDB 8.0.
const wireVersion80 = 25

// updateResult is what one update statement did.
type updateResult struct {
	matched, modified int
	upsertedID        bson.RawValue // Type 0 if none
}

// updateOne runs one statement of update.
func (s *Server) updateOne(req *request, coll string, st bson.Raw) (updateResult, error) {
	var res updateResult
	qv, err := st.LookupErr("q")
	if err != nil {
		return res, errorf(40414, "BSON field 'update.updates.q' is missing but a required field")
	}
	qd, ok := qv.DocumentOK()
	if !ok {
		return res, errorf(codeTypeMismatch, "BSON field 'update.updates.q' is the wrong type '%s', expected type 'object'", typeName(qv.Type))
	}
	f, err := parseQueryFilter(req, qd)
	if err != nil {
		return res, err
	}
	uv, err := st.LookupErr("u")
	if err != nil {
		return res, errorf(40414, "BSON field 'update.updates.u' is missing but a required field")
	}
	u, err := parseUpdate(uv, "u")
	if err != nil {
		return res, err
	}
	u.query = f
	multi, err := boolArg(st, "multi", false)
	if err != nil {
		return res, err
	}
	upsert, err := boolArg(st, "upsert", false)
	if err != nil {
		return res, err
	}
	sortDoc, err := docArg(st, "sort")
	if err != nil {
		return res, err
	}
	sort, err := parseSort(sortDoc)
	if err != nil {
		return res, err
	}
	switch {
	case multi && u.replacement != nil:
		return res, errorf(codeFailedToParse, "multi update is not supported for replacement-style update")
	case multi && len(sort) > 0:
		return res, errorf(codeFailedToParse, "Cannot specify sort with multi=true")
	case multi && req.session.retryableWrite():
		return res, errorf(codeInvalidOptions, "Cannot use (or request) retryable writes with multi=true")
	}
	if err := u.setArrayFilters(st.Lookup("arrayFilters"), uv); err != nil {
		return res, err
	}
	if err := checkCollation(st); err != nil {
		return res, err
	}
	store := s.storeOf(req)
	err = s.untilUnlocked(req, func() error {
		return store.withLazy(req.db, coll, func(c *collection, create func() *collection) error {
			return updateIn(store, c, create, f, u, st, multi, upsert, sort, &res)
		})
	})
	return res, err
}

// updateIn runs one statement st of update on c (nil if the collection
// does not exist, which create makes) of store, and counts in res.
func updateIn(store *store, c *collection, create func() *collection, f *filter, u *update, st bson.Raw, multi, upsert bool, sort sortSpec, res *updateResult) error {
	{
		if err := checkHint(c, st); err != nil {
			return err
		}
		scan := 0 // updateOne without a sort takes the first match
		if !multi && len(sort) == 0 {
			scan = 1
		}
		recs := c.matching(f, scan)
		if err := f.err(); err != nil {
			return err
		}
		if !multi && len(recs) > 1 {
			if len(sort) > 0 {
				recs = sortRecords(recs, sort)
			}
			recs = recs[:1]
		}
		if err := store.checkLocksLocked(c, recs); err != nil {
			return err
		}
		for _, r := range recs {
			doc, err := u.apply(r.doc, false)
			if err != nil {
				return err
			}
			res.matched++
			if bytes.Equal(doc, r.doc) {
				continue
			}
			if err := c.replace(r, doc); err != nil {
				return err
			}
			res.modified++
		}
		if len(recs) > 0 || !upsert {
			return nil
		}
		doc, err := upsertDoc(f, u)
		if err != nil {
			return err
		}
		if cerr := checkStorable(doc); cerr != nil {
			return cerr
		}
		if c == nil {
			c = create()
		}
		if cerr := c.add(doc); cerr != nil {
			return cerr
		}
		res.upsertedID = doc.Lookup("_id")
		return nil
	}
}

// sortRecords returns recs sorted by spec.
func sortRecords(recs []*record, spec sortSpec) []*record {
	sortBy(recs, func(r *record) bson.Raw { return r.doc }, spec)
	return recs
}

// delete runs {delete: coll, deletes: [{q, limit}], ordered}; limit 0
// deletes every match, 1 the first.
func (s *Server) delete(req *request) (bson.D, error) {
	if err := checkFields(req, "deletes", "ordered", "let"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	deletes, err := writeBatchArg(req, "deletes")
	if err != nil {
		return nil, err
	}
	for _, d := range deletes {
		if err := checkDocFields(d, "delete.deletes", false, []string{"q", "limit", "collation", "hint"}); err != nil {
			return nil, err
		}
	}
	ordered, err := boolArg(req.body, "ordered", true)
	if err != nil {
		return nil, err
	}
	n := 0
	var errs []writeError
	for i, d := range deletes {
		removed, err := s.deleteOne(req, coll, d)
		if isInterruption(err) {
			return nil, err // fails the batch, as in mongod
		}
		if err != nil {
			errs = append(errs, writeError{i, asCmdError(err)})
			if ordered {
				break
			}
			continue
		}
		n += removed
	}
	return withWriteErrors(bson.D{{Key: "n", Value: int32(n)}}, errs), nil
}

// deleteOne runs one statement of delete and returns how many documents it
// removed.
func (s *Server) deleteOne(req *request, coll string, d bson.Raw) (int, error) {
	qv, err := d.LookupErr("q")
	if err != nil {
		return 0, errorf(40414, "BSON field 'delete.deletes.q' is missing but a required field")
	}
	qd, ok := qv.DocumentOK()
	if !ok {
		return 0, errorf(codeTypeMismatch, "BSON field 'delete.deletes.q' is the wrong type '%s', expected type 'object'", typeName(qv.Type))
	}
	f, err := parseQueryFilter(req, qd)
	if err != nil {
		return 0, err
	}
	lv, err := d.LookupErr("limit")
	if err != nil {
		return 0, errorf(40414, "BSON field 'delete.deletes.limit' is missing but a required field")
	}
	limit, ok := lv.AsInt64OK()
	if !ok && lv.Type == bson.TypeDouble {
		limit, ok = int64(lv.Double()), lv.Double() == float64(int64(lv.Double()))
	}
	if !ok || (limit != 0 && limit != 1) {
		return 0, errorf(codeFailedToParse, "The limit field in delete objects must be 0 or 1. Got %s", formatValue(lv))
	}
	if limit == 0 && req.session.retryableWrite() {
		return 0, errorf(codeInvalidOptions, "Cannot use (or request) retryable writes with limit=0")
	}
	if err := checkCollation(d); err != nil {
		return 0, err
	}
	n := 0
	st := s.storeOf(req)
	err = s.untilUnlocked(req, func() error {
		return st.with(req.db, coll, false, func(c *collection) error {
			if err := checkHint(c, d); err != nil {
				return err
			}
			recs := c.matching(f, int(limit))
			if err := f.err(); err != nil {
				return err
			}
			if err := st.checkLocksLocked(c, recs); err != nil {
				return err
			}
			for _, r := range recs {
				if err := c.remove(r); err != nil {
					return err
				}
				n++
			}
			return nil
		})
	})
	return n, err
}

// writeBatchArg returns the operations of a write command (docsArg), of
// which there must be 1 to MaxWriteBatchSize.
func writeBatchArg(req *request, key string) ([]bson.Raw, error) {
	ops, err := docsArg(req, key)
	if err == nil && (len(ops) == 0 || len(ops) > MaxWriteBatchSize) {
		err = errorf(codeInvalidLength, "Write batch sizes must be between 1 and %d. Got %d operations.", MaxWriteBatchSize, len(ops))
	}
	return ops, err
}

// withWriteErrors adds the writeErrors array to a write command's reply.
func withWriteErrors(d bson.D, errs []writeError) bson.D {
	if len(errs) == 0 {
		return d
	}
	arr := make(bson.A, 0, len(errs))
	for _, e := range errs {
		we := bson.D{
			{Key: "index", Value: int32(e.index)},
			{Key: "code", Value: e.err.code},
			{Key: "codeName", Value: codeName(e.err.code)},
		}
		we = append(we, e.err.extra...)
		arr = append(arr, append(we, bson.E{Key: "errmsg", Value: e.err.msg}))
	}
	return append(d, bson.E{Key: "writeErrors", Value: arr})
}

// create runs {create: coll}: it creates an empty collection. The options
// that would change what the collection does (capped, validator,
// timeseries, views, ...) are refused as not implemented.
func (s *Server) create(req *request) (bson.D, error) {
	if err := checkFields(req, "capped", "size", "max", "validator", "validationLevel", "validationAction",
		"timeseries", "viewOn", "pipeline", "collation", "storageEngine", "indexOptionDefaults", "clusteredIndex",
		"changeStreamPreAndPostImages", "expireAfterSeconds", "encryptedFields", "idIndex", "autoIndexId",
		"flags", "temp", "recordPreImages"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	for _, opt := range []string{"capped", "validator", "timeseries", "viewOn", "clusteredIndex", "expireAfterSeconds", "encryptedFields", "temp"} {
		if v, err := req.body.LookupErr(opt); err == nil && truthy(v) {
			return nil, errorf(codeBadValue, "mongotest does not implement the collection option %s", opt)
		}
	}
	if err := checkCollation(req.body); err != nil {
		return nil, err
	}
	withOptions := false
	for _, e := range mustElements(req.body)[1:] {
		if !genericFields[e.Key()] {
			withOptions = true
		}
	}
	return bson.D{}, s.storeOf(req).withLazy(req.db, coll, func(c *collection, create func() *collection) error {
		if c != nil {
			if withOptions {
				return errorf(codeNamespaceExists, "Collection %s.%s already exists.", req.db, coll)
			}
			return nil
		}
		create()
		return nil
	})
}

// mustElements returns the elements of doc, a validated document.
func mustElements(doc bson.Raw) []bson.RawElement {
	elems, _ := doc.Elements()
	return elems
}

// drop runs {drop: coll}. Dropping a collection that does not exist
// succeeds, as from MongoDB 7.0 on.
func (s *Server) drop(req *request) (bson.D, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	var n int
	err = s.untilUnlocked(req, func() (err error) {
		n, err = s.store.drop(req.db, coll)
		return err
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return bson.D{}, nil
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(n)}, {Key: "ns", Value: req.db + "." + coll}}, nil
}

// dropDatabase runs {dropDatabase: 1}.
func (s *Server) dropDatabase(req *request) (bson.D, error) {
	if err := s.untilUnlocked(req, func() error { return s.store.dropDatabase(req.db) }); err != nil {
		return nil, err
	}
	return bson.D{{Key: "dropped", Value: req.db}}, nil
}
