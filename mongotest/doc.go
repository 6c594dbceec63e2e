// Package mongotest is an in-process MongoDB server for tests: it listens on
// 127.0.0.1, speaks the wire protocol (OP_MSG, OP_COMPRESSED, and the legacy
// OP_QUERY hello that drivers send first) and answers enough commands for a
// driver, or a connection pool, to connect, authenticate, and run CRUD
// operations and simple aggregations as MongoDB runs them.
//
//	srv, err := mongotest.Start()
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer srv.Close()
//	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI()))
//
// What it speaks:
//
//   - the handshake: hello, isMaster and ismaster, with compression
//     negotiation, saslSupportedMechs, speculativeAuthenticate and
//     load-balanced mode (see WithLoadBalanced);
//   - authentication: SCRAM-SHA-1, SCRAM-SHA-256 and PLAIN through
//     saslStart/saslContinue against users given to AddUser, and
//     MONGODB-X509 through authenticate against AddX509User over TLS;
//   - wire compression with snappy, zlib and zstd: a compressed request gets
//     a reply compressed with the same compressor, except for the commands
//     that must never be compressed;
//   - ping, buildInfo, serverStatus (with its connections section),
//     listDatabases, listCollections, endSessions;
//   - an in-memory store with MongoDB's semantics: insert, update (operators
//     or replacement, multi, upsert), delete, findAndModify, find (filter,
//     sort, projection, skip, limit, batchSize), getMore, killCursors,
//     count, distinct, aggregate ($match, $group, $count, $sort, $skip,
//     $limit, $project, $unset, $addFields, $unwind, $replaceRoot), create,
//     drop, dropDatabase, and createIndexes, listIndexes and dropIndexes,
//     with unique indexes enforced (E11000 duplicate key errors);
//   - MongoDB's query language: $eq $ne $gt $gte $lt $lte $in $nin $exists
//     $type $size $all $elemMatch $mod $regex $not $and $or $nor, dotted
//     paths and array elements, and values compared in MongoDB's order of
//     BSON types, numbers by value whatever their type;
//   - the failCommand fail point, as mongod has it for tests:
//     configureFailPoint and waitForFailPoint on admin, or Server.SetFailPoint,
//     to block, fail or close the connection of chosen commands (the
//     handshake and authentication included), or add a writeConcernError,
//     with the fail point's errorLabels or else those mongod would add.
//
// What it does not implement it refuses, rather than answer wrongly: an
// unknown command fails with CommandNotFound (59); an operator, stage,
// option or expression MongoDB has and this package does not ($lookup,
// $expr, collations, transactions, ...) fails with BadValue (2) saying so;
// one MongoDB does not have either fails as mongod fails it ("unknown
// operator: $foo", "Unrecognized pipeline stage name", an unknown field of
// a command). Queries scan the collection (but for one on _id), which gives
// the results an index would.
//
// The server is a standalone mongod, which refuses the txnNumber of
// retryable writes and transactions (IllegalOperation, 20), as mongod
// does; WithReplicaSet makes it the primary of a one-member replica set,
// which takes retryable writes (once per session and txnNumber) and adds
// the RetryableWriteError label to their retriable errors, as mongod does.
// In load-balanced mode the server is a mongos: it takes retryable writes
// too, and adds no RetryableWriteError itself, as a mongos does not.
// Multi-document transactions are not implemented.
//
// Once a user exists, every command but the handshake, authentication,
// ping, buildInfo and endSessions needs an authenticated connection. There
// are no roles: an authenticated user may do anything.
//
// Errors look like MongoDB's: ok 0 with errmsg, code and codeName, such as
// code 59 (CommandNotFound) for an unknown command. Input that breaks the
// wire protocol makes the server close that connection, as mongod does.
//
// Beyond what MongoDB does, Server.InjectFault breaks the wire protocol or
// the connection on purpose, for testing clients: a delayed or missing
// reply, a wrong responseTo, a truncated frame, a negative, tiny or huge
// messageLength, a reply that is not BSON, a reset in the middle of a reply,
// or a connection accepted and never answered; PauseAccepting stops the
// accepting of connections.
//
// Server.Stats reports what the server saw (connections, commands by name,
// compressed messages by compressor, authentications), so tests can check
// that a client did what it claims.
package mongotest
