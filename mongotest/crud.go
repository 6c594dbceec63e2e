package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// insert runs {insert: coll, documents: [...], ordered}, the documents
// coming from the body or from a "documents" document sequence.
func (s *Server) insert(req *request) (bson.D, error) {
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
	n, errs := s.store.insert(req.db, coll, docs, ordered)
	return withWriteErrors(bson.D{{Key: "n", Value: int32(n)}}, errs), nil
}

// delete runs {delete: coll, deletes: [{q, limit}], ordered}; limit 0
// deletes every match, 1 the first.
func (s *Server) delete(req *request) (bson.D, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	deletes, err := writeBatchArg(req, "deletes")
	if err != nil {
		return nil, err
	}
	ordered, err := boolArg(req.body, "ordered", true)
	if err != nil {
		return nil, err
	}
	n := 0
	var errs []writeError
	for i, d := range deletes {
		f, err := filterArg(d, "q")
		if err == nil {
			var limit int64
			if limit, err = nonNegativeArg(d, "limit", 0); err == nil {
				n += s.store.delete(req.db, coll, f, limit)
				continue
			}
		}
		errs = append(errs, writeError{i, asCmdError(err)})
		if ordered {
			break
		}
	}
	return withWriteErrors(bson.D{{Key: "n", Value: int32(n)}}, errs), nil
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
		arr = append(arr, bson.D{
			{Key: "index", Value: int32(e.index)},
			{Key: "code", Value: e.err.code},
			{Key: "codeName", Value: codeName(e.err.code)},
			{Key: "errmsg", Value: e.err.msg},
		})
	}
	return append(d, bson.E{Key: "writeErrors", Value: arr})
}

// find runs {find: coll, filter, skip, limit, batchSize, singleBatch}.
// Sort and projection are ignored: documents come in insertion order, whole.
func (s *Server) find(req *request) (bson.D, error) {
	q, err := queryArgs(req, "filter")
	if err != nil {
		return nil, err
	}
	batchSize, err := nonNegativeArg(req.body, "batchSize", defaultFirstBatch)
	if err != nil {
		return nil, err
	}
	single, err := boolArg(req.body, "singleBatch", false)
	if err != nil {
		return nil, err
	}
	limit := q.limit
	if limit < 0 { // the legacy negative limit: one batch
		limit, single = -limit, true
	}
	ns := req.db + "." + q.coll
	docs := s.skipped(req.db, q)
	c := &cursor{ns: ns, docs: docs, left: -1}
	if limit > 0 {
		c.left = limit
	}
	var batch []bson.Raw
	done := false
	if batchSize == 0 && !single {
		batch, done = nil, len(docs) == 0 // an empty first batch, as asked
	} else {
		batch, done = c.nextBatch(batchSize)
	}
	var id int64
	if !done && !single {
		id = s.cursors.open(c)
	}
	return cursorReply("firstBatch", batch, id, ns), nil
}

// getMore runs {getMore: id, collection, batchSize}.
func (s *Server) getMore(req *request) (bson.D, error) {
	v := req.body.Lookup("getMore")
	id, ok := v.Int64OK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'", v.Type)
	}
	cv := req.body.Lookup("collection")
	coll, ok := cv.StringValueOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'getMore.collection' is the wrong type '%s', expected type 'string'", cv.Type)
	}
	batchSize, err := nonNegativeArg(req.body, "batchSize", 0)
	if err != nil {
		return nil, err
	}
	ns := req.db + "." + coll
	batch, id, err := s.cursors.getMore(id, ns, batchSize)
	if err != nil {
		return nil, err
	}
	return cursorReply("nextBatch", batch, id, ns), nil
}

// killCursors runs {killCursors: coll, cursors: [ids]}.
func (s *Server) killCursors(req *request) (bson.D, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	v := req.body.Lookup("cursors")
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'killCursors.cursors' is the wrong type '%s', expected type 'array'", v.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid cursors array: %v", err)
	}
	ns := req.db + "." + coll
	killed, notFound := bson.A{}, bson.A{}
	for _, e := range vals {
		id, ok := e.Int64OK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'killCursors.cursors' holds a '%s', expected type 'long'", e.Type)
		}
		if s.cursors.kill(id, ns) {
			killed = append(killed, id)
		} else {
			notFound = append(notFound, id)
		}
	}
	return bson.D{
		{Key: "cursorsKilled", Value: killed},
		{Key: "cursorsNotFound", Value: notFound},
		{Key: "cursorsAlive", Value: bson.A{}},
		{Key: "cursorsUnknown", Value: bson.A{}},
	}, nil
}

// count runs {count: coll, query, skip, limit}.
func (s *Server) count(req *request) (bson.D, error) {
	q, err := queryArgs(req, "query")
	if err != nil {
		return nil, err
	}
	limit := q.limit
	if limit < 0 {
		limit = -limit
	}
	n := int64(len(s.skipped(req.db, q)))
	if limit > 0 {
		n = min(n, limit)
	}
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}

// query holds the arguments find and count share.
type query struct {
	coll        string
	filter      filter
	skip, limit int64 // limit as given: 0 for none, negative for find's single batch
}

// queryArgs reads the collection, the filter (in the field filterKey:
// find's "filter", count's "query"), skip and limit of find or count.
func queryArgs(req *request, filterKey string) (query, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return query{}, err
	}
	f, err := filterArg(req.body, filterKey)
	if err != nil {
		return query{}, err
	}
	skip, err := nonNegativeArg(req.body, "skip", 0)
	if err != nil {
		return query{}, err
	}
	limit, err := intArg(req.body, "limit", 0)
	if err != nil {
		return query{}, err
	}
	return query{coll: coll, filter: f, skip: skip, limit: limit}, nil
}

// skipped returns the documents of db.q.coll that match q's filter, but for
// the first q.skip of them, in insertion order.
func (s *Server) skipped(db string, q query) []bson.Raw {
	docs := s.store.find(db, q.coll, q.filter)
	return docs[min(q.skip, int64(len(docs))):]
}

// drop runs {drop: coll}. Dropping a collection that does not exist
// succeeds, as from MongoDB 7.0 on.
func (s *Server) drop(req *request) (bson.D, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	if !s.store.drop(req.db, coll) {
		return bson.D{}, nil
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(1)}, {Key: "ns", Value: req.db + "." + coll}}, nil
}

// dropDatabase runs {dropDatabase: 1}.
func (s *Server) dropDatabase(req *request) (bson.D, error) {
	s.store.dropDatabase(req.db)
	return bson.D{{Key: "dropped", Value: req.db}}, nil
}

// filterArg reads the filter in field key of cmd; absent means match all.
func filterArg(cmd bson.Raw, key string) (filter, error) {
	doc, err := docArg(cmd, key)
	if err != nil {
		return nil, err
	}
	return parseFilter(doc)
}

// cursorReply is the reply of find and getMore:
// {cursor: {<batchField>: [...], id, ns}}.
func cursorReply(batchField string, batch []bson.Raw, id int64, ns string) bson.D {
	docs := make(bson.A, len(batch))
	for i, d := range batch {
		docs[i] = d
	}
	return bson.D{{Key: "cursor", Value: bson.D{
		{Key: batchField, Value: docs},
		{Key: "id", Value: id},
		{Key: "ns", Value: ns},
	}}}
}
