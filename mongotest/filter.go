package mongotest

import (
	"math"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// filter is a query filter the server understands: a conjunction of
// equalities on fields, {a: 1, "b.c": "x", d: {$eq: 2}}. A field that holds
// an array matches when one of its elements is equal, and a missing field
// equals null, as in MongoDB. The empty filter matches everything.
type filter []condition

// condition is one equality of a filter.
type condition struct {
	path []string // the dotted field name, split
	want bson.RawValue
}

// parseFilter reads a filter document. Operators other than $eq are refused
// with BadValue rather than ignored, so that a test does not get wrong
// results silently.
func parseFilter(doc bson.Raw) (filter, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid filter: %v", err)
	}
	f := make(filter, 0, len(elems))
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		if strings.HasPrefix(key, "$") {
			return nil, errorf(codeBadValue, "mongotest supports only equality filters: unsupported top-level operator %s", key)
		}
		if sub, ok := v.DocumentOK(); ok {
			if op := commandName(sub); strings.HasPrefix(op, "$") {
				subElems, _ := sub.Elements()
				if op != "$eq" || len(subElems) != 1 {
					return nil, errorf(codeBadValue, "mongotest supports only equality filters: unsupported operator %s on %s", op, key)
				}
				v = subElems[0].Value()
			}
		}
		f = append(f, condition{path: strings.Split(key, "."), want: v})
	}
	return f, nil
}

// match reports whether doc satisfies every condition of f.
func (f filter) match(doc bson.Raw) bool {
	for _, c := range f {
		v, err := doc.LookupErr(c.path...)
		if err != nil {
			if c.want.Type != bson.TypeNull {
				return false
			}
			continue
		}
		if !matches(v, c.want) {
			return false
		}
	}
	return true
}

// matches reports whether the field value v satisfies an equality with
// want: v equals want, or v is an array with an element equal to want.
func matches(v, want bson.RawValue) bool {
	if valueKey(v) == valueKey(want) {
		return true
	}
	arr, ok := v.ArrayOK()
	if !ok {
		return false
	}
	vals, err := arr.Values()
	if err != nil {
		return false
	}
	for _, e := range vals {
		if valueKey(e) == valueKey(want) {
			return true
		}
	}
	return false
}

// valueKey returns a string that is the same for two BSON values exactly
// when MongoDB considers them equal, within what this package supports:
// numbers compare by value whatever their type (1, 1.0 and int64 1 are
// equal), anything else by type and bytes. It keys the _id index too.
func valueKey(v bson.RawValue) string {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		i, _ := v.AsInt64OK()
		return "n" + strconv.FormatInt(i, 10)
	case bson.TypeDouble:
		f, _ := v.DoubleOK()
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return "n" + strconv.FormatInt(int64(f), 10)
		}
		return "n" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return string(rune(v.Type)) + string(v.Value)
}
