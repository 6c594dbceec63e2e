package unified

import "testing"

// The CRUD, index, enumeration and run command operations build the
// commands a driver sends and return the specifications' results.
func TestRunnerCRUD(t *testing.T) {
	all := `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}]`
	outcome := func(docs string) string {
		return `], "outcome": [{"databaseName": "db", "collectionName": "coll", "documents": ` + docs + `}]`
	}
	// withOutcome is a file of one test: its operations ops, and the
	// collection holding docs at the end.
	withOutcome := func(ops, docs string) string {
		return oneTest(entities("")+initialData, `, "operations": [`+ops+outcome(docs))
	}
	observed := func(ops, events string) string {
		return oneTest(observing(`["commandStartedEvent"]`, "")+initialData, `, "operations": [`+ops+`],
			"expectEvents": [{"client": "c", "events": [`+events+`]}]`)
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"findOneAndUpdate: the document before", withOutcome(`{"name": "findOneAndUpdate", "object": "coll", "arguments": {"filter": {"_id": 2},
			"update": {"$set": {"x": "z"}}}, "expectResult": {"_id": 2, "x": "b"}}`, `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "z"}, {"_id": 3, "x": "c"}]`), ""},
		{"findOneAndUpdate: the document after, projected", opsTest(initialData, `{"name": "findOneAndUpdate", "object": "coll", "arguments": {"filter": {"_id": 2},
			"update": {"$set": {"x": "z"}}, "returnDocument": "After", "projection": {"_id": 0}}, "expectResult": {"x": "z"}}`), ""},
		{"findOneAndUpdate: an upsert", withOutcome(`{"name": "findOneAndUpdate", "object": "coll", "arguments": {"filter": {"_id": 4},
			"update": {"$set": {"x": "d"}}, "upsert": true, "returnDocument": "after"}, "expectResult": {"_id": 4, "x": "d"}}`,
			`[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4, "x": "d"}]`), ""},
		{"findOneAndUpdate: nothing found", opsTest(initialData, `{"name": "findOneAndUpdate", "object": "coll", "arguments": {"filter": {"_id": 9},
			"update": {"$set": {"x": "z"}}}, "expectResult": null}`), ""},
		{"findOneAndUpdate: an update without operators", opsTest(initialData, `{"name": "findOneAndUpdate", "object": "coll", "arguments": {"filter": {},
			"update": {"x": 1}}, "expectError": {"isClientError": true}}`), ""},
		{"findOneAndUpdate: a bad returnDocument", opsTest(initialData, `{"name": "findOneAndUpdate", "object": "coll", "arguments": {"filter": {},
			"update": {"$set": {"x": 1}}, "returnDocument": "Later"}}`), `returnDocument "Later"`},
		{"findOneAndReplace", withOutcome(`{"name": "findOneAndReplace", "object": "coll", "arguments": {"filter": {"x": "c"}, "replacement": {"y": 1},
			"returnDocument": "After"}, "expectResult": {"_id": 3, "y": 1}}`, `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "y": 1}]`), ""},
		{"findOneAndReplace: a replacement with operators", opsTest(initialData, `{"name": "findOneAndReplace", "object": "coll", "arguments": {"filter": {},
			"replacement": {"$set": {"x": 1}}}, "expectError": {"isClientError": true}}`), ""},
		{"findOneAndDelete", withOutcome(`{"name": "findOneAndDelete", "object": "coll", "arguments": {"filter": {}, "sort": {"_id": -1}},
			"expectResult": {"_id": 3, "x": "c"}}`, `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}]`), ""},
		{"findOne", opsTest(initialData, `{"name": "findOne", "object": "coll", "arguments": {"filter": {"_id": {"$gt": 1}}, "sort": {"_id": 1}},
			"expectResult": {"_id": 2, "x": "b"}}, {"name": "findOne", "object": "coll", "arguments": {"filter": {"_id": 9}}, "expectResult": null}`), ""},
		{"findOne's command", observed(`{"name": "findOne", "object": "coll", "arguments": {"filter": {"_id": 1}}}`,
			`{"commandStartedEvent": {"command": {"find": "coll", "filter": {"_id": 1}, "limit": 1, "singleBatch": true, "batchSize": {"$$exists": false}}}}`), ""},
		{"find: batchSize equal to limit", observed(findOp(`"filter": {}, "limit": 2, "batchSize": 2`, `[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}]`),
			`{"commandStartedEvent": {"command": {"find": "coll", "limit": 2, "batchSize": 3}}}`), ""},
		{"find: a comment on the getMores too", observed(findOp(`"filter": {}, "batchSize": 2, "comment": "hi"`, all),
			`{"commandStartedEvent": {"command": {"find": "coll", "comment": "hi"}}}, {"commandStartedEvent": {"command": {"getMore": {"$$type": "long"}, "comment": "hi"}}}`), ""},
		{"distinct", opsTest(initialData, `{"name": "distinct", "object": "coll", "arguments": {"fieldName": "x", "filter": {"_id": {"$lt": 3}}},
			"expectResult": ["a", "b"]}`), ""},
		{"distinct: values that differ", opsTest(initialData, `{"name": "distinct", "object": "coll", "arguments": {"fieldName": "x", "filter": {}},
			"expectResult": ["a", "b"]}`), "expectResult"},
		{"estimatedDocumentCount and count", observed(`{"name": "estimatedDocumentCount", "object": "coll", "expectResult": 3},
			{"name": "count", "object": "coll", "arguments": {"filter": {"x": "b"}}, "expectResult": 1}`,
			`{"commandStartedEvent": {"command": {"count": "coll", "query": {"$$exists": false}}}}, {"commandStartedEvent": {"command": {"count": "coll", "query": {"x": "b"}}}}`), ""},
		{"createIndex, listIndexes, listIndexNames, dropIndex", opsTest(initialData, `{"name": "createIndex", "object": "coll", "arguments": {"keys": {"x": 1, "y": -1}},
			"expectResult": "x_1_y_-1"}, {"name": "createIndex", "object": "coll", "arguments": {"keys": {"x": -1}, "name": "zz", "unique": true}, "expectResult": "zz"},
			{"name": "listIndexNames", "object": "coll", "expectResult": ["_id_", "x_1_y_-1", "zz"]},
			{"name": "listIndexes", "object": "coll", "expectResult": [{"name": "_id_"}, {"name": "x_1_y_-1", "key": {"x": 1, "y": -1}}, {"name": "zz", "unique": true}]},
			{"name": "dropIndex", "object": "coll", "arguments": {"name": "zz"}}, {"name": "listIndexNames", "object": "coll", "expectResult": ["_id_", "x_1_y_-1"]}`), ""},
		{"createCollection saved as an entity, listCollections, dropCollection", opsTest(initialData, `{"name": "dropCollection", "object": "d", "arguments": {"collection": "new"}},
			{"name": "createCollection", "object": "d", "arguments": {"collection": "new"}, "saveResultAsEntity": "newColl"},
			{"name": "insertOne", "object": "newColl", "arguments": {"document": {"_id": 1}}},
			{"name": "listCollectionNames", "object": "d", "arguments": {"filter": {"name": "new"}}, "expectResult": ["new"]},
			{"name": "listCollections", "object": "d", "arguments": {"filter": {"name": "new"}}, "expectResult": [{"name": "new", "type": "collection"}]},
			{"name": "dropCollection", "object": "d", "arguments": {"collection": "new"}},
			{"name": "listCollectionNames", "object": "d", "arguments": {"filter": {"name": "new"}}, "expectResult": []}`), ""},
		{"listDatabaseNames", opsTest(initialData, `{"name": "listDatabaseNames", "object": "c", "arguments": {"filter": {"name": "db"}}, "expectResult": ["db"]}`), ""},
		{"a database's aggregate", opsTest(initialData, `{"name": "aggregate", "object": "d", "arguments": {"pipeline": [{"$listLocalSessions": {}}]}}`),
			"skip:a feature the test server refuses"},
		{"runCursorCommand", observed(`{"name": "runCursorCommand", "object": "d", "arguments": {"commandName": "find", "command": {"find": "coll", "batchSize": 1},
			"batchSize": 1, "comment": "more"}, "expectResult": `+all+`}`, `{"commandStartedEvent": {"command": {"find": "coll", "batchSize": 1}}},
			{"commandStartedEvent": {"command": {"getMore": {"$$type": "long"}, "batchSize": 1, "comment": "more"}}},
			{"commandStartedEvent": {"command": {"getMore": {"$$type": "long"}, "batchSize": 1, "comment": "more"}}}`), ""},
		{"createCommandCursor", opsTest(initialData, `{"name": "createCommandCursor", "object": "d", "arguments": {"commandName": "find",
			"command": {"find": "coll", "batchSize": 1}}, "saveResultAsEntity": "cur"},
			{"name": "iterateUntilDocumentOrError", "object": "cur", "expectResult": {"_id": 1}},
			{"name": "iterateUntilDocumentOrError", "object": "cur", "expectResult": {"_id": 2}}, {"name": "close", "object": "cur"}`), ""},
		{"createCommandCursor: no cursor in the reply", opsTest("", `{"name": "createCommandCursor", "object": "d", "arguments": {"commandName": "ping",
			"command": {"ping": 1}}, "expectError": {"isClientError": true}}`), ""},
		{"bulkWrite: every model", withOutcome(`{"name": "bulkWrite", "object": "coll", "arguments": {"requests": [
				{"insertOne": {"document": {"_id": 4}}}, {"insertOne": {"document": {"_id": 5}}},
				{"updateOne": {"filter": {"_id": 1}, "update": {"$set": {"x": "z"}}}}, {"updateMany": {"filter": {"_id": {"$gt": 3}}, "update": {"$set": {"y": 1}}}},
				{"replaceOne": {"filter": {"_id": 6}, "replacement": {"x": "f"}, "upsert": true}},
				{"deleteOne": {"filter": {"_id": 2}}}, {"deleteMany": {"filter": {"_id": {"$in": [3, 4]}}}}]},
			"expectResult": {"insertedCount": 2, "insertedIds": {"$$unsetOrMatches": {"0": 4, "1": 5}}, "matchedCount": 3, "modifiedCount": 3,
				"upsertedCount": 1, "upsertedIds": {"4": 6}, "deletedCount": 3}}`,
			`[{"_id": 1, "x": "z"}, {"_id": 5, "y": 1}, {"_id": 6, "x": "f"}]`), ""},
		{"bulkWrite: ordered, stopped at a write error, with the partial result", withOutcome(`{"name": "bulkWrite", "object": "coll", "arguments": {"requests": [
				{"insertOne": {"document": {"_id": 4}}}, {"insertOne": {"document": {"_id": 1}}}, {"deleteOne": {"filter": {"_id": 2}}}]},
			"expectError": {"errorCode": 11000, "expectResult": {"$$unsetOrMatches": {"insertedCount": 1, "deletedCount": 0}}}}`,
			`[{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4}]`), ""},
		{"bulkWrite: unordered goes on after a write error", withOutcome(`{"name": "bulkWrite", "object": "coll", "arguments": {"ordered": false, "requests": [
				{"insertOne": {"document": {"_id": 1}}}, {"deleteOne": {"filter": {"_id": 2}}}]},
			"expectError": {"errorCodeName": "DuplicateKey", "expectResult": {"insertedCount": 0, "deletedCount": 1}}}`,
			`[{"_id": 1, "x": "a"}, {"_id": 3, "x": "c"}]`), ""},
		{"bulkWrite: a partial result that differs", opsTest(initialData, `{"name": "bulkWrite", "object": "coll", "arguments": {"requests": [
				{"insertOne": {"document": {"_id": 1}}}]}, "expectError": {"expectResult": {"insertedCount": 1}}}`), "expectResult"},
		{"insertMany: the partial result", opsTest(initialData, `{"name": "insertMany", "object": "coll", "arguments": {"ordered": false,
			"documents": [{"_id": 1}, {"_id": 4}]}, "expectError": {"errorCode": 11000, "expectResult": {"insertedCount": 1}}}`), ""},
		{"unacknowledged writes", oneTest(`, "createEntities": [{"client": {"id": "c"}}, {"database": {"id": "d", "client": "c", "databaseName": "db"}},
			{"collection": {"id": "coll", "database": "d", "collectionName": "coll", "collectionOptions": {"writeConcern": {"w": 0}}}}]`+initialData,
			`, "operations": [{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 4}}, "expectResult": {"acknowledged": false}},
			{"name": "updateOne", "object": "coll", "arguments": {"filter": {"_id": 4}, "update": {"$set": {"x": 1}}}, "expectResult": {"$$unsetOrMatches": {"acknowledged": false}}},
			{"name": "findOneAndDelete", "object": "coll", "arguments": {"filter": {"_id": 4}}, "expectResult": {"$$unsetOrMatches": null}}]`), ""},
		{"rawData", opsTest(initialData, findOp(`"filter": {}, "rawData": true`, all)), "skip:the runner does not take the argument rawData"},
		{"initialData the test server refuses", opsTest(`, "initialData": [{"databaseName": "db", "collectionName": "coll", "createOptions": {"capped": true, "size": 4096},
			"documents": []}]`, ""), "skip:initialData: a feature the test server refuses: does not implement the collection option capped"},
		{"a fail point the test server has not", opsTest("", `{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c",
			"failPoint": {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": "alwaysOn"}}}`), "skip:the fail point onPrimaryTransactionalWrite: the test server has only failCommand"},
		{"clientBulkWrite", opsTest("", `{"name": "clientBulkWrite", "object": "c", "arguments": {"models": []}}`), "skip:the runner has no clientBulkWrite operation"},
		{"assertNumberConnectionsCheckedOut", opsTest(initialData, `{"name": "assertNumberConnectionsCheckedOut", "object": "testRunner",
			"arguments": {"client": "c", "connections": 0}}, {"name": "assertNumberConnectionsCheckedOut", "object": "testRunner",
			"arguments": {"client": "c", "connections": 1}}`), "has 0 connections checked out, want 1"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}
