package proxy

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: the proxy's,
// its client's and the test servers' must all end with Close.
func TestMain(m *testing.M) { leakcheck.Main(m) }
