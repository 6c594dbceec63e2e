package mongotest

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements MongoDB's update documents, as update and
// findAndModify take them: a replacement document, or update operators:
// $set $unset $inc $mul $min $max $rename $setOnInsert $currentDate, and
// for arrays $push (with $each, $position, $slice, $sort) $addToSet (with
// $each) $pop $pull $pullAll, at paths that may have the positional
// operators $, $[] and $[<identifier>] (positional.go). Pipeline-style
// updates and $bit are refused as not implemented.

// update is a parsed update document.
type update struct {
	replacement bson.Raw   // a replacement document, or nil
	ops         []updateOp // the operators, in the order MongoDB applies them
	// positional is set when a path of ops has $, $[] or
	// $[<identifier>]; filters are the arrayFilters, by identifier
	// (setArrayFilters); query is the filter of the statement, whose
	// match $ stands for.
	positional bool
	filters    map[string]*arrayFilter
	query      *filter
}

// updateOp is one field of one operator, {$inc: {n: 1}}.
type updateOp struct {
	op   string
	path []string
	arg  bson.RawValue
	to   []string // $rename's target

	// $push and $addToSet
	each     []bson.RawValue
	position *int64
	slice    *int64
	sort     *pushSort
	// $pull, and the filter of its condition, whose failure (see
	// filter.err) fails the update
	pull       func(bson.RawValue) bool
	pullFilter *filter
}

// pushSort is $push's $sort: by the whole element (byValue) or by fields.
type pushSort struct {
	byValue bool
	desc    bool
	spec    sortSpec
}

// parseUpdate parses the update u of an update statement (u) or of
// findAndModify (update).
func parseUpdate(u bson.RawValue, field string) (*update, error) {
	if u.Type == bson.TypeArray {
		return nil, errorf(codeBadValue, "mongotest does not implement pipeline-style updates")
	}
	doc, ok := u.DocumentOK()
	if !ok {
		return nil, errorf(codeFailedToParse, "Update argument must be either an object or an array")
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid update: %v", err)
	}
	if len(elems) == 0 || !strings.HasPrefix(elems[0].Key(), "$") {
		for _, e := range elems {
			if strings.HasPrefix(e.Key(), "$") {
				return nil, errorf(codeDollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith.", e.Key(), e.Key())
			}
		}
		return &update{replacement: doc}, nil
	}
	u2 := &update{}
	type placed struct {
		path  []string
		order int
	}
	var paths []placed
	for _, e := range elems {
		op := e.Key()
		if !updateOperators[op] {
			if op == "$bit" {
				return nil, errorf(codeBadValue, "mongotest does not implement the update operator $bit")
			}
			return nil, errorf(codeFailedToParse, "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified as an array", op)
		}
		args, ok := e.Value().DocumentOK()
		if !ok {
			return nil, errorf(codeFailedToParse, "Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: ...}} not {%s: %s}",
				typeName(e.Value().Type), op, formatValue(e.Value()))
		}
		fields, _ := args.Elements()
		for _, f := range fields {
			path, err := updatePath(f.Key())
			if err != nil {
				return nil, err
			}
			o, err := parseUpdateOp(op, path, f.Key(), f.Value())
			if err != nil {
				return nil, err
			}
			u2.ops = append(u2.ops, o)
			u2.positional = u2.positional || isPositionalPath(path)
			paths = append(paths, placed{path, len(paths)})
			if o.to != nil {
				paths = append(paths, placed{o.to, len(paths)})
			}
		}
	}
	// Two operations on one path, or on a path and a field within it,
	// conflict, as in MongoDB.
	slices.SortStableFunc(paths, func(a, b placed) int { return slices.Compare(a.path, b.path) })
	for i := 1; i < len(paths); i++ {
		a, b := paths[i-1], paths[i]
		if len(b.path) >= len(a.path) && slices.Equal(b.path[:len(a.path)], a.path) {
			later := b
			if a.order > b.order {
				later = a
			}
			return nil, errorf(codeConflictingUpdateOperators, "Updating the path '%s' would create a conflict at '%s'",
				strings.Join(later.path, "."), strings.Join(a.path, "."))
		}
	}
	// MongoDB applies the operations in the order of their paths (for
	// $rename, of its target), which is the order new fields appear in.
	slices.SortStableFunc(u2.ops, func(a, b updateOp) int { return slices.Compare(a.placedAt(), b.placedAt()) })
	return u2, nil
}

// placedAt is the path that orders o among the operations.
func (o *updateOp) placedAt() []string {
	if o.to != nil {
		return o.to
	}
	return o.path
}

// updateOperators are the operators parseUpdate implements.
var updateOperators = map[string]bool{
	"$set": true, "$unset": true, "$inc": true, "$mul": true, "$min": true, "$max": true, "$rename": true,
	"$setOnInsert": true, "$currentDate": true, "$push": true, "$addToSet": true, "$pop": true,
	"$pull": true, "$pullAll": true,
}

// updatePath splits and checks the path an update operator names.
func updatePath(s string) ([]string, error) {
	path, err := splitPath(s)
	if err != nil {
		return nil, err
	}
	dollars := 0
	for i, p := range path {
		_, positional := positionalID(p)
		if p == "$" {
			dollars++
		}
		switch {
		case p == "":
			return nil, errorf(codeEmptyFieldName, "The update path '%s' contains an empty field name, which is not allowed.", s)
		case p == "$" && i == 0:
			return nil, errorf(codeBadValue, "Cannot have positional (i.e. '$') element in the first position in path '%s'", s)
		case positional && i == 0:
			return nil, errorf(codeBadValue, "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position in path '%s'", s)
		case dollars > 1:
			return nil, errorf(codeBadValue, "Too many positional (i.e. '$') elements found in path '%s'", s)
		case positional:
		case strings.HasPrefix(p, "$"):
			return nil, errorf(codeDollarPrefixedFieldName, "The dollar ($) prefixed field '%s' in '%s' is not valid for storage.", p, s)
		}
	}
	return path, nil
}

// parseUpdateOp checks the argument of one operation.
func parseUpdateOp(op string, path []string, key string, v bson.RawValue) (updateOp, error) {
	o := updateOp{op: op, path: path, arg: v}
	switch op {
	case "$inc", "$mul":
		if !isNumber(v) {
			verb := map[string]string{"$inc": "increment", "$mul": "multiply"}[op]
			return o, errorf(codeTypeMismatch, "Cannot %s with non-numeric argument: %s", verb, formatElement(key, v))
		}
		if v.Type == bson.TypeDecimal128 {
			return o, errorf(codeBadValue, "mongotest does not implement arithmetic on decimal128 values (%s)", op)
		}
	case "$rename":
		to, ok := v.StringValueOK()
		if !ok {
			return o, errorf(codeBadValue, "The 'to' field for $rename must be a string: %s", formatElement(key, v))
		}
		if to == key {
			return o, errorf(codeBadValue, "The source and target field for $rename must differ: %s", formatElement(key, v))
		}
		target, err := updatePath(to)
		if err != nil {
			return o, err
		}
		if isPositionalPath(path) {
			return o, errorf(codeBadValue, "The source field for $rename may not be dynamic: %s", key)
		}
		if isPositionalPath(target) {
			return o, errorf(codeBadValue, "The destination field for $rename may not be dynamic: %s", to)
		}
		o.to = target
	case "$currentDate":
		if v.Type == bson.TypeBoolean {
			break
		}
		d, ok := v.DocumentOK()
		t, _ := d.Lookup("$type").StringValueOK()
		if !ok || (t != "date" && t != "timestamp") {
			return o, errorf(codeBadValue, "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}")
		}
	case "$pop":
		if f := floatOf(v); !isNumber(v) || (f != 1 && f != -1) {
			return o, errorf(codeFailedToParse, "$pop expects 1 or -1, found: %s", formatValue(v))
		}
	case "$pullAll":
		if v.Type != bson.TypeArray {
			return o, errorf(codeBadValue, "$pullAll requires an array argument but was given a %s", typeName(v.Type))
		}
	case "$push", "$addToSet":
		return parseEach(o, v)
	case "$pull":
		return parsePull(o, v)
	}
	return o, nil
}

// parseEach reads the argument of $push or $addToSet: a value, or
// {$each: [...]} with $push's modifiers.
func parseEach(o updateOp, v bson.RawValue) (updateOp, error) {
	d, ok := v.DocumentOK()
	if !ok || commandName(d) != "$each" && !(o.op == "$push" && strings.HasPrefix(commandName(d), "$")) {
		o.each = []bson.RawValue{v}
		return o, nil
	}
	elems, _ := d.Elements()
	hasEach := false
	for _, e := range elems {
		switch k, val := e.Key(), e.Value(); {
		case k == "$each":
			if val.Type != bson.TypeArray {
				return o, errorf(codeBadValue, "The argument to $each in %s must be an array but it was of type: %s", o.op, typeName(val.Type))
			}
			o.each, hasEach = arrayValues(val), true
		case o.op == "$push" && (k == "$slice" || k == "$position"):
			f := floatOf(val)
			if !isNumber(val) || f != math.Trunc(f) {
				return o, errorf(codeBadValue, "The value for %s must be an integer value but was given type: %s", k, typeName(val.Type))
			}
			i := int64(f)
			if k == "$slice" {
				o.slice = &i
			} else {
				o.position = &i
			}
		case o.op == "$push" && k == "$sort":
			s, err := parsePushSort(val)
			if err != nil {
				return o, err
			}
			o.sort = s
		default:
			return o, errorf(codeBadValue, "Unrecognized clause in %s: %s", o.op, k)
		}
	}
	if !hasEach {
		return o, errorf(codeBadValue, "The %s modifiers need $each", o.op)
	}
	return o, nil
}

// parsePushSort reads $push's $sort: 1, -1, or a sort document.
func parsePushSort(v bson.RawValue) (*pushSort, error) {
	if isNumber(v) {
		switch floatOf(v) {
		case 1:
			return &pushSort{byValue: true}, nil
		case -1:
			return &pushSort{byValue: true, desc: true}, nil
		}
		return nil, errorf(codeBadValue, "The $sort element value must be either 1 or -1")
	}
	d, ok := v.DocumentOK()
	if !ok || len(d) <= 5 {
		return nil, errorf(codeBadValue, "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields")
	}
	spec, err := parseSort(d)
	if err != nil {
		return nil, err
	}
	return &pushSort{spec: spec}, nil
}

// parsePull reads the condition of $pull: a value to equal, an operator
// document applied to each element, or a filter applied to the elements
// that are documents.
func parsePull(o updateOp, v bson.RawValue) (updateOp, error) {
	d, ok := v.DocumentOK()
	if !ok {
		o.pull = func(e bson.RawValue) bool { return equalValues(e, v) }
		return o, nil
	}
	f := &filter{}
	o.pullFilter = f
	if strings.HasPrefix(commandName(d), "$") {
		p, err := f.parseOperators(o.path, d, 1, false)
		if err != nil {
			return o, err
		}
		o.pull = func(e bson.RawValue) bool { return p([]bson.RawValue{e}) }
		return o, nil
	}
	n, err := f.parseDoc(d, 1, false)
	if err != nil {
		return o, err
	}
	o.pull = func(e bson.RawValue) bool {
		doc, ok := e.DocumentOK()
		return ok && n.match(doc)
	}
	return o, nil
}

// apply returns doc updated by u. insert says that doc is the document an
// upsert inserts, for $setOnInsert.
func (u *update) apply(doc bson.Raw, insert bool) (bson.Raw, error) {
	oldID, hadID := doc.Lookup("_id"), doc.Lookup("_id").Type != 0
	if u.replacement != nil {
		newID := u.replacement.Lookup("_id")
		switch {
		case !hadID:
			return u.replacement, nil
		case newID.Type == 0:
			d := newMdoc(u.replacement)
			d.fields = append([]mfield{{"_id", &mval{raw: oldID}}}, d.fields...)
			return d.encode(), nil
		case !equalValues(oldID, newID) || oldID.Type != newID.Type:
			return nil, errorf(codeImmutableField, "The _id field cannot be changed from %s to %s.", formatElement("_id", oldID), formatElement("_id", newID))
		}
		return idFirst(u.replacement), nil
	}
	root := &mval{doc: newMdoc(doc)}
	if u.positional {
		if err := u.applyPositional(root, doc, insert, oldID); err != nil {
			return nil, err
		}
	} else {
		for _, o := range u.ops {
			if err := o.apply(root, insert, oldID); err != nil {
				return nil, err
			}
		}
	}
	out := root.doc.encode()
	if hadID {
		if newID := out.Lookup("_id"); newID.Type != oldID.Type || !bytes.Equal(newID.Value, oldID.Value) {
			return nil, errorf(codeImmutableField, "Performing an update on the path '_id' would modify the immutable field '_id'")
		}
	}
	return out, nil
}

// apply applies one operation to the document root.
func (o *updateOp) apply(root *mval, insert bool, id bson.RawValue) error {
	name := strings.Join(o.path, ".")
	switch o.op {
	case "$set":
		return setPath(root, o.path, o.arg)
	case "$setOnInsert":
		if insert {
			return setPath(root, o.path, o.arg)
		}
		return nil
	case "$unset":
		unsetPath(root, o.path)
		return nil
	case "$currentDate":
		now := time.Now()
		v := dateValue(now.UnixMilli())
		if d, ok := o.arg.DocumentOK(); ok && d.Lookup("$type").StringValue() == "timestamp" {
			v = timestampValue(uint32(now.Unix()), 1)
		}
		return setPath(root, o.path, v)
	case "$rename":
		return o.rename(root, id)
	}
	cur := lookup(root, o.path)
	switch o.op {
	case "$inc", "$mul":
		if cur == nil {
			v := o.arg
			if o.op == "$mul" {
				v = zeroOf(o.arg.Type)
			}
			return setPath(root, o.path, v)
		}
		old := cur.value()
		if !isNumber(old) {
			return errorf(codeTypeMismatch, "Cannot apply %s to a value of non-numeric type. %s has the field '%s' of non-numeric type %s",
				o.op, formatElement("_id", id), o.path[len(o.path)-1], typeName(old.Type))
		}
		v, ok := arithmetic(o.op, old, o.arg)
		if !ok {
			return errorf(codeBadValue, "Failed to apply %s operations to current value (%s) for document %s", o.op, formatValue(old), formatElement("_id", id))
		}
		cur.set(v)
		return nil
	case "$min", "$max":
		if cur == nil {
			return setPath(root, o.path, o.arg)
		}
		c := compareValues(o.arg, cur.value())
		if (o.op == "$min" && c < 0) || (o.op == "$max" && c > 0) {
			cur.set(o.arg)
		}
		return nil
	case "$push", "$addToSet":
		if cur == nil {
			return setPath(root, o.path, arrayValue(o.grow(nil)))
		}
		if !cur.asArray() {
			if o.op == "$addToSet" {
				return errorf(codeBadValue, "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s", o.path[len(o.path)-1], typeName(cur.value().Type))
			}
			return errorf(codeBadValue, "The field '%s' must be an array but is of type %s in document %s", name, typeName(cur.value().Type), formatElement("_id", id))
		}
		cur.set(arrayValue(o.grow(elementsOf(cur))))
		return nil
	case "$pop", "$pull", "$pullAll":
		if cur == nil {
			return nil
		}
		if !cur.asArray() {
			if o.op == "$pop" {
				return errorf(codeTypeMismatch, "Path '%s' contains an element of non-array type '%s'", name, typeName(cur.value().Type))
			}
			return errorf(codeBadValue, "Cannot apply %s to a non-array value", o.op)
		}
		elems := elementsOf(cur)
		switch o.op {
		case "$pop":
			if len(elems) > 0 {
				if floatOf(o.arg) == 1 {
					elems = elems[:len(elems)-1]
				} else {
					elems = elems[1:]
				}
			}
		case "$pull":
			elems = slices.DeleteFunc(elems, o.pull)
			if err := o.pullFilter.err(); err != nil {
				return err
			}
		case "$pullAll":
			drop := map[string]struct{}{}
			for _, d := range arrayValues(o.arg) {
				drop[valueKey(d)] = struct{}{}
			}
			elems = slices.DeleteFunc(elems, func(e bson.RawValue) bool {
				_, ok := drop[valueKey(e)]
				return ok
			})
		}
		cur.set(arrayValue(elems))
	}
	return nil
}

// grow returns the array elems after $push or $addToSet.
func (o *updateOp) grow(elems []bson.RawValue) []bson.RawValue {
	if o.op == "$addToSet" {
		seen := make(map[string]struct{}, len(elems)+len(o.each))
		for _, e := range elems {
			seen[valueKey(e)] = struct{}{}
		}
		for _, e := range o.each {
			k := valueKey(e)
			if _, dup := seen[k]; !dup {
				seen[k] = struct{}{}
				elems = append(elems, e)
			}
		}
		return elems
	}
	pos := int64(len(elems))
	if o.position != nil {
		pos = *o.position
		if pos < 0 {
			pos = max(int64(len(elems))+pos, 0)
		}
		pos = min(pos, int64(len(elems)))
	}
	elems = slices.Insert(elems, int(pos), o.each...)
	if s := o.sort; s != nil {
		slices.SortStableFunc(elems, func(a, b bson.RawValue) int {
			var c int
			if s.byValue {
				c = compareValues(a, b)
			} else {
				da, _ := a.DocumentOK()
				db, _ := b.DocumentOK()
				for _, k := range s.spec {
					if c = compareValues(k.keyOf(da), k.keyOf(db)); c != 0 {
						if k.desc {
							c = -c
						}
						break
					}
				}
				return c
			}
			if s.desc {
				c = -c
			}
			return c
		})
	}
	if o.slice != nil {
		n := *o.slice
		switch {
		case n >= 0 && n < int64(len(elems)):
			elems = elems[:n]
		case n < 0 && -n < int64(len(elems)):
			elems = elems[int64(len(elems))+n:]
		}
	}
	return elems
}

// rename moves the value of the source path to the target path. Neither
// may go through an array, as in MongoDB.
func (o *updateOp) rename(root *mval, id bson.RawValue) error {
	for i, p := range [][]string{o.path, o.to} {
		cur := root
		for _, c := range p[:len(p)-1] {
			d, ok := cur.asDoc()
			if !ok {
				break
			}
			if cur = d.get(c); cur == nil {
				break
			}
			if cur.asArray() {
				return errorf(codeBadValue, "The %s field cannot be an array element, '%s' in doc with %s has an array field called '%s'",
					[]string{"source", "destination"}[i], strings.Join(p, "."), formatElement("_id", id), c)
			}
		}
	}
	v := lookup(root, o.path)
	if v == nil {
		return nil
	}
	val := v.value()
	unsetPath(root, o.path)
	return setPath(root, o.to, val)
}

// zeroOf is the zero of a numeric type, which $mul sets a missing field to.
func zeroOf(t bson.Type) bson.RawValue {
	switch t {
	case bson.TypeInt32:
		return int32Value(0)
	case bson.TypeInt64:
		return int64Value(0)
	}
	return doubleValue(0)
}

// arithmetic adds ($inc) or multiplies ($mul) two numbers as MongoDB does:
// a double if either is one, else an int32 when both are and the result
// fits, else an int64; false when an int64 result overflows.
func arithmetic(op string, a, b bson.RawValue) (bson.RawValue, bool) {
	if a.Type == bson.TypeDecimal128 || b.Type == bson.TypeDecimal128 {
		return bson.RawValue{}, false
	}
	ia, aInt := intOf(a)
	ib, bInt := intOf(b)
	if !aInt || !bInt {
		fa, fb := floatOf(a), floatOf(b)
		if op == "$inc" {
			return doubleValue(fa + fb), true
		}
		return doubleValue(fa * fb), true
	}
	var r int64
	var overflow bool
	if op == "$inc" {
		r = ia + ib
		overflow = (ib > 0 && r < ia) || (ib < 0 && r > ia)
	} else {
		r = ia * ib
		overflow = ia != 0 && (r/ia != ib || (ia == -1 && ib == math.MinInt64) || (ib == -1 && ia == math.MinInt64))
	}
	if overflow {
		return bson.RawValue{}, false
	}
	if a.Type == bson.TypeInt32 && b.Type == bson.TypeInt32 {
		return intValue(r), true
	}
	return int64Value(r), true
}

// upsertDoc returns the document an upsert inserts when q matches nothing:
// the equalities of the query (its _id only, for a replacement), then the
// update, with an _id first (a new ObjectID if neither gave one).
func upsertDoc(f *filter, u *update) (bson.Raw, error) {
	base := &mdoc{}
	eqs := slices.Clone(f.eqs)
	slices.SortStableFunc(eqs, func(a, b equality) int { return slices.Compare(a.path, b.path) })
	for i, e := range eqs {
		if u.replacement != nil && (len(e.path) != 1 || e.path[0] != "_id") {
			continue
		}
		if i > 0 {
			prev := eqs[i-1]
			if slices.Equal(prev.path, e.path) {
				if !equalValues(prev.value, e.value) {
					return nil, errorf(codeNotSingleValueField, "cannot infer query fields to set, path '%s' is matched twice", strings.Join(e.path, "."))
				}
				continue
			}
			if len(e.path) > len(prev.path) && slices.Equal(e.path[:len(prev.path)], prev.path) {
				return nil, errorf(codeNotSingleValueField, "cannot infer query fields to set, both paths '%s' and '%s' are matched",
					strings.Join(prev.path, "."), strings.Join(e.path, "."))
			}
		}
		if err := setPath(&mval{doc: base}, e.path, e.value); err != nil {
			return nil, err
		}
	}
	doc, err := u.apply(base.encode(), true)
	if err != nil {
		return nil, err
	}
	d := newMdoc(doc)
	if d.get("_id") == nil {
		d.put("_id", &mval{raw: objectIDValue(bson.NewObjectID())})
	}
	d.moveFirst("_id")
	return d.encode(), nil
}
