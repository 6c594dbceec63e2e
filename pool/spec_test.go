package pool_test

// The runner of the CMAP specification's unit tests, the JSON files of
// testdata/spec/cmap-format (see the README.md there, which defines the format
// and the MATCH function). Every file of the folder runs: a file dropped into
// it needs no code change. Files of style "integration" need a server with
// failpoints and are skipped here.
//
// Unit files run in a testing/synctest bubble: the pool, its goroutines and
// the test's threads all live in it, so that "wait" operations, waitForEvent
// timeouts and the pool's own timers (waitQueueTimeoutMS, maxIdleTimeMS, the
// maintenance interval) use the bubble's fake clock and the tests are fast and
// deterministic.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

const (
	cmapSpecDir = "../testdata/spec/cmap-format"
	// cmapSpecAddress is the address of the pools under test.
	cmapSpecAddress = "127.0.0.1:27017"
	// cmapDefaultWaitForEventTimeout applies to waitForEvent operations that give
	// no timeout. It is virtual time: waiting it out costs nothing.
	cmapDefaultWaitForEventTimeout = 10 * time.Second
	// cmapThreadTimeout bounds waitForThread and the end of the threads at the end
	// of a test (virtual time too), so that a thread that never finishes fails
	// the test with a message instead of deadlocking the bubble.
	cmapThreadTimeout = time.Minute
)

func TestCMAPSpec(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(cmapSpecDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no spec test files in %s", cmapSpecDir)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			runCMAPFile(t, file)
		})
	}
}

// runCMAPFile reads one spec test file and runs it according to its style.
func runCMAPFile(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Style string `json:"style"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	switch head.Style {
	case "unit":
	case "integration":
		t.Skip("integration test: needs a server with failpoints, comes with the test server")
	default:
		t.Fatalf("%s: unknown style %q", file, head.Style)
	}
	spec, err := parseCMAPUnitFile(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	t.Log(spec.Description)
	synctest.Test(t, func(t *testing.T) {
		runCMAPUnit(t, spec)
	})
}

// cmapUnitFile is a unit test file. Unknown fields make parsing fail.
type cmapUnitFile struct {
	Version     int              `json:"version"`
	Style       string           `json:"style"`
	Description string           `json:"description"`
	PoolOptions map[string]any   `json:"poolOptions"`
	Operations  []map[string]any `json:"operations"`
	Error       map[string]any   `json:"error"`
	Events      []any            `json:"events"`
	Ignore      []string         `json:"ignore"`
	ops         []cmapOperation  // Operations, checked
	ignored     map[string]bool  // Ignore as a set
	options     []pool.Option    // PoolOptions, converted
}

func parseCMAPUnitFile(data []byte) (*cmapUnitFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f cmapUnitFile
	if err := dec.Decode(&f); err != nil {
		return nil, err
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("unsupported format version %d (the runner knows version 1)", f.Version)
	}
	if f.Operations == nil {
		return nil, errors.New("no operations")
	}
	labels := make(map[string]bool)
	for i, raw := range f.Operations {
		op, err := parseCMAPOperation(raw)
		if err != nil {
			return nil, fmt.Errorf("operation %d: %v", i, err)
		}
		op.index = i
		// Catch a misspelt label even where the check-in would not run
		// (on a thread stopped by an earlier error).
		if op.label != "" {
			labels[op.label] = true
		}
		if op.connection != "" && !labels[op.connection] {
			return nil, fmt.Errorf("%v: no earlier checkOut has label %q", op, op.connection)
		}
		f.ops = append(f.ops, op)
	}
	f.ignored = make(map[string]bool)
	for _, name := range f.Ignore {
		if !cmapEventNames[name] {
			return nil, fmt.Errorf("ignore: unknown event type %q", name)
		}
		f.ignored[name] = true
	}
	for k := range f.Error {
		switch k {
		case "type", "message", "address":
		default:
			return nil, fmt.Errorf("error: unknown field %q", k)
		}
	}
	for i, e := range f.Events {
		if _, ok := e.(map[string]any); !ok {
			return nil, fmt.Errorf("events[%d] is not an object", i)
		}
	}
	var err error
	if f.options, err = cmapPoolOptions(f.PoolOptions); err != nil {
		return nil, fmt.Errorf("poolOptions: %v", err)
	}
	return &f, nil
}

// cmapPoolOptions converts the poolOptions of a unit test file.
func cmapPoolOptions(raw map[string]any) ([]pool.Option, error) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var opts []pool.Option
	for _, k := range keys {
		v := raw[k]
		if k == "appName" {
			// Only the integration tests' failpoints look at it.
			if _, ok := v.(string); !ok {
				return nil, fmt.Errorf("appName is not a string: %v", v)
			}
			continue
		}
		n, err := specJSONInt(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		ms := time.Duration(n) * time.Millisecond
		switch k {
		case "maxPoolSize":
			opts = append(opts, pool.WithMaxPoolSize(int(n)))
		case "minPoolSize":
			opts = append(opts, pool.WithMinPoolSize(int(n)))
		case "maxConnecting":
			opts = append(opts, pool.WithMaxConnecting(int(n)))
		case "maxIdleTimeMS":
			opts = append(opts, pool.WithMaxIdleTime(ms))
		case "waitQueueTimeoutMS":
			opts = append(opts, pool.WithWaitQueueTimeout(ms))
		case "backgroundThreadIntervalMS":
			switch {
			case n == 0:
				return nil, errors.New("backgroundThreadIntervalMS must not be 0")
			case n < 0: // never run the maintenance
				opts = append(opts, pool.WithMaintenanceInterval(-1))
			default:
				opts = append(opts, pool.WithMaintenanceInterval(ms))
			}
		default:
			return nil, fmt.Errorf("unknown pool option %q", k)
		}
	}
	return opts, nil
}

// specJSONInt returns the integer value of a JSON number.
func specJSONInt(v any) (int64, error) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("not an integer: %v", v)
	}
	return int64(f), nil
}

// cmapOperation is one operation of a unit test file.
type cmapOperation struct {
	index      int
	name       string
	thread     string        // "" for the main thread
	label      string        // checkOut
	connection string        // checkIn
	interrupt  bool          // clear
	target     string        // start, waitForThread
	ms         time.Duration // wait
	event      string        // waitForEvent
	count      int           // waitForEvent
	timeout    time.Duration // waitForEvent
}

func (op cmapOperation) String() string {
	s := fmt.Sprintf("operation %d (%s", op.index, op.name)
	if op.thread != "" {
		s += " on " + op.thread
	}
	return s + ")"
}

// cmapOperationFields lists, per operation name, the fields it takes besides
// name and thread; required ones are marked true.
var cmapOperationFields = map[string]map[string]bool{
	"ready":         {},
	"close":         {},
	"checkOut":      {"label": false},
	"checkIn":       {"connection": true},
	"clear":         {"interruptInUseConnections": false},
	"start":         {"target": true},
	"wait":          {"ms": true},
	"waitForThread": {"target": true},
	"waitForEvent":  {"event": true, "count": true, "timeout": false},
}

func parseCMAPOperation(raw map[string]any) (cmapOperation, error) {
	var op cmapOperation
	name, ok := raw["name"].(string)
	if !ok {
		return op, fmt.Errorf("no name: %v", raw)
	}
	fields, ok := cmapOperationFields[name]
	if !ok {
		return op, fmt.Errorf("unknown operation %q", name)
	}
	op.name = name
	for k := range raw {
		if _, ok := fields[k]; !ok && k != "name" && k != "thread" {
			return op, fmt.Errorf("%s: unknown field %q", name, k)
		}
	}
	for k, required := range fields {
		if _, ok := raw[k]; required && !ok {
			return op, fmt.Errorf("%s: missing field %q", name, k)
		}
	}
	str := func(k string) (string, error) {
		v, ok := raw[k]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return "", fmt.Errorf("%s: %s is not a non-empty string: %v", name, k, v)
		}
		return s, nil
	}
	num := func(k string) (int64, error) {
		v, ok := raw[k]
		if !ok {
			return 0, nil
		}
		n, err := specJSONInt(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %v", name, k, err)
		}
		return n, nil
	}
	var err error
	if op.thread, err = str("thread"); err != nil {
		return op, err
	}
	if op.label, err = str("label"); err != nil {
		return op, err
	}
	if op.connection, err = str("connection"); err != nil {
		return op, err
	}
	if op.target, err = str("target"); err != nil {
		return op, err
	}
	if op.event, err = str("event"); err != nil {
		return op, err
	}
	if op.event != "" && !cmapEventNames[op.event] {
		return op, fmt.Errorf("%s: unknown event type %q", name, op.event)
	}
	if v, ok := raw["interruptInUseConnections"]; ok {
		if op.interrupt, ok = v.(bool); !ok {
			return op, fmt.Errorf("%s: interruptInUseConnections is not a boolean: %v", name, v)
		}
	}
	ms, err := num("ms")
	if err != nil {
		return op, err
	}
	op.ms = time.Duration(ms) * time.Millisecond
	count, err := num("count")
	if err != nil {
		return op, err
	}
	op.count = int(count)
	timeout, err := num("timeout")
	if err != nil {
		return op, err
	}
	op.timeout = time.Duration(timeout) * time.Millisecond
	if _, ok := raw["timeout"]; !ok {
		op.timeout = cmapDefaultWaitForEventTimeout
	}
	if op.thread != "" && (name == "start" || name == "waitForThread") {
		// The format does not need it and the runner keeps its threads on
		// the main goroutine.
		return op, fmt.Errorf("%s on a thread is not supported", name)
	}
	return op, nil
}

// The event types of the specification, by their test names.
var (
	cmapEventTypes = []pool.EventType{
		pool.PoolCreated, pool.PoolReady, pool.PoolCleared, pool.PoolClosed,
		pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed,
		pool.ConnectionCheckOutStarted, pool.ConnectionCheckOutFailed,
		pool.ConnectionCheckedOut, pool.ConnectionCheckedIn,
	}
	cmapEventNames = func() map[string]bool {
		m := make(map[string]bool)
		for _, t := range cmapEventTypes {
			m[t.String()] = true
		}
		return m
	}()
)

// cmapEventDoc returns e as the JSON document the spec tests match against, with
// only the fields the specification gives events of its type, so that the
// tests' "exists" checks (the placeholder 42) are honest. Numbers are float64,
// as encoding/json decodes the expected documents.
func cmapEventDoc(e pool.Event) map[string]any {
	doc := map[string]any{"type": e.Type.String(), "address": e.Address}
	switch e.Type {
	case pool.PoolCreated:
		if e.Options != nil {
			opts := make(map[string]any, len(e.Options))
			for k, v := range e.Options {
				opts[k] = float64(v)
			}
			doc["options"] = opts
		}
	case pool.PoolCleared:
		doc["interruptInUseConnections"] = e.Interrupt
		if !e.ServiceID.IsZero() {
			doc["serviceId"] = e.ServiceID.String()
		}
	case pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed,
		pool.ConnectionCheckedOut, pool.ConnectionCheckedIn:
		doc["connectionId"] = float64(e.ConnectionID)
	}
	switch e.Type {
	case pool.ConnectionReady, pool.ConnectionCheckedOut, pool.ConnectionCheckOutFailed:
		doc["duration"] = float64(e.Duration) / float64(time.Millisecond)
	}
	switch e.Type {
	case pool.ConnectionClosed, pool.ConnectionCheckOutFailed:
		doc["reason"] = e.Reason
	}
	return doc
}

// specMatch asserts that actual MATCHES expected, as the README of the format
// defines it: expected is a subset of actual, 42 and "42" mean "any value
// that exists". It returns a description of the first difference, "" if they
// match. path names the value in the description.
func specMatch(path string, expected, actual any, exists bool) string {
	if expected == float64(42) || expected == "42" {
		if !exists || actual == nil {
			return path + ": missing, want any value"
		}
		return ""
	}
	if !exists {
		return fmt.Sprintf("%s: missing, want %v", path, expected)
	}
	if specJSONType(expected) != specJSONType(actual) {
		return fmt.Sprintf("%s: got %v (%s), want %v (%s)", path, actual, specJSONType(actual), expected, specJSONType(expected))
	}
	switch exp := expected.(type) {
	case []any:
		act := actual.([]any)
		for i, v := range exp {
			var a any
			if i < len(act) {
				a = act[i]
			}
			if d := specMatch(fmt.Sprintf("%s[%d]", path, i), v, a, i < len(act)); d != "" {
				return d
			}
		}
	case map[string]any:
		act := actual.(map[string]any)
		keys := make([]string, 0, len(exp))
		for k := range exp {
			keys = append(keys, k)
		}
		// "type" first: a wrong type explains the other differences.
		slices.SortFunc(keys, func(a, b string) int {
			switch {
			case a == b:
				return 0
			case a == "type":
				return -1
			case b == "type":
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			a, ok := act[k]
			if d := specMatch(path+"."+k, exp[k], a, ok); d != "" {
				return d
			}
		}
	default:
		if expected != actual {
			return fmt.Sprintf("%s: got %v, want %v", path, actual, expected)
		}
	}
	return ""
}

// specJSONType names the JSON type of a value as encoding/json decodes it.
func specJSONType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("Go %T", v)
}

// cmapErrorKind is an error type the spec tests name, by the Go name of the
// pool's type for it.
type cmapErrorKind struct {
	name  string
	match func(error) (address string, ok bool)
}

// cmapErrorKindOf describes the pool's error type *T, named after T, found in an error
// chain with errors.As.
func cmapErrorKindOf[T any, E interface {
	*T
	error
}](address func(E) string) cmapErrorKind {
	return cmapErrorKind{
		name: reflect.TypeFor[T]().Name(),
		match: func(err error) (string, bool) {
			var e E
			if errors.As(err, &e) {
				return address(e), true
			}
			return "", false
		},
	}
}

var cmapErrorKinds = func() map[string]cmapErrorKind {
	m := make(map[string]cmapErrorKind)
	for _, k := range []cmapErrorKind{
		cmapErrorKindOf(func(e *pool.PoolClosedError) string { return e.Address }),
		cmapErrorKindOf(func(e *pool.PoolClearedError) string { return e.Address }),
		cmapErrorKindOf(func(e *pool.WaitQueueTimeoutError) string { return e.Address }),
		cmapErrorKindOf(func(e *pool.ConnectionError) string { return e.Address }),
	} {
		m[k.name] = k
	}
	return m
}()

// cmapMatchError asserts that err MATCHES the expected error of a test file.
// It returns a description of the first difference, "" if it matches.
func cmapMatchError(expected map[string]any, err error) string {
	address, hasAddress := "", false
	if exp, ok := expected["type"]; ok && exp != float64(42) && exp != "42" {
		name, ok := exp.(string)
		if !ok {
			return fmt.Sprintf("error.type is not a string: %v", exp)
		}
		k, ok := cmapErrorKinds[name]
		if !ok {
			return fmt.Sprintf("error.type %q: the runner knows no such error type", name)
		}
		if address, hasAddress = k.match(err); !hasAddress {
			return fmt.Sprintf("error.type: got %T (%v), want %s", err, err, name)
		}
	} else if _, ok := expected["address"]; ok {
		for _, k := range cmapErrorKinds {
			if address, hasAddress = k.match(err); hasAddress {
				break
			}
		}
	}
	if exp, ok := expected["message"]; ok && exp != float64(42) && exp != "42" {
		msg, ok := exp.(string)
		if !ok {
			return fmt.Sprintf("error.message is not a string: %v", exp)
		}
		// The pool's messages begin with the specification's and then add
		// context (the address, the limits that ended a wait, ...), so the
		// expected message must be a prefix of ours.
		if !strings.HasPrefix(err.Error(), msg) {
			return fmt.Sprintf("error.message: got %q, want it to begin with %q", err.Error(), msg)
		}
	}
	if exp, ok := expected["address"]; ok {
		var actual any
		if hasAddress {
			actual = address
		}
		if d := specMatch("error.address", exp, actual, hasAddress); d != "" {
			return d
		}
	}
	return ""
}

// cmapRunnerError is a fault of the test file or of the runner (an unknown label
// or thread, a waitForEvent that timed out), as opposed to an error of the
// pool that a test may expect. It always fails the test.
type cmapRunnerError struct{ msg string }

func (e *cmapRunnerError) Error() string { return e.msg }

func cmapRunnerErrorf(format string, args ...any) error {
	return &cmapRunnerError{fmt.Sprintf(format, args...)}
}

// errCMAPStopped ends the operations interrupted by the end of the test.
var errCMAPStopped = errors.New("stopped at the end of the test")

// cmapEventRecorder captures the pool's events in order and lets goroutines wait
// for them.
type cmapEventRecorder struct {
	mu      sync.Mutex
	events  []pool.Event
	counts  map[string]int
	changed chan struct{} // closed and replaced at every event
}

func newCMAPEventRecorder() *cmapEventRecorder {
	return &cmapEventRecorder{counts: make(map[string]int), changed: make(chan struct{})}
}

func (r *cmapEventRecorder) record(e pool.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.counts[e.Type.String()]++
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *cmapEventRecorder) snapshot() []pool.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor blocks until count events of type name have been seen since the
// start of the test, ignored types included.
func (r *cmapEventRecorder) waitFor(name string, count int, timeout time.Duration, stop <-chan struct{}) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		seen, changed := r.counts[name], r.changed
		r.mu.Unlock()
		if seen >= count {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return cmapRunnerErrorf("waitForEvent: %d %s event(s) seen after %v, want %d", seen, name, timeout, count)
		case <-stop:
			return errCMAPStopped
		}
	}
}

// cmapThread is a thread of a test: a goroutine running the operations sent to
// it in order, until its first error.
type cmapThread struct {
	name string
	ops  chan cmapOperation // buffered for all the operations of the file
	done chan struct{}      // closed when the goroutine ends
	err  error              // its first error; read after done

	ended bool // ops is closed: the thread takes no more operations
}

// end closes the thread's operations; it ends once it has run them.
func (th *cmapThread) end() {
	if !th.ended {
		th.ended = true
		close(th.ops)
	}
}

// cmapRunner runs one unit test file inside a synctest bubble.
type cmapRunner struct {
	t    *testing.T
	spec *cmapUnitFile
	rec  *cmapEventRecorder
	pool *pool.Pool
	stop chan struct{} // closed at the end of the test

	threads map[string]*cmapThread // all threads started; used by the main goroutine only

	mu     sync.Mutex
	labels map[string]*pool.Conn

	finished bool
	events   []pool.Event // the snapshot taken at the end of the operations
}

func runCMAPUnit(t *testing.T, spec *cmapUnitFile) {
	r := &cmapRunner{
		t:       t,
		spec:    spec,
		rec:     newCMAPEventRecorder(),
		stop:    make(chan struct{}),
		threads: make(map[string]*cmapThread),
		labels:  make(map[string]*pool.Conn),
	}
	defer r.dumpEventsOnFailure()
	defer r.finish() // also when an operation fails the test at once

	opts := append(slices.Clone(spec.options), pool.WithEventHandler(r.rec.record))
	p, err := pool.New(cmapSpecAddress, &fakeConnector{}, opts...)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	r.pool = p

	var mainErr error
	for i, op := range spec.ops {
		if op.thread != "" {
			th := r.threads[op.thread]
			if th == nil || th.ended {
				t.Fatalf("%v: no thread %q is running", op, op.thread)
			}
			th.ops <- op // never blocks: the buffer holds every operation
			continue
		}
		err := r.exec(op)
		var re *cmapRunnerError
		if errors.As(err, &re) {
			t.Fatalf("%v: %v", op, err)
		}
		if err != nil {
			// The error ends the main thread, as an exception would.
			mainErr = err
			if rest := len(spec.ops) - i - 1; rest > 0 {
				t.Logf("%v failed, %d operation(s) after it not run: %v", op, rest, err)
			}
			break
		}
	}
	r.finish()

	if spec.Error != nil {
		if mainErr == nil {
			t.Errorf("no error, want one matching %v", spec.Error)
		} else if d := cmapMatchError(spec.Error, mainErr); d != "" {
			t.Errorf("error %v does not match %v: %s", mainErr, spec.Error, d)
		}
	} else if mainErr != nil {
		t.Errorf("unexpected error: %v", mainErr)
	}

	var actual []map[string]any
	for _, e := range r.events {
		if !spec.ignored[e.Type.String()] {
			actual = append(actual, cmapEventDoc(e))
		}
	}
	for i, exp := range spec.Events {
		var act any
		if i < len(actual) {
			act = actual[i]
		}
		if d := specMatch(fmt.Sprintf("events[%d]", i), exp, act, i < len(actual)); d != "" {
			t.Errorf("event %d does not match: %s", i, d)
		}
	}
}

// finish ends the test: it snapshots the events, closes the pool, then stops
// the threads and waits for them, so that no goroutine outlives the bubble.
// It runs once.
func (r *cmapRunner) finish() {
	if r.finished {
		return
	}
	r.finished = true
	r.events = r.rec.snapshot()
	if r.pool != nil {
		if err := r.pool.Close(); err != nil {
			r.t.Errorf("Close: %v", err)
		}
	}
	close(r.stop)
	for _, th := range r.threads {
		th.end()
	}
	for name, th := range r.threads {
		if !cmapWaitDone(th.done) {
			r.t.Errorf("thread %q did not end within %v after the pool was closed", name, cmapThreadTimeout)
		}
	}
}

// cmapWaitDone waits for done, at most cmapThreadTimeout.
func cmapWaitDone(done <-chan struct{}) bool {
	timer := time.NewTimer(cmapThreadTimeout)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// dumpEventsOnFailure logs every event of the test when it failed.
func (r *cmapRunner) dumpEventsOnFailure() {
	if !r.t.Failed() {
		return
	}
	var b strings.Builder
	b.WriteString("actual events (\"#n\" is the index among the events not ignored):\n")
	n := 0
	for i, e := range r.events {
		idx := "ignored"
		if !r.spec.ignored[e.Type.String()] {
			idx = fmt.Sprintf("#%d", n)
			n++
		}
		fmt.Fprintf(&b, "  %2d %-8s %-26s", i, idx, e.Type)
		if e.ConnectionID != 0 {
			fmt.Fprintf(&b, " connectionId=%d", e.ConnectionID)
		}
		if e.Reason != "" {
			fmt.Fprintf(&b, " reason=%s", e.Reason)
		}
		if e.Err != nil {
			fmt.Fprintf(&b, " err=%q", e.Err)
		}
		b.WriteByte('\n')
	}
	r.t.Log(b.String())
}

// exec runs one operation on the calling goroutine.
func (r *cmapRunner) exec(op cmapOperation) error {
	p := r.pool
	switch op.name {
	case "ready":
		return p.Ready()
	case "close":
		return p.Close()
	case "clear":
		return p.Clear(pool.ClearOptions{InterruptInUse: op.interrupt})
	case "checkOut":
		c, err := p.CheckOut(context.Background())
		if err != nil {
			return err
		}
		if op.label != "" {
			r.mu.Lock()
			r.labels[op.label] = c
			r.mu.Unlock()
		}
		return nil
	case "checkIn":
		r.mu.Lock()
		c := r.labels[op.connection]
		r.mu.Unlock()
		if c == nil {
			return cmapRunnerErrorf("no connection labelled %q", op.connection)
		}
		return p.CheckIn(c)
	case "wait":
		timer := time.NewTimer(op.ms)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-r.stop:
			return errCMAPStopped
		}
	case "waitForEvent":
		return r.rec.waitFor(op.event, op.count, op.timeout, r.stop)
	case "start":
		if _, ok := r.threads[op.target]; ok {
			return cmapRunnerErrorf("thread %q was started already", op.target)
		}
		th := &cmapThread{
			name: op.target,
			ops:  make(chan cmapOperation, len(r.spec.ops)),
			done: make(chan struct{}),
		}
		r.threads[op.target] = th
		go r.runThread(th)
		return nil
	case "waitForThread":
		th := r.threads[op.target]
		if th == nil || th.ended {
			return cmapRunnerErrorf("no thread %q is running", op.target)
		}
		th.end()
		if !cmapWaitDone(th.done) {
			return cmapRunnerErrorf("thread %q did not finish within %v", op.target, cmapThreadTimeout)
		}
		var re *cmapRunnerError
		if errors.As(th.err, &re) {
			return cmapRunnerErrorf("thread %q failed (reported above)", op.target)
		}
		return th.err
	}
	return cmapRunnerErrorf("unknown operation %q", op.name)
}

// runThread is the goroutine of a thread.
func (r *cmapRunner) runThread(th *cmapThread) {
	defer close(th.done)
	for op := range th.ops {
		if th.err != nil {
			continue // a thread stops at its first error
		}
		select {
		case <-r.stop:
			continue
		default:
		}
		err := r.exec(op)
		if err == nil || err == errCMAPStopped {
			continue
		}
		th.err = err
		var re *cmapRunnerError
		if errors.As(err, &re) {
			r.t.Errorf("%v: %v", op, err)
		}
	}
}
