package mongotest

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// sortSpec is a parsed sort document, {a: 1, "b.c": -1}.
type sortSpec []sortKey

// sortKey is one field of a sort.
type sortKey struct {
	path []string
	desc bool
}

// parseSort parses a sort document as find, findAndModify and $sort take
// it: each value is 1 or -1. {$meta: ...} is refused as not implemented.
func parseSort(doc bson.Raw) (sortSpec, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid sort: %v", err)
	}
	spec := make(sortSpec, 0, len(elems))
	for _, e := range elems {
		v := e.Value()
		if d, ok := v.DocumentOK(); ok && commandName(d) == "$meta" {
			return nil, errorf(codeBadValue, "mongotest does not implement sorting by $meta")
		}
		var desc bool
		switch f := floatOf(v); {
		case isNumber(v) && f == 1:
		case isNumber(v) && f == -1:
			desc = true
		default:
			return nil, errorf(codeSortKeyOrdering, "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
		}
		if e.Key() == "" || strings.HasPrefix(e.Key(), "$") {
			return nil, errorf(codeBadValue, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
		path, err := splitPath(e.Key())
		if err != nil {
			return nil, err
		}
		spec = append(spec, sortKey{path: path, desc: desc})
	}
	return spec, nil
}

// emptyArraySortKey stands for an empty array in a sort key: MongoDB sorts
// it before null (and a missing field).
var emptyArraySortKey = bson.RawValue{Type: bson.TypeUndefined}

// keyOf returns the value doc sorts by for k: the field's value, null if
// it is missing, and for an array the smallest of its elements (ascending)
// or the largest (descending), as MongoDB sorts arrays.
func (k sortKey) keyOf(doc bson.Raw) bson.RawValue {
	var buf [4]bson.RawValue
	vals := queryValues(buf[:0], doc, k.path)
	var best bson.RawValue
	found := false
	consider := func(v bson.RawValue) {
		if v.Type == 0 {
			v = nullValue
		}
		if !found {
			best, found = v, true
			return
		}
		c := compareValues(v, best)
		if (k.desc && c > 0) || (!k.desc && c < 0) {
			best = v
		}
	}
	for _, v := range vals {
		if v.Type != bson.TypeArray {
			consider(v)
			continue
		}
		elems := arrayValues(v)
		if len(elems) == 0 {
			consider(emptyArraySortKey)
		}
		for _, e := range elems {
			consider(e)
		}
	}
	if !found {
		return nullValue
	}
	return best
}

// sortDocs sorts docs by spec, stably: documents that tie keep their
// order.
func sortDocs(docs []bson.Raw, spec sortSpec) {
	sortBy(docs, func(d bson.Raw) bson.Raw { return d }, spec)
}

// sortBy sorts items, the documents of which doc returns, by spec, stably.
// The keys are computed once per item.
func sortBy[T any](items []T, doc func(T) bson.Raw, spec sortSpec) {
	if len(spec) == 0 || len(items) < 2 {
		return
	}
	type keyed struct {
		item T
		keys []bson.RawValue
	}
	all := make([]keyed, len(items))
	for i, it := range items {
		keys := make([]bson.RawValue, len(spec))
		for j, k := range spec {
			keys[j] = k.keyOf(doc(it))
		}
		all[i] = keyed{it, keys}
	}
	slices.SortStableFunc(all, func(a, b keyed) int {
		for j, k := range spec {
			c := compareValues(a.keys[j], b.keys[j])
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	for i := range all {
		items[i] = all[i].item
	}
}
