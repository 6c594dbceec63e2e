package topology

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests. The package
// starts none; the check keeps it so.
func TestMain(m *testing.M) { leakcheck.Main(m) }
