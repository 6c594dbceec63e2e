// Package unified runs specification tests written in the unified test format
// (the unified-test-format specification), for the subset of the format that
// the connection logging tests use, against a mongotest server and clients
// built with mongopool.New. It is used only by tests.
//
// What it runs:
//
//   - files of schema version 1.x up to SchemaVersion, with runOnRequirements
//     evaluated against the server it starts for each test (version from
//     buildInfo, topology from hello, authentication as configured: the
//     server always has a user and every client its credentials);
//   - client entities, with uriOptions and observeLogMessages;
//   - the operations listDatabases and close on clients, and createEntities
//     and failPoint on the test runner; fail points set during a test are
//     disabled at its end;
//   - expectError (isError, isClientError, isTimeoutError, errorContains,
//     errorCode, errorCodeName, errorLabelsContain, errorLabelsOmit,
//     errorResponse), expectResult and ignoreResultAndError;
//   - expectLogMessages, with ignoreMessages, ignoreExtraMessages and
//     failureIsRedacted, matched by the specification's rules (Match).
//
// Anything else in a file (an entity type, an operation, an argument, a field,
// a URI option the clients do not apply, a special operator) fails the test
// with a message naming it: a test never passes by skipping what it asks for.
// The only skips are the ones the format prescribes: unmet runOnRequirements
// and skipReason.
//
// A client entity behaves as a driver's client would where the tests can see
// it: commands run with an implicit session when the server supports sessions,
// and close ends those sessions (endSessions) before closing the pool. It does
// not retry reads: an operation that fails with a retryable error while
// retryReads is on fails the test, since a driver would have retried it.
package unified
