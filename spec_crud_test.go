package mongopool_test

import (
	"testing"

	"github.com/mongopool/mongopool/internal/unified"
)

// The specifications' unified tests of sessions, transactions and the
// operations of the CRUD, retryable reads and writes, command monitoring
// and run command specifications, each test against a deployment of a
// topology it accepts (a standalone, a replica set of three members, a
// sharded cluster, a mongos behind a load balancer), with Clients built by NewClient and
// explicit sessions of StartSession: those the project can run pass; the
// others skip, each naming what it needs that the project has not
// (snapshot reads, change streams, GridFS, client bulkWrite, a feature the
// test server refuses, ...).

// TestSpecTransactions runs testdata/spec/transactions.
func TestSpecTransactions(t *testing.T) {
	unified.RunDir(t, "testdata/spec/transactions")
}

// TestSpecTransactionsConvenientAPI runs
// testdata/spec/transactions-convenient-api (WithTransaction).
func TestSpecTransactionsConvenientAPI(t *testing.T) {
	unified.RunDir(t, "testdata/spec/transactions-convenient-api")
}

// TestSpecSessions runs testdata/spec/sessions.
func TestSpecSessions(t *testing.T) {
	unified.RunDir(t, "testdata/spec/sessions")
}

// TestSpecCRUD runs testdata/spec/crud.
func TestSpecCRUD(t *testing.T) {
	unified.RunDir(t, "testdata/spec/crud")
}

// TestSpecRetryableWrites runs testdata/spec/retryable-writes.
func TestSpecRetryableWrites(t *testing.T) {
	unified.RunDir(t, "testdata/spec/retryable-writes")
}

// TestSpecRetryableReads runs testdata/spec/retryable-reads.
func TestSpecRetryableReads(t *testing.T) {
	unified.RunDir(t, "testdata/spec/retryable-reads")
}

// TestSpecCommandMonitoring runs the command monitoring and logging tests
// (testdata/spec/command-logging-and-monitoring).
func TestSpecCommandMonitoring(t *testing.T) {
	unified.RunDir(t, "testdata/spec/command-logging-and-monitoring/monitoring")
	unified.RunDir(t, "testdata/spec/command-logging-and-monitoring/logging")
}

// TestSpecCausalConsistency runs testdata/spec/causal-consistency.
func TestSpecCausalConsistency(t *testing.T) {
	unified.RunDir(t, "testdata/spec/causal-consistency")
}

// TestSpecRunCommand runs testdata/spec/run-command.
func TestSpecRunCommand(t *testing.T) {
	unified.RunDir(t, "testdata/spec/run-command")
}
