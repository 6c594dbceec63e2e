package otelmetrics_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: every test closes
// its pools and shuts its meter provider down.
func TestMain(m *testing.M) { leakcheck.Main(m) }
