package mongotest

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The bulkWrite command of MongoDB 8.0 (maxWireVersion 25): the writes of
// several collections, of several databases, in one command on the admin
// database, which drivers send for MongoClient.bulkWrite. A server that
// announces an older maxWireVersion does not know it, as mongod 7.0 does
// not.

// bulkWriteNS is the namespace of bulkWrite's results cursor, as mongod
// names it.
const bulkWriteNS = "admin.$cmd.bulkWrite"

// bulkWrite runs {bulkWrite: 1, ops: [...], nsInfo: [{ns}, ...], ordered,
// errorsOnly, cursor: {batchSize}}. Each operation is {insert: i,
// document}, {update: i, filter, updateMods, multi, upsert, sort, ...} or
// {delete: i, filter, multi, ...}, i indexing nsInfo; each runs as the
// statement of an insert, an update or a delete on its namespace would.
// The results (every operation's, or only the failed ones' with errorsOnly)
// come in a cursor, and the reply counts them: nErrors, nInserted,
// nMatched, nModified, nUpserted, nDeleted. Ordered (the default) stops at
// the first failed operation.
func (s *Server) bulkWrite(req *request) (bson.D, error) {
	if req.db != "admin" {
		return nil, errorf(codeUnauthorized, "bulkWrite may only be run against the admin database.")
	}
	if err := checkFields(req, "ops", "nsInfo", "ordered", "errorsOnly", "bypassDocumentValidation", "let", "cursor"); err != nil {
		return nil, err
	}
	ops, err := writeBatchArg(req, "ops")
	if err != nil {
		return nil, err
	}
	nss, err := bulkWriteNamespaces(req)
	if err != nil {
		return nil, err
	}
	ordered, err := boolArg(req.body, "ordered", true)
	if err != nil {
		return nil, err
	}
	errorsOnly, err := boolArg(req.body, "errorsOnly", false)
	if err != nil {
		return nil, err
	}
	cur, err := docArg(req.body, "cursor")
	if err != nil {
		return nil, err
	}
	if err := checkDocFields(cur, "bulkWrite.cursor", false, []string{"batchSize"}); err != nil {
		return nil, err
	}
	batchSize, err := nonNegativeArg(cur, "batchSize", 0)
	if err != nil {
		return nil, err
	}
	if _, err := cur.LookupErr("batchSize"); err != nil {
		batchSize = -1 // every result in the first batch, as the size of a reply allows
	}
	// Every operation is checked before any runs, as mongod parses the
	// whole command first.
	parsed := make([]bulkOp, len(ops))
	for i, op := range ops {
		if parsed[i], err = parseBulkOp(op, len(nss)); err != nil {
			return nil, err
		}
	}

	var counts struct{ errors, inserted, matched, modified, upserted, deleted int32 }
	var results []bson.Raw
	for i, op := range parsed {
		sub := *req // the operation's namespace, with the command's session and transaction
		sub.db, sub.name = nss[op.ns].db, op.kind
		res := bson.D{{Key: "ok", Value: 1.0}, {Key: "idx", Value: int32(i)}}
		var err error
		switch op.kind {
		case "insert":
			n, errs := s.insertDocs(&sub, nss[op.ns].coll, []bson.Raw{op.doc}, true)
			if len(errs) > 0 {
				err = errs[0].err
				break
			}
			counts.inserted += int32(n)
			res = append(res, bson.E{Key: "n", Value: int32(n)})
		case "update":
			var r updateResult
			if r, err = s.updateOne(&sub, nss[op.ns].coll, op.doc); err != nil {
				break
			}
			n := int32(r.matched)
			counts.matched += n
			counts.modified += int32(r.modified)
			if r.upsertedID.Type != 0 {
				n++
				counts.upserted++
			}
			res = append(res, bson.E{Key: "n", Value: n}, bson.E{Key: "nModified", Value: int32(r.modified)})
			if r.upsertedID.Type != 0 {
				res = append(res, bson.E{Key: "upserted", Value: bson.D{{Key: "_id", Value: r.upsertedID}}})
			}
		case "delete":
			var n int
			if n, err = s.deleteOne(&sub, nss[op.ns].coll, op.doc); err != nil {
				break
			}
			counts.deleted += int32(n)
			res = append(res, bson.E{Key: "n", Value: int32(n)})
		}
		if isInterruption(err) {
			return nil, err // fails the command, as in mongod
		}
		if err != nil {
			counts.errors++
			ce := asCmdError(err)
			res = bson.D{
				{Key: "ok", Value: 0.0}, {Key: "idx", Value: int32(i)}, {Key: "n", Value: int32(0)},
				{Key: "code", Value: ce.code}, {Key: "codeName", Value: codeName(ce.code)},
			}
			res = append(res, ce.extra...)
			res = append(res, bson.E{Key: "errmsg", Value: ce.msg})
		}
		if err != nil || !errorsOnly {
			results = append(results, mustMarshal(res))
		}
		if err != nil && ordered {
			break
		}
	}

	return append(s.firstBatch(&cursor{ns: bulkWriteNS, docs: results, left: -1}, batchSize, false),
		bson.E{Key: "nErrors", Value: counts.errors},
		bson.E{Key: "nInserted", Value: counts.inserted},
		bson.E{Key: "nMatched", Value: counts.matched},
		bson.E{Key: "nModified", Value: counts.modified},
		bson.E{Key: "nUpserted", Value: counts.upserted},
		bson.E{Key: "nDeleted", Value: counts.deleted},
	), nil
}

// bulkNamespace is one namespace of bulkWrite's nsInfo.
type bulkNamespace struct{ db, coll string }

// bulkWriteNamespaces returns the namespaces of bulkWrite's nsInfo, checked.
func bulkWriteNamespaces(req *request) ([]bulkNamespace, error) {
	infos, err := docsArg(req, "nsInfo")
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		return nil, errorf(codeBadValue, "BSON field 'bulkWrite.nsInfo' must not be empty")
	}
	nss := make([]bulkNamespace, len(infos))
	for i, info := range infos {
		if err := checkDocFields(info, "bulkWrite.nsInfo", false, []string{"ns", "collectionUUID", "encryptionInformation", "isTimeseriesNamespace"}); err != nil {
			return nil, err
		}
		v, err := info.LookupErr("ns")
		if err != nil {
			return nil, errorf(codeIDLFieldMissing, "BSON field 'bulkWrite.nsInfo.ns' is missing but a required field")
		}
		ns, ok := v.StringValueOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'bulkWrite.nsInfo.ns' is the wrong type '%s', expected type 'string'", typeName(v.Type))
		}
		db, coll, found := strings.Cut(ns, ".")
		if !found || db == "" || coll == "" || strings.ContainsAny(db, "/\\ \"$\x00") || strings.ContainsRune(coll, 0) {
			return nil, errorf(codeInvalidNamespace, "Invalid namespace specified '%s'", ns)
		}
		nss[i] = bulkNamespace{db, coll}
	}
	return nss, nil
}

// bulkOp is one operation of bulkWrite: its kind (insert, update or
// delete), the index of its namespace, and what the statement of that
// command would be: the document to insert, or {q, u, multi, upsert,
// ...} or {q, limit, ...}.
type bulkOp struct {
	kind string
	ns   int
	doc  bson.Raw
}

// bulkOpFields are the fields of bulkWrite's operations, by kind, and the
// statement field each becomes ("" for itself).
var bulkOpFields = map[string]map[string]string{
	"insert": {"document": ""},
	"update": {"filter": "q", "updateMods": "u", "multi": "", "upsert": "", "arrayFilters": "", "collation": "",
		"hint": "", "sort": "", "upsertSupplied": "", "constants": "c"},
	"delete": {"filter": "q", "multi": "", "collation": "", "hint": ""},
}

// parseBulkOp parses one operation of bulkWrite, whose nsInfo has n
// namespaces.
func parseBulkOp(op bson.Raw, n int) (bulkOp, error) {
	elems, err := op.Elements()
	if err != nil || len(elems) == 0 {
		return bulkOp{}, errorf(codeFailedToParse, "Unrecognized bulkWrite operation: the operation is empty")
	}
	kind := elems[0].Key()
	fields, ok := bulkOpFields[kind]
	if !ok {
		return bulkOp{}, errorf(codeFailedToParse, "Unrecognized bulkWrite operation: '%s' (want insert, update or delete)", kind)
	}
	idx, ok := elems[0].Value().AsInt64OK()
	if !ok {
		return bulkOp{}, errorf(codeTypeMismatch, "BSON field 'bulkWrite.ops.%s' is the wrong type '%s', expected type 'int'", kind, typeName(elems[0].Value().Type))
	}
	if idx < 0 || idx >= int64(n) {
		return bulkOp{}, errorf(codeBadValue, "BulkWrite ops entry %s has an invalid nsInfo index %d (nsInfo has %d entries)", kind, idx, n)
	}
	var stmt bson.D
	for _, e := range elems[1:] {
		to, known := fields[e.Key()]
		if !known {
			return bulkOp{}, errorf(codeIDLUnknownField, "BSON field 'bulkWrite.ops.%s.%s' is an unknown field.", kind, e.Key())
		}
		if to == "" {
			to = e.Key()
		}
		stmt = append(stmt, bson.E{Key: to, Value: e.Value()})
	}
	bo := bulkOp{kind: kind, ns: int(idx)}
	switch kind {
	case "insert":
		v, err := op.LookupErr("document")
		if err != nil {
			return bulkOp{}, errorf(codeIDLFieldMissing, "BSON field 'bulkWrite.ops.document' is missing but a required field")
		}
		doc, ok := v.DocumentOK()
		if !ok {
			return bulkOp{}, errorf(codeTypeMismatch, "BSON field 'bulkWrite.ops.document' is the wrong type '%s', expected type 'object'", typeName(v.Type))
		}
		bo.doc = doc
		return bo, nil
	case "delete":
		// delete's limit: 0 for every match, 1 for the first.
		multi, err := boolArg(op, "multi", false)
		if err != nil {
			return bulkOp{}, err
		}
		limit := int32(1)
		if multi {
			limit = 0
		}
		stmt = append(slices.DeleteFunc(stmt, func(e bson.E) bool { return e.Key == "multi" }), bson.E{Key: "limit", Value: limit})
	}
	for _, f := range []string{"filter", "updateMods"} {
		if f == "updateMods" && kind != "update" {
			continue
		}
		v, err := op.LookupErr(f)
		if err != nil {
			return bulkOp{}, errorf(codeIDLFieldMissing, "BSON field 'bulkWrite.ops.%s' is missing but a required field", f)
		}
		if v.Type != bson.TypeEmbeddedDocument && (f == "filter" || v.Type != bson.TypeArray) {
			return bulkOp{}, errorf(codeTypeMismatch, "BSON field 'bulkWrite.ops.%s' is the wrong type '%s', expected type 'object'", f, typeName(v.Type))
		}
	}
	bo.doc = mustMarshal(stmt)
	return bo, nil
}
