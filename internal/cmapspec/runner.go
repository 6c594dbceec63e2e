package cmapspec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Defaults of the Runner's bounds.
const (
	// DefaultWaitForEventTimeout applies to the waitForEvent operations that
	// give no timeout.
	DefaultWaitForEventTimeout = 10 * time.Second
	// DefaultThreadTimeout bounds waitForThread and the end of the threads
	// at the end of a test.
	DefaultThreadTimeout = time.Minute
)

// Runner runs test files against pools it has made.
type Runner struct {
	// NewPool makes the pool of the test of f, with opts: f.Options followed
	// by the runner's own (its event handler). It is called on the test's
	// goroutine, in the bubble if Synctest is set. The runner closes the
	// pool at the end of the test.
	NewPool func(t *testing.T, f *File, opts []pool.Option) (*pool.Pool, error)
	// Synctest runs each test in a testing/synctest bubble: the pool, its
	// goroutines and the test's threads all live in it, so that "wait"
	// operations, waitForEvent timeouts and the pool's own timers use the
	// bubble's fake clock, and the test is fast and deterministic. The pool
	// must then need nothing from outside the bubble (a fake connector).
	// Without it, everything runs in real time.
	Synctest bool
	// WaitForEventTimeout applies to waitForEvent operations that give no
	// timeout; 0 means DefaultWaitForEventTimeout.
	WaitForEventTimeout time.Duration
	// ThreadTimeout bounds waitForThread and the end of the threads at the
	// end of a test, so that a thread that never finishes fails the test
	// with a message instead of hanging it; 0 means DefaultThreadTimeout.
	ThreadTimeout time.Duration
}

// Run runs the test of f and reports its failures on t.
func (r *Runner) Run(t *testing.T, f *File) {
	t.Helper()
	if r.NewPool == nil {
		t.Fatal("cmapspec: Runner.NewPool is nil")
	}
	t.Log(f.Description)
	if r.Synctest {
		synctest.Test(t, func(t *testing.T) { r.run(t, f) })
		return
	}
	r.run(t, f)
}

// runnerError is a fault of the test file or of the runner (an unknown label
// or thread, a waitForEvent that timed out), as opposed to an error of the
// pool that a test may expect. It always fails the test.
type runnerError struct{ msg string }

func (e *runnerError) Error() string { return e.msg }

func runnerErrorf(format string, args ...any) error {
	return &runnerError{fmt.Sprintf(format, args...)}
}

// errStopped ends the operations interrupted by the end of the test.
var errStopped = errors.New("stopped at the end of the test")

// recorder captures the pool's events in order and lets goroutines wait for
// them.
type recorder struct {
	mu      sync.Mutex
	events  []pool.Event
	counts  map[string]int
	changed chan struct{} // closed and replaced at every event
}

func newRecorder() *recorder {
	return &recorder{counts: make(map[string]int), changed: make(chan struct{})}
}

func (r *recorder) record(e pool.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	r.counts[e.Type.String()]++
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) snapshot() []pool.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitForRelevant blocks until n events whose types are not ignored have been
// seen, or timeout passes (what is missing then shows in the comparison).
func (r *recorder) waitForRelevant(n int, ignored map[string]bool, timeout time.Duration, stop <-chan struct{}) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		seen, changed := 0, r.changed
		for _, e := range r.events {
			if !ignored[e.Type.String()] {
				seen++
			}
		}
		r.mu.Unlock()
		if seen >= n {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-stop:
			return
		}
	}
}

// waitFor blocks until count events of type name have been seen since the
// start of the test, ignored types included.
func (r *recorder) waitFor(name string, count int, timeout time.Duration, stop <-chan struct{}) error {
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
			return runnerErrorf("waitForEvent: %d %s event(s) seen after %v, want %d", seen, name, timeout, count)
		case <-stop:
			return errStopped
		}
	}
}

// thread is a thread of a test: a goroutine running the operations sent to
// it in order, until its first error.
type thread struct {
	ops  chan operation // buffered for all the operations of the file
	done chan struct{}  // closed when the goroutine ends

	mu    sync.Mutex // protects following fields
	err   error      // its first error
	errOp operation  // the operation that failed

	ended  bool // ops is closed: the thread takes no more operations
	waited bool // a waitForThread propagated its error
}

// failure returns the thread's first error and the operation that failed.
func (th *thread) failure() (error, operation) {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.err, th.errOp
}

// end closes the thread's operations; it ends once it has run them.
func (th *thread) end() {
	if !th.ended {
		th.ended = true
		close(th.ops)
	}
}

// run is the state of one test.
type run struct {
	t             *testing.T
	f             *File
	rec           *recorder
	pool          *pool.Pool
	stop          chan struct{} // closed at the end of the test
	eventTimeout  time.Duration
	threadTimeout time.Duration
	synctest      bool // the test runs in a bubble

	threads map[string]*thread // all threads started; used by the main goroutine only

	mu     sync.Mutex
	labels map[string]*pool.Conn

	finished bool
	events   []pool.Event // the snapshot taken at the end of the operations
}

func (r *Runner) run(t *testing.T, f *File) {
	x := &run{
		t:             t,
		f:             f,
		rec:           newRecorder(),
		stop:          make(chan struct{}),
		eventTimeout:  orDefault(r.WaitForEventTimeout, DefaultWaitForEventTimeout),
		threadTimeout: orDefault(r.ThreadTimeout, DefaultThreadTimeout),
		synctest:      r.Synctest,
		threads:       make(map[string]*thread),
		labels:        make(map[string]*pool.Conn),
	}
	defer x.dumpEventsOnFailure()
	defer x.finish() // also when an operation fails the test at once

	opts := append(slices.Clone(f.Options), pool.WithEventHandler(x.rec.record))
	p, err := r.NewPool(t, f, opts)
	if err != nil {
		t.Fatalf("making the pool: %v", err)
	}
	x.pool = p

	var mainErr error
	for i, op := range f.ops {
		if op.thread != "" {
			th := x.threads[op.thread]
			if th == nil || th.ended {
				t.Fatalf("%v: no thread %q is running", op, op.thread)
			}
			th.ops <- op // never blocks: the buffer holds every operation
			continue
		}
		err := x.exec(op)
		var re *runnerError
		if errors.As(err, &re) {
			t.Fatalf("%v: %v", op, err)
		}
		if err != nil {
			// The error ends the main thread, as an exception would.
			mainErr = err
			if rest := len(f.ops) - i - 1; rest > 0 {
				t.Logf("%v failed, %d operation(s) after it not run: %v", op, rest, err)
			}
			break
		}
	}
	x.finish()

	if f.err != nil {
		if mainErr == nil {
			t.Errorf("no error, want one matching %v", f.err)
		} else if d := MatchError(f.err, mainErr); d != "" {
			t.Errorf("error %v does not match %v: %s", mainErr, f.err, d)
		}
	} else if mainErr != nil {
		t.Errorf("unexpected error: %v", mainErr)
	}

	var actual []map[string]any
	for _, e := range x.events {
		if !f.ignored[e.Type.String()] {
			actual = append(actual, EventDoc(e))
		}
	}
	for i, exp := range f.events {
		var act any
		if i < len(actual) {
			act = actual[i]
		}
		if d := Match(fmt.Sprintf("events[%d]", i), exp, act, i < len(actual)); d != "" {
			t.Errorf("event %d does not match: %s", i, d)
		}
	}
}

// orDefault returns d, or def if d is 0.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// finish ends the test: it snapshots the events, closes the pool, then stops
// the threads and waits for them, so that no goroutine outlives the test.
// It runs once.
func (x *run) finish() {
	if x.finished {
		return
	}
	x.finished = true
	// The pool delivers its events on a goroutine of its own: wait for the
	// events the test expects, at most the waitForEvent timeout (a test
	// that fails waits that long), so that the snapshot has what the
	// operations above emitted. In a bubble every goroutine settles first.
	if x.synctest {
		synctest.Wait()
	}
	x.rec.waitForRelevant(len(x.f.events), x.f.ignored, x.eventTimeout, x.stop)
	x.events = x.rec.snapshot()
	x.checkUnwaitedThreads()
	if x.pool != nil {
		if err := x.pool.Close(); err != nil {
			x.t.Errorf("Close: %v", err)
		}
	}
	close(x.stop)
	for _, th := range x.threads {
		th.end()
	}
	for name, th := range x.threads {
		if !x.waitDone(th.done) {
			x.t.Errorf("thread %q did not end within %v after the pool was closed", name, x.threadTimeout)
		}
	}
}

// checkUnwaitedThreads fails the test for an error of a thread that no
// waitForThread propagated, raised before the end of the test (the pool's
// closing then fails the check-outs still waiting, as the test wants). The
// format propagates a thread's errors through waitForThread alone, and the
// specification's files leave threads whose check-outs fail (a clear evicts
// them, a timeout ends them) unwaited: the failed check-out's
// ConnectionCheckOutFailed event is what they assert. So a failed check-out
// passes here; any other failure (a check-in refused, for one) would pass
// unseen, and fails the test.
func (x *run) checkUnwaitedThreads() {
	for _, msg := range unwaitedThreadErrors(x.threads) {
		x.t.Error(msg)
	}
}

// unwaitedThreadErrors returns the failures checkUnwaitedThreads reports.
func unwaitedThreadErrors(threads map[string]*thread) []string {
	var out []string
	for name, th := range threads {
		if th.waited {
			continue
		}
		err, op := th.failure()
		if err == nil || err == errStopped || op.name == "checkOut" {
			continue
		}
		var re *runnerError
		if !errors.As(err, &re) { // those were reported when they happened
			out = append(out, fmt.Sprintf("thread %q: %v failed and no waitForThread propagated it: %v", name, op, err))
		}
	}
	slices.Sort(out)
	return out
}

// waitDone waits for done, at most the thread timeout.
func (x *run) waitDone(done <-chan struct{}) bool {
	timer := time.NewTimer(x.threadTimeout)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// dumpEventsOnFailure logs every event of the test when it failed.
func (x *run) dumpEventsOnFailure() {
	if !x.t.Failed() {
		return
	}
	var b strings.Builder
	b.WriteString("actual events (\"#n\" is the index among the events not ignored):\n")
	n := 0
	for i, e := range x.events {
		idx := "ignored"
		if !x.f.ignored[e.Type.String()] {
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
	x.t.Log(b.String())
}

// exec runs one operation on the calling goroutine.
func (x *run) exec(op operation) error {
	p := x.pool
	switch op.name {
	case "ready":
		return p.Ready()
	case "close":
		return p.Close()
	case "clear":
		return p.Clear(pool.ClearOptions{InterruptInUse: op.interrupt})
	case "checkOut":
		// A check-out the pool never answers fails the test after the
		// thread timeout, rather than hanging it until the package's.
		ctx, cancel := context.WithTimeout(context.Background(), x.threadTimeout)
		c, err := p.CheckOut(ctx)
		expired := ctx.Err() != nil
		cancel()
		if err != nil {
			if expired {
				return runnerErrorf("checkOut did not end within %v: %v", x.threadTimeout, err)
			}
			return err
		}
		if op.label != "" {
			x.mu.Lock()
			x.labels[op.label] = c
			x.mu.Unlock()
		}
		return nil
	case "checkIn":
		x.mu.Lock()
		c := x.labels[op.connection]
		x.mu.Unlock()
		if c == nil {
			return runnerErrorf("no connection labelled %q", op.connection)
		}
		return p.CheckIn(c)
	case "wait":
		timer := time.NewTimer(op.ms)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-x.stop:
			return errStopped
		}
	case "waitForEvent":
		timeout := x.eventTimeout
		if op.hasTimeout {
			timeout = op.timeout
		}
		return x.rec.waitFor(op.event, op.count, timeout, x.stop)
	case "start":
		if _, ok := x.threads[op.target]; ok {
			return runnerErrorf("thread %q was started already", op.target)
		}
		th := &thread{
			ops:  make(chan operation, len(x.f.ops)),
			done: make(chan struct{}),
		}
		x.threads[op.target] = th
		go x.runThread(th)
		return nil
	case "waitForThread":
		th := x.threads[op.target]
		if th == nil || th.ended {
			return runnerErrorf("no thread %q is running", op.target)
		}
		th.end()
		th.waited = true
		if !x.waitDone(th.done) {
			return runnerErrorf("thread %q did not finish within %v", op.target, x.threadTimeout)
		}
		err, _ := th.failure()
		var re *runnerError
		if errors.As(err, &re) {
			return runnerErrorf("thread %q failed (reported above)", op.target)
		}
		return err
	}
	return runnerErrorf("unknown operation %q", op.name)
}

// runThread is the goroutine of a thread.
func (x *run) runThread(th *thread) {
	defer close(th.done)
	for op := range th.ops {
		if err, _ := th.failure(); err != nil {
			continue // a thread stops at its first error
		}
		select {
		case <-x.stop:
			continue
		default:
		}
		err := x.exec(op)
		if err == nil || err == errStopped {
			continue
		}
		th.mu.Lock()
		th.err, th.errOp = err, op
		th.mu.Unlock()
		var re *runnerError
		if errors.As(err, &re) {
			x.t.Errorf("%v: %v", op, err)
		}
	}
}
