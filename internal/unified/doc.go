// Package unified runs specification tests written in the unified test format
// (the unified-test-format specification), for the subset of the format that
// the logging, SDAM, load balancer and server selection tests use, against
// test deployments of mongotest servers and clients built with
// mongopool.NewClient. It is used only by tests.
//
// What it runs:
//
//   - files of schema version 1.x up to SchemaVersion; each test runs on a
//     deployment of the first topology that the file's and the test's
//     runOnRequirements accept (in the order they name them) and that the
//     runner provides: "single" (a standalone), "replicaset" (a replica set
//     of three members) or "load-balanced" (the test server as a mongos
//     behind a load balancer: the only server behind its address), and whose
//     server meets the rest of the requirements (version from buildInfo,
//     authentication as configured: the server always has a user and every
//     client its credentials);
//   - initialData, loaded through an internal client before each test (each
//     collection dropped, created with createOptions if any, filled);
//   - client entities, with uriOptions (those NewClient applies), observeLogMessages
//     (the connection, topology and serverSelection components),
//     observeEvents (the CMAP, SDAM and command monitoring events),
//     ignoreCommandMonitoringEvents, observeSensitiveCommands,
//     useMultipleMongoses and storeEventsAsEntities (event list entities:
//     documents with name, observedAt, address and the event's fields,
//     durations as durationMS);
//   - database and collection entities, with the readPreference of their
//     options; thread entities; cursor entities (saveResultAsEntity of
//     createFindCursor); TopologyDescription entities
//     (recordTopologyDescription);
//   - the operations listDatabases and close on clients, runCommand on
//     databases (with a readPreference), and on collections insertOne,
//     insertMany, bulkWrite (insertOne requests), updateOne, updateMany,
//     replaceOne, deleteOne, deleteMany, find (filter, sort, skip, limit,
//     batchSize), createFindCursor, aggregate (pipeline, batchSize) and
//     countDocuments (filter, skip, limit), and iterateUntilDocumentOrError,
//     iterateOnce and close on cursors. Reads run as Client.Read (retryable
//     reads), writes as Client.Write (retryable writes where the
//     specification allows), runCommand as Client.RunCommand, and cursors
//     (those of find and aggregate too) as Client.Cursor, whose getMores go
//     to the cursor's server, over its connection in a load-balanced
//     deployment, as the load balancer specification has a driver pin it;
//     the Client gives every command its implicit session;
//   - the special operations createEntities, failPoint (set on the server
//     the client selects, and disabled there at the end of the test),
//     runOnThread, waitForThread, waitForEvent, assertEventCount,
//     recordTopologyDescription, assertTopologyType, waitForPrimaryChange
//     and wait; waitForEvent and waitForThread fail after 10 s, and a
//     thread's failure fails the test whether or not waitForThread waits
//     for it;
//   - expectError (isError, isClientError, isTimeoutError, errorContains,
//     errorCode, errorCodeName, errorLabelsContain, errorLabelsOmit,
//     errorResponse), expectResult and ignoreResultAndError; a write error
//     or write concern error in a reply is the operation's error;
//   - expectLogMessages, with ignoreMessages, ignoreExtraMessages and
//     failureIsRedacted, matched by the specification's rules (Match);
//   - expectEvents of the three event types, with ignoreExtraEvents, and the
//     assertions of the format's expectedCmapEvent, expectedCommandEvent
//     (command, reply, commandName, databaseName, hasServiceId,
//     hasServerConnectionId) and expectedSdamEvent (the types of
//     previousDescription and newDescription, awaited);
//   - outcome, read through the internal client in _id order and compared
//     exactly (key order aside).
//
// Anything else in a file (an entity type, an operation, an argument, a
// field, an event type, a URI option, a special operator) fails the test
// with a message naming it: a test never passes by skipping what it asks
// for. Besides the skips the format prescribes (unmet runOnRequirements,
// skipReason), a test skips, naming the capability, when it needs what the
// project does not have: a topology the runner cannot provide (a sharded
// cluster), several mongoses behind the load balancer (a client with
// useMultipleMongoses: true that the test uses, in a load-balanced
// deployment), a URI option the client does not apply that a driver may
// leave out or that stands for a missing feature (waitQueueSize,
// waitQueueMultiple, a write or read concern), an entity of a missing
// feature (explicit sessions, GridFS, client-side encryption), a command
// the test server does not have (runCommand that fails with
// CommandNotFound), or an awaited heartbeat from a server that reports no
// topologyVersion. What the runner cannot do within a client entity fails
// the test even when something else in it would make it skip.
//
// A Client delivers its events and log messages asynchronously, in order,
// on goroutines of its own, as a driver with asynchronous event publishers
// does: before the runner reads what a client entity observed (the events
// and log messages of expectEvents, expectLogMessages and event list
// entities, once the operations are done; assertEventCount;
// recordTopologyDescription), it flushes the client (Client.Flush), so that
// every event and message emitted before is counted; a client the test
// closed is flushed with the pools it had, whose closing events come after
// Close returns. Each flush fails the test after 10 s; waitForEvent and
// waitForPrimaryChange wait for the events as they come.
//
// A client entity behaves as a driver's client would where the tests can see
// it: commands run with an implicit session when the server supports sessions
// (but the retryable writes, to which the Client gives sessions of its own),
// and close ends those sessions (endSessions) before closing the Client.
package unified
