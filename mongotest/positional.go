package mongotest

import (
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The positional operators of update paths: $, the element of the array
// that the query matched ({$set: {"items.$.qty": 0}} with the query
// {"items.sku": "x"}); $[], every element; and $[<identifier>], the
// elements that pass the arrayFilters of update, findAndModify and
// bulkWrite ({$set: {"items.$[it].qty": 0}} with arrayFilters [{"it.qty":
// {$lt: 0}}]). A path with them is made concrete for each document, an
// element index for each element the operator takes, and the update
// operator is applied at each of those paths.

// positionalID reports whether p, a component of an update path, is $,
// $[] or $[<identifier>], and returns the identifier ("" for $[], "$" for
// $).
func positionalID(p string) (id string, ok bool) {
	if p == "$" {
		return "$", true
	}
	if !strings.HasPrefix(p, "$[") || !strings.HasSuffix(p, "]") {
		return "", false
	}
	return p[2 : len(p)-1], true
}

// isPositionalPath reports whether path has $, $[] or $[<identifier>].
func isPositionalPath(path []string) bool {
	return slices.ContainsFunc(path, func(p string) bool { _, ok := positionalID(p); return ok })
}

// matchedIndex returns the index of the first element of the array at
// prefix in doc that the query f matched: the first that, alone in the
// array, satisfies every condition of f on a path within prefix (the
// conditions $elemMatch and dotted paths put on the elements). It reports
// false when there is none, or when f puts no condition there.
func matchedIndex(f *filter, doc bson.Raw, prefix []string) (int, bool) {
	var conds []fieldNode
	var gather func(n node)
	gather = func(n node) {
		switch n := n.(type) {
		case andNode:
			for _, c := range n {
				gather(c)
			}
		case fieldNode:
			if len(n.path) >= len(prefix) && slices.Equal(n.path[:len(prefix)], prefix) {
				conds = append(conds, n)
			}
		}
	}
	if f != nil {
		gather(f.root)
	}
	if len(conds) == 0 {
		return 0, false
	}
	arr, err := doc.LookupErr(prefix...)
	if err != nil || arr.Type != bson.TypeArray {
		return 0, false
	}
	for j, e := range arrayValues(arr) {
		// A document with the element alone in the array, at prefix.
		var v any = bson.A{e}
		for k := len(prefix) - 1; k >= 0; k-- {
			v = bson.D{{Key: prefix[k], Value: v}}
		}
		one, err := bson.Marshal(v)
		if err != nil {
			return 0, false
		}
		if !slices.ContainsFunc(conds, func(c fieldNode) bool { return !c.match(one) }) {
			return j, true
		}
	}
	return 0, false
}

// validIdentifier reports whether id may name an array filter: an
// alphanumeric string that begins with a lowercase letter, as in MongoDB.
func validIdentifier(id string) bool {
	if id == "" || id[0] < 'a' || id[0] > 'z' {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// arrayFilter is one of the arrayFilters: its identifier, and the filter
// an element must match, as the value of a document's field named by the
// identifier.
type arrayFilter struct {
	id     string
	filter *filter
}

// matches reports whether the array element e passes the filter.
func (af *arrayFilter) matches(e bson.RawValue) bool {
	doc, err := bson.Marshal(bson.D{{Key: af.id, Value: e}})
	return err == nil && af.filter.match(doc)
}

// setArrayFilters parses the arrayFilters v (absent: Type 0) of an update
// statement or findAndModify whose update is u, and checks them against
// the identifiers of u's paths: each identifier needs its filter, and each
// filter must be used, as MongoDB checks.
func (u *update) setArrayFilters(v bson.RawValue, updateDoc bson.RawValue) error {
	var docs []bson.RawValue
	if v.Type != 0 {
		if v.Type != bson.TypeArray {
			return errorf(codeTypeMismatch, "BSON field 'arrayFilters' is the wrong type '%s', expected type 'array'", typeName(v.Type))
		}
		docs = arrayValues(v)
	}
	u.filters = map[string]*arrayFilter{}
	for _, d := range docs {
		doc, ok := d.DocumentOK()
		if !ok {
			return errorf(codeTypeMismatch, "BSON field 'arrayFilters' holds a %s; each array filter is a document", typeName(d.Type))
		}
		elems, err := doc.Elements()
		if err != nil || len(elems) == 0 {
			return errorf(codeFailedToParse, "Cannot use an expression without a top-level field name in arrayFilters")
		}
		id := ""
		for _, e := range elems {
			top, _, _ := strings.Cut(e.Key(), ".")
			switch {
			case id == "":
				id = top
			case top != id:
				return errorf(codeFailedToParse, "Error parsing array filter :: caused by :: Expected a single top-level field name, found '%s' and '%s'", id, top)
			}
		}
		if !validIdentifier(id) {
			return errorf(codeBadValue, "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '%s'", id)
		}
		if u.filters[id] != nil {
			return errorf(codeFailedToParse, "Found multiple array filters with the same top-level field name %s", id)
		}
		f, err := parseFilter(doc)
		if err != nil {
			return err
		}
		u.filters[id] = &arrayFilter{id: id, filter: f}
	}
	used := map[string]bool{}
	for _, o := range u.ops {
		for _, p := range o.path {
			id, ok := positionalID(p)
			if !ok || id == "" || id == "$" {
				continue
			}
			if u.filters[id] == nil {
				return errorf(codeBadValue, "No array filter found for identifier '%s' in path '%s'", id, strings.Join(o.path, "."))
			}
			used[id] = true
		}
	}
	for _, d := range docs {
		doc, _ := d.DocumentOK()
		elems, _ := doc.Elements()
		id, _, _ := strings.Cut(elems[0].Key(), ".")
		if !used[id] {
			return errorf(codeFailedToParse, "The array filter for identifier '%s' was not used in the update %s", id, formatValue(updateDoc))
		}
	}
	return nil
}

// concretePaths returns the paths of root that path, which may have $[]
// and $[<identifier>], names: each of those components becomes the index
// of each element of the array there that the operator takes (every one
// for $[], those that pass the identifier's filter otherwise).
func (u *update) concretePaths(root *mval, doc bson.Raw, path []string) ([][]string, error) {
	i := slices.IndexFunc(path, func(p string) bool { _, ok := positionalID(p); return ok })
	if i < 0 {
		return [][]string{path}, nil
	}
	id, _ := positionalID(path[i])
	if id == "$" {
		j, ok := matchedIndex(u.query, doc, path[:i])
		if !ok {
			return nil, errorf(codeBadValue, "The positional operator did not find the match needed from the query.")
		}
		return u.concretePaths(root, doc, slices.Concat(path[:i], []string{strconv.Itoa(j)}, path[i+1:]))
	}
	prefix := strings.Join(path[:i], ".")
	arr := lookup(root, path[:i])
	switch {
	case arr == nil:
		return nil, errorf(codeBadValue, "The path '%s' must exist in the document in order to apply array updates.", prefix)
	case !arr.asArray():
		return nil, errorf(codeBadValue, "Cannot apply array updates to non-array element %s: %s", path[i-1], formatValue(arr.value()))
	}
	var out [][]string
	for j, e := range arr.arr {
		if id != "" {
			af := u.filters[id]
			if !af.matches(e.value()) {
				if err := af.filter.err(); err != nil {
					return nil, err
				}
				continue
			}
		}
		concrete := slices.Concat(path[:i], []string{strconv.Itoa(j)}, path[i+1:])
		more, err := u.concretePaths(root, doc, concrete)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// applyPositional applies u's operations to root, a document being
// updated, making their positional paths concrete first: all of them
// before any change, since a change may move what a later path finds. Two
// concrete paths where one is, or is within, the other conflict, as in
// MongoDB.
func (u *update) applyPositional(root *mval, doc bson.Raw, insert bool, id bson.RawValue) error {
	type concreteOp struct {
		op    *updateOp
		paths [][]string
	}
	ops := make([]concreteOp, len(u.ops))
	var all [][]string
	for i := range u.ops {
		o := &u.ops[i]
		paths := [][]string{o.path}
		if isPositionalPath(o.path) {
			var err error
			if paths, err = u.concretePaths(root, doc, o.path); err != nil {
				return err
			}
		}
		ops[i] = concreteOp{o, paths}
		all = append(all, paths...)
		if o.to != nil {
			all = append(all, o.to)
		}
	}
	slices.SortFunc(all, slices.Compare)
	for i := 1; i < len(all); i++ {
		if a, b := all[i-1], all[i]; len(b) >= len(a) && slices.Equal(b[:len(a)], a) {
			return errorf(codeConflictingUpdateOperators, "Update created a conflict at '%s'", strings.Join(a, "."))
		}
	}
	for _, c := range ops {
		for _, p := range c.paths {
			o := *c.op
			o.path = p
			if err := o.apply(root, insert, id); err != nil {
				return err
			}
		}
	}
	return nil
}
