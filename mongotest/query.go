package mongotest

import (
	"math"
	"strings"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements MongoDB's query language, as find, count, delete,
// update, $match and the other commands take it:
//
//   - equality, {a: 1}, also on dotted paths ({"a.b": 1}, {"a.0": 1}) and on
//     array elements ({tags: "x"} matches tags: ["x", "y"]); a regular
//     expression as the value matches strings;
//   - the comparison operators $eq $ne $gt $gte $lt $lte $in $nin, which
//     compare numbers of any type by value and other values only with
//     values of their own type, as MongoDB's type bracketing does;
//   - $exists $type $size $all $elemMatch $mod $regex (with $options, PCRE
//     as mongod has it: see regex.go) $not;
//   - the logical operators $and $or $nor at the top level, and $comment.
//
// $where and $expr are parsed in javascript_ops.go, where the command
// allows them. An operator MongoDB has and this package does not ($text,
// $near, ...) is refused with BadValue; an operator MongoDB does not have
// is refused as mongod refuses it: "unknown operator: $foo".

// maxQueryDepth bounds the nesting of $and, $or, $nor, $not and
// $elemMatch, as mongod does.
const maxQueryDepth = 100

// maxListValues bounds the values of $in, $nin and $all, whose lookup
// structures cost several times the bytes of the request: as many as an
// insert may carry documents.
const maxListValues = MaxWriteBatchSize

// filter is a parsed query filter.
type filter struct {
	root node
	// eqs are the equalities of the top level (and of top-level $and),
	// which an upsert copies into the document it inserts.
	eqs []equality
	// idKey is the valueKey of the value the filter requires of _id, when
	// it requires one (hasID): the store then looks that one document up.
	idKey string
	hasID bool
	// failure is the first error of a match, when one could not finish
	// (a regular expression that took too long): the documents it tested
	// did not match, and the command must fail with it (see err).
	failure atomic.Pointer[cmdError]
	// features are what the command lets the filter hold beyond the query
	// operators ($where, $expr: see javascript_ops.go); sub counts the
	// $elemMatch objects being parsed, where neither may stand; scripted
	// is set once it holds one.
	features filterFeatures
	sub      int
	scripted bool
}

// fail records err as the filter's failure, unless it has one.
func (f *filter) fail(err *cmdError) { f.failure.CompareAndSwap(nil, err) }

// failed reports whether a match of f failed: the later ones stop at once.
func (f *filter) failed() bool { return f.failure.Load() != nil }

// err returns the failure of a match of f, nil if none: a command that
// matched documents with f fails with it.
func (f *filter) err() error {
	if f == nil {
		return nil
	}
	if e := f.failure.Load(); e != nil {
		return e
	}
	return nil
}

// equality is one {path: value} condition of a filter.
type equality struct {
	path  []string
	value bson.RawValue
}

// node is one condition of a filter.
type node interface {
	match(doc bson.Raw) bool
}

// pred tests the values a path reaches in a document (see queryValues).
type pred func(vals []bson.RawValue) bool

// matchAll is the empty filter's node.
type matchAll struct{}

func (matchAll) match(bson.Raw) bool { return true }

type andNode []node

func (n andNode) match(doc bson.Raw) bool {
	for _, c := range n {
		if !c.match(doc) {
			return false
		}
	}
	return true
}

type orNode []node

func (n orNode) match(doc bson.Raw) bool {
	for _, c := range n {
		if c.match(doc) {
			return true
		}
	}
	return false
}

type norNode []node

func (n norNode) match(doc bson.Raw) bool { return !orNode(n).match(doc) }

// fieldNode tests the values at a path.
type fieldNode struct {
	path []string
	test pred
}

func (n fieldNode) match(doc bson.Raw) bool {
	var buf [4]bson.RawValue
	return n.test(queryValues(buf[:0], doc, n.path))
}

// match reports whether doc satisfies f; a nil filter matches everything.
func (f *filter) match(doc bson.Raw) bool {
	return f == nil || f.root.match(doc)
}

// parseFilter parses a query filter document, without $where and $expr.
func parseFilter(doc bson.Raw) (*filter, error) {
	return parseFilterWith(doc, filterFeatures{})
}

// parseFilterWith parses a query filter document that may hold what ff
// allows.
func parseFilterWith(doc bson.Raw, ff filterFeatures) (*filter, error) {
	f := &filter{features: ff}
	root, err := f.parseDoc(doc, 0, true)
	if err != nil {
		return nil, err
	}
	f.root = root
	for _, e := range f.eqs {
		if len(e.path) == 1 && e.path[0] == "_id" && e.value.Type != bson.TypeNull && e.value.Type != bson.TypeArray {
			f.idKey, f.hasID = valueKey(e.value), true
		}
	}
	return f, nil
}

// parseDoc parses a filter document (the whole filter, an element of
// $and/$or/$nor, or $elemMatch's object form). top says whether its
// equalities count for upserts.
func (f *filter) parseDoc(doc bson.Raw, depth int, top bool) (node, error) {
	if depth > maxQueryDepth {
		return nil, errorf(codeBadValue, "exceeded maximum query tree depth of %d", maxQueryDepth)
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid filter: %v", err)
	}
	var and andNode
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		if strings.HasPrefix(key, "$") {
			n, err := f.parseTopOperator(key, v, depth, top)
			if err != nil {
				return nil, err
			}
			if n != nil {
				and = append(and, n)
			}
			continue
		}
		path, err := splitPath(key)
		if err != nil {
			return nil, err
		}
		test, err := f.parseValue(path, v, depth, top)
		if err != nil {
			return nil, err
		}
		and = append(and, fieldNode{path: path, test: test})
	}
	switch len(and) {
	case 0:
		return matchAll{}, nil
	case 1:
		return and[0], nil
	}
	return and, nil
}

// notImplementedTop are the top-level operators of MongoDB that this
// package refuses.
var notImplementedTop = map[string]bool{
	"$expr": true, "$text": true, "$jsonSchema": true, "$sampleRate": true,
	"$alwaysTrue": true, "$alwaysFalse": true, "$search": true,
}

// parseTopOperator parses a top-level operator: $and, $or, $nor, $comment.
func (f *filter) parseTopOperator(key string, v bson.RawValue, depth int, top bool) (node, error) {
	switch key {
	case "$comment":
		return nil, nil
	case "$where":
		return f.parseWhere(v)
	case "$expr":
		if f.features.expr {
			return f.parseExpr(v)
		}
	case "$and", "$or", "$nor":
		arr, ok := v.ArrayOK()
		vals, _ := arr.Values()
		if !ok || len(vals) == 0 {
			return nil, errorf(codeBadValue, "$and/$or/$nor must be a nonempty array")
		}
		nodes := make([]node, 0, len(vals))
		for _, e := range vals {
			d, ok := e.DocumentOK()
			if !ok {
				return nil, errorf(codeBadValue, "$or/$and/$nor entries need to be full objects")
			}
			n, err := f.parseDoc(d, depth+1, top && key == "$and")
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
		}
		switch key {
		case "$and":
			return andNode(nodes), nil
		case "$or":
			return orNode(nodes), nil
		}
		return norNode(nodes), nil
	}
	if notImplementedTop[key] {
		return nil, errorf(codeBadValue, "mongotest does not implement the query operator %s", key)
	}
	return nil, errorf(codeBadValue, "unknown top level operator: %s", key)
}

// parseValue parses the condition on a field: an operator document, a
// regular expression, or a value to equal.
func (f *filter) parseValue(path []string, v bson.RawValue, depth int, top bool) (pred, error) {
	if d, ok := v.DocumentOK(); ok && strings.HasPrefix(commandName(d), "$") {
		return f.parseOperators(path, d, depth, top)
	}
	if v.Type == bson.TypeRegex {
		return f.regexPred(v, "")
	}
	if top {
		f.eqs = append(f.eqs, equality{path: path, value: v})
	}
	return eqPred(v), nil
}

// notImplementedOps are the field operators of MongoDB that this package
// refuses.
var notImplementedOps = map[string]bool{
	"$geoWithin": true, "$geoIntersects": true, "$near": true, "$nearSphere": true, "$within": true,
	"$bitsAllSet": true, "$bitsAllClear": true, "$bitsAnySet": true, "$bitsAnyClear": true,
	"$jsonSchema": true, "$text": true,
}

// parseOperators parses an operator document, {$gt: 1, $lt: 5}: all of its
// operators must hold.
func (f *filter) parseOperators(path []string, ops bson.Raw, depth int, top bool) (pred, error) {
	if depth > maxQueryDepth {
		return nil, errorf(codeBadValue, "exceeded maximum query tree depth of %d", maxQueryDepth)
	}
	elems, err := ops.Elements()
	if err != nil {
		return nil, errorf(codeBadValue, "invalid filter: %v", err)
	}
	var preds []pred
	var regex, options bson.RawValue
	for _, e := range elems {
		op, v := e.Key(), e.Value()
		var p pred
		var err error
		switch op {
		case "$eq":
			if top {
				f.eqs = append(f.eqs, equality{path: path, value: v})
			}
			p = eqPred(v)
		case "$ne":
			p = not(eqPred(v))
		case "$gt", "$gte", "$lt", "$lte":
			p, err = comparePred(op, v, path)
		case "$in", "$nin":
			p, err = f.inPred(op, v)
			if op == "$nin" && err == nil {
				p = not(p)
			}
		case "$exists":
			want := truthy(v)
			p = func(vals []bson.RawValue) bool { return exists(vals) == want }
		case "$type":
			p, err = typePred(v)
		case "$size":
			p, err = sizePred(v)
		case "$all":
			p, err = f.allPred(v)
		case "$elemMatch":
			p, err = f.elemMatchPred(path, v, depth)
		case "$mod":
			p, err = modPred(v)
		case "$not":
			p, err = f.notPred(path, v, depth)
		case "$regex":
			regex = v
			continue
		case "$options":
			options = v
			continue
		default:
			if notImplementedOps[op] {
				return nil, errorf(codeBadValue, "mongotest does not implement the query operator %s", op)
			}
			return nil, errorf(codeBadValue, "unknown operator: %s", op)
		}
		if err != nil {
			return nil, err
		}
		preds = append(preds, p)
	}
	if options.Type != 0 && regex.Type == 0 {
		return nil, errorf(codeBadValue, "$options needs a $regex")
	}
	if regex.Type != 0 {
		opts := ""
		if options.Type != 0 {
			s, ok := options.StringValueOK()
			if !ok {
				return nil, errorf(codeBadValue, "$options has to be a string")
			}
			opts = s
		}
		p, err := f.regexPred(regex, opts)
		if err != nil {
			return nil, err
		}
		preds = append(preds, p)
	}
	if len(preds) == 1 {
		return preds[0], nil
	}
	return func(vals []bson.RawValue) bool {
		for _, p := range preds {
			if !p(vals) {
				return false
			}
		}
		return true
	}, nil
}

// expanded tests each value and, for an array, each of its elements, as
// MongoDB's matchers do; missing values are skipped.
func expanded(test func(bson.RawValue) bool) pred {
	return func(vals []bson.RawValue) bool {
		for _, v := range vals {
			if v.Type == 0 {
				continue
			}
			if test(v) {
				return true
			}
			if v.Type == bson.TypeArray {
				for _, e := range arrayValues(v) {
					if test(e) {
						return true
					}
				}
			}
		}
		return false
	}
}

// not negates p.
func not(p pred) pred {
	return func(vals []bson.RawValue) bool { return !p(vals) }
}

// exists reports whether the path reached a value.
func exists(vals []bson.RawValue) bool {
	for _, v := range vals {
		if v.Type != 0 {
			return true
		}
	}
	return false
}

// missing reports whether the path missed on some branch.
func missing(vals []bson.RawValue) bool {
	if len(vals) == 0 {
		return true
	}
	for _, v := range vals {
		if v.Type == 0 {
			return true
		}
	}
	return false
}

// isNullish reports whether v is null or undefined, which equal null.
func isNullish(v bson.RawValue) bool {
	return v.Type == bson.TypeNull || v.Type == bson.TypeUndefined
}

// eqPred is {$eq: want}: null also matches a missing field.
func eqPred(want bson.RawValue) pred {
	if isNullish(want) {
		isNull := expanded(isNullish)
		return func(vals []bson.RawValue) bool { return missing(vals) || isNull(vals) }
	}
	return expanded(func(v bson.RawValue) bool { return equalValues(v, want) })
}

// comparePred is $gt, $gte, $lt or $lte: it compares values of the
// operand's type class only, except for MinKey and MaxKey, which compare
// with everything; $gte and $lte null are {$eq: null}. NaN is apart, as in
// mongod's ComparisonMatchExpressionBase::compare: although it sorts below
// every number, a range predicate matches it only against NaN ($gte and
// $lte NaN match NaN, $gt and $lt NaN match nothing), and never matches it
// against another number ({$lt: 0} does not match NaN).
func comparePred(op string, want bson.RawValue, path []string) (pred, error) {
	if want.Type == bson.TypeRegex {
		return nil, errorf(codeBadValue, "Can't have RegEx as arg to predicate over field '%s'.", strings.Join(path, "."))
	}
	if isNullish(want) {
		if op == "$gte" || op == "$lte" {
			return eqPred(want), nil
		}
		return func([]bson.RawValue) bool { return false }, nil
	}
	ok := func(c int) bool {
		switch op {
		case "$gt":
			return c > 0
		case "$gte":
			return c >= 0
		case "$lt":
			return c < 0
		}
		return c <= 0
	}
	anyType := want.Type == bson.TypeMinKey || want.Type == bson.TypeMaxKey
	class := typeClass(want.Type)
	wantNaN := isNaN(want)
	inclusive := op == "$gte" || op == "$lte"
	return expanded(func(v bson.RawValue) bool {
		if !anyType && typeClass(v.Type) != class {
			return false
		}
		if (wantNaN || isNaN(v)) && !anyType {
			return inclusive && wantNaN && isNaN(v)
		}
		return ok(compareValues(v, want))
	}), nil
}

// isNaN reports whether v is a NaN, a double's or a decimal's.
func isNaN(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeDouble:
		return math.IsNaN(v.Double())
	case bson.TypeDecimal128:
		return v.Decimal128().IsNaN()
	}
	return false
}

// inPred is $in: the values are looked up by key, so that a long list
// costs one lookup per value tested, not one comparison per element.
func (f *filter) inPred(op string, v bson.RawValue) (pred, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeBadValue, "%s needs an array", op)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, errorf(codeBadValue, "%s: %v", op, err)
	}
	if len(vals) > maxListValues {
		return nil, errorf(codeBadValue, "%s holds %d values, more than the %d that mongotest takes", op, len(vals), maxListValues)
	}
	keys := make(map[string]struct{}, len(vals))
	var regexes []func(string) bool
	hasNull := false
	for _, e := range vals {
		switch {
		case e.Type == bson.TypeRegex:
			p, o := e.Regex()
			re, err := f.regexMatcher(p, o)
			if err != nil {
				return nil, err
			}
			regexes = append(regexes, re)
		case e.Type == bson.TypeEmbeddedDocument && strings.HasPrefix(commandName(e.Document()), "$"):
			return nil, errorf(codeBadValue, "cannot nest $ under %s", op)
		case isNullish(e):
			hasNull = true
		}
		keys[valueKey(e)] = struct{}{}
	}
	match := expanded(func(v bson.RawValue) bool {
		if _, ok := keys[valueKey(v)]; ok {
			return true
		}
		if len(regexes) > 0 && (v.Type == bson.TypeString || v.Type == bson.TypeSymbol) {
			s := stringOf(v)
			for _, re := range regexes {
				if re(s) {
					return true
				}
			}
		}
		return false
	})
	return func(vals []bson.RawValue) bool {
		return (hasNull && missing(vals)) || match(vals)
	}, nil
}

// truthy reads a value as MongoDB's trueValue does: false, zero, null and
// undefined are false, anything else true.
func truthy(v bson.RawValue) bool {
	switch {
	case v.Type == bson.TypeBoolean:
		return v.Boolean()
	case isNumber(v):
		f := floatOf(v)
		return f != 0 && !math.IsNaN(f) || v.Type == bson.TypeDecimal128 && !v.Decimal128().IsZero()
	case isNullish(v) || v.Type == 0:
		return false
	}
	return true
}

// typeAliases are the names $type takes, with the BSON type each names.
var typeAliases = map[string]bson.Type{
	"double": bson.TypeDouble, "string": bson.TypeString, "object": bson.TypeEmbeddedDocument,
	"array": bson.TypeArray, "binData": bson.TypeBinary, "undefined": bson.TypeUndefined,
	"objectId": bson.TypeObjectID, "bool": bson.TypeBoolean, "date": bson.TypeDateTime,
	"null": bson.TypeNull, "regex": bson.TypeRegex, "dbPointer": bson.TypeDBPointer,
	"javascript": bson.TypeJavaScript, "symbol": bson.TypeSymbol, "javascriptWithScope": bson.TypeCodeWithScope,
	"int": bson.TypeInt32, "timestamp": bson.TypeTimestamp, "long": bson.TypeInt64,
	"decimal": bson.TypeDecimal128, "minKey": bson.TypeMinKey, "maxKey": bson.TypeMaxKey,
}

// typePred is $type: an alias, a type number, "number", or an array of
// them.
func typePred(v bson.RawValue) (pred, error) {
	specs := []bson.RawValue{v}
	if v.Type == bson.TypeArray {
		specs = arrayValues(v)
	}
	var types []bson.Type
	numbers := false
	for _, s := range specs {
		switch {
		case s.Type == bson.TypeString:
			name := s.StringValue()
			if name == "number" {
				numbers = true
				continue
			}
			t, ok := typeAliases[name]
			if !ok {
				return nil, errorf(codeBadValue, "Unknown type name alias: %s", name)
			}
			types = append(types, t)
		case isNumber(s):
			f := floatOf(s)
			t := bson.Type(int8(f))
			if f != math.Trunc(f) || typeClass(t) == 18 || t == 0 {
				return nil, errorf(codeBadValue, "Invalid numerical type code: %v", f)
			}
			types = append(types, t)
		default:
			return nil, errorf(codeTypeMismatch, "type must be represented as a number or a string")
		}
	}
	return expanded(func(v bson.RawValue) bool {
		if numbers && isNumber(v) {
			return true
		}
		for _, t := range types {
			if v.Type == t {
				return true
			}
		}
		return false
	}), nil
}

// sizePred is $size: an array of that many elements.
func sizePred(v bson.RawValue) (pred, error) {
	if !isNumber(v) {
		return nil, errorf(codeBadValue, "$size needs a number")
	}
	f := floatOf(v)
	if f != math.Trunc(f) {
		return nil, errorf(codeBadValue, "Failed to parse $size. Expected an integer, but found %v", f)
	}
	if f < 0 {
		return nil, errorf(codeBadValue, "Failed to parse $size. Expected a non-negative number in: $size: %v", f)
	}
	n := int(f)
	return func(vals []bson.RawValue) bool {
		for _, v := range vals {
			if v.Type == bson.TypeArray && len(arrayValues(v)) == n {
				return true
			}
		}
		return false
	}, nil
}

// allPred is $all: every value of the list matches (an empty list matches
// nothing).
func (f *filter) allPred(v bson.RawValue) (pred, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeBadValue, "$all needs an array")
	}
	vals, _ := arr.Values()
	if len(vals) == 0 {
		return func([]bson.RawValue) bool { return false }, nil
	}
	if len(vals) > maxListValues {
		return nil, errorf(codeBadValue, "$all holds %d values, more than the %d that mongotest takes", len(vals), maxListValues)
	}
	preds := make([]pred, 0, len(vals))
	for _, e := range vals {
		if d, ok := e.DocumentOK(); ok && strings.HasPrefix(commandName(d), "$") {
			return nil, errorf(codeBadValue, "mongotest does not implement $all with %s", commandName(d))
		}
		if e.Type == bson.TypeRegex {
			p, err := f.regexPred(e, "")
			if err != nil {
				return nil, err
			}
			preds = append(preds, p)
			continue
		}
		preds = append(preds, eqPred(e))
	}
	return func(vals []bson.RawValue) bool {
		for _, p := range preds {
			if !p(vals) {
				return false
			}
		}
		return true
	}, nil
}

// elemMatchPred is $elemMatch: an element of an array satisfies the
// operators ({$elemMatch: {$gt: 1, $lt: 5}}) or, as a document, the filter
// ({$elemMatch: {k: "a", q: {$gt: 1}}}).
func (f *filter) elemMatchPred(path []string, v bson.RawValue, depth int) (pred, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(codeBadValue, "$elemMatch needs an Object")
	}
	var test func(bson.RawValue) bool
	if name := commandName(d); strings.HasPrefix(name, "$") && name != "$and" && name != "$or" && name != "$nor" && name != "$where" && name != "$expr" {
		p, err := f.parseOperators(path, d, depth+1, false)
		if err != nil {
			return nil, err
		}
		test = func(e bson.RawValue) bool { return p([]bson.RawValue{e}) }
	} else {
		f.sub++
		n, err := f.parseDoc(d, depth+1, false)
		f.sub--
		if err != nil {
			return nil, err
		}
		test = func(e bson.RawValue) bool {
			doc, ok := e.DocumentOK()
			return ok && n.match(doc)
		}
	}
	return func(vals []bson.RawValue) bool {
		for _, v := range vals {
			if v.Type != bson.TypeArray {
				continue
			}
			for _, e := range arrayValues(v) {
				if test(e) {
					return true
				}
			}
		}
		return false
	}, nil
}

// modPred is $mod: [divisor, remainder], on the integer part of numbers.
func modPred(v bson.RawValue) (pred, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeBadValue, "malformed mod, needs to be an array")
	}
	vals, _ := arr.Values()
	switch {
	case len(vals) < 2:
		return nil, errorf(codeBadValue, "malformed mod, not enough elements")
	case len(vals) > 2:
		return nil, errorf(codeBadValue, "malformed mod, too many elements")
	case !isNumber(vals[0]) || !isNumber(vals[1]):
		return nil, errorf(codeBadValue, "malformed mod, divisor and remainder must be numbers")
	}
	d, r := truncInt(floatOf(vals[0])), truncInt(floatOf(vals[1]))
	if d == 0 {
		return nil, errorf(codeBadValue, "divisor cannot be 0")
	}
	return expanded(func(v bson.RawValue) bool {
		if !isNumber(v) {
			return false
		}
		if i, ok := intOf(v); ok {
			return i%d == r
		}
		f := floatOf(v)
		return !math.IsNaN(f) && !math.IsInf(f, 0) && truncInt(f)%d == r
	}), nil
}

// truncInt truncates f to an integer, saturating at the int64 range.
func truncInt(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= 1<<63:
		return math.MaxInt64
	case f < -(1 << 63):
		return math.MinInt64
	}
	return int64(f)
}

// notPred is $not: a regular expression, or an operator document.
func (f *filter) notPred(path []string, v bson.RawValue, depth int) (pred, error) {
	if v.Type == bson.TypeRegex {
		p, err := f.regexPred(v, "")
		if err != nil {
			return nil, err
		}
		return not(p), nil
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(codeBadValue, "$not needs a regex or a document")
	}
	if len(d) <= 5 {
		return nil, errorf(codeBadValue, "$not cannot be empty")
	}
	p, err := f.parseOperators(path, d, depth+1, false)
	if err != nil {
		return nil, err
	}
	return not(p), nil
}

// regexPred matches strings (and symbols) against the regular expression
// v, a BSON regular expression or the string of $regex, with options
// (those of $options, or of the BSON value). The pattern is compiled once,
// with the filter.
func (f *filter) regexPred(v bson.RawValue, options string) (pred, error) {
	var pattern string
	switch v.Type {
	case bson.TypeString:
		pattern = v.StringValue()
	case bson.TypeRegex:
		p, o := v.Regex()
		if o != "" && options != "" {
			return nil, errorf(codeBadValue, "options set in both $regex and $options")
		}
		pattern, options = p, options+o
	default:
		return nil, errorf(codeBadValue, "$regex has to be a string")
	}
	re, err := f.regexMatcher(pattern, options)
	if err != nil {
		return nil, err
	}
	return expanded(func(v bson.RawValue) bool {
		switch v.Type {
		case bson.TypeString, bson.TypeSymbol:
			return re(stringOf(v))
		case bson.TypeRegex:
			p, o := v.Regex()
			return p == pattern && o == options
		}
		return false
	}), nil
}

// regexMatcher compiles the regular expression pattern with options (see
// compileRegex) into a test of a string. A match that cannot finish fails
// the filter (see filter.err), and then every later match of the filter is
// false at once.
func (f *filter) regexMatcher(pattern, options string) (func(string) bool, error) {
	re, err := compileRegex(pattern, options)
	if err != nil {
		return nil, err
	}
	return func(s string) bool {
		if f.failed() {
			return false
		}
		ok, err := re.MatchString(s)
		if err != nil {
			f.fail(regexFailure(pattern, options, err))
			return false
		}
		return ok
	}, nil
}
