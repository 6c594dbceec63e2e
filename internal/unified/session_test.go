package unified

import (
	"strings"
	"testing"
)

// rsTest is a file of one test on a replica set: client c observing the
// command started events, database d, collection coll and session s (with
// sessionExtra in its spec), the initial data, then the test's fields.
func rsTest(sessionExtra, test string) string {
	return oneTest(`, "runOnRequirements": [{"topologies": ["replicaset"]}],
		"createEntities": [{"client": {"id": "c", "observeEvents": ["commandStartedEvent"]}},
		{"database": {"id": "d", "client": "c", "databaseName": "db"}},
		{"collection": {"id": "coll", "database": "d", "collectionName": "coll"}},
		{"session": {"id": "s", "client": "c"`+sessionExtra+`}}]`+initialData, test)
}

// insertIn inserts {_id: id} into coll in the session s.
func insertIn(id string) string {
	return `{"name": "insertOne", "object": "coll", "arguments": {"session": "s", "document": {"_id": ` + id + `}}}`
}

func state(st string) string {
	return `{"name": "assertSessionTransactionState", "object": "testRunner", "arguments": {"session": "s", "state": "` + st + `"}}`
}

const (
	startTxn  = `{"name": "startTransaction", "object": "s"}`
	commitTxn = `{"name": "commitTransaction", "object": "s"}`
	abortTxn  = `{"name": "abortTransaction", "object": "s"}`
)

// Session entities run their commands with their lsid, and their
// transactions as the Client's Session does; the runner's assertions on
// sessions read the Session's state.
func TestRunnerSessions(t *testing.T) {
	inTxn := func(id, extra string) string {
		return `{"commandStartedEvent": {"commandName": "insert", "command": {"insert": "coll", "documents": [{"_id": ` + id + `}],
			"lsid": {"$$sessionLsid": "s"}, "txnNumber": {"$numberLong": "1"}, "autocommit": false` + extra + `}}}`
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"a transaction committed", rsTest("", `, "operations": [`+state("none")+`, `+startTxn+`, `+state("starting")+`, `+insertIn("4")+`, `+state("in_progress")+`,
			`+insertIn("5")+`, `+commitTxn+`, `+state("committed")+`, {"name": "assertSessionUnpinned", "object": "testRunner", "arguments": {"session": "s"}}],
			"expectEvents": [{"client": "c", "events": [`+inTxn("4", `, "startTransaction": true`)+`, `+inTxn("5", `, "startTransaction": {"$$exists": false}`)+`,
				{"commandStartedEvent": {"commandName": "commitTransaction", "databaseName": "admin", "command": {"lsid": {"$$sessionLsid": "s"}, "txnNumber": {"$numberLong": "1"}}}}]}],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4}, {"_id": 5}]}]`), ""},
		{"a transaction aborted", rsTest("", `, "operations": [`+startTxn+`, `+insertIn("4")+`, `+abortTxn+`, `+state("aborted")+`],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}]}]`), ""},
		{"a state that differs", rsTest("", `, "operations": [`+startTxn+`, `+state("in_progress")+`]`), "in the transaction state starting, want in_progress"},
		{"an unknown state", rsTest("", `, "operations": [`+state("open")+`]`), `unknown transaction state "open"`},
		{"a client error of the transaction API", rsTest("", `, "operations": [{"name": "commitTransaction", "object": "s",
			"expectError": {"isClientError": true, "errorContains": "no transaction started"}}]`), ""},
		{"assertSessionPinned on a replica set's session", rsTest("", `, "operations": [`+startTxn+`, `+insertIn("4")+`,
			{"name": "assertSessionPinned", "object": "testRunner", "arguments": {"session": "s"}}]`), `the session "s" is not pinned`},
		{"targetedFailPoint on a session that is not pinned", rsTest("", `, "operations": [{"name": "targetedFailPoint", "object": "testRunner",
			"arguments": {"session": "s", "failPoint": {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["insert"], "errorCode": 2}}}}]`),
			`the session "s" is not pinned to a server`},
		{"$$sessionLsid after endSession", rsTest("", `, "operations": [`+insertIn("4")+`, {"name": "endSession", "object": "s"},
			{"name": "find", "object": "coll", "arguments": {"filter": {"_id": 4}}, "expectResult": [{"_id": 4}]},
			{"name": "assertSameLsidOnLastTwoCommands", "object": "testRunner", "arguments": {"client": "c"}},
			{"name": "insertOne", "object": "coll", "arguments": {"session": "s", "document": {"_id": 5}}, "expectError": {"isClientError": true}}],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"command": {"insert": "coll", "lsid": {"$$sessionLsid": "s"}}}},
				{"commandStartedEvent": {"command": {"find": "coll", "lsid": {"$$sessionLsid": "s"}}}}]}]`), ""},
		{"$$sessionLsid of another session", rsTest("", `, "operations": [{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [
				{"session": {"id": "s2", "client": "c"}}]}}, `+insertIn("4")+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"command": {"lsid": {"$$sessionLsid": "s2"}}}}]}]`),
			`want the lsid of the session "s2"`},
		{"$$sessionLsid of an entity that is not a session", rsTest("", `, "operations": [`+insertIn("4")+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"command": {"lsid": {"$$sessionLsid": "coll"}}}}]}]`),
			`"coll" is a collection, not a session`},
		{"different lsids: a session and an implicit one", rsTest("", `, "operations": [`+insertIn("4")+`, `+findOp(`"filter": {"_id": 4}`, `[{"_id": 4}]`)+`,
			{"name": "assertDifferentLsidOnLastTwoCommands", "object": "testRunner", "arguments": {"client": "c"}},
			{"name": "assertSessionNotDirty", "object": "testRunner", "arguments": {"session": "s"}}]`), ""},
		{"the same lsid asserted of different ones", rsTest("", `, "operations": [`+insertIn("4")+`, `+findOp(`"filter": {"_id": 4}`, `[{"_id": 4}]`)+`,
			{"name": "assertSameLsidOnLastTwoCommands", "object": "testRunner", "arguments": {"client": "c"}}]`), "the last two commands have the lsids"},
		{"a dirty session", rsTest("", `, "operations": [{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint":
				{"configureFailPoint": "failCommand", "mode": {"times": 2}, "data": {"failCommands": ["insert"], "closeConnection": true}}}},
			{"name": "insertOne", "object": "coll", "arguments": {"session": "s", "document": {"_id": 4}}, "expectError": {"isClientError": true}},
			{"name": "assertSessionDirty", "object": "testRunner", "arguments": {"session": "s"}}]`), ""},
		{"defaultTransactionOptions", rsTest(`, "sessionOptions": {"defaultTransactionOptions": {"readConcern": {"level": "majority"},
			"writeConcern": {"w": "majority", "wtimeoutMS": 1000}, "maxCommitTimeMS": 60000}}`, `, "operations": [`+startTxn+`, `+insertIn("4")+`, `+commitTxn+`],
			"expectEvents": [{"client": "c", "events": [`+inTxn("4", `, "readConcern": {"level": "majority"}`)+`,
				{"commandStartedEvent": {"command": {"commitTransaction": 1, "writeConcern": {"w": "majority", "wtimeout": 1000}, "maxTimeMS": 60000}}}]}]`), ""},
		{"startTransaction's options over the defaults", rsTest(`, "sessionOptions": {"defaultTransactionOptions": {"readConcern": {"level": "majority"}}}`,
			`, "operations": [{"name": "startTransaction", "object": "s", "arguments": {"readConcern": {"level": "local"}}}, `+insertIn("4")+`, `+commitTxn+`],
			"expectEvents": [{"client": "c", "events": [`+inTxn("4", `, "readConcern": {"level": "local"}`)+`,
				{"commandStartedEvent": {"command": {"commitTransaction": 1, "writeConcern": {"$$exists": false}}}}]}]`), ""},
		{"a collection's concerns, not in a transaction", rsTest("", `, "operations": [
			{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [{"collection": {"id": "wc", "database": "d", "collectionName": "coll",
				"collectionOptions": {"writeConcern": {"w": 1}, "readConcern": {"level": "local"}}}}]}},
			{"name": "insertOne", "object": "wc", "arguments": {"document": {"_id": 4}}},
			{"name": "find", "object": "wc", "arguments": {"filter": {"_id": 4}}},
			`+startTxn+`, {"name": "insertOne", "object": "wc", "arguments": {"session": "s", "document": {"_id": 5}}},
			{"name": "find", "object": "wc", "arguments": {"session": "s", "filter": {"_id": 5}}}, `+commitTxn+`],
			"expectEvents": [{"client": "c", "events": [
				{"commandStartedEvent": {"command": {"insert": "coll", "writeConcern": {"w": 1}}}},
				{"commandStartedEvent": {"command": {"find": "coll", "readConcern": {"level": "local"}}}},
				{"commandStartedEvent": {"command": {"insert": "coll", "writeConcern": {"$$exists": false}, "readConcern": {"$$exists": false}}}},
				{"commandStartedEvent": {"command": {"find": "coll", "readConcern": {"$$exists": false}}}},
				{"commandStartedEvent": {"command": {"commitTransaction": 1}}}]}]`), ""},
		{"a transaction's read preference, not the collection's", rsTest("", `, "operations": [
			{"name": "createEntities", "object": "testRunner", "arguments": {"entities": [{"collection": {"id": "sec", "database": "d", "collectionName": "coll",
				"collectionOptions": {"readPreference": {"mode": "secondary"}}}}]}},
			`+startTxn+`, {"name": "find", "object": "sec", "arguments": {"session": "s", "filter": {"_id": 1}}, "expectResult": [{"_id": 1, "x": "a"}]}, `+abortTxn+`,
			{"name": "startTransaction", "object": "s", "arguments": {"readPreference": {"mode": "secondary"}}},
			{"name": "find", "object": "coll", "arguments": {"session": "s", "filter": {}}, "expectError": {"errorContains": "read preference in a transaction must be primary"}},
			{"name": "runCommand", "object": "d", "arguments": {"session": "s", "commandName": "count", "command": {"count": "coll"}},
				"expectError": {"errorContains": "read preference in a transaction must be primary"}}, `+abortTxn+`]`), ""},
		{"an unacknowledged transaction", rsTest("", `, "operations": [{"name": "startTransaction", "object": "s", "arguments": {"writeConcern": {"w": 0}},
			"expectError": {"isClientError": true, "errorContains": "transactions do not support unacknowledged write concern"}}]`), ""},
		// mongotest fails a w above its members as mongod does: a
		// writeConcernError 100 of the commit.
		{"a write concern above the members", rsTest("", `, "operations": [{"name": "startTransaction", "object": "s", "arguments": {"writeConcern": {"w": 10}}},
			`+insertIn("4")+`, {"name": "commitTransaction", "object": "s", "expectError": {"errorCode": 100}}]`), ""},
		{"causalConsistency: true", rsTest(`, "sessionOptions": {"causalConsistency": true}`, `, "operations": []`), ""},
		{"causalConsistency: false", rsTest(`, "sessionOptions": {"causalConsistency": false}`, `, "operations": [`+insertIn("4")+`]`), ""},
		{"snapshot", rsTest(`, "sessionOptions": {"snapshot": true}`, `, "operations": []`), "skip:createEntities[3].session: the project has no snapshot reads"},
		// A causally consistent session's second command reads after its
		// first (the causal consistency specification).
		{"an expected afterClusterTime", rsTest("", `, "operations": [`+insertIn("4")+`, `+insertIn("5")+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"command": {"readConcern": {"$$exists": false}}}},
				{"commandStartedEvent": {"command": {"readConcern": {"afterClusterTime": {"$$exists": true}}}}}]}]`), ""},
		{"an unknown session option", rsTest(`, "sessionOptions": {"causal": true}`, `, "operations": []`), `unknown field "causal"`},
		{"defaultTimeoutMS", rsTest(`, "sessionOptions": {"defaultTimeoutMS": 100}`, `, "operations": []`), `does not support "defaultTimeoutMS"`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// withTransaction runs its callback's operations with their assertions;
// an operation's error goes back to WithTransaction whatever the operation
// expected, so that a transient error runs the callback again.
func TestRunnerWithTransaction(t *testing.T) {
	with := func(args, extra string) string {
		return `{"name": "withTransaction", "object": "s", "arguments": {` + args + `}` + extra + `}`
	}
	transient := `{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
		"mode": {"times": 1}, "data": {"failCommands": ["insert"], "errorCode": 112, "errorLabels": ["TransientTransactionError"]}}}}`
	all := `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4}]`
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"a callback committed", rsTest("", `, "operations": [`+with(`"callback": [`+insertIn("4")+`]`, "")+`, `+state("committed")+`],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": `+all+`}]`), ""},
		{"a transient error: the callback runs again, its expectation checked each time", rsTest("", `, "operations": [`+transient+`, `+with(`"callback": [
				{"name": "insertOne", "object": "coll", "arguments": {"session": "s", "document": {"_id": 4}}, "ignoreResultAndError": true}]`, "")+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"commandName": "insert"}}, {"commandStartedEvent": {"commandName": "abortTransaction"}},
				{"commandStartedEvent": {"commandName": "insert"}}, {"commandStartedEvent": {"commandName": "commitTransaction"}}]}],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": `+all+`}]`), ""},
		{"an error expected in the callback reaches withTransaction", rsTest("", `, "operations": [`+with(`"callback": [
				{"name": "insertOne", "object": "coll", "arguments": {"session": "s", "document": {"_id": 1}}, "expectError": {"errorCode": 11000}}]`,
			`, "expectError": {"errorCode": 11000}`)+`, `+state("aborted")+`]`), ""},
		{"a failed assertion in the callback fails the test", rsTest("", `, "operations": [`+with(`"callback": [`+
			findOp(`"session": "s", "filter": {"_id": 1}`, `[{"_id": 7}]`)+`]`, "")+`]`), "callback (call 1) operation 0 (find on coll): expectResult"},
		{"options", rsTest("", `, "operations": [`+with(`"callback": [`+insertIn("4")+`], "readConcern": {"level": "local"}, "writeConcern": {"w": 1}, "maxCommitTimeMS": 5000`, "")+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"command": {"insert": "coll", "readConcern": {"level": "local"}}}},
				{"commandStartedEvent": {"command": {"commitTransaction": 1, "writeConcern": {"w": 1}, "maxTimeMS": 5000}}}]}]`), ""},
		{"a refusal in the callback skips", rsTest("", `, "operations": [`+with(`"callback": [`+findOp(`"session": "s", "filter": {"$text": {"$search": "a"}}`, `[]`)+`]`, "")+`]`),
			"skip:a feature the test server refuses: does not implement the query operator $text"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// The namespace assertions read the collections and indexes through the
// internal client.
func TestRunnerNamespaceAssertions(t *testing.T) {
	assert := func(name, extra string) string {
		return `{"name": "` + name + `", "object": "testRunner", "arguments": {"databaseName": "db", "collectionName": "coll"` + extra + `}}`
	}
	createIndex := `{"name": "createIndex", "object": "coll", "arguments": {"keys": {"x": 1}}, "expectResult": "x_1"}`
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"a collection and an index", opsTest(initialData, assert("assertCollectionExists", "")+`, `+assert("assertIndexNotExists", `, "indexName": "x_1"`)+`, `+createIndex+`,
			`+assert("assertIndexExists", `, "indexName": "x_1"`)+`, {"name": "drop", "object": "coll"}, `+assert("assertCollectionNotExists", "")+`,
			`+assert("assertIndexNotExists", `, "indexName": "x_1"`)), ""},
		{"a collection that does not exist", opsTest("", assert("assertCollectionExists", "")), "the collection coll does not exist in db.coll"},
		{"an index that does not exist", opsTest(initialData, assert("assertIndexExists", `, "indexName": "x_1"`)), "the index x_1 does not exist"},
		{"an index that exists", opsTest(initialData, createIndex+`, `+assert("assertIndexNotExists", `, "indexName": "x_1"`)), "the index x_1 exists"},
		{"an index without its name", opsTest(initialData, assert("assertIndexExists", "")), `missing required field "indexName"`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// A client with serverApi is made, but a test that uses it skips: the
// Client has no Stable API.
func TestRunnerServerAPI(t *testing.T) {
	file := oneTest(`, "createEntities": [{"client": {"id": "c"}}, {"client": {"id": "api", "serverApi": {"version": "1", "strict": true}}},
		{"database": {"id": "d", "client": "c", "databaseName": "db"}}, {"database": {"id": "apidb", "client": "api", "databaseName": "db"}}]`, `, "operations": [OPS]`)
	checkOutcome(t, runJSON(t, strings.Replace(file, "OPS", pingOp, 1)), "")
	checkOutcome(t, runJSON(t, strings.Replace(file, "OPS", strings.Replace(pingOp, `"d"`, `"apidb"`, 1), 1)), `skip:client "api" sets serverApi`)
}
