package mongotest

import (
	"bytes"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The read commands: find, getMore, killCursors, count and distinct.

// findFields are the fields of find that this package takes; the ones it
// does not implement are refused by find when they ask for something.
var findFields = []string{"filter", "sort", "projection", "skip", "limit", "batchSize", "singleBatch",
	"hint", "let", "collation", "allowDiskUse", "allowPartialResults", "noCursorTimeout", "oplogReplay",
	"awaitData", "tailable", "returnKey", "showRecordId", "min", "max", "ntoreturn", "term"}

// find runs {find: coll, filter, sort, projection, skip, limit, batchSize,
// singleBatch}: the first batch, and a cursor for the rest.
func (s *Server) find(req *request) (bson.D, error) {
	if err := checkFields(req, findFields...); err != nil {
		return nil, err
	}
	for _, opt := range []string{"tailable", "awaitData", "returnKey", "showRecordId"} {
		if b, _ := boolArg(req.body, opt, false); b {
			return nil, errorf(codeBadValue, "mongotest does not implement find's %s option", opt)
		}
	}
	for _, opt := range []string{"min", "max"} {
		if d, err := docArg(req.body, opt); err != nil || len(d) > 5 {
			return nil, errorf(codeBadValue, "mongotest does not implement find's %s option", opt)
		}
	}
	if err := checkCollation(req.body); err != nil {
		return nil, err
	}
	q, err := queryArgs(req, "filter")
	if err != nil {
		return nil, err
	}
	sortDoc, err := docArg(req.body, "sort")
	if err != nil {
		return nil, err
	}
	// {$natural: 1} is the order of insertion, which find gives anyway;
	// {$natural: -1} its reverse.
	var reverse bool
	if commandName(sortDoc) == "$natural" && len(mustElements(sortDoc)) == 1 {
		v := sortDoc.Lookup("$natural")
		if f := floatOf(v); !isNumber(v) || (f != 1 && f != -1) {
			return nil, errorf(codeSortKeyOrdering, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		reverse, sortDoc = floatOf(v) == -1, emptyDoc
	}
	sort, err := parseSort(sortDoc)
	if err != nil {
		return nil, err
	}
	var proj *projection
	if pd, err := docArg(req.body, "projection"); err != nil {
		return nil, err
	} else if len(pd) > 5 {
		if proj, err = parseFindProjection(pd); err != nil {
			return nil, err
		}
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
	var docs []bson.Raw
	scan := 0 // with no sort, the scan may stop once it has skip+limit documents
	if len(sort) == 0 && !reverse && limit > 0 && q.skip < math.MaxInt32 && limit < math.MaxInt32 {
		scan = int(q.skip + limit)
	}
	err = s.storeOf(req).with(req.db, q.coll, false, func(c *collection) error {
		if err := checkHint(c, req.body); err != nil {
			return err
		}
		if q.filter.scriptedFilter() {
			docs = c.candidates(q.filter) // matched below, out of the lock
			return nil
		}
		docs = docsOf(c.matching(q.filter, scan))
		return q.filter.err()
	})
	if err == nil && q.filter.scriptedFilter() {
		docs, err = q.filter.keep(docs, scan)
	}
	if err != nil {
		return nil, err
	}
	if reverse {
		slices.Reverse(docs)
	}
	sortDocs(docs, sort)
	docs = docs[min(q.skip, int64(len(docs))):]
	if proj != nil && proj.positional != nil {
		// The matched element of each document returned, which the query
		// gives, before the projection runs on the documents alone.
		if limit > 0 && limit < int64(len(docs)) {
			docs = docs[:limit]
		}
		docs = slices.Clone(docs)
		for i, d := range docs {
			if docs[i], err = proj.withMatchedElement(q.filter, d); err != nil {
				return nil, err
			}
		}
	}
	ns := req.db + "." + q.coll
	c := &cursor{ns: ns, docs: docs, left: -1, project: proj}
	if limit > 0 {
		c.left = limit
	}
	return s.firstBatch(c, batchSize, single), nil
}

// firstBatch returns the reply of a command that opens the cursor c: its
// first batch of batchSize documents (0 for an empty one), and the cursor
// id, 0 if c is exhausted or single says the client wants one batch only.
func (s *Server) firstBatch(c *cursor, batchSize int64, single bool) bson.D {
	var batch []bson.Raw
	var done bool
	if batchSize == 0 && !single {
		done = len(c.docs) == 0 // an empty first batch, as asked
	} else {
		batch, done = c.nextBatch(batchSize)
	}
	var id int64
	if !done && !single {
		id = s.cursors.open(c)
	}
	return cursorReply("firstBatch", batch, id, c.ns)
}

// checkHint fails, as mongod does, when the hint of cmd names an index the
// collection c does not have, or a hidden one: mongod's planner leaves
// hidden indexes out. A hint changes nothing else here: every query
// scans.
func checkHint(c *collection, cmd bson.Raw) error {
	v, err := cmd.LookupErr("hint")
	if err != nil {
		return nil
	}
	found := false
	switch v.Type {
	case bson.TypeString:
		name := v.StringValue()
		found = name == "_id_" || c != nil && slices.ContainsFunc(c.indexes, func(ix *index) bool { return ix.name == name && !ix.hidden })
	case bson.TypeEmbeddedDocument:
		key := v.Document()
		found = len(key) <= 5 || commandName(key) == "$natural" || bytes.Equal(key, idIndex.key) ||
			c != nil && slices.ContainsFunc(c.indexes, func(ix *index) bool { return bytes.Equal(ix.key, key) && !ix.hidden })
	default:
		return errorf(codeFailedToParse, "hint must be a string or an object")
	}
	if !found && c != nil {
		return errorf(codeBadValue, "hint provided does not correspond to an existing index")
	}
	return nil
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
	if err := checkFields(req, "query", "skip", "limit", "hint", "collation", "fields", "encryptionInformation"); err != nil {
		return nil, err
	}
	if err := checkCollation(req.body); err != nil {
		return nil, err
	}
	q, err := queryArgs(req, "query")
	if err != nil {
		return nil, err
	}
	limit := q.limit
	if limit < 0 {
		limit = -limit
	}
	var n int64
	var docs []bson.Raw
	err = s.storeOf(req).with(req.db, q.coll, false, func(c *collection) error {
		if err := checkHint(c, req.body); err != nil {
			return err
		}
		switch {
		case q.filter.root == (matchAll{}):
			n = int64(c.count())
		case q.filter.scriptedFilter():
			docs = c.candidates(q.filter) // matched below, out of the lock
		default:
			n = int64(len(c.matching(q.filter, 0)))
		}
		return q.filter.err()
	})
	if err == nil && q.filter.scriptedFilter() {
		docs, err = q.filter.keep(docs, 0)
		n = int64(len(docs))
	}
	if err != nil {
		return nil, err
	}
	n = max(n-q.skip, 0)
	if limit > 0 {
		n = min(n, limit)
	}
	return bson.D{{Key: "n", Value: intValue(n)}}, nil
}

// distinct runs {distinct: coll, key, query}: the distinct values of the
// field key in the matching documents, the elements of an array counting
// one by one, in MongoDB's order of values.
func (s *Server) distinct(req *request) (bson.D, error) {
	if err := checkFields(req, "key", "query", "collation", "hint", "mirrored", "sampleId"); err != nil {
		return nil, err
	}
	if err := checkCollation(req.body); err != nil {
		return nil, err
	}
	q, err := queryArgs(req, "query")
	if err != nil {
		return nil, err
	}
	kv, err := req.body.LookupErr("key")
	if err != nil {
		return nil, errorf(40414, "BSON field 'distinct.key' is missing but a required field")
	}
	key, ok := kv.StringValueOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'distinct.key' is the wrong type '%s', expected type 'string'", typeName(kv.Type))
	}
	path, err := splitPath(key)
	if err != nil {
		return nil, err
	}
	var docs []bson.Raw
	err = s.storeOf(req).with(req.db, q.coll, false, func(c *collection) error {
		if err := checkHint(c, req.body); err != nil {
			return err
		}
		if q.filter.scriptedFilter() {
			docs = c.candidates(q.filter) // matched below, out of the lock
			return nil
		}
		docs = docsOf(c.matching(q.filter, 0))
		return q.filter.err()
	})
	if err == nil && q.filter.scriptedFilter() {
		docs, err = q.filter.keep(docs, 0)
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]struct{}{}
	var values []bson.RawValue
	size := 0
	add := func(v bson.RawValue) error {
		k := valueKey(v)
		if _, dup := seen[k]; dup {
			return nil
		}
		if size += len(v.Value) + 8; size > MaxBSONObjectSize {
			return errorf(17217, "distinct too big, 16mb cap")
		}
		seen[k] = struct{}{}
		values = append(values, v)
		return nil
	}
	for _, d := range docs {
		for _, v := range queryValues(nil, d, path) {
			var err error
			switch v.Type {
			case 0:
			case bson.TypeArray:
				for _, e := range arrayValues(v) {
					if err = add(e); err != nil {
						break
					}
				}
			default:
				err = add(v)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	slices.SortStableFunc(values, compareValues)
	return bson.D{{Key: "values", Value: arrayValue(values)}}, nil
}

// query holds the arguments find and count share.
type query struct {
	coll        string
	filter      *filter
	skip, limit int64 // limit as given: 0 for none, negative for find's single batch
}

// queryArgs reads the collection, the filter (in the field filterKey:
// find's "filter", count's "query"), skip and limit of find or count.
func queryArgs(req *request, filterKey string) (query, error) {
	coll, err := collectionArg(req)
	if err != nil {
		return query{}, err
	}
	f, err := queryFilterArg(req, filterKey)
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

// filterArg reads the filter in field key of cmd; absent means match all.
func filterArg(cmd bson.Raw, key string) (*filter, error) {
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
