// Package leakcheck finds goroutines that tests leave behind: Main fails a
// test binary whose tests pass but leave goroutines running, and Check fails
// a single test that leaves goroutines it started.
//
// By default every goroutine counts, except the one doing the check and the
// goroutines of the runtime, the signal handler and the testing package
// itself. Only and Ignore narrow that down by what a goroutine's stack
// contains (a package path, a function name).
//
// A goroutine that has just been told to stop may need a moment to end, so a
// check looks again for a bounded time (see Wait) before it reports.
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DefaultWait is how long a check waits, at the most, for goroutines that
// count to end before it reports them. It only delays a check that fails.
const DefaultWait = 5 * time.Second

// Option changes which goroutines a check counts, or how long it waits.
type Option func(*config)

type config struct {
	only   []string
	ignore []string
	wait   time.Duration
	before map[uint64]bool // goroutines that ran before a test (Check)
}

// Only counts just the goroutines whose stack contains at least one of
// substrs (typically package paths ending in a dot, such as
// "example.com/mod/pkg."). Several Only options add up.
func Only(substrs ...string) Option {
	return func(c *config) { c.only = append(c.only, substrs...) }
}

// Ignore leaves out the goroutines whose stack contains any of substrs, such
// as a library's background goroutines that outlive its use by design.
// Several Ignore options add up.
func Ignore(substrs ...string) Option {
	return func(c *config) { c.ignore = append(c.ignore, substrs...) }
}

// Wait sets how long a check waits, at the most, for goroutines that count to
// end before it reports them (DefaultWait if not given). A zero or negative d
// means a single look.
func Wait(d time.Duration) Option {
	return func(c *config) { c.wait = d }
}

func newConfig(opts []Option) *config {
	c := &config{wait: DefaultWait}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Main runs the tests and exits. When they pass but goroutines that count are
// still running after them, it prints their stacks and exits with status 1.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
func Main(m *testing.M, opts ...Option) {
	code := m.Run()
	if code == 0 {
		if left := Remaining(opts...); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutines left after the tests:\n\n%s\n", len(left), strings.Join(left, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// Check fails t if, once the test and its cleanups are done, goroutines that
// count and were not running when Check was called are still running. Call it
// first in the test: cleanups run last-registered first, so the check then
// runs after the cleanups that close the test's pools and servers.
//
// Tests that use Check must not run in parallel with others, whose goroutines
// it would take for the test's own.
func Check(t testing.TB, opts ...Option) {
	t.Helper()
	c := newConfig(opts)
	c.before = make(map[uint64]bool)
	for _, g := range goroutines() {
		c.before[g.id] = true
	}
	t.Cleanup(func() {
		if left := c.remaining(); len(left) > 0 {
			t.Errorf("leakcheck: %d goroutines left after the test:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
}

// Running returns the stacks of the goroutines that count now, sorted,
// without waiting.
func Running(opts ...Option) []string {
	c := newConfig(opts)
	return c.counted()
}

// Remaining waits up to the configured time for the goroutines that count to
// end and returns the stacks of those still running, sorted; none if all
// ended.
func Remaining(opts ...Option) []string {
	return newConfig(opts).remaining()
}

func (c *config) remaining() []string {
	deadline := time.Now().Add(c.wait)
	pause := time.Millisecond
	for {
		left := c.counted()
		if len(left) == 0 || !time.Now().Before(deadline) {
			return left
		}
		// Nothing announces a goroutine's end: look again shortly.
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// counted returns the stacks of the goroutines that count now.
func (c *config) counted() []string {
	self := currentID()
	var out []string
	for _, g := range goroutines() {
		if g.id == self || c.before[g.id] || harmless(g) {
			continue
		}
		if len(c.only) > 0 && !containsAny(g.stack, c.only) {
			continue
		}
		if containsAny(g.stack, c.ignore) {
			continue
		}
		out = append(out, g.stack)
	}
	slices.Sort(out)
	return out
}

// harmlessEntries are the functions (or prefixes of them) that goroutines of
// the runtime, the signal handling and the test framework start in. Such a
// goroutine is never a test's leak: the testing package's own goroutines run
// tests, and the others live as long as the process by design.
var harmlessEntries = []string{
	"main.main",      // the test binary's main goroutine
	"testing.",       // tRunner and the other goroutines of the testing package
	"runtime.",       // e.g. runtime.ensureSigM, started by signal.Notify
	"runtime/trace.", // the trace reader of -trace
	"os/signal.",     // the signal loop
}

func harmless(g goroutine) bool {
	for _, e := range harmlessEntries {
		if strings.HasPrefix(g.entry, e) {
			return true
		}
	}
	return false
}

func containsAny(s string, substrs []string) bool {
	for _, sub := range substrs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// goroutine is one goroutine of a runtime.Stack dump.
type goroutine struct {
	id    uint64
	entry string // the function it started in
	stack string
}

// goroutines returns all goroutines of the program but the runtime's own.
func goroutines() []goroutine {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutine
	for _, s := range strings.Split(strings.TrimSpace(string(buf)), "\n\n") {
		if g, ok := parse(s); ok {
			out = append(out, g)
		}
	}
	return out
}

// parse reads one goroutine's part of a dump:
//
//	goroutine 7 [chan receive]:
//	example.com/pkg.(*T).wait(0xc000010000)
//		/src/pkg/t.go:12 +0x25
//	created by example.com/pkg.Start in goroutine 1
//		/src/pkg/t.go:30 +0x6a
func parse(s string) (goroutine, bool) {
	header, rest, _ := strings.Cut(s, "\n")
	num, ok := strings.CutPrefix(header, "goroutine ")
	if !ok {
		return goroutine{}, false
	}
	num, _, _ = strings.Cut(num, " ")
	id, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return goroutine{}, false
	}
	g := goroutine{id: id, stack: s}
	// The entry is the last function frame: frames are the lines that do not
	// start with a tab, up to the "created by" line. runtime.goexit, which
	// every goroutine returns to, shows as the last frame of one that has
	// not run yet: it is not the entry.
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "created by ") {
			break
		}
		if line == "" || line[0] == '\t' || strings.HasPrefix(line, "...") {
			continue
		}
		if f := funcName(line); f != "runtime.goexit" {
			g.entry = f
		}
	}
	return g, true
}

// funcName strips the arguments from a frame line: "pkg.(*T).M(0x1, 0x2)"
// gives "pkg.(*T).M".
func funcName(line string) string {
	if strings.HasSuffix(line, ")") {
		if i := strings.LastIndex(line, "("); i > 0 {
			return line[:i]
		}
	}
	return line
}

// currentID returns the id of the calling goroutine, from the header of its
// own stack.
func currentID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf, _ = bytes.CutPrefix(buf, []byte("goroutine "))
	if i := bytes.IndexByte(buf, ' '); i > 0 {
		buf = buf[:i]
	}
	id, _ := strconv.ParseUint(string(buf), 10, 64)
	return id
}
