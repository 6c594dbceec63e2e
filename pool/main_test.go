package pool_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if any goroutine of the pool package outlives the
// tests: every test closes its pools, and Close waits for the pool's
// goroutines. (Tests run in synctest bubbles get the same check per test.)
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := poolGoroutines(); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines of the pool left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// poolGoroutines returns the stacks of the goroutines running pool code. A
// goroutine that has just called wg.Done may need a moment to end, so it looks
// a bounded number of times before it reports.
func poolGoroutines() string {
	var found string
	for range 50 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		found = ""
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "mongopool/pool.(*Pool)") && !strings.Contains(g, "poolGoroutines") {
				found += g + "\n\n"
			}
		}
		if found == "" {
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
	return found
}
