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
//     (see WithLoadBalanced); a standalone mongod reports its
//     topologyVersion and answers the awaitable and exhaust hellos of the
//     streaming protocol, as a replica set member does (below): its
//     topologyVersion never changes while it runs, so an awaitable hello
//     with it waits maxAwaitTimeMS, as mongod's does;
//   - authentication: SCRAM-SHA-1, SCRAM-SHA-256 and PLAIN through
//     saslStart/saslContinue against users given to AddUser, and
//     MONGODB-X509 through authenticate against AddX509User over TLS;
//   - the user management commands createUser, updateUser, dropUser,
//     dropAllUsersFromDatabase and usersInfo, on the same users: a user
//     created through the wire authenticates at once, with credentials
//     derived as mongod derives them (a user of $external is a
//     MONGODB-X509 certificate subject);
//   - wire compression with snappy, zlib and zstd: a compressed request gets
//     a reply compressed with the same compressor, except for the commands
//     that must never be compressed;
//   - ping, buildInfo, serverStatus (with its connections section),
//     listDatabases (with the admin, config and local databases of a
//     mongod, of nominal sizes), listCollections, endSessions;
//   - an in-memory store with MongoDB's semantics: insert, update (operators
//     or replacement, multi, upsert, the positional operators $, $[] and
//     $[<identifier>] with arrayFilters), delete, findAndModify, find (filter,
//     sort, projection with the positional a.$, $slice and $elemMatch,
//     skip, limit, batchSize), getMore, killCursors, count, distinct,
//     aggregate ($match, $group, $count, $sort, $skip, $limit, $project,
//     $unset, $addFields, $unwind, $replaceRoot), create, drop,
//     dropDatabase, and createIndexes, listIndexes and dropIndexes, with
//     unique indexes enforced (E11000 duplicate key errors);
//   - the release it presents itself as (WithVersion; 7.0 by default) in
//     its handshake, buildInfo and commands: from 8.0, the bulkWrite command
//     of MongoClient.bulkWrite (inserts, updates and deletes on several
//     namespaces, each as its insert, update or delete statement runs, with
//     its results in a cursor, retryable and in transactions) and update's
//     sort;
//   - MongoDB's query language: $eq $ne $gt $gte $lt $lte $in $nin $exists
//     $type $size $all $elemMatch $mod $regex (PCRE's syntax and matching,
//     through regexp2, each match bounded in time) $not $and $or $nor, dotted
//     paths and array elements, and values compared in MongoDB's order of
//     BSON types, numbers by value whatever their type;
//   - server-side JavaScript (see below): $where, $expr with $function,
//     $function in aggregate's stages and $accumulator in $group;
//   - read and write concerns, parsed and checked as mongod checks them: a
//     standalone refuses w > 1, a replica set reports a w it cannot satisfy
//     as a writeConcernError (UnsatisfiableWriteConcern,
//     UnknownReplWriteConcern) of a write it applies, linearizable reads
//     run on a primary only (see concern.go);
//   - the failCommand fail point, as mongod has it for tests:
//     configureFailPoint and waitForFailPoint on admin, or Server.SetFailPoint,
//     to block, fail or close the connection of chosen commands (the
//     handshake and authentication included), or add a writeConcernError,
//     with the fail point's errorLabels or else those mongod would add.
//
// What it does not implement it refuses, rather than answer wrongly: an
// unknown command fails with CommandNotFound (59); an operator, stage,
// option or expression MongoDB has and this package does not ($lookup,
// $add, collations, ...) fails with BadValue (2) saying so;
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
// standalone refuses transactions, as mongod does. A transaction
// copies each collection it uses, at its first use: its cost grows with the
// collection's documents (a test server's collections are small; a
// transaction over a collection of 100,000 documents costs milliseconds).
//
// # JavaScript
//
// Server-side JavaScript runs where mongod runs it, in goja (an interpreter
// written in Go) rather than SpiderMonkey:
//
//   - $where, a string or BSON JavaScript, in the filters of find, count,
//     distinct, update, delete and findAndModify, at their top level (or in
//     $and, $or and $nor there), with this and obj the document; refused as
//     mongod refuses it in $elemMatch ("$where can only be applied to the
//     top-level document"), on a field ("unknown operator: $where") and in
//     aggregation's $match, so in countDocuments ("$where is not allowed in
//     this context");
//   - $expr in those filters and in $match, with the expressions mongotest
//     implements (field paths, literals, $function): it matches when the
//     value is true as aggregation counts it;
//   - $function {body, args, lang: "js"} in the expressions of aggregate's
//     stages and of $expr (not of find's projection, refused), and
//     $accumulator {init, initArgs, accumulate, accumulateArgs, merge,
//     finalize, lang} in $group, with mongod's parse errors (31260-31432,
//     4544701-4544712); merge is never called, as on a mongod that does not
//     spill a group to disk.
//
// Code is taken as mongod takes it: a function, or statements whose last
// expression is returned ("this.x > 1", "var y = 2; y == this.x"), or a
// body with a return. A document reaches JavaScript as mongod's shell types
// show it: numbers for doubles and int32s, NumberLong and NumberDecimal
// objects, Date, RegExp, ObjectId (with str, equals, getTimestamp), BinData,
// Timestamp, MinKey, MaxKey, Code, arrays and objects in field order; the
// constructors of these types are globals, with sleep(ms) and print. Results
// go back as mongod converts them: new numbers are doubles, the fields of a
// document from BSON keep their int32s. A syntax error, or an exception,
// fails with JSInterpreterFailure (139), its message and stack.
//
// Each call into JavaScript (one document's $where, one $function, one
// group's accumulation) is watched, and stopped, as mongod stops it: at the
// command's maxTimeMS (MaxTimeMSExpired, 50), at WithJavaScriptTimeout's
// limit (Interrupted, 11601; 60 seconds by default, mongod's
// internalQueryJavaScriptFnTimeoutMillis), so that while (true) {} ends, when
// a replica set member steps down during the write (11602), when the server
// closes, and when the client hangs up: sleep(ms) waits no longer either.
// An interruption fails a whole update or delete command, as in mongod.
// Stats.JavaScriptRunning and Stats.JavaScriptInterrupted report the calls
// running and those stopped. currentOp lists the commands running (filtered
// by a query on their documents) and killOp stops one: its JavaScript, or
// its wait for a transaction's lock, fails with Interrupted (11601). There
// are no db.system.js functions, and no memory limit
// beyond the recursion's. A read (find, count, distinct) matches a filter
// with JavaScript outside the store's lock, so that a sleeping $where holds
// up no other command, as mongod yields; a write's $where holds the store
// while it runs, and the other commands wait for it.
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
//     errors get the RetryableWriteError label;
//   - the replica set commands, on admin: replSetGetStatus and
//     replSetGetConfig describe the set as rs.status() and rs.conf() show
//     it (a set of more than 7 members, all voting, has no configuration
//     mongod would take: they refuse it); replSetStepDown steps the
//     primary down, and the election handoff of mongod elects an electable
//     secondary at once, which replSetFreeze keeps from being elected. A
//     standalone refuses them (NoReplicationEnabled, 76).
//
// Tests change the set with ReplicaSet's controls: StepDown (writes in
// progress fail with InterruptedDueToReplStateChange, 11602), Elect, Stop
// and Restart (a killed and restarted mongod), Partition and Heal (a
// member that answers nothing meanwhile), and SetLag (a member whose
// lastWrite trails, for max staleness). Each moves on the topologyVersion
// of the members whose hello changes, so that awaitable hellos bring the
// news at once. Nothing happens on its own: no election follows a
// step-down or a stop until Elect (but for the handoff of replSetStepDown,
// which mongod makes at once), and writes do not move topologyVersion on,
// as in mongod.
//
// A replica set does not implement: delayed members and the lag of the
// data itself (SetLag changes what a member reports, not what it serves),
// the replica set commands that change the configuration
// (replSetInitiate, replSetReconfig, ...) or force an election
// (replSetStepUp), $clusterTime and operationTime, and elections by
// priority or by timeout (after a forced replSetStepDown, mongod elects a
// member after electionTimeoutMillis; the test server waits for Elect).
// Read and write concerns are taken and not checked: with instantaneous
// replication, every write is on every member when it is acknowledged. A
// mongos reports no topologyVersion, so clients poll it rather than
// stream (a mongos of 4.4 and later has one: this one is older there).
//
// # Sharded clusters
//
// StartShardedCluster starts mongoses in front of replica-set shards. Each
// database lives whole on one shard (ShardOf says which); a mongos answers
// the handshake itself (msg: "isdbgrid") and routes the commands on data to
// the shard's primary, or a secondary for a read that allows one, waiting
// for a primary during an election and sending reads, retryable writes,
// commits and aborts again to the new one; cursors get the mongos's own
// ids; a transaction is pinned to the mongos that started it, whose replies
// carry the recoveryToken another mongos commits it with. StopMongos and
// RestartMongos stop and start one mongos; each has its own fail points,
// and each shard its controls (ShardedCluster.Shards). Transactions that
// span two shards and sharded collections are refused.
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
// ping, buildInfo and endSessions needs an authenticated connection. Roles
// are checked when given to a user (the built-in ones exist) and reported,
// not enforced: an authenticated user may do anything. A connection stays
// authenticated as a user that dropUser drops (mongod would end its
// authentication).
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
