package mongotest

import (
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxPathParts bounds the components of a dotted field path, so that a
// hostile path cannot make the server nest documents without end.
const maxPathParts = 200

// missingValue stands for a field a path does not reach, among the values
// queryValues returns.
var missingValue = bson.RawValue{}

// splitPath splits a dotted field path into its components.
func splitPath(path string) ([]string, error) {
	parts := strings.Split(path, ".")
	if len(parts) > maxPathParts {
		return nil, errorf(codeBadValue, "the field path '%.100s...' has %d components, more than the %d that mongotest takes", path, len(parts), maxPathParts)
	}
	return parts, nil
}

// queryValues appends to out the values that the path reaches in doc, as
// MongoDB's queries see them: through a document, the field; through an
// array, the element a numeric component names, or else the field of each
// element that is a document. A path that reaches nothing on a branch adds
// missingValue (Type 0). An array at the end of the path is one value: the
// matchers look at its elements too (see expanded).
func queryValues(out []bson.RawValue, doc bson.Raw, path []string) []bson.RawValue {
	v, err := doc.LookupErr(path[0])
	if err != nil {
		return append(out, missingValue)
	}
	if len(path) == 1 {
		return append(out, v)
	}
	return descend(out, v, path[1:])
}

// descend continues queryValues into the value v with the rest of the path.
func descend(out []bson.RawValue, v bson.RawValue, rest []string) []bson.RawValue {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		return queryValues(out, v.Document(), rest)
	case bson.TypeArray:
		elems := arrayValues(v)
		if i, ok := arrayIndex(rest[0]); ok {
			if i >= len(elems) {
				return append(out, missingValue)
			}
			if len(rest) == 1 {
				return append(out, elems[i])
			}
			return descend(out, elems[i], rest[1:])
		}
		for _, e := range elems {
			if e.Type == bson.TypeEmbeddedDocument {
				out = queryValues(out, e.Document(), rest)
			}
		}
		return out
	}
	return append(out, missingValue)
}

// arrayIndex reads a path component as an array index: digits only, as
// MongoDB takes them.
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	i, err := strconv.Atoi(s)
	return i, err == nil
}

// lookupPath returns the value at the dotted path in doc through documents
// only (and array indexes), as index keys, $group and sort keys without
// arrays read it; ok is false when the path reaches nothing.
func lookupPath(doc bson.Raw, path []string) (bson.RawValue, bool) {
	v, err := doc.LookupErr(path[0])
	if err != nil {
		return bson.RawValue{}, false
	}
	for _, p := range path[1:] {
		switch v.Type {
		case bson.TypeEmbeddedDocument:
			if v, err = v.Document().LookupErr(p); err != nil {
				return bson.RawValue{}, false
			}
		case bson.TypeArray:
			i, ok := arrayIndex(p)
			elems := arrayValues(v)
			if !ok || i >= len(elems) {
				return bson.RawValue{}, false
			}
			v = elems[i]
		default:
			return bson.RawValue{}, false
		}
	}
	return v, true
}
