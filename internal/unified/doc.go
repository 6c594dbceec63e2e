// Package unified runs specification tests written in the unified test format
// (the unified-test-format specification) against test deployments of
// mongotest servers, with clients built with mongopool.NewClient and sessions
// of Client.StartSession: the logging, SDAM, load balancer and server
// selection tests, and those of sessions, transactions (and their convenient
// API), CRUD, retryable reads and writes, command monitoring and run command.
// It is used only by tests.
//
// What it runs:
//
//   - files of schema version 1.x up to SchemaVersion; each test runs on a
//     deployment of the first topology that the file's and the test's
//     runOnRequirements accept (in the order they name them) and that the
//     runner provides: "single" (a standalone), "replicaset" (a replica set
//     of three members), "sharded" and "sharded-replicaset" (two mongoses in
//     front of a shard that is a replica set) or "load-balanced" (the test
//     server as a mongos behind a load balancer: the only server behind its
//     address), and whose
//     server meets the rest of the requirements (version from buildInfo,
//     authentication: the server has a user and every client its
//     credentials, but for a test that asks for auth: false when the
//     deployment with authentication does not meet its requirements);
//   - initialData, loaded through an internal client before each test (each
//     collection dropped, created with createOptions if any, filled);
//   - client entities, with uriOptions (those NewClient applies), observeLogMessages
//     (the connection, topology and serverSelection components),
//     observeEvents (the CMAP, SDAM and command monitoring events),
//     ignoreCommandMonitoringEvents, observeSensitiveCommands,
//     useMultipleMongoses and storeEventsAsEntities (event list entities:
//     documents with name, observedAt, address and the event's fields,
//     durations as durationMS);
//   - database and collection entities, with the readPreference, readConcern
//     and writeConcern of their options, which their operations apply as a
//     driver's database and collection do (but in a transaction, whose own
//     apply); session entities (Client.StartSession), with the
//     defaultTransactionOptions of their sessionOptions (readConcern,
//     writeConcern, readPreference, maxCommitTimeMS) and causalConsistency
//     (true by default, as the Client's explicit sessions); thread entities; cursor entities (saveResultAsEntity of
//     createFindCursor and createCommandCursor); collection entities
//     (saveResultAsEntity of createCollection); TopologyDescription entities
//     (recordTopologyDescription);
//   - the operations of clients: listDatabases, listDatabaseNames,
//     listDatabaseObjects, dropDatabase and close; of databases: runCommand (with a
//     readPreference), runCursorCommand and createCommandCursor (with
//     batchSize, maxTimeMS and comment for the getMores, and cursorType),
//     aggregate, createCollection, dropCollection, listCollections,
//     listCollectionNames, listCollectionObjects and modifyCollection; of
//     collections: insertOne, insertMany, bulkWrite (every write model),
//     updateOne, updateMany, replaceOne, deleteOne, deleteMany,
//     findOneAndUpdate, findOneAndReplace, findOneAndDelete, find, findOne,
//     createFindCursor, aggregate, countDocuments, estimatedDocumentCount,
//     count, distinct, createIndex, dropIndex, dropIndexes, listIndexes,
//     listIndexNames and drop, with the options of the CRUD specification
//     passed on in their commands, and its results (an unacknowledged
//     write's is {acknowledged: false}; a bulk write's or an insertMany's
//     error has the result of what it wrote, which expectError's
//     expectResult matches); of sessions: startTransaction,
//     commitTransaction, abortTransaction, withTransaction (its callback's
//     operations run with their assertions, and their errors go back to
//     WithTransaction whatever they expected, so that it may retry) and
//     endSession; iterateUntilDocumentOrError, iterateOnce and close on
//     cursors. Every operation takes the session argument
//     (mongopool.WithSession). Reads run as Client.Read (retryable reads),
//     writes as Client.Write (retryable writes where the specification
//     allows; createCollection, drop, dropCollection and dropDatabase too,
//     sent once, with the write concern and a causally consistent
//     session's afterClusterTime), runCommand and the other commands as
//     Client.RunCommand, and
//     cursors (those of find, aggregate and the listings too) as
//     Client.Cursor, whose getMores go to the cursor's server, over its
//     connection in a load-balanced deployment, as the load balancer
//     specification has a driver pin it; the Client gives every command its
//     implicit session;
//   - the special operations createEntities, failPoint (set on the server
//     the client selects, and disabled there at the end of the test),
//     targetedFailPoint (set through a client of its own on the server the
//     session is pinned to), runOnThread, waitForThread, waitForEvent,
//     assertEventCount, recordTopologyDescription, assertTopologyType,
//     waitForPrimaryChange, wait, assertSessionTransactionState,
//     assertSessionPinned, assertSessionUnpinned, assertSessionDirty,
//     assertSessionNotDirty, assertSameLsidOnLastTwoCommands,
//     assertDifferentLsidOnLastTwoCommands, assertCollectionExists,
//     assertCollectionNotExists, assertIndexExists, assertIndexNotExists
//     (through the internal client) and assertNumberConnectionsCheckedOut
//     (the InUse of the client's pools); waitForEvent and waitForThread fail
//     after 10 s, and a thread's failure fails the test whether or not
//     waitForThread waits for it;
//   - expectError (isError, isClientError, isTimeoutError, errorContains,
//     errorCode, errorCodeName, errorLabelsContain, errorLabelsOmit,
//     errorResponse, expectResult), expectResult and ignoreResultAndError;
//     a write error or write concern error in a reply is the operation's
//     error, and an assertion on a code holds if one of a bulk write's
//     errors has it;
//   - expectLogMessages, with ignoreMessages, ignoreExtraMessages and
//     failureIsRedacted, matched by the specification's rules (Match);
//   - expectEvents of the three event types, with ignoreExtraEvents, and the
//     assertions of the format's expectedCmapEvent, expectedCommandEvent
//     (command, reply, commandName, databaseName, hasServiceId,
//     hasServerConnectionId) and expectedSdamEvent (the types of
//     previousDescription and newDescription, awaited), $$sessionLsid
//     included (a session's lsid, kept after endSession);
//   - outcome, read through the internal client in _id order and compared
//     exactly (key order aside).
//
// Anything else in a file (an entity type, an operation, an argument, a
// field, an event type, a URI option, a special operator) fails the test
// with a message naming it: a test never passes by skipping what it asks
// for. Besides the skips the format prescribes (unmet runOnRequirements,
// skipReason), a test skips, naming the capability, when it needs what the
// project does not have:
//
//   - several mongoses behind the load balancer (a client with
//     useMultipleMongoses: true that the test uses, in a load-balanced
//     deployment; a sharded deployment has two mongoses, which such a
//     client reaches, and another client only the first);
//   - a feature of the Client's it has not: a URI option the client does not
//     apply that a driver may leave out (waitQueueSize, waitQueueMultiple);
//     the Stable API (a client with serverApi that the test uses); command
//     log messages (observeLogMessages of the command component); snapshot
//     reads (a session with snapshot: true); an entity of a missing feature
//     (GridFS,
//     client-side encryption); an operation the runner has not, on purpose
//     (clientBulkWrite, change streams, mapReduce, getSnapshotTime) or an
//     argument it does not take (rawData, which the CRUD specification says
//     drivers should not implement);
//   - what the test server does not have: a command (an operation that
//     fails with CommandNotFound), a feature it refuses as not implemented
//     (an error whose message says "mongotest does not implement": a query
//     operator, a stage, a collation, an option, whatever the operation
//     expected), a fail point other than failCommand, or an awaited
//     heartbeat from a server that reports no topologyVersion.
//
// What the runner cannot do within a client entity fails the test even when
// something else in it would make it skip.
//
// A Client delivers its events and log messages asynchronously, in order,
// on goroutines of its own, as a driver with asynchronous event publishers
// does: before the runner reads what a client entity observed (the events
// and log messages of expectEvents, expectLogMessages and event list
// entities, once the operations are done; assertEventCount;
// recordTopologyDescription; the lsids of the last two commands), it
// flushes the client (Client.Flush), so that every event and message
// emitted before is counted; a client the test closed is flushed with the
// pools it had, whose closing events come after Close returns. Each flush
// fails the test after 10 s; waitForEvent and waitForPrimaryChange wait for
// the events as they come.
//
// A client entity behaves as a driver's client would where the tests can see
// it: commands run with an implicit session when the server supports sessions
// (but the retryable writes, to which the Client gives sessions of its own),
// and close ends those sessions (endSessions) before closing the Client. At
// the end of a test, its sessions end (aborting a transaction under way)
// after its fail points are disabled, and before its clients close.
package unified
