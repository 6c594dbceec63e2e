package mongopool_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/unified"
)

// TestSpecLogging runs the connection logging tests of the specification
// (testdata/spec/logging, in the unified test format): each test gets a
// mongotest server and clients built with New, and its log messages must be
// the ones the file lists, in order.
func TestSpecLogging(t *testing.T) {
	unified.RunDir(t, "testdata/spec/logging")
}
