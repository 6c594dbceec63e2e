package prommetrics_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: every test closes
// its pools and removes them from its collector.
func TestMain(m *testing.M) { leakcheck.Main(m) }
