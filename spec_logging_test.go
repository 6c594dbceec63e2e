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

// TestSpecSDAMUnified runs the SDAM specification's unified tests
// (testdata/spec/sdam/unified) against the test server: those the clients can
// run pass; the others skip, each saying why (a topology the test server is
// not, events the clients do not emit yet, the streaming protocol).
func TestSpecSDAMUnified(t *testing.T) {
	unified.RunDir(t, "testdata/spec/sdam/unified")
}

// TestSpecLoadBalancers runs the load balancer specification's tests
// (testdata/spec/load-balancers), as TestSpecSDAMUnified does.
func TestSpecLoadBalancers(t *testing.T) {
	unified.RunDir(t, "testdata/spec/load-balancers")
}
