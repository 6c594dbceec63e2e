package mongotest

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The $group stage: {_id: expr, field: {accumulator: expr}, ...}, with the
// accumulators $sum, $avg, $min, $max, $first, $last, $push, $addToSet and
// $count, and $accumulator's JavaScript (javascript_ops.go). The groups
// come out in the order their first document came in.

// accumulators are the accumulators implemented; mongodAccumulators the
// others of MongoDB, refused as not implemented.
var (
	accumulators = map[string]bool{
		"$sum": true, "$avg": true, "$min": true, "$max": true, "$first": true, "$last": true,
		"$push": true, "$addToSet": true, "$count": true,
	}
	mongodAccumulators = map[string]bool{
		"$stdDevPop": true, "$stdDevSamp": true, "$mergeObjects": true, "$top": true, "$topN": true,
		"$bottom": true, "$bottomN": true, "$firstN": true, "$lastN": true, "$maxN": true, "$minN": true,
		"$median": true, "$percentile": true, "$concatArrays": true, "$setUnion": true,
	}
)

// groupField is one accumulated field of $group.
type groupField struct {
	name string
	op   string
	arg  expression
	js   *jsAccumulator // for $accumulator
}

// parseGroup compiles $group, whose JavaScript runs in js.
func parseGroup(v bson.RawValue, js *jsRun) (stage, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(15947, "a group's fields must be specified in an object")
	}
	var id expression
	var fields []groupField
	for _, e := range mustElements(d) {
		name := e.Key()
		if name == "_id" {
			x, err := compileExprJS(e.Value(), 0, js)
			if err != nil {
				return nil, err
			}
			id = x
			continue
		}
		if strings.HasPrefix(name, "$") {
			return nil, errorf(codeFieldPathDollar, "The field name '%s' cannot be an operator name", name)
		}
		if strings.Contains(name, ".") {
			return nil, errorf(codeGroupFieldDotted, "The field name '%s' cannot contain '.'", name)
		}
		spec, ok := e.Value().DocumentOK()
		elems, _ := spec.Elements()
		if !ok || len(elems) != 1 {
			return nil, errorf(40234, "The field '%s' must be an accumulator object", name)
		}
		op := elems[0].Key()
		switch {
		case op == "$accumulator":
			acc, err := parseJSAccumulator(elems[0].Value(), js)
			if err != nil {
				return nil, err
			}
			fields = append(fields, groupField{name: name, op: op, js: acc})
			continue
		case mongodAccumulators[op]:
			return nil, errorf(codeBadValue, "mongotest does not implement the accumulator %s", op)
		case !accumulators[op]:
			return nil, errorf(codeUnknownGroupOp, "unknown group operator '%s'", op)
		}
		var arg expression = constExpr{int32Value(1)}
		if op == "$count" {
			if c, ok := elems[0].Value().DocumentOK(); !ok || len(c) > 5 {
				return nil, errorf(codeBadValue, "$count takes no arguments, i.e. $count:{}")
			}
		} else {
			x, err := compileExprJS(elems[0].Value(), 0, js)
			if err != nil {
				return nil, err
			}
			arg = x
		}
		fields = append(fields, groupField{name: name, op: op, arg: arg})
	}
	if id == nil {
		return nil, errorf(codeGroupIDRequired, "a group specification must include an _id")
	}
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		type group struct {
			id   bson.RawValue
			accs []accumulator
		}
		index := map[string]*group{}
		var order []*group
		for _, doc := range docs {
			idv, ok := id.eval(doc)
			if !ok {
				idv = nullValue
			}
			k := valueKey(idv)
			g := index[k]
			if g == nil {
				g = &group{id: idv, accs: make([]accumulator, len(fields))}
				for i, f := range fields {
					g.accs[i].op = f.op
				}
				index[k] = g
				order = append(order, g)
			}
			for i, f := range fields {
				if f.js != nil {
					if err := f.js.add(&g.accs[i], doc); err != nil {
						return nil, err
					}
					continue
				}
				val, ok := f.arg.eval(doc)
				if err := g.accs[i].add(val, ok); err != nil {
					return nil, err
				}
			}
		}
		out := make([]bson.Raw, 0, len(order))
		for _, g := range order {
			var b docBuilder
			b.append("_id", g.id)
			for i, f := range fields {
				if f.js == nil {
					b.append(f.name, g.accs[i].result())
					continue
				}
				v, err := f.js.result(&g.accs[i])
				if err != nil {
					return nil, err
				}
				b.append(f.name, v)
			}
			doc := b.doc()
			if len(doc) > MaxBSONObjectSize {
				return nil, errorf(codeBSONObjectTooLarge, "the $group result is larger than %d bytes", MaxBSONObjectSize)
			}
			out = append(out, doc)
		}
		return out, nil
	}, nil
}

// accumulator is the state of one accumulated field of one group.
type accumulator struct {
	op string
	// sums ($sum, $avg, $count): the kind of the sum so far (the widest
	// type added: int32, int64, double), and the sum.
	kind  bson.Type
	isum  int64
	fsum  float64
	count int64
	// $min, $max, $first, $last
	val bson.RawValue
	has bool
	// $push, $addToSet
	vals []bson.RawValue
	seen map[string]struct{}
}

// add adds the value v of one document (ok false: missing).
func (a *accumulator) add(v bson.RawValue, ok bool) error {
	switch a.op {
	case "$sum", "$count", "$avg":
		if !ok || !isNumber(v) {
			return nil
		}
		if v.Type == bson.TypeDecimal128 {
			return errorf(codeBadValue, "mongotest does not implement %s of decimal128 values", a.op)
		}
		a.count++
		a.addNumber(v)
	case "$min", "$max":
		if !ok || isNullish(v) {
			return nil
		}
		if c := compareValues(v, a.val); !a.has || (a.op == "$min" && c < 0) || (a.op == "$max" && c > 0) {
			a.val, a.has = v, true
		}
	case "$first":
		if !a.has {
			a.val, a.has = orNull(v, ok), true
		}
	case "$last":
		a.val, a.has = orNull(v, ok), true
	case "$push":
		if ok {
			a.vals = append(a.vals, v)
		}
	case "$addToSet":
		if !ok {
			return nil
		}
		if a.seen == nil {
			a.seen = map[string]struct{}{}
		}
		k := valueKey(v)
		if _, dup := a.seen[k]; !dup {
			a.seen[k] = struct{}{}
			a.vals = append(a.vals, v)
		}
	}
	return nil
}

// addNumber adds v to the sum, widening its type as MongoDB does: int32,
// then int64 on overflow or an int64, then double.
func (a *accumulator) addNumber(v bson.RawValue) {
	a.fsum += floatOf(v)
	if a.kind == bson.TypeDouble {
		return
	}
	i, isInt := intOf(v)
	if !isInt {
		a.kind = bson.TypeDouble
		return
	}
	sum := a.isum + i
	if (i > 0 && sum < a.isum) || (i < 0 && sum > a.isum) {
		a.kind = bson.TypeDouble // beyond int64
		return
	}
	a.isum = sum
	switch {
	case v.Type == bson.TypeInt64 || a.kind == bson.TypeInt64 || sum > math.MaxInt32 || sum < math.MinInt32:
		a.kind = bson.TypeInt64
	default:
		a.kind = bson.TypeInt32
	}
}

// result returns the accumulated value.
func (a *accumulator) result() bson.RawValue {
	switch a.op {
	case "$sum", "$count":
		switch a.kind {
		case bson.TypeDouble:
			return doubleValue(a.fsum)
		case bson.TypeInt64:
			return int64Value(a.isum)
		}
		return int32Value(int32(a.isum))
	case "$avg":
		if a.count == 0 {
			return nullValue
		}
		if a.kind == bson.TypeDouble {
			return doubleValue(a.fsum / float64(a.count))
		}
		return doubleValue(float64(a.isum) / float64(a.count))
	case "$min", "$max", "$first", "$last":
		if !a.has {
			return nullValue
		}
		return a.val
	}
	return arrayValue(a.vals)
}

// orNull returns v, or null for a missing value.
func orNull(v bson.RawValue, ok bool) bson.RawValue {
	if !ok {
		return nullValue
	}
	return v
}
