package browsertest

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: the browser, its
// driver, the workload, the pool and the servers are all stopped by each test.
func TestMain(m *testing.M) { leakcheck.Main(m) }
