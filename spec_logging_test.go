package mongopool_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/unified"
)

// TestSpecLogging runs the connection logging tests of the specification
// (testdata/spec/logging, in the unified test format): each test gets a
// test deployment and Clients built by NewClient, and its log messages must
// be the ones the file lists, in order.
func TestSpecLogging(t *testing.T) {
	unified.RunDir(t, "testdata/spec/logging")
}

// TestSpecSDAMUnified runs the SDAM specification's unified tests
// (testdata/spec/sdam/unified), its logging tests among them, each against
// a deployment of a topology it accepts (a standalone, a replica set of
// three members, a mongos behind a load balancer): those the project can
// run pass; the others skip, each naming what it needs that the project
// has not (a sharded cluster, a command the test server lacks, a write
// concern in the connection string, ...).
func TestSpecSDAMUnified(t *testing.T) {
	unified.RunDir(t, "testdata/spec/sdam/unified")
}

// TestSpecLoadBalancers runs the load balancer specification's tests
// (testdata/spec/load-balancers), as TestSpecSDAMUnified does.
func TestSpecLoadBalancers(t *testing.T) {
	unified.RunDir(t, "testdata/spec/load-balancers")
}

// TestSpecServerSelectionLogging runs the server selection specification's
// logging tests (testdata/spec/server-selection/logging), as
// TestSpecSDAMUnified does: the messages of a selection that succeeds, and
// of one that waits and fails, naming the operation and its id.
func TestSpecServerSelectionLogging(t *testing.T) {
	unified.RunDir(t, "testdata/spec/server-selection/logging")
}
