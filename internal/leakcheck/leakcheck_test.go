package leakcheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// childEnv, when set, makes TestMain and the child tests act as the test
// binary that TestMainReportsLeak starts: the value names the child test.
const childEnv = "LEAKCHECK_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// A child reports at once: the parent test waits for it.
		leakcheck.Main(m, leakcheck.Wait(100*time.Millisecond))
		return
	}
	leakcheck.Main(m)
}

// leaker closes started, blocks until stop is closed and then closes done.
func leaker(started chan<- struct{}, stop <-chan struct{}, done chan<- struct{}) {
	close(started)
	<-stop
	close(done)
}

// startLeaker starts leaker, waits until it runs (so that its stack names
// it), and returns a func that stops it and waits until it has ended.
func startLeaker(t *testing.T) (stop func()) {
	started, s, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go leaker(started, s, done)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the leaker did not start")
	}
	return func() {
		close(s)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the leaker did not end")
		}
	}
}

// fakeT records what Check does with a test: the cleanups it registers and
// the errors it reports.
type fakeT struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// end runs the cleanups as the testing package does, last first.
func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestCheckReportsLeakedGoroutine(t *testing.T) {
	f := &fakeT{TB: t}
	leakcheck.Check(f, leakcheck.Wait(50*time.Millisecond))
	stop := startLeaker(t)
	defer stop()
	f.end()
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "1 goroutines left") || !strings.Contains(f.errs[0], "leakcheck_test.leaker") {
		t.Fatalf("errors %q, want one naming the leaker", f.errs)
	}
}

func TestCheckIgnoresEarlierAndEndedGoroutines(t *testing.T) {
	earlier := startLeaker(t) // running before Check: not the test's
	defer earlier()
	f := &fakeT{TB: t}
	leakcheck.Check(f)

	// One that ends within the test, and one that a later cleanup stops
	// (cleanups run last first, so that one runs before the check).
	startLeaker(t)()
	stopLater := startLeaker(t)
	f.Cleanup(stopLater)
	f.end()
	if len(f.errs) != 0 {
		t.Fatalf("errors %q, want none", f.errs)
	}
}

func TestOnlyAndIgnore(t *testing.T) {
	stop := startLeaker(t)
	defer stop()
	has := func(stacks []string) bool {
		for _, s := range stacks {
			if strings.Contains(s, "leakcheck_test.leaker") {
				return true
			}
		}
		return false
	}
	if !has(leakcheck.Running()) {
		t.Errorf("Running() misses the leaker: %q", leakcheck.Running())
	}
	if !has(leakcheck.Running(leakcheck.Only("nothing.such", "leakcheck_test.leaker"))) {
		t.Error("Only with a matching substring misses the leaker")
	}
	if got := leakcheck.Running(leakcheck.Only("nothing.such")); len(got) != 0 {
		t.Errorf("Only with no matching substring: %q", got)
	}
	if got := leakcheck.Running(leakcheck.Ignore("leakcheck_test.leaker")); has(got) {
		t.Errorf("Ignore keeps the leaker: %q", got)
	}
}

// The test framework's own goroutines (the main goroutine, the runners of
// the tests) and the checking goroutine never count.
func TestRunningLeavesOutTestFramework(t *testing.T) {
	if got := leakcheck.Running(); len(got) != 0 {
		t.Fatalf("Running() with nothing started: %q", got)
	}
	t.Run("sub", func(t *testing.T) { // a parent test waiting in t.Run
		if got := leakcheck.Running(); len(got) != 0 {
			t.Fatalf("Running() in a subtest: %q", got)
		}
	})
}

func TestRemainingWaitsForEnd(t *testing.T) {
	started, s, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go leaker(started, s, done)
	close(s) // told to stop but maybe not even started: Remaining waits for it
	if got := leakcheck.Remaining(); len(got) != 0 {
		t.Fatalf("Remaining: %q", got)
	}
}

// Main fails a passing test binary that leaves a goroutine and passes one
// that does not.
func TestMainReportsLeak(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in a child")
	}
	for _, tc := range []struct {
		child string
		fail  bool
	}{
		{child: "TestChildLeaks", fail: true},
		{child: "TestChildClean", fail: false},
	} {
		t.Run(tc.child, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+tc.child+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+tc.child)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			switch {
			case !tc.fail && err != nil:
				t.Fatalf("the child failed: %v\n%s", err, out)
			case tc.fail && (!errors.As(err, &ee) || ee.ExitCode() != 1):
				t.Fatalf("the child ended with %v, want exit status 1\n%s", err, out)
			case tc.fail && (!strings.Contains(string(out), "leakcheck: 1 goroutines left after the tests") ||
				!strings.Contains(string(out), "leakcheck_test.leaker")):
				t.Fatalf("the child's output does not report the leaker:\n%s", out)
			case tc.fail && !strings.Contains(string(out), "PASS"):
				t.Fatalf("the child's tests did not pass, so the leak is not what failed it:\n%s", out)
			}
		})
	}
}

// TestChildLeaks leaves a goroutine running, in the child TestMainReportsLeak
// starts.
func TestChildLeaks(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		t.Skip("run as a child by TestMainReportsLeak")
	}
	startLeaker(t) // never stopped
}

// TestChildClean starts and ends a goroutine, in the child
// TestMainReportsLeak starts.
func TestChildClean(t *testing.T) {
	if os.Getenv(childEnv) != t.Name() {
		t.Skip("run as a child by TestMainReportsLeak")
	}
	startLeaker(t)()
}
