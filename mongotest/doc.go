// Package mongotest is an in-process MongoDB server for tests: it listens on
// 127.0.0.1, speaks the wire protocol (OP_MSG, OP_COMPRESSED, and the legacy
// OP_QUERY hello that drivers send first) and answers enough commands for a
// driver, or a connection pool, to connect, authenticate and run simple CRUD.
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
//   - ping, buildInfo, listDatabases, listCollections, endSessions, and an
//     in-memory store: insert, find (equality filters only; sort and
//     projection are ignored), getMore, killCursors, count, delete, drop and
//     dropDatabase;
//   - the failCommand fail point, as mongod has it for tests:
//     configureFailPoint and waitForFailPoint on admin, or Server.SetFailPoint,
//     to block, fail or close the connection of chosen commands (the
//     handshake and authentication included), or add a writeConcernError.
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
