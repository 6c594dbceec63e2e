// Package unified runs specification tests written in the unified test format
// (the unified-test-format specification), for the subset of the format that
// the connection logging tests and the tests of CMAP events use, against a
// mongotest server and clients built with mongopool.New. It is used only by
// tests.
//
// What it runs:
//
//   - files of schema version 1.x up to SchemaVersion, with runOnRequirements
//     evaluated against the server it starts for each test (version from
//     buildInfo, topology from hello, authentication as configured: the
//     server always has a user and every client its credentials);
//   - initialData, loaded through an internal client before each test (each
//     collection dropped, created with createOptions if any, filled);
//   - client entities, with uriOptions (those mongopool.New applies, and
//     retryReads and retryWrites), observeLogMessages, observeEvents for the
//     eleven CMAP events, ignoreCommandMonitoringEvents and
//     observeSensitiveCommands (which concern command events only), and
//     storeEventsAsEntities (event list entities: documents with name,
//     observedAt, address and the event's fields, durations as durationMS);
//   - database, collection and thread entities;
//   - the operations listDatabases and close on clients, runCommand on
//     databases (readPreference only if primary), and on collections
//     insertOne, insertMany, find (filter, sort, skip, limit, batchSize),
//     aggregate (pipeline, batchSize) and countDocuments (filter, skip,
//     limit), cursors iterated to the end with getMore;
//   - the special operations createEntities, failPoint (fail points set
//     during a test are disabled at its end), runOnThread, waitForThread,
//     waitForEvent, assertEventCount and wait; waitForEvent and
//     waitForThread fail after 10 s, and a thread's failure fails the test
//     whether or not waitForThread waits for it;
//   - expectError (isError, isClientError, isTimeoutError, errorContains,
//     errorCode, errorCodeName, errorLabelsContain, errorLabelsOmit,
//     errorResponse), expectResult and ignoreResultAndError; a write error
//     or write concern error in a reply is the operation's error;
//   - expectLogMessages, with ignoreMessages, ignoreExtraMessages and
//     failureIsRedacted, matched by the specification's rules (Match);
//   - expectEvents of eventType cmap, with ignoreExtraEvents, and the
//     expectedCmapEvent assertions (hasServiceId and
//     interruptInUseConnections of poolClearedEvent, reason of
//     connectionClosedEvent and connectionCheckOutFailedEvent);
//   - outcome, read through the internal client in _id order and compared
//     exactly (key order aside).
//
// Anything else in a file (an entity type, an operation, an argument, a field,
// an event type, a URI option the clients do not apply, a special operator)
// fails the test with a message naming it: a test never passes by skipping
// what it asks for. The only skips are the ones the format prescribes
// (unmet runOnRequirements, skipReason) and two more, each with its reason:
// a uriOption a driver may choose not to support (waitQueueSize,
// waitQueueMultiple), and an event the clients do not emit yet (the command
// monitoring and SDAM events, listed in eventKinds), whether observed,
// stored, expected or waited for. Within a client entity, what the runner
// cannot do fails the test even when something else in it would make it
// skip.
//
// A client entity behaves as a driver's client would where the tests can see
// it: commands run with an implicit session when the server supports sessions,
// and close ends those sessions (endSessions) before closing the pool. It does
// not retry: a read that fails with a retryable error while retryReads is on,
// or a write while retryWrites is on outside a single server's topology (a
// driver retries writes only on replica sets and sharded clusters), fails the
// test, since a driver would have retried it.
package unified
