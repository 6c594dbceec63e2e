package pool_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: every test closes
// its pools, and Close waits for the pool's goroutines. (Tests run in
// synctest bubbles get the same check per test.)
func TestMain(m *testing.M) { leakcheck.Main(m) }
