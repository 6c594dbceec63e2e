package mongotest

import (
	"bytes"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Indexes: createIndexes, listIndexes and dropIndexes keep the index
// specifications of each collection, as mongod lists them. Queries do not
// use them (they scan the collection, which gives the same results); unique
// indexes are enforced on every insert and update, with mongod's E11000
// duplicate key error.

// index is one index of a collection besides _id_.
type index struct {
	name    string
	key     bson.Raw // the key pattern, as given
	fields  [][]string
	unique  bool
	sparse  bool
	partial *filter
	// partialSpec is the partialFilterExpression as given, which is part
	// of the index's signature.
	partialSpec bson.Raw
	// hidden indexes are kept up to date (a hidden unique index still
	// refuses duplicates) but cannot be hinted, as in mongod.
	hidden bool
	spec   bson.Raw // the specification listIndexes returns
	// owners maps each key of a unique index to its document.
	owners map[string]*record
}

// indexKey is one key a document has in an index.
type indexKey struct {
	str  string          // the key, as valueKey makes it, for the map
	vals []bson.RawValue // the values, for the duplicate key error
}

// indexOptions are the fields an index specification may hold: those this
// package uses, and those it keeps without use (they change nothing that a
// collection scan returns).
var indexOptions = map[string]bool{
	"key": true, "name": true, "unique": true, "sparse": true, "partialFilterExpression": true,
	"v": true, "background": true, "hidden": true, "ns": true, "storageEngine": true,
	"weights": true, "default_language": true, "language_override": true, "textIndexVersion": true,
	"2dsphereIndexVersion": true, "bits": true, "min": true, "max": true, "collation": true,
	"expireAfterSeconds": true, "wildcardProjection": true, "prepareUnique": true,
}

// indexPlugins are the string values a key pattern may hold.
var indexPlugins = map[string]bool{"2d": true, "2dsphere": true, "text": true, "hashed": true}

// parseIndexSpec reads one specification of createIndexes.
func parseIndexSpec(spec bson.Raw) (*index, error) {
	elems, err := spec.Elements()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid index specification: %v", err)
	}
	ix := &index{}
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if !indexOptions[k] {
			return nil, errorf(codeInvalidIndexSpecificationOption, "The field '%s' is not valid for an index specification. Specification: %s", k, formatDoc(spec))
		}
		switch k {
		case "key":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, errorf(codeTypeMismatch, "The field 'key' must be an object, but got %s", typeName(v.Type))
			}
			ix.key = d
		case "name":
			s, ok := v.StringValueOK()
			if !ok {
				return nil, errorf(codeTypeMismatch, "The field 'name' must be a string, but got %s", typeName(v.Type))
			}
			ix.name = s
		case "unique":
			ix.unique = truthy(v)
		case "sparse":
			ix.sparse = truthy(v)
		case "partialFilterExpression":
			d, ok := v.DocumentOK()
			if !ok {
				return nil, errorf(codeTypeMismatch, "The field 'partialFilterExpression' must be an object, but got %s", typeName(v.Type))
			}
			if ix.partial, err = parseFilter(d); err != nil {
				return nil, err
			}
			ix.partialSpec = d
		case "hidden":
			ix.hidden = truthy(v)
		case "expireAfterSeconds":
			return nil, errorf(codeBadValue, "mongotest does not implement TTL indexes (expireAfterSeconds): it never removes documents by age")
		case "collation":
			if d, ok := v.DocumentOK(); !ok || d.Lookup("locale").Type != bson.TypeString || d.Lookup("locale").StringValue() != "simple" {
				return nil, errorf(codeBadValue, "mongotest does not implement collations other than the simple one")
			}
		case "wildcardProjection":
			return nil, errorf(codeBadValue, "mongotest does not implement wildcard indexes")
		}
	}
	if ix.key == nil {
		return nil, errorf(codeFailedToParse, "The 'key' field is a required property of an index specification")
	}
	if ix.name == "" {
		return nil, errorf(codeFailedToParse, "The 'name' field is a required property of an index specification")
	}
	keys, _ := ix.key.Elements()
	if len(keys) == 0 {
		return nil, errorf(codeCannotCreateIndex, "Index keys cannot be empty.")
	}
	for _, e := range keys {
		v := e.Value()
		switch {
		case strings.Contains(e.Key(), "$**"):
			return nil, errorf(codeBadValue, "mongotest does not implement wildcard indexes")
		case isNumber(v):
			if floatOf(v) == 0 {
				return nil, errorf(codeCannotCreateIndex, "Values in the index key pattern can't be 0")
			}
		case v.Type == bson.TypeString && indexPlugins[v.StringValue()]:
			if ix.unique {
				return nil, errorf(codeBadValue, "mongotest does not implement unique %s indexes", v.StringValue())
			}
		case v.Type == bson.TypeString:
			return nil, errorf(codeCannotCreateIndex, "Unknown index plugin '%s'", v.StringValue())
		default:
			return nil, errorf(codeCannotCreateIndex, "Values in v:2 index key pattern cannot be of type %s. Only numbers > 0, numbers < 0, and strings are allowed.", typeName(v.Type))
		}
		path, err := splitPath(e.Key())
		if err != nil {
			return nil, err
		}
		ix.fields = append(ix.fields, path)
	}
	// The specification as listIndexes shows it: v, key, name, then the
	// options given.
	var b docBuilder
	b.append("v", int32Value(2))
	b.append("key", docValue(ix.key))
	b.append("name", stringValue(ix.name))
	for _, e := range elems {
		if k := e.Key(); k != "key" && k != "name" && k != "v" && k != "ns" && k != "background" {
			b.append(k, e.Value())
		}
	}
	ix.spec = b.doc()
	if ix.unique {
		ix.owners = map[string]*record{}
	}
	return ix, nil
}

// indexComparison is how a requested index compares with an existing one,
// as mongod's IndexDescriptor::compareIndexOptions tells them apart.
type indexComparison int

const (
	// indexDifferent: another signature, so another index (under another
	// name).
	indexDifferent indexComparison = iota
	// indexEquivalent: the same signature but other options; the two
	// cannot coexist.
	indexEquivalent
	// indexIdentical: the same index.
	indexIdentical
)

// unsignedOptions are the fields of an index specification that the
// comparison of the other options leaves out: those of the signature,
// compared apart, and those that change nothing about the index (mongod's
// kIndexOptionsNotConsideredForEqualityCheck).
var unsignedOptions = map[string]bool{
	"key": true, "ns": true, "name": true, "v": true, "textIndexVersion": true,
	"2dsphereIndexVersion": true, "background": true, "dropDups": true, "hidden": true,
	"collation": true, "partialFilterExpression": true, "unique": true, "sparse": true,
	"wildcardProjection": true,
}

// compare compares the requested index ix with the existing one. The
// signature of an index is its key pattern, unique, sparse, its partial
// filter and its collation (always the simple one here); MongoDB 4.9 made
// unique and sparse part of it (SERVER-47657), so that indexes on one key
// pattern may differ by them. A partial filter is compared as given, where
// mongod compares the normalized expressions: two filters written
// differently for the same documents count as different here.
func (ix *index) compare(existing *index) indexComparison {
	if compareDocs(ix.key, existing.key, true) != 0 || ix.unique != existing.unique || ix.sparse != existing.sparse ||
		(ix.partialSpec == nil) != (existing.partialSpec == nil) ||
		ix.partialSpec != nil && compareDocs(ix.partialSpec, existing.partialSpec, true) != 0 {
		return indexDifferent
	}
	mine, theirs := otherOptions(ix.spec), otherOptions(existing.spec)
	if len(mine) != len(theirs) {
		return indexEquivalent
	}
	for k, v := range mine {
		w, ok := theirs[k]
		// mongod compares the options as BSON elements: by canonical
		// type, then value (1 and 1.0 are equal, 1 and true are not).
		if !ok || compareValues(v, w) != 0 {
			return indexEquivalent
		}
	}
	return indexIdentical
}

// otherOptions returns the fields of the specification spec that are no
// part of the signature, by name.
func otherOptions(spec bson.Raw) map[string]bson.RawValue {
	elems, _ := spec.Elements()
	m := make(map[string]bson.RawValue, len(elems))
	for _, e := range elems {
		if !unsignedOptions[e.Key()] {
			m[e.Key()] = e.Value()
		}
	}
	return m
}

// keysOf returns the keys doc has in the index ix: one per value of an
// array (a multikey index), null for a missing field; none when a partial
// index's filter excludes doc, or a sparse index's fields are all missing.
func (ix *index) keysOf(doc bson.Raw) ([]indexKey, error) {
	if ix.partial != nil && !ix.partial.match(doc) {
		return nil, ix.partial.err()
	}
	perField := make([][]bson.RawValue, len(ix.fields))
	multi, allMissing := -1, true
	for i, path := range ix.fields {
		vals := indexValues(doc, path)
		if len(vals) != 1 || vals[0].Type != bson.TypeNull || exists(queryValues(nil, doc, path)) {
			allMissing = false
		}
		if len(vals) > 1 {
			if multi >= 0 {
				return nil, errorf(codeCannotIndexParallelArrays, "cannot index parallel arrays [%s] [%s]",
					ix.fields[multi][0], path[0])
			}
			multi = i
		}
		perField[i] = vals
	}
	if ix.sparse && allMissing {
		return nil, nil
	}
	n := 1
	if multi >= 0 {
		n = len(perField[multi])
	}
	keys := make([]indexKey, 0, n)
	for j := range n {
		k := indexKey{vals: make([]bson.RawValue, len(ix.fields))}
		var b []byte
		for i := range ix.fields {
			v := perField[i][0]
			if i == multi {
				v = perField[i][j]
			}
			k.vals[i] = v
			b = appendKey(b, v)
		}
		k.str = string(b)
		keys = append(keys, k)
	}
	return keys, nil
}

// indexValues returns the distinct values doc has at path for an index:
// the elements of an array (undefined for an empty one), null when the
// field is missing.
func indexValues(doc bson.Raw, path []string) []bson.RawValue {
	var out []bson.RawValue
	seen := map[string]struct{}{}
	add := func(v bson.RawValue) {
		k := valueKey(v)
		if _, dup := seen[k]; !dup {
			seen[k] = struct{}{}
			out = append(out, v)
		}
	}
	for _, v := range queryValues(nil, doc, path) {
		switch v.Type {
		case 0:
			add(nullValue)
		case bson.TypeArray:
			elems := arrayValues(v)
			if len(elems) == 0 {
				add(bson.RawValue{Type: bson.TypeUndefined})
			}
			for _, e := range elems {
				add(e)
			}
		default:
			add(v)
		}
	}
	if len(out) == 0 {
		out = append(out, nullValue)
	}
	return out
}

// duplicateKey is mongod's E11000 error for the key k of ix in db.coll,
// with the keyPattern and keyValue fields of its reply.
func duplicateKey(ns string, ix *index, k indexKey) *cmdError {
	var kv docBuilder
	var parts []string
	keys, _ := ix.key.Elements()
	for i, e := range keys {
		kv.append(e.Key(), k.vals[i])
		parts = append(parts, e.Key()+": "+formatValue(k.vals[i]))
	}
	return &cmdError{
		code: codeDuplicateKey,
		msg:  "E11000 duplicate key error collection: " + ns + " index: " + ix.name + " dup key: { " + strings.Join(parts, ", ") + " }",
		extra: bson.D{
			{Key: "keyPattern", Value: ix.key},
			{Key: "keyValue", Value: kv.doc()},
		},
	}
}

// idIndex is the _id_ index every collection has, for duplicateKey and
// listIndexes.
var idIndex = &index{
	name: "_id_",
	key:  mustMarshal(bson.D{{Key: "_id", Value: int32(1)}}),
	spec: mustMarshal(bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "name", Value: "_id_"}}),
}

// createIndexes runs {createIndexes: coll, indexes: [...]}: it creates the
// indexes that do not exist yet, all or none, and fails with E11000 when
// the documents break a new unique index.
func (s *Server) createIndexes(req *request) (bson.D, error) {
	if err := checkFields(req, "indexes", "commitQuorum", "ignoreUnknownIndexOptions", "isTimeseriesNamespace"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	v := req.body.Lookup("indexes")
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'createIndexes.indexes' is the wrong type '%s', expected type 'array'", typeName(v.Type))
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return nil, errorf(codeBadValue, "Must specify at least one index to create")
	}
	var specs []*index
	for i, e := range vals {
		d, ok := e.DocumentOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field 'createIndexes.indexes.%d' is the wrong type '%s', expected type 'object'", i, typeName(e.Type))
		}
		ix, err := parseIndexSpec(d)
		if err != nil {
			return nil, err
		}
		specs = append(specs, ix)
	}
	var before, after int
	var created bool
	err = s.untilUnlocked(req, func() (err error) {
		before, after, created, err = s.store.createIndexes(req.db, coll, specs)
		return err
	})
	if err != nil {
		return nil, err
	}
	d := bson.D{
		{Key: "numIndexesBefore", Value: int32(before)},
		{Key: "numIndexesAfter", Value: int32(after)},
	}
	if before == after {
		return append(d, bson.E{Key: "note", Value: "all indexes already exist"}), nil
	}
	return append(d, bson.E{Key: "createdCollectionAutomatically", Value: created}), nil
}

// listIndexes runs {listIndexes: coll}.
func (s *Server) listIndexes(req *request) (bson.D, error) {
	if err := checkFields(req, "cursor", "includeBuildUUIDs", "includeIndexBuildInfo"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	specs, ok := s.store.indexSpecs(req.db, coll)
	if !ok {
		return nil, errorf(codeNamespaceNotFound, "ns does not exist: %s.%s", req.db, coll)
	}
	return cursorReply("firstBatch", specs, 0, req.db+"."+coll), nil
}

// dropIndexes runs {dropIndexes: coll, index: name | "*" | key pattern |
// [names]}.
func (s *Server) dropIndexes(req *request) (bson.D, error) {
	if err := checkFields(req, "index"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	v, err := req.body.LookupErr("index")
	if err != nil {
		return nil, errorf(codeFailedToParse, "BSON field 'dropIndexes.index' is missing but a required field")
	}
	var choose func(ixs []*index) ([]*index, error)
	switch v.Type {
	case bson.TypeString:
		name := v.StringValue()
		if name == "_id_" {
			return nil, errorf(codeInvalidOptions, "cannot drop _id index")
		}
		choose = func(ixs []*index) ([]*index, error) {
			if name == "*" {
				return ixs, nil
			}
			return pickIndexes(ixs, []string{name})
		}
	case bson.TypeEmbeddedDocument:
		key := v.Document()
		if bytes.Equal(key, idIndex.key) {
			return nil, errorf(codeInvalidOptions, "cannot drop _id index")
		}
		choose = func(ixs []*index) ([]*index, error) {
			for _, ix := range ixs {
				if bytes.Equal(ix.key, key) {
					return []*index{ix}, nil
				}
			}
			return nil, errorf(codeIndexNotFound, "can't find index with key: %s", formatDoc(key))
		}
	case bson.TypeArray:
		var names []string
		for _, e := range arrayValues(v) {
			n, ok := e.StringValueOK()
			if !ok {
				return nil, errorf(codeTypeMismatch, "dropIndexes 'index' array must contain strings")
			}
			if n == "_id_" {
				return nil, errorf(codeInvalidOptions, "cannot drop _id index")
			}
			names = append(names, n)
		}
		choose = func(ixs []*index) ([]*index, error) { return pickIndexes(ixs, names) }
	default:
		return nil, errorf(codeTypeMismatch, "BSON field 'dropIndexes.index' is the wrong type '%s', expected types '[string, object, array]'", typeName(v.Type))
	}
	var was int
	err = s.untilUnlocked(req, func() (err error) {
		was, err = s.store.dropIndexes(req.db, coll, choose)
		return err
	})
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "nIndexesWas", Value: int32(was)}}, nil
}

// pickIndexes returns the indexes of ixs named names, or IndexNotFound for
// the first name that none has.
func pickIndexes(ixs []*index, names []string) ([]*index, error) {
	var out []*index
	for _, n := range names {
		i := slices.IndexFunc(ixs, func(ix *index) bool { return ix.name == n })
		if i < 0 {
			return nil, errorf(codeIndexNotFound, "index not found with name [%s]", n)
		}
		out = append(out, ixs[i])
	}
	return out, nil
}
