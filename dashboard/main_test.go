package dashboard_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/leakcheck"
)

// TestMain fails the run if a goroutine outlives the tests: every test closes
// its pools, its dashboards and its servers, and every stream of /events ends
// with its request.
func TestMain(m *testing.M) { leakcheck.Main(m) }
