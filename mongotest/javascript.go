package mongotest

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file is the JavaScript engine of $where, $function and $accumulator
// (see javascript_ops.go for the operators): goja, an interpreter written
// in Go, in place of mongod's SpiderMonkey.
//
// Each command that runs JavaScript has one jsRun, and one goja runtime,
// created when it first calls a function; the functions are compiled once
// per command (and their programs kept across commands). Every call into
// JavaScript is bounded and interruptible, as mongod's are: a watcher
// stops it (goja's Runtime.Interrupt, and the end of sleep) at the
// command's maxTimeMS (MaxTimeMSExpired), at the per-call limit of
// WithJavaScriptTimeout (Interrupted), when a replica set member steps
// down during a write (InterruptedDueToReplStateChange), when the server
// closes (InterruptedAtShutdown), and when the client hangs up
// (ClientDisconnect). No goroutine outlives the call.
//
// A document reaches JavaScript as mongod's JavaScript sees it: doubles
// and int32s are numbers; int64s NumberLong objects (valueOf, toNumber,
// floatApprox); decimals NumberDecimal objects; strings, booleans, null
// and undefined themselves; dates Date objects; ObjectIds ObjectId
// objects (str, toString, equals, getTimestamp); regular expressions
// RegExp objects; binary data BinData objects (type, base64(), hex());
// timestamps Timestamp objects (t, i); MinKey and MaxKey their objects;
// code Code objects (code); arrays Arrays, and documents objects whose
// keys keep their order. The constructors ObjectId, NumberLong, NumberInt,
// NumberDecimal, Timestamp, BinData, Code and ISODate are globals, as are
// sleep(ms) and print. A value goes back to BSON the other way round: a
// number is a double, except for a field of a document that came from
// BSON, where it was an int32 and still fits one (as mongod keeps it); a
// function is code. DBPointers and code with scope are refused.

// DefaultJavaScriptTimeout is how long one call into JavaScript (one
// document's $where, one $function, one step of an $accumulator) may run
// unless WithJavaScriptTimeout says otherwise: mongod's
// internalQueryJavaScriptFnTimeoutMillis, 60 seconds.
const DefaultJavaScriptTimeout = 60 * time.Second

// WithJavaScriptTimeout sets how long one call into JavaScript may run
// before the server stops it and fails the command with Interrupted
// (11601), as mongod's internalQueryJavaScriptFnTimeoutMillis does
// (default DefaultJavaScriptTimeout): a test of an endless loop need not
// wait a minute.
func WithJavaScriptTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("mongotest: WithJavaScriptTimeout: the limit must be positive, not %v", d)
		}
		c.jsTimeout = d
		return nil
	}
}

// The error codes of server-side JavaScript.
const (
	codeJSInterpreterFailure = 139
	codeClientDisconnect     = 279
	codeInterrupted          = 11601
)

func init() {
	for code, name := range map[int32]string{
		codeJSInterpreterFailure: "JSInterpreterFailure",
		codeClientDisconnect:     "ClientDisconnect",
		codeInterrupted:          "Interrupted",
	} {
		if _, ok := codeNames[code]; !ok {
			codeNames[code] = name
		}
	}
}

// isInterruption reports whether err is one of mongod's interruptions,
// which fail a whole write command rather than one of its statements.
func isInterruption(err error) bool {
	var ce *cmdError
	if !errors.As(err, &ce) || ce == nil {
		return false
	}
	switch ce.code {
	case codeInterrupted, codeMaxTimeMSExpired, codeInterruptedAtShutdown, codeClientDisconnect,
		codeInterruptedDueToReplStateChange:
		return true
	}
	return false
}

// hangUpWatchAfter is how long a call into JavaScript runs before its
// watcher also watches the client for a hang-up: the calls of a $where,
// one per document, mostly end sooner, and need no reading of the socket.
const hangUpWatchAfter = 5 * time.Millisecond

// maxJSCallStack bounds the calls nested in JavaScript, so that an endless
// recursion fails (as SpiderMonkey's "too much recursion") rather than
// growing the server's memory.
const maxJSCallStack = 2000

// maxJSDepth bounds the nesting of a value converted from JavaScript to
// BSON, which catches cycles.
const maxJSDepth = 150

// jsRun is the JavaScript of one command.
type jsRun struct {
	req      *request
	limit    time.Duration // of one call (WithJavaScriptTimeout)
	deadline time.Time     // from the command's maxTimeMS, zero if none

	vm    *goja.Runtime // created at the first call
	types jsTypes
	funcs map[*goja.Program]goja.Value
	// origins are the objects and arrays made from BSON during the call
	// running, with the document or array each came from: a number put
	// back where an int32 was stays one.
	origins map[*goja.Object]bson.Raw
	// watch is the watcher of the call running, which sleep waits on.
	watch *jsWatch

	// failure is the first failure of a call (kept by the expressions,
	// which cannot return one): the command fails with it, and no call
	// runs after it.
	failure *cmdError
}

// newJSRun returns the JavaScript context of req; the runtime itself is
// made only if a call comes.
func newJSRun(req *request) *jsRun {
	r := &jsRun{req: req, limit: DefaultJavaScriptTimeout}
	if req.conn != nil && req.conn.srv != nil && req.conn.srv.cfg.jsTimeout > 0 {
		r.limit = req.conn.srv.cfg.jsTimeout
	}
	if v, err := req.body.LookupErr("maxTimeMS"); err == nil && isNumber(v) && floatOf(v) > 0 {
		r.deadline = time.Now().Add(time.Duration(floatOf(v) * float64(time.Millisecond)))
	}
	return r
}

// fail records err as the run's failure, unless it has one.
func (r *jsRun) fail(err *cmdError) {
	if r.failure == nil {
		r.failure = err
	}
}

// err returns the run's failure, nil if none (or if r is nil).
func (r *jsRun) err() error {
	if r == nil || r.failure == nil {
		return nil
	}
	return r.failure
}

// jsFunc is a compiled function: a program that evaluates to it.
type jsFunc struct {
	src  string
	prog *goja.Program
}

// jsPrograms keeps the programs compiled, by source, across commands.
var jsPrograms struct {
	mu sync.Mutex
	m  map[string]*goja.Program
}

// maxJSPrograms bounds jsPrograms, which is emptied when full.
const maxJSPrograms = 512

// compileJS compiles src, a function or the body of one as mongod takes
// it, or fails as mongod fails with JSInterpreterFailure.
func compileJS(src string) (*jsFunc, *cmdError) {
	jsPrograms.mu.Lock()
	prog := jsPrograms.m[src]
	jsPrograms.mu.Unlock()
	if prog != nil {
		return &jsFunc{src: src, prog: prog}, nil
	}
	fn, err := functionSource(src)
	if err == nil {
		prog, err = goja.Compile("", "("+fn+"\n)", false)
	}
	if err != nil {
		return nil, errorf(codeJSInterpreterFailure, "SyntaxError: %s", syntaxMessage(err))
	}
	jsPrograms.mu.Lock()
	if jsPrograms.m == nil || len(jsPrograms.m) >= maxJSPrograms {
		jsPrograms.m = map[string]*goja.Program{}
	}
	jsPrograms.m[src] = prog
	jsPrograms.mu.Unlock()
	return &jsFunc{src: src, prog: prog}, nil
}

// syntaxMessage returns the message of a parse or compile error.
func syntaxMessage(err error) string {
	var ce *goja.CompilerSyntaxError
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

// functionSource turns src into the source of a function expression as
// mongod does (its parseJSFunctionOrExpression): a function stays as it
// is; statements become the body of a function that returns the value of
// the last one when it is an expression; a body with a return statement
// becomes a function's body. Trailing semicolons are dropped first.
func functionSource(src string) (string, error) {
	s := strings.TrimSpace(src)
	for strings.HasSuffix(s, ";") {
		s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	}
	prg, err := parser.ParseFile(nil, "", s, 0)
	if err != nil {
		if isFunctionExpression(s) {
			return s, nil
		}
		if strings.Contains(err.Error(), "Illegal return statement") {
			return "function() {" + s + "\n}", nil
		}
		return "", err
	}
	if len(prg.Body) == 0 {
		return "", errors.New("no function or expression")
	}
	last := prg.Body[len(prg.Body)-1]
	switch last.(type) {
	case *ast.FunctionDeclaration:
		return s, nil
	case *ast.ExpressionStatement:
	default:
		return "function() {" + s + "\n}", nil
	}
	// Put return before the last statement. Its start may be inside
	// parentheses that the parser drops ("(a == b)"): move back until
	// the body parses, but not into the statement before.
	floor := 0
	if len(prg.Body) > 1 {
		floor = int(prg.Body[len(prg.Body)-2].Idx1()) - 1
	}
	for at := min(int(last.Idx0())-1, len(s)); at >= floor && at >= 0; at-- {
		body := s[:at] + "return " + s[at:]
		if _, err := parser.ParseFile(nil, "", "function x() {"+body+"\n}", 0); err == nil {
			return "function() {" + body + "\n}", nil
		}
	}
	return "function() {" + s + "\n}", nil
}

// isFunctionExpression reports whether s is one anonymous function, which
// does not parse as a statement.
func isFunctionExpression(s string) bool {
	prg, err := parser.ParseFile(nil, "", "("+s+"\n)", 0)
	if err != nil || len(prg.Body) != 1 {
		return false
	}
	st, ok := prg.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return false
	}
	_, ok = st.Expression.(*ast.FunctionLiteral)
	return ok
}

// runtime returns the run's goja runtime, made with mongod's globals at
// the first call.
func (r *jsRun) runtime() (*goja.Runtime, error) {
	if r.vm != nil {
		return r.vm, nil
	}
	vm := goja.New()
	vm.SetMaxCallStackSize(maxJSCallStack)
	setup, err := vm.RunProgram(jsPrelude())
	if err != nil {
		return nil, err
	}
	install, _ := goja.AssertFunction(setup)
	newID := func(goja.FunctionCall) goja.Value { return vm.ToValue(bson.NewObjectID().Hex()) }
	hexOf := func(call goja.FunctionCall) goja.Value {
		b, err := base64.StdEncoding.DecodeString(call.Argument(0).String())
		if err != nil {
			panic(vm.NewTypeError("invalid base64: %v", err))
		}
		return vm.ToValue(hex.EncodeToString(b))
	}
	if _, err := install(goja.Undefined(), vm.GlobalObject(), vm.ToValue(newID), vm.ToValue(hexOf), vm.ToValue(r.sleep)); err != nil {
		return nil, err
	}
	ctor := func(name string) *goja.Object { return vm.Get(name).ToObject(vm) }
	r.types = jsTypes{
		date: ctor("Date"), regexp: ctor("RegExp"), objectID: ctor("ObjectId"), numberLong: ctor("NumberLong"),
		numberInt: ctor("NumberInt"), numberDecimal: ctor("NumberDecimal"), timestamp: ctor("Timestamp"),
		binData: ctor("BinData"), code: ctor("Code"),
	}
	t := &r.types
	for _, p := range []struct {
		ctor  *goja.Object
		proto **goja.Object
	}{
		{t.objectID, &t.objectIDProto}, {t.numberLong, &t.numberLongProto}, {t.numberInt, &t.numberIntProto},
		{t.numberDecimal, &t.numberDecimalProto}, {t.timestamp, &t.timestampProto}, {t.binData, &t.binDataProto},
		{t.code, &t.codeProto},
	} {
		*p.proto = p.ctor.Get("prototype").ToObject(vm)
	}
	t.minKey, _ = vm.RunString("MinKey()")
	t.maxKey, _ = vm.RunString("MaxKey()")
	r.vm, r.funcs = vm, map[*goja.Program]goja.Value{}
	return vm, nil
}

// jsTypes are the constructors and values of the runtime that BSON's
// types become.
type jsTypes struct {
	date, regexp, objectID, numberLong, numberInt, numberDecimal, timestamp, binData, code *goja.Object
	minKey, maxKey                                                                         goja.Value
	// the prototypes of the objects of BSON's types
	objectIDProto, numberLongProto, numberIntProto, numberDecimalProto, timestampProto, binDataProto, codeProto *goja.Object
}

// function returns fn as a callable of the runtime.
func (r *jsRun) function(fn *jsFunc) (goja.Callable, error) {
	v, err := r.functionValue(fn)
	if err != nil {
		return nil, err
	}
	f, _ := goja.AssertFunction(v)
	return f, nil
}

// functionValue returns fn as a function object of the runtime, made once
// per command.
func (r *jsRun) functionValue(fn *jsFunc) (goja.Value, error) {
	if v := r.funcs[fn.prog]; v != nil {
		return v, nil
	}
	v, err := r.vm.RunProgram(fn.prog)
	if err != nil {
		return nil, err
	}
	if _, ok := goja.AssertFunction(v); !ok {
		return nil, fmt.Errorf("TypeError: %s is not a function", v)
	}
	r.funcs[fn.prog] = v
	return v, nil
}

// guard runs f, a call into JavaScript, under a watcher, and returns its
// failure as the command's: the watcher's reason if it stopped the call.
func (r *jsRun) guard(f func(vm *goja.Runtime) error) *cmdError {
	if r.failure != nil {
		return r.failure
	}
	vm, err := r.runtime()
	if err != nil {
		r.fail(jsFailure(err))
		return r.failure
	}
	st := &r.req.conn.srv.stats
	st.update(func(s *Stats) { s.JavaScriptCalls++; s.JavaScriptRunning++ })
	r.origins = map[*goja.Object]bson.Raw{}
	w := r.startWatch()
	err = f(vm)
	why := w.end()
	vm.ClearInterrupt()
	r.watch, r.origins = nil, nil
	st.update(func(s *Stats) {
		s.JavaScriptRunning--
		if why != nil {
			s.JavaScriptInterrupted[codeName(why.code)]++
		}
	})
	switch {
	case why != nil:
		r.fail(why)
	case err != nil:
		r.fail(jsFailure(err))
	}
	return r.failure
}

// jsWatch watches one call into JavaScript, and interrupts it.
type jsWatch struct {
	stop  chan struct{} // closed when the call returns
	done  chan struct{} // closed when the watcher has ended
	fired chan struct{} // closed once the watcher interrupted the call
	why   *cmdError     // the reason, set before fired closes
}

// startWatch starts the watcher of a call.
func (r *jsRun) startWatch() *jsWatch {
	w := &jsWatch{stop: make(chan struct{}), done: make(chan struct{}), fired: make(chan struct{})}
	r.watch = w
	limit := time.NewTimer(r.limit)
	var maxTime <-chan time.Time
	var mt *time.Timer
	if !r.deadline.IsZero() {
		mt = time.NewTimer(time.Until(r.deadline))
		maxTime = mt.C
	}
	c, vm := r.req.conn, r.vm
	go func() {
		defer close(w.done)
		defer limit.Stop()
		if mt != nil {
			defer mt.Stop()
		}
		later := time.NewTimer(hangUpWatchAfter)
		defer later.Stop()
		var hang *hangUpWatch
		var gone <-chan struct{}
		defer func() {
			if hang != nil {
				hang.stop()
			}
		}()
		for {
			var why *cmdError
			select {
			case <-w.stop:
				return
			case <-later.C:
				hang = c.watchHangUp()
				gone = hang.gone
				continue
			case <-limit.C:
				why = errorf(codeInterrupted, "JavaScript execution interrupted: a call ran longer than %v (mongotest's WithJavaScriptTimeout, mongod's internalQueryJavaScriptFnTimeoutMillis)", r.limit)
			case <-maxTime:
				why = errorf(codeMaxTimeMSExpired, "operation exceeded time limit")
			case <-r.req.interrupt:
				why = errInterrupted().(*cmdError)
			case <-r.req.killed():
				why = errKilled()
			case <-c.life.done:
				why = errorf(codeInterruptedAtShutdown, "interrupted at shutdown")
			case <-gone:
				why = errorf(codeClientDisconnect, "operation was interrupted because a client disconnected")
			}
			w.why = why
			vm.Interrupt(why)
			close(w.fired)
			<-w.stop
			return
		}
	}()
	return w
}

// end stops the watcher and returns why it interrupted the call, nil if
// it did not.
func (w *jsWatch) end() *cmdError {
	close(w.stop)
	<-w.done
	return w.why
}

// sleep is JavaScript's sleep(ms), as mongod has it: it waits, unless the
// call is interrupted.
func (r *jsRun) sleep(call goja.FunctionCall) goja.Value {
	if len(call.Arguments) != 1 || !isJSNumber(call.Arguments[0]) {
		panic(r.newError("sleep takes a single numeric argument -- sleep(milliseconds)"))
	}
	ms := call.Arguments[0].ToFloat()
	if !(ms > 0) || r.watch == nil {
		return goja.Undefined()
	}
	d := time.Duration(min(ms, float64(24*time.Hour/time.Millisecond)) * float64(time.Millisecond))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.watch.fired: // the runtime is interrupted: it stops on return
	}
	return goja.Undefined()
}

// newError returns a JavaScript Error with msg, to throw.
func (r *jsRun) newError(msg string) *goja.Object {
	o, err := r.vm.New(r.vm.Get("Error"), r.vm.ToValue(msg))
	if err != nil {
		return r.vm.NewTypeError(msg)
	}
	return o
}

// isJSNumber reports whether v is a number.
func isJSNumber(v goja.Value) bool {
	switch v.Export().(type) {
	case int64, float64:
		return true
	}
	return false
}

// jsFailure turns what a call returned into mongod's failure:
// JSInterpreterFailure with the exception and its stack.
func jsFailure(err error) *cmdError {
	var ce *cmdError
	if errors.As(err, &ce) && ce != nil {
		return ce
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return errorf(codeJSInterpreterFailure, "InternalError: too much recursion :\n%s", jsStack(so.Stack()))
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		msg := "uncaught exception: "
		if v := ex.Value(); v != nil {
			if o, ok := v.(*goja.Object); ok && o.ClassName() == "Error" {
				msg = ""
			}
			msg += v.String()
		}
		return errorf(codeJSInterpreterFailure, "%s :\n%s", msg, jsStack(ex.Stack()))
	}
	return errorf(codeJSInterpreterFailure, "%s", err.Error())
}

// jsStack formats a stack as SpiderMonkey does: function@file:line:column.
func jsStack(frames []goja.StackFrame) string {
	var b strings.Builder
	for i, f := range frames {
		if i == 20 {
			break
		}
		p := f.Position()
		if p.Line == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s@%s:%d:%d\n", f.FuncName(), p.Filename, p.Line, p.Column)
	}
	return b.String()
}

// The conversions between BSON and JavaScript.

// toJS converts v to a value of the runtime.
func (r *jsRun) toJS(v bson.RawValue) (goja.Value, error) {
	vm, t := r.vm, &r.types
	construct := func(c *goja.Object, args ...any) (goja.Value, error) {
		vals := make([]goja.Value, len(args))
		for i, a := range args {
			vals[i] = vm.ToValue(a)
		}
		return vm.New(c, vals...)
	}
	switch v.Type {
	case bson.TypeDouble:
		return vm.ToValue(v.Double()), nil
	case bson.TypeString:
		return vm.ToValue(v.StringValue()), nil
	case bson.TypeSymbol:
		return vm.ToValue(v.Symbol()), nil
	case bson.TypeEmbeddedDocument:
		doc := v.Document()
		obj := vm.NewObject()
		elems, err := doc.Elements()
		if err != nil {
			return nil, err
		}
		for _, e := range elems {
			x, err := r.toJS(e.Value())
			if err != nil {
				return nil, err
			}
			if err := obj.DefineDataProperty(e.Key(), x, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
				return nil, err
			}
		}
		r.origins[obj] = doc
		return obj, nil
	case bson.TypeArray:
		vals := arrayValues(v)
		items := make([]any, len(vals))
		for i, e := range vals {
			x, err := r.toJS(e)
			if err != nil {
				return nil, err
			}
			items[i] = x
		}
		arr := vm.NewArray(items...)
		r.origins[arr] = bson.Raw(v.Value)
		return arr, nil
	case bson.TypeBinary:
		sub, data := v.Binary()
		return construct(t.binData, int64(sub), base64.StdEncoding.EncodeToString(data))
	case bson.TypeUndefined:
		return goja.Undefined(), nil
	case bson.TypeObjectID:
		return construct(t.objectID, v.ObjectID().Hex())
	case bson.TypeBoolean:
		return vm.ToValue(v.Boolean()), nil
	case bson.TypeDateTime:
		return construct(t.date, float64(v.DateTime()))
	case bson.TypeNull:
		return goja.Null(), nil
	case bson.TypeRegex:
		pattern, options := v.Regex()
		var flags strings.Builder
		for _, o := range options {
			if strings.ContainsRune("ims", o) {
				flags.WriteRune(o)
			}
		}
		return construct(t.regexp, pattern, flags.String())
	case bson.TypeJavaScript:
		return construct(t.code, v.JavaScript())
	case bson.TypeInt32:
		return vm.ToValue(int64(v.Int32())), nil
	case bson.TypeTimestamp:
		ts, i := v.Timestamp()
		return construct(t.timestamp, int64(ts), int64(i))
	case bson.TypeInt64:
		return construct(t.numberLong, strconv.FormatInt(v.Int64(), 10))
	case bson.TypeDecimal128:
		return construct(t.numberDecimal, v.Decimal128().String())
	case bson.TypeMinKey:
		return t.minKey, nil
	case bson.TypeMaxKey:
		return t.maxKey, nil
	}
	return nil, errorf(codeBadValue, "mongotest does not convert BSON %s values to JavaScript", typeName(v.Type))
}

// fromJS converts the JavaScript value v to BSON; origin is the value that
// was at its place in the BSON it came from, if any (Type 0 if none).
func (r *jsRun) fromJS(v goja.Value, origin bson.RawValue, depth int) (bson.RawValue, error) {
	if depth > maxJSDepth {
		return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: the value nests deeper than %d levels (a cycle?)", maxJSDepth)
	}
	if v == nil || goja.IsUndefined(v) {
		return bson.RawValue{Type: bson.TypeUndefined}, nil
	}
	if goja.IsNull(v) {
		return nullValue, nil
	}
	obj, isObj := v.(*goja.Object)
	if !isObj {
		switch x := v.Export().(type) {
		case int64:
			if origin.Type == bson.TypeInt32 && x >= math.MinInt32 && x <= math.MaxInt32 {
				return int32Value(int32(x)), nil
			}
			return doubleValue(float64(x)), nil
		case float64:
			if origin.Type == bson.TypeInt32 && x == math.Trunc(x) && x >= math.MinInt32 && x <= math.MaxInt32 && !(x == 0 && math.Signbit(x)) {
				return int32Value(int32(x)), nil
			}
			return doubleValue(x), nil
		case string:
			return stringValue(x), nil
		case bool:
			return marshalJSValue(x)
		}
		return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: cannot convert %s", v.String())
	}
	t := &r.types
	if _, ok := goja.AssertFunction(obj); ok {
		return marshalJSValue(bson.JavaScript(obj.String()))
	}
	switch obj.Prototype() {
	case t.objectIDProto:
		id, err := bson.ObjectIDFromHex(obj.Get("str").String())
		if err != nil {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: invalid ObjectId: %v", err)
		}
		return objectIDValue(id), nil
	case t.numberLongProto:
		n, err := strconv.ParseInt(hidden(obj, "__value"), 10, 64)
		if err != nil {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: invalid NumberLong")
		}
		return int64Value(n), nil
	case t.numberIntProto:
		n, err := strconv.ParseInt(hidden(obj, "__value"), 10, 32)
		if err != nil {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: invalid NumberInt")
		}
		return int32Value(int32(n)), nil
	case t.numberDecimalProto:
		d, err := bson.ParseDecimal128(hidden(obj, "__value"))
		if err != nil {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: invalid NumberDecimal: %v", err)
		}
		return marshalJSValue(d)
	case t.timestampProto:
		return timestampValue(uint32(obj.Get("t").ToInteger()), uint32(obj.Get("i").ToInteger())), nil
	case t.binDataProto:
		data, err := base64.StdEncoding.DecodeString(hidden(obj, "__base64"))
		if err != nil {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: invalid BinData: %v", err)
		}
		return marshalJSValue(bson.Binary{Subtype: byte(obj.Get("type").ToInteger()), Data: data})
	case t.codeProto:
		return marshalJSValue(bson.JavaScript(obj.Get("code").String()))
	}
	switch {
	case obj == t.minKey:
		return bson.RawValue{Type: bson.TypeMinKey}, nil
	case obj == t.maxKey:
		return bson.RawValue{Type: bson.TypeMaxKey}, nil
	}
	switch obj.ClassName() {
	case "Date":
		tm, ok := obj.Export().(time.Time)
		if !ok {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: an invalid Date")
		}
		return dateValue(tm.UnixMilli()), nil
	case "RegExp":
		var opts []byte
		for _, f := range obj.Get("flags").String() {
			if strings.ContainsRune("ims", f) {
				opts = append(opts, byte(f))
			}
		}
		return marshalJSValue(bson.Regex{Pattern: obj.Get("source").String(), Options: string(opts)})
	case "Array":
		n := int(obj.Get("length").ToInteger())
		src := r.origins[obj]
		vals := make([]bson.RawValue, n)
		for i := range n {
			var o bson.RawValue
			if src != nil {
				o, _ = bson.RawArray(src).IndexErr(uint(i))
			}
			x, err := r.fromJS(obj.Get(strconv.Itoa(i)), o, depth+1)
			if err != nil {
				return bson.RawValue{}, err
			}
			vals[i] = x
		}
		return arrayValue(vals), nil
	}
	src := r.origins[obj]
	var b docBuilder
	for _, k := range obj.Keys() {
		if strings.IndexByte(k, 0) >= 0 {
			return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: a field name holds a NUL byte")
		}
		var o bson.RawValue
		if src != nil {
			o = src.Lookup(k)
		}
		x, err := r.fromJS(obj.Get(k), o, depth+1)
		if err != nil {
			return bson.RawValue{}, err
		}
		b.append(k, x)
	}
	return b.docValue(), nil
}

// hidden reads the hidden property name of o as a string.
func hidden(o *goja.Object, name string) string {
	if v := o.Get(name); v != nil {
		return v.String()
	}
	return ""
}

// marshalJSValue encodes x as a BSON value.
func marshalJSValue(x any) (bson.RawValue, error) {
	t, b, err := bson.MarshalValue(x)
	if err != nil {
		return bson.RawValue{}, errorf(codeJSInterpreterFailure, "Converting from JavaScript to BSON failed: %v", err)
	}
	return bson.RawValue{Type: t, Value: b}, nil
}

// jsPreludeProgram is the program of the runtime's globals, compiled once.
var jsPreludeProgram = sync.OnceValue(func() *goja.Program {
	return goja.MustCompile("prelude", jsPreludeSource, true)
})

func jsPrelude() *goja.Program { return jsPreludeProgram() }

// jsPreludeSource evaluates to a function that installs mongod's globals
// on the global object g: the constructors of BSON's types, sleep, print.
const jsPreludeSource = `(function(g, newObjectId, hexOf, sleep) {
	function hide(o, k, v) { Object.defineProperty(o, k, {value: v}); }
	function methods(c, m) {
		for (var k in m) Object.defineProperty(c.prototype, k, {value: m[k], writable: true, configurable: true});
	}
	var int64Min = BigInt("-9223372036854775808"), int64Max = BigInt("9223372036854775807");

	function ObjectId(hex) {
		if (!(this instanceof ObjectId)) return new ObjectId(hex);
		if (hex === undefined) hex = newObjectId();
		if (typeof hex !== "string" || !/^[0-9a-fA-F]{24}$/.test(hex)) throw new TypeError("invalid ObjectId: " + hex);
		this.str = hex.toLowerCase();
	}
	methods(ObjectId, {
		toString: function() { return 'ObjectId("' + this.str + '")'; },
		toJSON: function() { return {$oid: this.str}; },
		toHexString: function() { return this.str; },
		equals: function(o) { return o instanceof ObjectId && o.str === this.str; },
		getTimestamp: function() { return new Date(parseInt(this.str.slice(0, 8), 16) * 1000); },
	});

	function NumberLong(v) {
		if (!(this instanceof NumberLong)) return new NumberLong(v);
		var n = typeof v === "string" ? BigInt(v) : BigInt(Math.trunc(Number(v === undefined ? 0 : v)));
		if (n < int64Min || n > int64Max) throw new RangeError("NumberLong out of range: " + v);
		hide(this, "__value", n.toString());
		this.floatApprox = Number(n);
	}
	methods(NumberLong, {
		valueOf: function() { return Number(this.__value); },
		toNumber: function() { return Number(this.__value); },
		toString: function() {
			var n = Number(this.__value);
			return Number.isSafeInteger(n) ? "NumberLong(" + this.__value + ")" : 'NumberLong("' + this.__value + '")';
		},
		toJSON: function() { return {$numberLong: this.__value}; },
	});

	function NumberInt(v) {
		if (!(this instanceof NumberInt)) return new NumberInt(v);
		hide(this, "__value", String(Number(v === undefined ? 0 : v) | 0));
	}
	methods(NumberInt, {
		valueOf: function() { return Number(this.__value); },
		toNumber: function() { return Number(this.__value); },
		toString: function() { return "NumberInt(" + this.__value + ")"; },
		toJSON: function() { return Number(this.__value); },
	});

	function NumberDecimal(v) {
		if (!(this instanceof NumberDecimal)) return new NumberDecimal(v);
		hide(this, "__value", String(v === undefined ? 0 : v));
	}
	methods(NumberDecimal, {
		toString: function() { return 'NumberDecimal("' + this.__value + '")'; },
		toJSON: function() { return {$numberDecimal: this.__value}; },
	});

	function Timestamp(t, i) {
		if (!(this instanceof Timestamp)) return new Timestamp(t, i);
		this.t = t === undefined ? 0 : Number(t);
		this.i = i === undefined ? 0 : Number(i);
	}
	methods(Timestamp, {
		toString: function() { return "Timestamp(" + this.t + ", " + this.i + ")"; },
		toJSON: function() { return {$timestamp: {t: this.t, i: this.i}}; },
	});

	function BinData(type, data) {
		if (!(this instanceof BinData)) return new BinData(type, data);
		this.type = Number(type);
		hide(this, "__base64", String(data));
	}
	methods(BinData, {
		base64: function() { return this.__base64; },
		hex: function() { return hexOf(this.__base64); },
		toString: function() { return "BinData(" + this.type + ',"' + this.__base64 + '")'; },
		toJSON: function() { return {$binary: {base64: this.__base64, subType: this.type.toString(16)}}; },
	});

	function Code(code) {
		if (!(this instanceof Code)) return new Code(code);
		this.code = String(code);
	}
	methods(Code, { toString: function() { return this.code; } });

	var minKey, maxKey;
	function MinKey() { return minKey; }
	function MaxKey() { return maxKey; }
	minKey = Object.create(MinKey.prototype);
	maxKey = Object.create(MaxKey.prototype);
	methods(MinKey, { toString: function() { return "MinKey"; }, toJSON: function() { return {$minKey: 1}; } });
	methods(MaxKey, { toString: function() { return "MaxKey"; }, toJSON: function() { return {$maxKey: 1}; } });

	function ISODate(s) { return s === undefined ? new Date() : new Date(s); }

	var globals = {ObjectId: ObjectId, NumberLong: NumberLong, NumberInt: NumberInt, NumberDecimal: NumberDecimal,
		Timestamp: Timestamp, BinData: BinData, Code: Code, MinKey: MinKey, MaxKey: MaxKey, ISODate: ISODate,
		sleep: sleep, print: function() {}};
	for (var k in globals) Object.defineProperty(g, k, {value: globals[k], writable: true, configurable: true});
})`
