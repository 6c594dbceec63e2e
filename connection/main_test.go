package connection_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: every test closes
// its connections and waits for its servers.
func TestMain(m *testing.M) { leakcheck.Main(m) }
