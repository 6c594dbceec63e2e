package unified

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// SchemaVersion is the newest schema version the runner accepts: files of
// major version 1 up to this one.
const SchemaVersion = "1.28"

// testTimeout bounds each test, operations and checks included.
const testTimeout = 60 * time.Second

// operationTimeout bounds each operation of a test: one that has not ended
// then (a check-out nothing will ever serve, say) ends the test with a
// message that names it, and the tests after it in the directory are not
// run, since they would likely wait as long.
const operationTimeout = 15 * time.Second

// The runner's user: every test's server has it, every client uses it.
const (
	runnerUser     = "unified-runner"
	runnerPassword = "unified-runner-password"
)

// RunDir runs every .json file of dir, each as a subtest named after the file.
// A directory without any is a failure, not a pass.
func RunDir(t *testing.T, dir string) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no .json test files in %s", dir)
	}
	sort.Strings(files)
	var hung hangGuard
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) { runFile(t, f, &hung) })
	}
}

// hangGuard remembers the first test one of whose operations hung, so that
// the tests after it are not run: each would wait out operationTimeout too.
type hangGuard struct {
	mu   sync.Mutex
	test string
}

// hang records that the test named test hung.
func (g *hangGuard) hang(test string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.test == "" {
		g.test = test
	}
}

// hungTest returns the test that hung, "" if none did.
func (g *hangGuard) hungTest() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.test
}

// RunFile runs the tests of one file, each as a subtest named after its
// description.
func RunFile(t *testing.T, path string) {
	var hung hangGuard
	runFile(t, path, &hung)
}

// runFile is RunFile, with the directory's guard against hung tests.
func runFile(t *testing.T, path string, hung *hangGuard) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := loadFile(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for i, tv := range f.tests {
		t.Run(testName(tv, i), func(t *testing.T) {
			if h := hung.hungTest(); h != "" {
				t.Fatalf("not run: an operation of %s hung, and this test would likely wait as long", h)
			}
			err := runTest(t, f, tv, hung)
			var skip *skipError
			switch {
			case errors.As(err, &skip):
				t.Skip(skip.reason)
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

// file is a test file's top level, checked.
type file struct {
	reqs        []bson.RawValue // runOnRequirements, nil if none
	entities    []bson.RawValue // createEntities
	initialData []bson.RawValue
	tests       []bson.RawValue
}

// loadFile parses a test file (extended JSON) and checks its top level.
func loadFile(data []byte) (*file, error) {
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON(data, false, &raw); err != nil {
		return nil, fmt.Errorf("not an extended JSON document: %w", err)
	}
	o := readObject("file", docValue(raw),
		[]string{"description", "schemaVersion", "runOnRequirements", "createEntities", "initialData", "tests", "_yamlAnchors"})
	o.str("description", true)
	if version := o.str("schemaVersion", true); o.err == nil {
		if err := checkSchemaVersion(version); err != nil {
			return nil, err
		}
	}
	f := &file{entities: o.array("createEntities", false), initialData: o.array("initialData", false), tests: o.array("tests", true)}
	if o.has("runOnRequirements") {
		if f.reqs = o.array("runOnRequirements", false); f.reqs == nil {
			o.fail("runOnRequirements is empty")
		}
	}
	if o.err == nil && len(f.tests) == 0 {
		o.fail("no tests")
	}
	if o.err != nil {
		return nil, o.err
	}
	return f, nil
}

// testName returns a test's description, or its index if it has none (which
// runTest reports).
func testName(tv bson.RawValue, i int) string {
	if d, ok := tv.DocumentOK(); ok {
		if s, ok := d.Lookup("description").StringValueOK(); ok {
			return s
		}
	}
	return fmt.Sprintf("test %d", i)
}

// skipError is a test that must not run: an unmet runOnRequirements, or a
// skipReason.
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

// runTest runs one test of f. It returns a *skipError for a test that must
// not run, and the first failure otherwise (all the failed log and event
// expectations together). Its server and clients are closed when t ends.
func runTest(t *testing.T, f *file, tv bson.RawValue, hung *hangGuard) error {
	r := newTestRun(t, tv)
	r.hung = hung
	return r.run(f, tv)
}

// waitTimeout bounds waitForEvent and waitForThread, as the format says.
const waitTimeout = 10 * time.Second

// flushTimeout bounds each flush of a client's events and log messages: a
// client whose handlers fall that far behind fails the test.
const flushTimeout = 10 * time.Second

func newTestRun(t *testing.T, tv bson.RawValue) *testRun {
	r := &testRun{t: t, where: fmt.Sprintf("test %q", testName(tv, 0)), entities: newEntityMap(),
		waitTimeout: waitTimeout, flushTimeout: flushTimeout}
	r.match = &matcher{lsid: r.sessionLsid}
	return r
}

// checkSchemaVersion accepts versions of major 1 up to SchemaVersion.
func checkSchemaVersion(s string) error {
	v, err := ParseVersion(s)
	if err != nil {
		return fmt.Errorf("schemaVersion: %w", err)
	}
	max, _ := ParseVersion(SchemaVersion)
	if v[0] != max[0] || v.Compare(max) > 0 {
		return fmt.Errorf("schemaVersion %s is not supported: the runner reads %d.x up to %s", s, max[0], SchemaVersion)
	}
	return nil
}

// testRun is the state of one test: its server, its entities, the fail
// points to disable.
type testRun struct {
	t        *testing.T
	where    string
	ctx      context.Context
	cancel   context.CancelFunc // ends ctx, and the operations of threads
	dep      *deployment
	internal *mongopool.Client
	server   Server
	sessions bool
	entities *entityMap
	// match evaluates the test's matches, with its entities.
	match       *matcher
	waitTimeout time.Duration // of waitForEvent and waitForThread
	// flushTimeout bounds each wait for a client to deliver its events
	// and log messages.
	flushTimeout time.Duration
	failPoints   []setFailPoint
	// hung, if not nil, hears of an operation that hung.
	hung *hangGuard
	// setsFailPoints is true when the test's operations may configure a
	// fail point: its clients then check their servers every 500 ms
	// rather than every 10 s (see newClient).
	setsFailPoints bool
}

func (r *testRun) run(f *file, tv bson.RawValue) error {
	o := readObject(r.where, tv,
		[]string{"description", "runOnRequirements", "skipReason", "operations", "expectLogMessages", "expectEvents", "outcome"},
		"expectTracingMessages")
	o.str("description", true)
	skip := o.str("skipReason", false)
	var reqs []bson.RawValue
	if o.has("runOnRequirements") {
		reqs = o.array("runOnRequirements", false)
	}
	ops := o.array("operations", true)
	for _, op := range ops {
		// failPoint and targetedFailPoint, anywhere, a thread's included.
		if bytes.Contains(op.Value, []byte("ailPoint\x00")) {
			r.setsFailPoints = true
		}
	}
	var expectLogs, expectEvents, outcome []bson.RawValue
	if o.has("expectLogMessages") {
		expectLogs = o.array("expectLogMessages", false)
	}
	if o.has("expectEvents") {
		if expectEvents = o.array("expectEvents", false); o.err == nil && len(expectEvents) == 0 {
			o.fail("expectEvents is empty (it needs one expectedEventsForClient or more)")
		}
	}
	if o.has("outcome") {
		if outcome = o.array("outcome", false); o.err == nil && len(outcome) == 0 {
			o.fail("outcome is empty (it needs one collectionData or more)")
		}
	}
	if o.err != nil {
		return o.err
	}
	if skip != "" {
		return &skipError{"skipReason: " + skip}
	}
	eventChecks, err := parseExpectEvents(r.match, r.where+" expectEvents", expectEvents)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	r.t.Cleanup(cancel)
	r.ctx, r.cancel = ctx, cancel
	r.t.Cleanup(r.stop)
	if err := r.startFor(f.reqs, reqs); err != nil {
		return err
	}
	for _, c := range eventChecks {
		for _, e := range c.events {
			if err := r.canObserve(e); err != nil {
				return err
			}
		}
	}
	if err := r.loadInitialData(f.initialData); err != nil {
		if why := refusal(err); why != "" {
			return &skipError{fmt.Sprintf("initialData: %s", why)}
		}
		return err
	}

	// Clients are closed at the end, after the checks; fail points are
	// disabled then too if a failure cut the test short. Before either,
	// threads still running are stopped: their operations canceled.
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range all[*client](r.entities) {
			c.close(ctx)
		}
	})
	// Sessions end (aborting their transactions) once the fail points
	// are off, before their clients close.
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range all[*session](r.entities) {
			s.end(ctx)
		}
	})
	r.t.Cleanup(func() {
		if err := r.disableFailPoints(); err != nil {
			r.t.Error(err)
		}
	})
	r.t.Cleanup(r.stopThreads)
	if err := r.createEntities("createEntities", f.entities); err != nil {
		return err
	}
	for i, op := range ops {
		if err := r.operation(fmt.Sprintf("%s operation %d", r.where, i), op); err != nil {
			return err
		}
	}
	// Threads not waited for are waited for now: their failures are the
	// test's.
	var errs []error
	for _, th := range all[*thread](r.entities) {
		if err := th.wait(r.waitTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s (not waited for by waitForThread): %w", r.where, err))
		}
	}
	// The operations are done. The clients deliver their events and log
	// messages asynchronously: those emitted so far, the closing ones of
	// the clients the test closed included, are flushed to the listeners
	// before they stop; then no more count.
	for _, c := range all[*client](r.entities) {
		if err := c.flush(r.ctx, r.flushTimeout); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.where, err))
		}
	}
	for _, c := range all[*client](r.entities) {
		if c.logs != nil {
			c.logs.stop()
		}
		if c.events != nil {
			c.events.stop()
		}
	}
	for _, l := range all[*eventList](r.entities) {
		l.stop()
	}
	if err := r.disableFailPoints(); err != nil || len(errs) > 0 {
		return errors.Join(append(errs, err)...)
	}
	for i, e := range expectLogs {
		errs = append(errs, r.checkLogs(fmt.Sprintf("%s expectLogMessages[%d]", r.where, i), e))
	}
	for _, c := range eventChecks {
		errs = append(errs, r.checkEvents(c))
	}
	errs = append(errs, r.checkOutcome(outcome))
	return errors.Join(errs...)
}

// canObserve returns why the project cannot give the event e, if it
// cannot: an awaited heartbeat needs a server that reports a
// topologyVersion.
func (r *testRun) canObserve(e *expectedEvent) error {
	if e.awaited != nil && *e.awaited && !r.server.Streams {
		return &skipError{fmt.Sprintf("%s with awaited: true: the test server reports no topologyVersion as a %s deployment (mongod does from 4.4 on), so no client streams its heartbeats",
			e.name, r.server.Topology)}
	}
	return nil
}

// absent reports an expectation that a value is absent: {$$exists: false}.
func absent(v bson.RawValue) bool {
	name, arg, ok := operator(v)
	return ok && name == "$$exists" && arg.Type == bson.TypeBoolean && !arg.Boolean()
}

// stopThreads ends the threads at the end of a test: their operations are
// canceled, and they are given the format's waitTimeout to return (not the
// run's, which a test may have shortened).
func (r *testRun) stopThreads() {
	threads := all[*thread](r.entities)
	if len(threads) == 0 {
		return
	}
	r.cancel()
	for _, th := range threads {
		if err := th.wait(waitTimeout); errors.Is(err, errThreadTimeout) {
			r.t.Errorf("%s: %v", r.where, err)
		}
	}
}

// startFor starts the test's deployment: of the first topology that both
// the file's and the test's runOnRequirements accept (in the order they name
// them) and that the runner can provide, whose server meets the rest of
// the requirements. A test no such deployment can run is skipped, with the
// requirements it failed, or the topologies it asks for and the runner
// cannot provide.
func (r *testRun) startFor(fileReqs, testReqs []bson.RawValue) error {
	lists := []reqList{{"file runOnRequirements", fileReqs}, {r.where + " runOnRequirements", testReqs}}
	var unmet, unprovidable []string
	// A deployment has authentication, but one without is tried too for
	// a test that may ask for none.
	auths := []bool{true}
	if asksNoAuth(fileReqs) || asksNoAuth(testReqs) {
		auths = append(auths, false)
	}
	for _, t := range candidateTopologies(fileReqs, testReqs) {
		if !slices.Contains(providedTopologies, t) {
			unprovidable = append(unprovidable, unprovided(t))
			continue
		}
		for _, auth := range auths {
			met, err := r.startMeeting(t, auth, lists, &unmet)
			if err != nil || met {
				return err
			}
		}
	}
	if len(unmet) == 0 {
		// No deployment was started: the requirements are still read,
		// so that a malformed one fails the test rather than skip it.
		none := Server{GetParameter: func(context.Context, string) (bson.RawValue, error) {
			return bson.RawValue{}, errors.New("no deployment")
		}}
		for _, l := range lists {
			if l.reqs == nil {
				continue
			}
			if _, _, err := none.Satisfied(r.ctx, l.where, l.reqs); err != nil {
				return err
			}
		}
	}
	why := unmet
	if len(unprovidable) > 0 {
		why = append(why, "the runner cannot provide "+strings.Join(unprovidable, "; nor "))
	}
	return &skipError{strings.Join(why, "; ")}
}

// reqList is a runOnRequirements list, and where it is.
type reqList struct {
	where string
	reqs  []bson.RawValue // nil accepts any deployment
}

// startMeeting starts a deployment of topology t, with authentication or
// not, and reports whether it meets every requirement list; if it does
// not, it is stopped, and why is added to unmet.
func (r *testRun) startMeeting(t string, auth bool, lists []reqList, unmet *[]string) (bool, error) {
	if err := r.start(t, auth); err != nil {
		return false, err
	}
	for _, l := range lists {
		if l.reqs == nil {
			continue
		}
		ok, why, err := r.server.Satisfied(r.ctx, l.where, l.reqs)
		if err != nil {
			return false, err
		}
		if !ok {
			what := t
			if !auth {
				what += " (without authentication)"
			}
			*unmet = append(*unmet, fmt.Sprintf("on a %s deployment, %s not met: %s", what, l.where, why))
			r.stop()
			return false, nil
		}
	}
	return true, nil
}

// asksNoAuth reports whether a requirement of the list asks for a server
// without authentication.
func asksNoAuth(reqs []bson.RawValue) bool {
	for _, req := range reqs {
		doc, _ := req.DocumentOK()
		if auth, ok := doc.Lookup("auth").BooleanOK(); ok && !auth {
			return true
		}
	}
	return false
}

// candidateTopologies returns the topologies that every requirement list
// accepts (a nil list, or a requirement without topologies, accepts any),
// in the order the lists name them, then in the runner's order.
func candidateTopologies(lists ...[]bson.RawValue) []string {
	var order []string
	add := func(t string) {
		if !slices.Contains(order, t) {
			order = append(order, t)
		}
	}
	for _, l := range lists {
		for _, req := range l {
			doc, _ := req.DocumentOK() // Satisfied reports one that is not
			ts, _ := doc.Lookup("topologies").ArrayOK()
			vals, _ := ts.Values()
			for _, v := range vals {
				if s, ok := v.StringValueOK(); ok {
					if s == "sharded-replicaset" {
						s = "sharded" // the runner's shards are replica sets
					}
					add(s)
				}
			}
		}
	}
	for _, t := range providedTopologies {
		add(t)
	}
	var out []string
	for _, t := range order {
		if slices.Contains(topologies, t) && acceptedByAll(t, lists) {
			out = append(out, t)
		}
	}
	return out
}

// acceptedByAll reports whether every list has a requirement that accepts
// the topology t, whatever its other conditions.
func acceptedByAll(t string, lists [][]bson.RawValue) bool {
	for _, l := range lists {
		if l == nil {
			continue
		}
		ok := false
		for _, req := range l {
			doc, isDoc := req.DocumentOK()
			if !isDoc {
				return true // Satisfied reports the malformed requirement
			}
			ts, err := doc.LookupErr("topologies")
			if err != nil {
				ok = true
				break
			}
			arr, _ := ts.ArrayOK()
			vals, _ := arr.Values()
			for _, v := range vals {
				if s, _ := v.StringValueOK(); s == t || s == "sharded-replicaset" && t == "sharded" {
					ok = true
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// start starts a deployment of topology t, with authentication or not, and
// learns what runOnRequirements needs through an internal client.
func (r *testRun) start(t string, auth bool) error {
	dep, err := startDeployment(t, auth)
	if err != nil {
		return err
	}
	r.dep = dep
	internal, err := mongopool.Connect(r.ctx, dep.uri(nil))
	if err != nil {
		r.stop()
		return fmt.Errorf("the internal client of the %s deployment: %w", t, err)
	}
	r.internal = internal

	info, err := internal.RunCommand(r.ctx, "admin", bson.D{{Key: "buildInfo", Value: 1}})
	if err != nil {
		return fmt.Errorf("buildInfo: %w", err)
	}
	r.server = Server{}
	if r.server.Version, err = versionArray(info); err != nil {
		return fmt.Errorf("buildInfo: %w", err)
	}
	helloCmd := bson.D{{Key: "hello", Value: 1}}
	if t == "load-balanced" {
		// A mongos behind a load balancer refuses a hello that does not
		// say it comes through one.
		helloCmd = append(helloCmd, bson.E{Key: "loadBalanced", Value: true})
	}
	hello, err := internal.RunCommand(r.ctx, "admin", helloCmd)
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if r.server.Topology = topologyOf(hello); r.server.Topology != t {
		return fmt.Errorf("the %s deployment answers hello as a %s one: %s", t, r.server.Topology, hello)
	}
	_, r.sessions = hello.Lookup("logicalSessionTimeoutMinutes").AsInt64OK()
	_, err = hello.LookupErr("topologyVersion")
	r.server.Streams = err == nil
	// As configured: the server has a user, or none, and mongotest speaks
	// these mechanisms (MONGODB-X509 only over TLS, which this server has
	// not).
	r.server.Auth = auth
	r.server.AuthMechanisms = []string{mongotest.MechSCRAMSHA1, mongotest.MechSCRAMSHA256, mongotest.MechPLAIN}
	r.server.GetParameter = func(ctx context.Context, name string) (bson.RawValue, error) {
		reply, err := internal.RunCommand(ctx, "admin", bson.D{{Key: "getParameter", Value: 1}, {Key: name, Value: 1}})
		if err != nil {
			return bson.RawValue{}, err
		}
		v, err := reply.LookupErr(name)
		if err != nil {
			return bson.RawValue{}, fmt.Errorf("the reply has no %s", name)
		}
		return v, nil
	}
	return nil
}

// stop closes the deployment and the internal client; the test's cleanup
// calls it too.
func (r *testRun) stop() {
	if r.internal != nil {
		r.internal.Close()
		r.internal = nil
	}
	if r.dep != nil {
		r.dep.close()
		r.dep = nil
	}
}

// versionArray reads the first three elements of buildInfo's versionArray,
// which the format says to compare.
func versionArray(info bson.Raw) (Version, error) {
	var v Version
	a, ok := info.Lookup("versionArray").ArrayOK()
	if !ok {
		return v, errors.New("no versionArray")
	}
	vals, err := a.Values()
	if err != nil || len(vals) < 3 {
		return v, fmt.Errorf("malformed versionArray %s", a)
	}
	for i := range v {
		n, ok := vals[i].AsInt64OK()
		if !ok || n < 0 {
			return v, fmt.Errorf("malformed versionArray %s", a)
		}
		v[i] = int(n)
	}
	return v, nil
}

// topologyOf tells the topology from a hello reply.
func topologyOf(hello bson.Raw) string {
	if _, err := hello.LookupErr("serviceId"); err == nil {
		return "load-balanced"
	}
	if msg, _ := hello.Lookup("msg").StringValueOK(); msg == "isdbgrid" {
		return "sharded"
	}
	if _, err := hello.LookupErr("setName"); err == nil {
		return "replicaset"
	}
	return "single"
}

// operation runs one operation and checks its outcome.
func (r *testRun) operation(where string, v bson.RawValue) error {
	_, fail := r.runOperation(where, v)
	return fail
}

// runOperation runs one operation and checks its outcome: it returns the
// operation's error, whatever the operation expected (a withTransaction
// callback passes it on), and the test's failure (or *skipError), if any.
func (r *testRun) runOperation(where string, v bson.RawValue) (opErr, fail error) {
	o := readObject(where, v,
		[]string{"name", "object", "arguments", "expectError", "expectResult", "ignoreResultAndError", "saveResultAsEntity"})
	name := o.str("name", true)
	object := o.str("object", true)
	args := o.document("arguments", false)
	expErr, wantErr := o.value("expectError", false)
	expResult, wantResult := o.value("expectResult", false)
	ignore, _ := o.boolean("ignoreResultAndError")
	saveAs := o.str("saveResultAsEntity", false)
	if o.err != nil {
		return nil, o.err
	}
	where = fmt.Sprintf("%s (%s on %s)", where, name, object)
	if ignore && (wantErr || wantResult) {
		return nil, fmt.Errorf("%s: ignoreResultAndError with expectError or expectResult", where)
	}
	if wantErr && wantResult {
		return nil, fmt.Errorf("%s: expectError with expectResult", where)
	}

	if object == "testRunner" {
		if wantErr || wantResult || ignore || saveAs != "" {
			return nil, fmt.Errorf("%s: a special operation has no result or error to expect or save", where)
		}
		return nil, r.special(where, name, args)
	}

	// A watchdog: an operation that waits for what never comes ends the
	// test, with its name, rather than the package's timeout.
	var timedOut atomic.Bool
	watchdog := time.AfterFunc(operationTimeout, func() {
		timedOut.Store(true)
		r.cancel()
	})
	res, err := r.entityOperation(where, name, object, args)
	if !watchdog.Stop() && timedOut.Load() {
		if r.hung != nil {
			r.hung.hang(r.t.Name())
		}
		return err, &runnerError{fmt.Errorf("%s did not end within %v (the test was ended): %v", where, operationTimeout, err)}
	}
	var fatal *runnerError
	var skip *skipError
	if errors.As(err, &fatal) || errors.As(err, &skip) {
		return err, err
	}
	if why := refusal(err); why != "" {
		// What the test server refuses tells nothing of the client,
		// whatever the test expected.
		return err, &skipError{fmt.Sprintf("%s: %s", where, why)}
	}
	if err == nil && saveAs != "" {
		if res.entity == nil {
			return nil, fmt.Errorf("%s: saveResultAsEntity: the runner saves cursors and collections, not the result of %s", where, name)
		}
		if err := r.entities.add(where, saveAs, res.entity); err != nil {
			if cur, ok := res.entity.(*cursor); ok {
				cur.close(r.ctx)
			}
			return nil, err
		}
	} else if cur, ok := res.entity.(*cursor); ok {
		cur.close(r.ctx) // nobody can use it
	}
	switch {
	case ignore:
		return err, nil
	case wantErr:
		if err == nil {
			return nil, fmt.Errorf("%s: succeeded with %s, want an error", where, show(res.value))
		}
		return err, r.checkError(where+" expectError", expErr, err)
	case err != nil:
		return err, fmt.Errorf("%s: %w", where, err)
	}
	if wantResult {
		var merr error
		if ea, ok := expResult.ArrayOK(); ok && res.iterable {
			aa, ok := res.value.ArrayOK()
			if !ok {
				return nil, fmt.Errorf("%s: the result %s is not an array", where, show(res.value))
			}
			merr = r.match.matchArray("", ea, aa, true)
		} else {
			// A document result is a root-level document.
			merr = r.match.match(expResult, res.value, true)
		}
		if merr != nil {
			return nil, fmt.Errorf("%s: expectResult: %w", where, merr)
		}
	}
	return nil, nil
}

// special runs a special operation, one on the test runner.
func (r *testRun) special(where, name string, args bson.Raw) error {
	switch name {
	case "createEntities":
		a := arguments(where, args, []string{"entities"})
		list := a.array("entities", true)
		if a.err != nil {
			return a.err
		}
		return r.createEntities(where, list)
	case "failPoint":
		return r.failPoint(where, args)
	case "runOnThread":
		return r.runOnThread(where, args)
	case "waitForThread":
		return r.waitForThread(where, args)
	case "waitForEvent":
		return r.waitForEvent(where, args)
	case "assertEventCount":
		return r.assertEventCount(where, args)
	case "recordTopologyDescription":
		return r.recordTopologyDescription(where, args)
	case "assertTopologyType":
		return r.assertTopologyType(where, args)
	case "waitForPrimaryChange":
		return r.waitForPrimaryChange(where, args)
	case "targetedFailPoint":
		return r.targetedFailPoint(where, args)
	case "assertSessionTransactionState", "assertSessionPinned", "assertSessionUnpinned",
		"assertSessionDirty", "assertSessionNotDirty":
		return r.sessionSpecial(where, name, args)
	case "assertSameLsidOnLastTwoCommands", "assertDifferentLsidOnLastTwoCommands":
		a, b, err := r.lsidsOfLastTwo(where, args)
		if err != nil {
			return err
		}
		if same := sameDocument(a, b); same != (name == "assertSameLsidOnLastTwoCommands") {
			return fmt.Errorf("%s: the last two commands have the lsids %s and %s", where, show(docValue(a)), show(docValue(b)))
		}
		return nil
	case "assertCollectionExists", "assertCollectionNotExists", "assertIndexExists", "assertIndexNotExists":
		return r.assertNamespace(where, name, args)
	case "assertNumberConnectionsCheckedOut":
		return r.assertConnectionsCheckedOut(where, args)
	case "wait":
		a := arguments(where, args, []string{"ms"})
		ms, _ := a.integer("ms", true)
		if a.err == nil && ms < 0 {
			a.fail("ms %d is negative", ms)
		}
		if a.err != nil {
			return a.err
		}
		return sleep(r.ctx, time.Duration(ms)*time.Millisecond)
	}
	return fmt.Errorf("%s: unknown special operation %q", where, name)
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failPoint sets a fail point through a client entity, on the server the
// client selects for a command (its primary), and records where it is.
// The command goes over a connection that Client.Do lends: no command
// monitoring event tells of it, as the format wants none for
// configureFailPoint.
func (r *testRun) failPoint(where string, args bson.Raw) error {
	a := arguments(where, args, []string{"client", "failPoint"})
	id := a.str("client", true)
	fp := a.document("failPoint", true)
	if a.err != nil {
		return a.err
	}
	c, err := r.usableClient(where, id)
	if err != nil {
		return err
	}
	fpName, ok := fp.Lookup("configureFailPoint").StringValueOK()
	if !ok {
		return fmt.Errorf("%s: failPoint %s has no configureFailPoint name", where, show(docValue(fp)))
	}
	if err := checkFailPointName(where, fpName); err != nil {
		return err
	}
	var cmd bson.D
	if err := bson.Unmarshal(fp, &cmd); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	raw, err := bson.Marshal(append(cmd, bson.E{Key: "$db", Value: "admin"}))
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	err = c.cl.Do(r.ctx, func(conn *connection.Conn) error {
		if _, err := conn.RoundTrip(r.ctx, raw); err != nil {
			return err
		}
		r.failPoints = append(r.failPoints, setFailPoint{name: fpName, address: conn.Address()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: setting the fail point %s: %w", where, show(docValue(fp)), err)
	}
	return nil
}

// assertConnectionsCheckedOut checks the number of connections the
// client has checked out of its pools now (their InUse, which a check-out
// and a check-in change before they return, as the format's counter of
// events would).
func (r *testRun) assertConnectionsCheckedOut(where string, args bson.Raw) error {
	a := arguments(where, args, []string{"client", "connections"})
	id := a.str("client", true)
	want, _ := a.integer("connections", true)
	if a.err != nil {
		return a.err
	}
	c, err := r.usableClient(where, id)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range c.cl.Pools() {
		n += p.Stats().InUse
	}
	if int64(n) != want {
		return fmt.Errorf("%s: the client %q has %d connections checked out, want %d", where, id, n, want)
	}
	return nil
}

// checkFailPointName returns why a test skips a fail point the test server
// does not have: it has failCommand only.
func checkFailPointName(where, name string) error {
	if name != "failCommand" {
		return &skipError{fmt.Sprintf("%s: the fail point %s: the test server has only failCommand", where, name)}
	}
	return nil
}

// setFailPoint is a fail point a test set, and the server it is set on.
type setFailPoint struct {
	name, address string
}

// disableFailPoints turns off the fail points the test set, on the servers
// they were set on, whatever became of the entities. The test server has
// one fail point, failCommand; it accepts no other.
func (r *testRun) disableFailPoints() error {
	var errs []error
	for _, fp := range r.failPoints {
		srv := r.dep.members[fp.address]
		switch {
		case srv == nil:
			errs = append(errs, fmt.Errorf("disabling the fail point %s: no server of the deployment is at %s", fp.name, fp.address))
		case fp.name != "failCommand":
			errs = append(errs, fmt.Errorf("disabling the fail point %s: the test server has no such fail point", fp.name))
		default:
			srv.ClearFailPoints()
		}
	}
	r.failPoints = nil
	return errors.Join(errs...)
}

// checkError checks an error against an expectedError.
func (r *testRun) checkError(where string, exp bson.RawValue, err error) error {
	o := readObject(where, exp,
		[]string{"isError", "isClientError", "isTimeoutError", "errorContains", "errorCode", "errorCodeName",
			"errorLabelsContain", "errorLabelsOmit", "errorResponse", "expectResult"},
		"writeErrors", "writeConcernErrors")
	if o.doc != nil && o.err == nil {
		if n, _ := o.doc.Elements(); len(n) == 0 {
			o.fail("an expectedError needs one assertion or more")
		}
	}
	// A bulk write's error may be several of the server's: an assertion
	// on a code holds if one of them has it.
	server := serverErrors(err)
	fromServer := len(server) > 0
	var problems []string
	if v, ok := o.boolean("isError"); ok && !v {
		o.fail("isError: false is not allowed")
	}
	if v, ok := o.boolean("isClientError"); ok && v == fromServer {
		if v {
			problems = append(problems, "want a client error, got a server's reply")
		} else {
			problems = append(problems, "want an error from the server, got a client error")
		}
	}
	if v, ok := o.boolean("isTimeoutError"); ok && v != isTimeout(err) {
		problems = append(problems, fmt.Sprintf("isTimeoutError: %v, and the error is the opposite", v))
	}
	if o.has("errorContains") {
		s := o.str("errorContains", false)
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(s)) {
			problems = append(problems, fmt.Sprintf("the message does not contain %q", s))
		}
	}
	if code, ok := o.integer("errorCode", false); ok {
		if !slices.ContainsFunc(server, func(e serverError) bool { return int64(e.code) == code }) {
			problems = append(problems, fmt.Sprintf("want the server's error code %d", code))
		}
	}
	if o.has("errorCodeName") {
		name := o.str("errorCodeName", false)
		if !slices.ContainsFunc(server, func(e serverError) bool { return strings.EqualFold(e.codeName, name) }) {
			problems = append(problems, fmt.Sprintf("want the server's codeName %s", name))
		}
	}
	for _, l := range o.strings("errorLabelsContain") {
		if !pool.HasErrorLabel(err, l) {
			problems = append(problems, fmt.Sprintf("want the label %s", l))
		}
	}
	for _, l := range o.strings("errorLabelsOmit") {
		if pool.HasErrorLabel(err, l) {
			problems = append(problems, fmt.Sprintf("want no label %s", l))
		}
	}
	if resp := o.document("errorResponse", false); resp != nil {
		if !fromServer {
			problems = append(problems, "errorResponse: the error has no server response")
		} else if merr := r.match.match(docValue(resp), docValue(server[0].raw), true); merr != nil {
			problems = append(problems, fmt.Sprintf("errorResponse: %v", merr))
		}
	}
	if want, ok := o.value("expectResult", false); ok {
		// The partial result of a bulk write, which a driver may leave
		// out ($$unsetOrMatches).
		var merr error
		if bwe := (*bulkWriteError)(nil); errors.As(err, &bwe) {
			merr = r.match.match(want, docValue(bwe.result), true)
		} else {
			merr = r.match.matchValue("", want, bson.RawValue{}, false, true)
		}
		if merr != nil {
			problems = append(problems, fmt.Sprintf("expectResult: %v", merr))
		}
	}
	if o.err != nil {
		return o.err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s; the error: %v", where, strings.Join(problems, "; "), err)
	}
	return nil
}

// serverError is an error of the server in an operation's error: a
// command's, or a write concern's.
type serverError struct {
	code     int32
	codeName string
	raw      bson.Raw // the reply
}

// serverErrors returns the server's errors in err, in order.
func serverErrors(err error) []serverError {
	var out []serverError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
			return
		case *wire.CommandError:
			out = append(out, serverError{e.Code, e.CodeName, e.Raw})
			return
		case *mongopool.WriteConcernError:
			out = append(out, serverError{e.Code, e.CodeName, e.Reply})
			return
		case *mongopool.WriteErrors:
			for _, we := range e.Errors {
				out = append(out, serverError{we.Code, we.CodeName, e.Reply})
			}
			if e.WriteConcernError != nil {
				walk(e.WriteConcernError)
			}
			return
		case interface{ Unwrap() []error }:
			for _, u := range e.Unwrap() {
				walk(u)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// isTimeout reports an error that a time limit ended.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pool.ErrWaitQueueTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// checkLogs checks one expectedLogMessagesForClient.
func (r *testRun) checkLogs(where string, v bson.RawValue) error {
	o := readObject(where, v, []string{"client", "messages", "ignoreMessages", "ignoreExtraMessages"})
	id := o.str("client", true)
	want := o.array("messages", true)
	ignore := o.array("ignoreMessages", false)
	extraOK, _ := o.boolean("ignoreExtraMessages")
	if o.err != nil {
		return o.err
	}
	c, err := entity[*client](r, where, id)
	if err != nil {
		return err
	}
	if c.logs == nil {
		return fmt.Errorf("%s: the client %q does not observe log messages", where, id)
	}
	got, err := c.logs.captured()
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}

	// Drop the messages that match one of ignoreMessages.
	kept := got[:0:0]
	for _, m := range got {
		drop := false
		for i, ig := range ignore {
			mismatch, err := matchLog(fmt.Sprintf("%s.ignoreMessages[%d]", where, i), ig, m)
			if err != nil {
				return err
			}
			if mismatch == "" {
				drop = true
				break
			}
		}
		if !drop {
			kept = append(kept, m)
		}
	}

	for i, w := range want {
		if i >= len(kept) {
			return fmt.Errorf("%s: %d messages, want %d; missing messages[%d] %s\ngot:\n%s", where, len(kept), len(want), i, show(w), dumpLogs(kept))
		}
		mismatch, err := matchLog(fmt.Sprintf("%s.messages[%d]", where, i), w, kept[i])
		if err != nil {
			return err
		}
		if mismatch != "" {
			return fmt.Errorf("%s: messages[%d] does not match the message [%d]: %s\ngot:\n%s", where, i, i, mismatch, dumpLogs(kept))
		}
	}
	if !extraOK && len(kept) > len(want) {
		return fmt.Errorf("%s: %d messages, want %d; the extra ones:\n%s", where, len(kept), len(want), dumpLogs(kept[len(want):]))
	}
	return nil
}

// matchLog matches an expectedLogMessage against a message: it returns why
// they differ, "" if they match, and an error for an expectation the runner
// cannot evaluate.
func matchLog(where string, exp bson.RawValue, m logMessage) (string, error) {
	o := readObject(where, exp, []string{"level", "component", "data", "failureIsRedacted"})
	level := o.str("level", true)
	component := o.str("component", true)
	data := o.document("data", true)
	redacted, checkRedaction := o.boolean("failureIsRedacted")
	if o.err != nil {
		return "", o.err
	}
	if _, err := levelOf(level); err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	if !components[component] {
		return "", fmt.Errorf("%s: unknown log component %q", where, component)
	}
	if m.level != level {
		return fmt.Sprintf("level %s, want %s", m.level, level), nil
	}
	if m.component != component {
		return fmt.Sprintf("component %s, want %s", m.component, component), nil
	}
	if err := Match(docValue(data), docValue(m.data), true); err != nil {
		return "data: " + err.Error(), nil
	}
	if checkRedaction {
		f, err := m.data.LookupErr("failure")
		if err != nil {
			return "failureIsRedacted: the message has no failure", nil
		}
		// A failure is its text, or a document; a redacted one is empty.
		empty := false
		if s, ok := f.StringValueOK(); ok {
			empty = s == ""
		} else if d, ok := f.DocumentOK(); ok {
			elems, _ := d.Elements()
			empty = len(elems) == 0
		}
		if empty != redacted {
			return fmt.Sprintf("failureIsRedacted: %v, and the failure %s says otherwise", redacted, show(f)), nil
		}
	}
	return "", nil
}

func dumpLogs(ms []logMessage) string {
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "  [%d] %s %s %s\n", i, m.level, m.component, show(docValue(m.data)))
	}
	return b.String()
}
