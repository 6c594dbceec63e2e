package mongotest

import (
	"math"

	"github.com/dop251/goja"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The operators that run JavaScript (javascript.go), where mongod takes
// them:
//
//   - $where, in the filters of find, count, distinct, update, delete and
//     findAndModify, at their top level (and in $and, $or and $nor there):
//     not in $elemMatch, not on a field, not in aggregation's $match
//     (mongod's MatchExpressionParser without kJavascript);
//   - $expr, in those filters and in $match, at their top level, with the
//     expressions of expr.go: it matches when its value is true as
//     aggregation counts it;
//   - $function, in the expressions of aggregate's stages and of $expr;
//   - $accumulator, in $group.
//
// Elsewhere ($pull's conditions, partial indexes, find's projection) they
// are refused.

// filterFeatures says what a filter may hold beyond the query operators,
// as mongod's AllowedFeatureSet does: $where (kJavascript) and $expr,
// whose JavaScript runs in js.
type filterFeatures struct {
	js    *jsRun
	where bool
	expr  bool
}

// parseQueryFilter parses the filter of a command of req that mongod lets
// run JavaScript: find, count, distinct, update, delete, findAndModify.
func parseQueryFilter(req *request, doc bson.Raw) (*filter, error) {
	return parseFilterWith(doc, filterFeatures{js: newJSRun(req), where: true, expr: true})
}

// queryFilterArg reads the filter in field key of req (absent: match
// all), as parseQueryFilter parses it.
func queryFilterArg(req *request, key string) (*filter, error) {
	doc, err := docArg(req.body, key)
	if err != nil {
		return nil, err
	}
	return parseQueryFilter(req, doc)
}

// parseWhere parses {$where: code}, as mongod's parseWhere and
// ExtensionsCallbackReal do, and compiles the code.
func (f *filter) parseWhere(v bson.RawValue) (node, error) {
	switch {
	case !f.features.where || f.features.js == nil:
		return nil, errorf(codeBadValue, "$where is not allowed in this context")
	case f.sub > 0:
		return nil, errorf(codeBadValue, "$where can only be applied to the top-level document")
	}
	var src string
	switch v.Type {
	case bson.TypeString:
		src = v.StringValue()
	case bson.TypeJavaScript:
		src = v.JavaScript()
	case bson.TypeCodeWithScope:
		return nil, errorf(codeBadValue, "$where no longer supports deprecated BSON type CodeWScope")
	default:
		return nil, errorf(codeBadValue, "$where got bad type")
	}
	fn, err := compileJS(src)
	if err != nil {
		return nil, err
	}
	f.scripted = true
	return whereNode{f: f, fn: fn}, nil
}

// whereNode is $where: its function, run on the document.
type whereNode struct {
	f  *filter
	fn *jsFunc
}

func (n whereNode) match(doc bson.Raw) bool {
	if n.f.failed() {
		return false
	}
	ok, err := n.f.features.js.where(n.fn, doc)
	if err != nil {
		n.f.fail(err)
		return false
	}
	return ok
}

// parseExpr parses {$expr: expression}.
func (f *filter) parseExpr(v bson.RawValue) (node, error) {
	if f.sub > 0 {
		return nil, errorf(codeBadValue, "$expr can only be applied to the top-level document")
	}
	x, err := compileExprJS(v, 0, f.features.js)
	if err != nil {
		return nil, err
	}
	f.scripted = true
	return exprNode{f: f, x: x}, nil
}

// exprNode is $expr: the expression's value, as a truth.
type exprNode struct {
	f *filter
	x expression
}

func (n exprNode) match(doc bson.Raw) bool {
	if n.f.failed() {
		return false
	}
	v, ok := n.x.eval(doc)
	if err := n.f.features.js.err(); err != nil {
		n.f.fail(asCmdError(err))
		return false
	}
	return ok && coerceToBool(v)
}

// coerceToBool is the truth of a value in aggregation (mongod's
// Value::coerceToBool): false, null, undefined and the zeros are false,
// anything else (NaN, "", [] included) is true.
func coerceToBool(v bson.RawValue) bool {
	switch v.Type {
	case bson.TypeBoolean:
		return v.Boolean()
	case bson.TypeNull, bson.TypeUndefined, 0:
		return false
	case bson.TypeDouble:
		return v.Double() != 0 || math.IsNaN(v.Double())
	case bson.TypeInt32, bson.TypeInt64:
		return floatOf(v) != 0
	case bson.TypeDecimal128:
		return !v.Decimal128().IsZero()
	}
	return true
}

// scriptedFilter reports whether f runs JavaScript or $expr: a read then
// takes the documents under the store's lock and matches them after, so
// that a $where that sleeps holds up no other command, as mongod yields
// its locks meanwhile.
func (f *filter) scriptedFilter() bool { return f != nil && f.scripted }

// candidates returns the documents of c that f may match (the one with its
// _id, or all of them), counting them examined.
func (c *collection) candidates(f *filter) []bson.Raw {
	if c == nil {
		return nil
	}
	return docsOf(c.matching(&filter{root: matchAll{}, hasID: f.hasID, idKey: f.idKey}, 0))
}

// keep returns the documents of docs that f matches, at most limit (if
// positive), or f's failure.
func (f *filter) keep(docs []bson.Raw, limit int) ([]bson.Raw, error) {
	out := docs[:0:0]
	for _, d := range docs {
		if f.match(d) {
			out = append(out, d)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		if f.failed() {
			break
		}
	}
	return out, f.err()
}

// where runs the $where function fn on doc, with this and obj the
// document, as mongod's JsFunction::runAsPredicate: the document matches
// when the result is true as JavaScript counts it.
func (r *jsRun) where(fn *jsFunc, doc bson.Raw) (bool, *cmdError) {
	var ok bool
	err := r.guard(func(vm *goja.Runtime) error {
		f, err := r.function(fn)
		if err != nil {
			return err
		}
		this, err := r.toJS(docValue(doc))
		if err != nil {
			return err
		}
		if err := vm.Set("obj", this); err != nil {
			return err
		}
		res, err := f(this)
		if err != nil {
			return err
		}
		ok = res.ToBoolean()
		return nil
	})
	return ok, err
}

// call runs fn with args, and an empty object as this, as mongod's
// JsExecution::callFunction, and returns its result as BSON.
func (r *jsRun) call(fn *jsFunc, args []bson.RawValue) (bson.RawValue, *cmdError) {
	var out bson.RawValue
	err := r.guard(func(vm *goja.Runtime) error {
		f, err := r.function(fn)
		if err != nil {
			return err
		}
		vals := make([]goja.Value, len(args))
		for i, a := range args {
			if vals[i], err = r.toJS(a); err != nil {
				return err
			}
		}
		res, err := f(vm.NewObject(), vals...)
		if err != nil {
			return err
		}
		out, err = r.fromJS(res, bson.RawValue{}, 0)
		return err
	})
	return out, err
}

// funcExpr is {$function: {body, args, lang: "js"}}.
type funcExpr struct {
	js   *jsRun
	body string
	fn   *jsFunc // compiled at the first call, as mongod compiles it
	args expression
}

// compileFunction compiles $function's argument v, as mongod's
// ExpressionFunction::parse, with its codes.
func compileFunction(v bson.RawValue, depth int, js *jsRun) (expression, error) {
	if js == nil {
		return nil, errorf(codeBadValue, "mongotest does not implement $function here: it runs in aggregate's stages and in the $expr of query filters")
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(31260, "$function requires an object as an argument, found: %s", typeName(v.Type))
	}
	bv, err := d.LookupErr("body")
	if err != nil {
		return nil, errorf(31261, "The body function must be specified.")
	}
	bx, err := compileExprJS(bv, depth+1, js)
	if err != nil {
		return nil, err
	}
	c, ok := bx.(constExpr)
	if !ok {
		return nil, errorf(31432, "The body function must be a constant expression")
	}
	body, ok := codeOf(c.v)
	if !ok {
		return nil, errorf(31262, "The body function must evaluate to type string or code")
	}
	av, err := d.LookupErr("args")
	if err != nil {
		return nil, errorf(31263, "The args field must be specified.")
	}
	args, err := compileExprJS(av, depth+1, js)
	if err != nil {
		return nil, err
	}
	lv, err := d.LookupErr("lang")
	if err != nil {
		return nil, errorf(31418, "The lang field must be specified.")
	}
	if lang, ok := lv.StringValueOK(); !ok || lang != "js" {
		return nil, errorf(31419, "Currently the only supported language specifier is 'js'.")
	}
	return &funcExpr{js: js, body: body, args: args}, nil
}

// codeOf returns the source in v, a string or BSON JavaScript.
func codeOf(v bson.RawValue) (string, bool) {
	switch v.Type {
	case bson.TypeString:
		return v.StringValue(), true
	case bson.TypeJavaScript:
		return v.JavaScript(), true
	}
	return "", false
}

func (e *funcExpr) eval(root bson.Raw) (bson.RawValue, bool) {
	r := e.js
	if r.failure != nil {
		return bson.RawValue{}, false
	}
	args, ok := e.args.eval(root)
	if r.failure != nil {
		return bson.RawValue{}, false
	}
	if !ok || args.Type != bson.TypeArray {
		r.fail(errorf(31266, "The args field must be of type array"))
		return bson.RawValue{}, false
	}
	if e.fn == nil {
		fn, err := compileJS(e.body)
		if err != nil {
			r.fail(err)
			return bson.RawValue{}, false
		}
		e.fn = fn
	}
	v, err := r.call(e.fn, arrayValues(args))
	if err != nil {
		return bson.RawValue{}, false
	}
	return v, true
}

// jsAccumulator is {$accumulator: {init, initArgs, accumulate,
// accumulateArgs, merge, finalize, lang}}, as mongod's AccumulatorJs runs
// it on one server: init at a group's first document, with initArgs
// evaluated on it; accumulate over the group's accumulateArgs, in one
// JavaScript loop, when the group ends; then finalize. merge, which only
// combines the states of several servers or of a group spilled to disk, is
// never called, as on a mongod that does not spill.
type jsAccumulator struct {
	js                          *jsRun
	init, accumulate, finalize  string
	initFn, accumulateFn, finFn *jsFunc
	initArgs, accumulateArgs    expression
	hasFinalize                 bool
	reduceFn                    *jsFunc
}

// jsReduceSource is the loop that runs accumulate over a group's calls,
// as mongod's reducePendingCalls runs it.
const jsReduceSource = `function(accumulate, state, pendingCalls) {
	for (var i = 0; i < pendingCalls.length; i++) {
		state = accumulate.apply(null, [state].concat(pendingCalls[i]));
	}
	return state;
}`

// parseJSAccumulator compiles $accumulator's argument v, as mongod's
// AccumulatorJs::parse, with its codes.
func parseJSAccumulator(v bson.RawValue, js *jsRun) (*jsAccumulator, error) {
	if js == nil {
		return nil, errorf(codeBadValue, "mongotest does not implement $accumulator here")
	}
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(4544703, "$accumulator expects an object as an argument; found: %s", typeName(v.Type))
	}
	a := &jsAccumulator{js: js}
	var merge string
	for _, e := range mustElements(d) {
		var err error
		switch name := e.Key(); name {
		case "init":
			a.init, err = accumulatorFunction(name, e.Value(), js)
		case "accumulate":
			a.accumulate, err = accumulatorFunction(name, e.Value(), js)
		case "merge":
			merge, err = accumulatorFunction(name, e.Value(), js)
		case "finalize":
			a.finalize, err = accumulatorFunction(name, e.Value(), js)
			a.hasFinalize = true
		case "initArgs":
			a.initArgs, err = compileExprJS(e.Value(), 0, js)
		case "accumulateArgs":
			a.accumulateArgs, err = compileExprJS(e.Value(), 0, js)
		case "lang":
			lang, ok := e.Value().StringValueOK()
			switch {
			case !ok:
				err = errorf(4544704, "$accumulator lang must be a string; found: %s", typeName(e.Value().Type))
			case lang != "js":
				err = errorf(4544705, "$accumulator only supports lang: 'js'")
			}
		default:
			err = errorf(4544706, "$accumulator got an unexpected field: %s", name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case a.init == "":
		return nil, errorf(4544707, "$accumulator missing required argument 'init'")
	case a.accumulate == "":
		return nil, errorf(4544708, "$accumulator missing required argument 'accumulate'")
	case merge == "":
		return nil, errorf(4544709, "$accumulator missing required argument 'merge'")
	case a.accumulateArgs == nil:
		return nil, errorf(4544710, "$accumulator missing required argument 'accumulateArgs'")
	}
	if a.initArgs == nil {
		a.initArgs = constExpr{arrayValue(nil)}
	}
	return a, nil
}

// accumulatorFunction reads the function name of $accumulator: a constant
// string or code.
func accumulatorFunction(name string, v bson.RawValue, js *jsRun) (string, error) {
	x, err := compileExprJS(v, 0, js)
	if err != nil {
		return "", err
	}
	c, ok := x.(constExpr)
	if !ok {
		return "", errorf(4544701, "$accumulator '%s' must be a constant expression", name)
	}
	src, ok := codeOf(c.v)
	if !ok {
		return "", errorf(4544702, "$accumulator '%s' must be a String or Code", name)
	}
	return src, nil
}

// compiled returns *fn, compiling src into it first.
func compiled(fn **jsFunc, src string) (*jsFunc, error) {
	if *fn == nil {
		f, err := compileJS(src)
		if err != nil {
			return nil, err
		}
		*fn = f
	}
	return *fn, nil
}

// shown formats an expression's value for a message, mongod's MISSING if
// there is none.
func shown(v bson.RawValue, ok bool) string {
	if !ok {
		return "MISSING"
	}
	return formatValue(v)
}

// add takes doc into the group whose state is acc (val the state once
// has; vals the accumulateArgs of its documents).
func (a *jsAccumulator) add(acc *accumulator, doc bson.Raw) error {
	if !acc.has {
		args, ok := a.initArgs.eval(doc)
		if err := a.js.err(); err != nil {
			return err
		}
		if !ok || args.Type != bson.TypeArray {
			return errorf(4544711, "$accumulator initArgs must evaluate to an array: %s", shown(args, ok))
		}
		fn, err := compiled(&a.initFn, a.init)
		if err != nil {
			return err
		}
		state, cerr := a.js.call(fn, arrayValues(args))
		if cerr != nil {
			return cerr
		}
		acc.val, acc.has = state, true
	}
	args, ok := a.accumulateArgs.eval(doc)
	if err := a.js.err(); err != nil {
		return err
	}
	if !ok || args.Type != bson.TypeArray {
		return errorf(4544712, "$accumulator accumulateArgs must evaluate to an array: %s", shown(args, ok))
	}
	acc.vals = append(acc.vals, args)
	return nil
}

// result runs accumulate over the group's documents, then finalize, and
// returns the group's value.
func (a *jsAccumulator) result(acc *accumulator) (bson.RawValue, error) {
	state := acc.val
	if len(acc.vals) > 0 {
		fn, err := compiled(&a.accumulateFn, a.accumulate)
		if err != nil {
			return bson.RawValue{}, err
		}
		reduce, err := compiled(&a.reduceFn, jsReduceSource)
		if err != nil {
			return bson.RawValue{}, err
		}
		var out bson.RawValue
		if cerr := a.js.guard(func(vm *goja.Runtime) error {
			loop, err := a.js.function(reduce)
			if err != nil {
				return err
			}
			f, err := a.js.functionValue(fn)
			if err != nil {
				return err
			}
			s, err := a.js.toJS(state)
			if err != nil {
				return err
			}
			pending, err := a.js.toJS(arrayValue(acc.vals))
			if err != nil {
				return err
			}
			res, err := loop(goja.Undefined(), f, s, pending)
			if err != nil {
				return err
			}
			out, err = a.js.fromJS(res, bson.RawValue{}, 0)
			return err
		}); cerr != nil {
			return bson.RawValue{}, cerr
		}
		state = out
	}
	if !a.hasFinalize {
		return state, nil
	}
	fn, err := compiled(&a.finFn, a.finalize)
	if err != nil {
		return bson.RawValue{}, err
	}
	v, cerr := a.js.call(fn, []bson.RawValue{state})
	if cerr != nil {
		return bson.RawValue{}, cerr
	}
	return v, nil
}
