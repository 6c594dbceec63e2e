package mongotest

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements the part of MongoDB's aggregation expressions that
// $project, $addFields, $group and find's projection use here: field paths
// ("$a.b"), the variables $$ROOT, $$CURRENT and $$REMOVE, literals, objects
// and arrays of expressions, $literal, and $function (javascript_ops.go)
// in aggregate and in query filters' $expr. Any other operator ($add,
// $concat, ...) is refused with BadValue as not implemented.

// expression is a compiled aggregation expression.
type expression interface {
	// eval evaluates the expression on the document root; ok is false
	// when the result is missing (a field path that reaches nothing).
	eval(root bson.Raw) (v bson.RawValue, ok bool)
}

type constExpr struct{ v bson.RawValue }

func (e constExpr) eval(bson.Raw) (bson.RawValue, bool) { return e.v, true }

// pathExpr is a field path from the document (or from $$ROOT/$$CURRENT).
type pathExpr struct{ path []string }

func (e pathExpr) eval(root bson.Raw) (bson.RawValue, bool) {
	return evalPath(docValue(root), e.path)
}

// removeExpr is $$REMOVE: always missing.
type removeExpr struct{}

func (removeExpr) eval(bson.Raw) (bson.RawValue, bool) { return bson.RawValue{}, false }

type objectExpr struct {
	keys  []string
	exprs []expression
}

func (e objectExpr) eval(root bson.Raw) (bson.RawValue, bool) {
	var b docBuilder
	for i, x := range e.exprs {
		if v, ok := x.eval(root); ok {
			b.append(e.keys[i], v)
		}
	}
	return b.docValue(), true
}

type arrayExpr []expression

func (e arrayExpr) eval(root bson.Raw) (bson.RawValue, bool) {
	vals := make([]bson.RawValue, len(e))
	for i, x := range e {
		v, ok := x.eval(root)
		if !ok {
			v = nullValue
		}
		vals[i] = v
	}
	return arrayValue(vals), true
}

// evalPath follows path from v as aggregation does: through documents,
// and through arrays by mapping the rest of the path over their elements
// (the elements it reaches nothing in are left out).
func evalPath(v bson.RawValue, path []string) (bson.RawValue, bool) {
	if len(path) == 0 {
		return v, true
	}
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		sub, err := v.Document().LookupErr(path[0])
		if err != nil {
			return bson.RawValue{}, false
		}
		return evalPath(sub, path[1:])
	case bson.TypeArray:
		var out []bson.RawValue
		for _, e := range arrayValues(v) {
			if r, ok := evalPath(e, path); ok {
				out = append(out, r)
			}
		}
		return arrayValue(out), true
	}
	return bson.RawValue{}, false
}

// compileExpr compiles the expression v, where no JavaScript runs.
func compileExpr(v bson.RawValue, depth int) (expression, error) {
	return compileExprJS(v, depth, nil)
}

// compileExprJS compiles the expression v, whose $function calls run in
// js (nil where mongotest runs none).
func compileExprJS(v bson.RawValue, depth int, js *jsRun) (expression, error) {
	if depth > maxQueryDepth {
		return nil, errorf(codeBadValue, "the expression nests deeper than %d levels", maxQueryDepth)
	}
	switch v.Type {
	case bson.TypeString:
		s := v.StringValue()
		if !strings.HasPrefix(s, "$") {
			return constExpr{v}, nil
		}
		return compileFieldPath(s)
	case bson.TypeEmbeddedDocument:
		d := v.Document()
		elems, _ := d.Elements()
		if len(elems) > 0 && strings.HasPrefix(elems[0].Key(), "$") {
			if len(elems) > 1 {
				return nil, errorf(15983, "an expression specification must contain exactly one field, the name of the expression. Found %d fields in %s", len(elems), formatDoc(d))
			}
			switch elems[0].Key() {
			case "$literal":
				return constExpr{elems[0].Value()}, nil
			case "$function":
				return compileFunction(elems[0].Value(), depth, js)
			}
			return nil, errorf(codeBadValue, "mongotest does not implement the expression operator %s", elems[0].Key())
		}
		obj := objectExpr{}
		for _, e := range elems {
			if strings.HasPrefix(e.Key(), "$") {
				return nil, errorf(codeFieldPathDollar, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
			}
			if strings.Contains(e.Key(), ".") {
				return nil, errorf(16412, "FieldPath field names may not contain '.'. Consider using $getField or $setField.")
			}
			x, err := compileExprJS(e.Value(), depth+1, js)
			if err != nil {
				return nil, err
			}
			obj.keys, obj.exprs = append(obj.keys, e.Key()), append(obj.exprs, x)
		}
		return obj, nil
	case bson.TypeArray:
		var arr arrayExpr
		for _, e := range arrayValues(v) {
			x, err := compileExprJS(e, depth+1, js)
			if err != nil {
				return nil, err
			}
			arr = append(arr, x)
		}
		return arr, nil
	}
	return constExpr{v}, nil
}

// compileFieldPath compiles "$a.b", "$$ROOT", "$$CURRENT.a" or "$$REMOVE".
func compileFieldPath(s string) (expression, error) {
	if name, ok := strings.CutPrefix(s, "$$"); ok {
		v, rest, _ := strings.Cut(name, ".")
		switch v {
		case "ROOT", "CURRENT":
			if rest == "" {
				return pathExpr{}, nil
			}
			path, err := splitPath(rest)
			if err != nil {
				return nil, err
			}
			return pathExpr{path}, nil
		case "REMOVE":
			return removeExpr{}, nil
		}
		return nil, errorf(codeUndefinedVariable, "Use of undefined variable: %s", v)
	}
	if s == "$" {
		return nil, errorf(16872, "'$' by itself is not a valid FieldPath")
	}
	path, err := splitPath(s[1:])
	if err != nil {
		return nil, err
	}
	for _, p := range path {
		if p == "" {
			return nil, errorf(15998, "FieldPath field names may not be empty strings.")
		}
		if strings.HasPrefix(p, "$") {
			return nil, errorf(codeFieldPathDollar, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		}
	}
	return pathExpr{path}, nil
}
