// Package mongotest is an in-process MongoDB server for tests: it listens on
// 127.0.0.1 (or on an in-memory Network), speaks the wire protocol (OP_MSG, OP_COMPRESSED, and the legacy
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
//     negotiation, saslSupportedMechs, speculativeAuthenticate, as a
//     mongod, a mongos (see WithMongos) or a mongos behind a load balancer
//     (see WithLoadBalanced);
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
// $expr, collations, ...) fails with BadValue (2) saying so;
// one MongoDB does not have either fails as mongod fails it ("unknown
// operator: $foo", "Unrecognized pipeline stage name", an unknown field of
// a command). Queries scan the collection (but for one on _id), which gives
// the results an index would.
//
// The server is a standalone mongod, which refuses the txnNumber of
// retryable writes and transactions (IllegalOperation, 20), as mongod
// does. WithMongos makes it a mongos, and so does load-balanced mode: it
// takes retryable writes, and adds no RetryableWriteError itself, as a
// mongos does not.
//
// # Transactions
//
// A replica set's primary and a mongos run multi-document transactions as
// mongod does: startTransaction, autocommit: false, commitTransaction
// (which may be retried) and abortTransaction on a session; snapshot reads
// (a transaction sees the data as it was at its first command, and its own
// writes); WriteConflict (112, TransientTransactionError) for a
// transaction that writes a document another open transaction wrote, or
// that changed after its snapshot; writes outside transactions that wait
// for a transaction holding their document (Stats.TransactionWaits);
// NoSuchTransaction (251) once a transaction is aborted by an error, a
// step-down or its lifetime limit (WithTransactionLifetime, 60 seconds by
// default); OperationNotSupportedInTransaction (263) for commands that do
// not run in one. It does not implement create and createIndexes in a
// transaction (mongod from 4.4 on runs them there), which it refuses. A
// standalone refuses transactions, as mongod does.
//
// # Replica sets
//
// StartReplicaSet starts a replica set: members on their own ports, with
// their own connections, stats and fail points, sharing one store, so that
// replication is instantaneous. WithReplicaSet makes a server the primary
// of a set of one member. WithAdvertisedHosts gives the members host names
// to advertise instead of their 127.0.0.1 addresses, for clients that
// reach them through a dialer (on a Network, the members listen on those
// names). The members answer as mongod's do:
//
//   - hello reports the set (setName, setVersion, hosts, passives,
//     arbiters, primary, me), the member's role (isWritablePrimary,
//     secondary, arbiterOnly, passive, hidden, tags), electionId on the
//     primary, lastWrite, and topologyVersion, whose counter moves on at
//     each change of the member's hello and whose processId is new at each
//     start;
//   - the awaitable hello (topologyVersion and maxAwaitTimeMS) waits for
//     the next change of the member, or maxAwaitTimeMS; with the OP_MSG
//     exhaustAllowed flag the member streams a reply (moreToCome) at each
//     change, as drivers' streaming monitors expect; unlike mongod, setting
//     a fail point on hello ends the wait at once (with an unchanged reply),
//     so that it applies from the stream's next hello rather than after
//     maxAwaitTimeMS;
//   - a member that is not primary refuses writes (NotWritablePrimary,
//     10107) and the reads that do not opt in with a $readPreference
//     (NotPrimaryNoSecondaryOk, 13435), its errors carrying its
//     topologyVersion; an unacknowledged write to it closes the
//     connection;
//   - retryable writes (once per session and txnNumber) work on the
//     primary, are remembered across a failover, and their retriable
//     errors get the RetryableWriteError label.
//
// Tests change the set with ReplicaSet's controls: StepDown (writes in
// progress fail with InterruptedDueToReplStateChange, 11602), Elect, Stop
// and Restart (a killed and restarted mongod), Partition and Heal (a
// member that answers nothing meanwhile), and SetLag (a member whose
// lastWrite trails, for max staleness). Each moves on the topologyVersion
// of the members whose hello changes, so that awaitable hellos bring the
// news at once. Nothing happens on its own: no election follows a
// step-down or a stop until Elect, and writes do not move topologyVersion
// on, as in mongod.
//
// A replica set does not implement: delayed members and the lag of the
// data itself (SetLag changes what a member reports, not what it serves),
// the replSet* commands (replSetGetStatus, replSetStepDown, ...),
// $clusterTime and operationTime, and elections by priority or by timeout.
// Read and write concerns are taken and not checked: with instantaneous
// replication, every write is on every member when it is acknowledged. A
// standalone and a mongos report no topologyVersion, so clients poll them
// rather than stream.
//
// # In-memory network
//
// A Network is an in-memory network for tests that run on the fake clock
// of testing/synctest, whose time moves on only while every goroutine of
// the bubble is durably blocked, which a goroutine blocked on a socket is
// not. Servers listen on it (WithNetwork), at addresses that look like
// TCP's ("127.0.0.1:27017", then 27018, ..., or the host names of
// WithAdvertisedHosts), and clients dial through its DialContext, which
// mongopool.WithDialer and the official driver's SetDialer take. Its
// connections wait on channels and timers of the bubble: a monitor's 10s
// heartbeat, a 30s server selection timeout or an awaitable hello's
// maxAwaitTimeMS then take that long on the bubble's clock, and no time at
// all:
//
//	synctest.Test(t, func(t *testing.T) {
//		n := mongotest.NewNetwork()
//		defer n.Close()
//		rs, err := mongotest.StartReplicaSet("rs0", 3, mongotest.WithNetwork(n))
//		if err != nil {
//			t.Fatal(err)
//		}
//		client, err := mongopool.Connect(t.Context(), rs.URI(), mongopool.WithDialer(n.DialContext))
//		...
//	})
//
// Everything works on a Network as on TCP: replica sets and their
// controls (a stopped member's address refuses connections, Restart
// listens on it again), fail points, faults, awaitable and streaming
// hellos, TLS. Network.Close closes the servers started on it and every
// connection, so that no goroutine of theirs outlives the bubble.
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
// accepting of connections. LimitConnectionRate refuses the connections
// beyond a rate, as the ingress connection rate limiter of an overloaded
// MongoDB 8.2 does: closed as soon as accepted.
//
// Server.Stats reports what the server saw (connections, commands by name,
// compressed messages by compressor, authentications, awaitable hellos),
// so tests can check that a client did what it claims.
package mongotest
