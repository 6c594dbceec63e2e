package unified

import (
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/topology"
)

// fileWith builds a file of one test: reqs its file-level runOnRequirements
// (none when empty), top more of the file's top level (after a comma), test
// the test's fields (after a comma).
func fileWith(reqs, top, test string) string {
	if reqs != "" {
		top = `, "runOnRequirements": ` + reqs + top
	}
	return oneTest(top, test)
}

// observing is a client c observing events, with database d and collection
// coll, and extra fields for c.
func observing(events, extra string) string {
	return entities(`, "observeEvents": ` + events + extra)
}

func op(name, object, args string) string {
	if args == "" {
		return `{"name": "` + name + `", "object": "` + object + `"}`
	}
	return `{"name": "` + name + `", "object": "` + object + `", "arguments": ` + args + `}`
}

func waitFor(event string, count string) string {
	return op("waitForEvent", "testRunner", `{"client": "c", "event": `+event+`, "count": `+count+`}`)
}

// The runner starts a deployment of the first topology the requirements
// accept that it can provide: a replica set of three members, a mongos
// behind a load balancer, a standalone; a sharded cluster it cannot, and
// says so.
func TestRunnerTopologies(t *testing.T) {
	record := op("recordTopologyDescription", "testRunner", `{"client": "c", "id": "td"}`)
	assertType := func(tt string) string {
		return op("assertTopologyType", "testRunner", `{"topologyDescription": "td", "topologyType": "`+tt+`"}`)
	}
	rsFound := waitFor(`{"topologyDescriptionChangedEvent": {}}`, "4") // opened, then each member's first check
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"replicaset", fileWith(`[{"topologies": ["replicaset"]}]`, observing(`["topologyDescriptionChangedEvent"]`, ""),
			`, "operations": [`+rsFound+`, `+record+`, `+assertType("ReplicaSetWithPrimary")+`]`), ""},
		{"replicaset: a type that differs", fileWith(`[{"topologies": ["replicaset"]}]`, observing(`["topologyDescriptionChangedEvent"]`, ""),
			`, "operations": [`+rsFound+`, `+record+`, `+assertType("Single")+`]`), `is a ReplicaSetWithPrimary topology, want Single`},
		{"load-balanced", fileWith(`[{"topologies": ["load-balanced"]}]`, entities(""),
			`, "operations": [`+record+`, `+assertType("LoadBalanced")+`]`), ""},
		{"the order the requirements name", fileWith(`[{"topologies": ["load-balanced", "single"]}]`, entities(""),
			`, "operations": [`+record+`, `+assertType("LoadBalanced")+`]`), ""},
		{"the file's and the test's requirements both", fileWith(`[{"topologies": ["load-balanced", "replicaset"]}]`, observing(`["topologyDescriptionChangedEvent"]`, ""),
			`, "runOnRequirements": [{"topologies": ["single", "replicaset"]}], "operations": [`+rsFound+`, `+record+`, `+assertType("ReplicaSetWithPrimary")+`]`), ""},
		{"single by default", fileWith("", observing(`["topologyDescriptionChangedEvent"]`, ""),
			`, "operations": [`+waitFor(`{"topologyDescriptionChangedEvent": {}}`, "2")+`, `+record+`, `+assertType("Single")+`]`), ""},
		{"sharded", fileWith(`[{"topologies": ["sharded"]}]`, observing(`["topologyDescriptionChangedEvent"]`, ""),
			`, "operations": [`+waitFor(`{"topologyDescriptionChangedEvent": {}}`, "2")+`, `+record+`, `+assertType("Sharded")+`]`), ""},
		{"sharded-replicaset", fileWith(`[{"topologies": ["sharded-replicaset"]}]`, observing(`["topologyDescriptionChangedEvent"]`, ""),
			`, "operations": [`+waitFor(`{"topologyDescriptionChangedEvent": {}}`, "2")+`, `+record+`, `+assertType("Sharded")+`]`), ""},
		{"an unknown topology", fileWith(`[{"topologies": ["shraded"]}]`, "", `, "operations": []`), `unknown topology "shraded"`},
		{"a requirement that is not a document", fileWith(`[1]`, "", `, "operations": []`), "want a document"},
		{"topologies that is not an array", fileWith(`[{"topologies": "single"}]`, "", `, "operations": []`), `"topologies": want an array`},
		{"an unknown requirement with a topology the runner cannot provide", fileWith(`[{"topologies": ["sharded"], "minServerVersoin": "4.0"}]`, "",
			`, "operations": []`), `unknown field "minServerVersoin"`},
		{"unmet on every topology", fileWith(`[{"topologies": ["single", "replicaset"], "minServerVersion": "99"}]`, "", `, "operations": []`),
			"skip:on a replicaset deployment, file runOnRequirements not met"},
		{"an unknown topology type", fileWith("", entities(""), `, "operations": [`+record+`, `+assertType("Replica")+`]`),
			`unknown topologyType "Replica"`},
		{"a recorded description of a missing entity", fileWith("", entities(""), `, "operations": [`+assertType("Single")+`]`),
			`no entity named "td"`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// waitForPrimaryChange waits for a primary other than the recorded
// description's: any, when it had none.
func TestRunnerWaitForPrimaryChange(t *testing.T) {
	noPrimary := func(r *testRun) {
		if err := r.entities.add("setup", "none", &topologyDescription{desc: topology.Description{}}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(prior, timeout string) string {
		return op("waitForPrimaryChange", "testRunner", `{"client": "c", "priorTopologyDescription": "`+prior+`"`+timeout+`}`)
	}
	js := fileWith(`[{"topologies": ["replicaset"]}]`, entities(""), `, "operations": [`+wait("none", "")+`]`)
	_, err := runJSONWith(t, js, noPrimary)
	checkOutcome(t, err, "")

	// The primary it has already is no change: the wait ends at timeoutMS.
	js = fileWith(`[{"topologies": ["replicaset"]}]`, observing(`["topologyDescriptionChangedEvent"]`, ""), `, "operations": [`+
		waitFor(`{"topologyDescriptionChangedEvent": {}}`, "4")+`, `+
		op("recordTopologyDescription", "testRunner", `{"client": "c", "id": "now"}`)+`, `+wait("now", `, "timeoutMS": 50`)+`]`)
	_, err = runJSONWith(t, js, func(*testRun) {})
	checkOutcome(t, err, "no primary other than")

	js = fileWith(`[{"topologies": ["replicaset"]}]`, entities(""), `, "operations": [`+wait("none", `, "timeoutMS": 0`)+`]`)
	_, err = runJSONWith(t, js, noPrimary)
	checkOutcome(t, err, "timeoutMS 0 is not positive")
}

// The runner observes the SDAM events of its clients and matches them by
// the format's rules: the types of the descriptions of a change, awaited.
func TestRunnerSDAMEvents(t *testing.T) {
	all := `["topologyOpeningEvent", "topologyDescriptionChangedEvent", "serverDescriptionChangedEvent",
		"serverHeartbeatStartedEvent", "serverHeartbeatSucceededEvent", "serverHeartbeatFailedEvent", "topologyClosedEvent"]`
	found := waitFor(`{"serverDescriptionChangedEvent": {"newDescription": {"type": "Standalone"}}}`, "1")
	// The standalone reports a topologyVersion, as mongod does from 4.4
	// on: after its handshake, the monitor streams, its next heartbeat an
	// awaited one, which the close cancels without an event.
	streaming := waitFor(`{"serverHeartbeatStartedEvent": {"awaited": true}}`, "1")
	sdam := func(extra string, events ...string) string {
		return `{"client": "c", "eventType": "sdam", "events": [` + strings.Join(events, ", ") + `]` + extra + `}`
	}
	lifecycle := []string{
		`{"topologyOpeningEvent": {}}`,
		`{"topologyDescriptionChangedEvent": {"previousDescription": {"type": "Unknown"}, "newDescription": {"type": "Unknown"}}}`,
		`{"serverHeartbeatStartedEvent": {"awaited": false}}`,
		`{"serverHeartbeatSucceededEvent": {"awaited": false}}`,
		`{"serverDescriptionChangedEvent": {"previousDescription": {"type": "Unknown"}, "newDescription": {"type": "Standalone"}}}`,
		`{"topologyDescriptionChangedEvent": {"previousDescription": {"type": "Unknown"}, "newDescription": {"type": "Single"}}}`,
		`{"serverHeartbeatStartedEvent": {"awaited": true}}`,
		`{"topologyDescriptionChangedEvent": {"previousDescription": {"type": "Single"}, "newDescription": {"type": "Unknown"}}}`,
		`{"topologyClosedEvent": {}}`,
	}
	wrongType := append([]string(nil), lifecycle...)
	wrongType[4] = `{"serverDescriptionChangedEvent": {"newDescription": {"type": "RSPrimary"}}}`
	sdamTest := func(ops, expect string) string {
		return oneTest(observing(all, ""), `, "operations": [`+ops+`], "expectEvents": [`+expect+`]`)
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"a standalone's lifecycle", sdamTest(streaming+", "+closeOp, sdam("", lifecycle...)), ""},
		{"a type that differs", sdamTest(streaming+", "+closeOp, sdam("", wrongType...)), "newDescription of type Standalone, want RSPrimary"},
		{"awaited that differs", sdamTest(found, sdam(`, "ignoreExtraEvents": true`, lifecycle[0], lifecycle[1], `{"serverHeartbeatStartedEvent": {"awaited": true}}`)),
			"serverHeartbeatStartedEvent: awaited false, want true"},
		{"an unknown server type", sdamTest(found, sdam(`, "ignoreExtraEvents": true`, `{"serverDescriptionChangedEvent": {"newDescription": {"type": "Primary"}}}`)),
			`unknown type "Primary"`},
		{"an unknown field of a description", sdamTest(found, sdam(`, "ignoreExtraEvents": true`, `{"topologyDescriptionChangedEvent": {"newDescription": {"setName": "x"}}}`)),
			`unknown field "setName"`},
		{"an assertion the event has not", sdamTest(found, sdam(`, "ignoreExtraEvents": true`, `{"topologyOpeningEvent": {"topologyId": 1}}`)),
			`unknown field "topologyId"`},
		{"a heartbeat that fails", oneTest(observing(all, `, "uriOptions": {"appname": "hb", "heartbeatFrequencyMS": 500}`), `, "operations": [`+found+`,
			{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
				"mode": "alwaysOn", "data": {"failCommands": ["hello", "isMaster"], "appName": "hb", "closeConnection": true}}}}, `+
			waitFor(`{"serverHeartbeatFailedEvent": {"awaited": false}}`, "1")+`, `+
			waitFor(`{"serverDescriptionChangedEvent": {"previousDescription": {"type": "Standalone"}, "newDescription": {"type": "Unknown"}}}`, "1")+`]`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// An awaited heartbeat is an event only a server that reports a
// topologyVersion gives (a mongod of 4.4 or later, not the test server's
// mongos): a test that expects one elsewhere is skipped, not failed.
func TestRunnerSkipsAwaitedWithoutStreaming(t *testing.T) {
	awaited := true
	e := &expectedEvent{name: "serverHeartbeatStartedEvent", awaited: &awaited}
	r := &testRun{server: Server{Topology: "load-balanced"}}
	var skip *skipError
	if err := r.canObserve(e); !errors.As(err, &skip) || !strings.Contains(skip.reason, "awaited: true") {
		t.Errorf("canObserve without a topologyVersion: %v, want a skip", err)
	}
	r.server.Streams = true
	if err := r.canObserve(e); err != nil {
		t.Errorf("canObserve with a topologyVersion: %v, want nil", err)
	}
}

// commands is the command monitoring event types, as observeEvents names
// them.
const commands = `["commandStartedEvent", "commandSucceededEvent", "commandFailedEvent"]`

// The runner observes the command monitoring events of its clients, but
// configureFailPoint's and those its ignoreCommandMonitoringEvents lists,
// and matches them by the format's rules.
func TestRunnerCommandEvents(t *testing.T) {
	insert := `{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 9}}}`
	badFind := `{"name": "find", "object": "coll", "arguments": {"filter": {"$or": true}}, "expectError": {"isClientError": false}}`
	failFind := `{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
		"mode": {"times": 1}, "data": {"failCommands": ["find"], "closeConnection": true}}}}`
	find := findOp(`"filter": {"_id": 9}`, `[{"_id": 9}]`)
	cmdTest := func(extra, ops string, events ...string) string {
		return oneTest(observing(commands, extra), `, "operations": [`+ops+`], "expectEvents": [{"client": "c", "events": [`+strings.Join(events, ", ")+`]}]`)
	}
	started := func(name, fields string) string {
		return `{"commandStartedEvent": {"commandName": "` + name + `", "databaseName": "db"` + fields + `}}`
	}
	succeeded := func(name, fields string) string {
		return `{"commandSucceededEvent": {"commandName": "` + name + `", "databaseName": "db"` + fields + `}}`
	}
	failed := func(name string) string {
		return `{"commandFailedEvent": {"commandName": "` + name + `", "databaseName": "db", "hasServiceId": false, "hasServerConnectionId": true}}`
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"started, succeeded, failed", cmdTest("", insert+", "+badFind+", "+pingOp,
			started("insert", `, "command": {"insert": "coll", "documents": [{"_id": 9}], "ordered": true, "lsid": {"$$exists": true}},
				"hasServiceId": false, "hasServerConnectionId": true`),
			succeeded("insert", `, "reply": {"ok": 1, "n": 1}, "hasServiceId": false, "hasServerConnectionId": true`),
			started("find", ""), failed("find"),
			started("ping", `, "command": {"ping": 1}`), succeeded("ping", `, "reply": {"ok": 1}`)), ""},
		{"a retried read: each attempt's events, configureFailPoint's none", cmdTest("", insert+", "+failFind+", "+find,
			started("insert", ""), succeeded("insert", ""), started("find", ""), failed("find"), started("find", ""), succeeded("find", "")), ""},
		{"ignoreCommandMonitoringEvents", cmdTest(`, "ignoreCommandMonitoringEvents": ["insert"]`, insert+", "+pingOp,
			started("ping", ""), succeeded("ping", "")), ""},
		{"a databaseName that differs", cmdTest("", pingOp, `{"commandStartedEvent": {"databaseName": "admin"}}`, succeeded("ping", "")),
			`databaseName "db", want "admin"`},
		{"a command that differs", cmdTest("", pingOp, started("ping", `, "command": {"ping": 2}`), succeeded("ping", "")), "command: "},
		{"a reply that differs", cmdTest("", pingOp, started("ping", ""), succeeded("ping", `, "reply": {"ok": 0}`)), "reply: "},
		{"hasServiceId outside a load balancer", cmdTest("", pingOp, started("ping", `, "hasServiceId": true`), succeeded("ping", "")), "serviceId"},
		{"a reply in a started event", cmdTest("", pingOp, started("ping", `, "reply": {}`), succeeded("ping", "")), `unknown field "reply"`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}

	t.Run("serviceId behind a load balancer", func(t *testing.T) {
		js := fileWith(`[{"topologies": ["load-balanced"]}]`, observing(commands, ""), `, "operations": [`+pingOp+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"commandName": "ping", "hasServiceId": true}},
				{"commandSucceededEvent": {"commandName": "ping", "hasServiceId": true}}]}]`)
		checkOutcome(t, runJSON(t, js), "")
	})
}

// storeEventsAsEntities keeps the command and SDAM events too, with the
// fields of their specifications.
func TestRunnerStoreOtherEvents(t *testing.T) {
	store := `, "storeEventsAsEntities": [{"id": "cmd", "events": ["CommandStartedEvent", "CommandSucceededEvent"]},
		{"id": "sdam", "events": ["ServerDescriptionChangedEvent", "ServerHeartbeatSucceededEvent"]}], "observeEvents": ["serverDescriptionChangedEvent"]`
	r, err := runJSONWith(t, oneTest(entities(store), `, "operations": [`+
		waitFor(`{"serverDescriptionChangedEvent": {}}`, "1")+`, `+pingOp+`]`), func(*testRun) {})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"cmd": {`{"name":"CommandStartedEvent","commandName":"ping","databaseName":"db","connectionId":1,"serverConnectionId":"S"}`,
			`{"name":"CommandSucceededEvent","commandName":"ping","databaseName":"db","connectionId":1,"serverConnectionId":"S","durationMS":"D"}`},
		"sdam": {`{"name":"ServerHeartbeatSucceededEvent","awaited":false,"durationMS":"D"}`,
			`{"name":"ServerDescriptionChangedEvent","previousDescription":{"type":"Unknown"},"newDescription":{"type":"Standalone"}}`},
	}
	for id, docs := range want {
		l, err := entity[*eventList](r, "test", id)
		if err != nil {
			t.Fatal(err)
		}
		got := l.documents()
		if len(got) != len(docs) {
			t.Fatalf("%s: %d events, want %d: %v", id, len(got), len(docs), got)
		}
		for i, d := range got {
			elems, err := d.Elements()
			if err != nil {
				t.Fatal(err)
			}
			var m bson.D
			for _, e := range elems {
				switch v := e.Value(); {
				case e.Key() == "observedAt" || e.Key() == "address" && v.Type == bson.TypeString:
				case e.Key() == "durationMS" && v.Type == bson.TypeDouble && v.Double() > 0:
					m = append(m, bson.E{Key: "durationMS", Value: "D"})
				case e.Key() == "serverConnectionId" && v.Type == bson.TypeInt64 && v.Int64() > 0:
					m = append(m, bson.E{Key: "serverConnectionId", Value: "S"})
				default:
					m = append(m, bson.E{Key: e.Key(), Value: v})
				}
			}
			js, _ := bson.MarshalExtJSON(m, false, false)
			if string(js) != docs[i] {
				t.Errorf("%s[%d] = %s, want %s", id, i, js, docs[i])
			}
		}
	}
}

// Cursors of createFindCursor: iterated a document at a time, with
// getMores; in a load-balanced deployment the cursor keeps its connection
// until it is exhausted.
func TestRunnerCursors(t *testing.T) {
	create := `{"name": "createFindCursor", "object": "coll", "arguments": {"filter": {}, "batchSize": 1}, "saveResultAsEntity": "cur"}`
	next := func(id int) string {
		return `{"name": "iterateUntilDocumentOrError", "object": "cur", "expectResult": {"_id": ` + string(rune('0'+id)) + `}}`
	}
	iterate := create + ", " + next(1) + ", " + next(2) + ", " + next(3)
	cmap := `["connectionCheckedOutEvent", "connectionCheckedInEvent"]`
	once := expectCMAP("", `{"connectionCheckedOutEvent": {}}`, `{"connectionCheckedInEvent": {}}`)
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"single: each command (find, two getMores) checks a connection out", fileWith("", observing(cmap, "")+initialData, `, "operations": [`+iterate+`],
			"expectEvents": [`+expectCMAP("", strings.Repeat(`{"connectionCheckedOutEvent": {}}, {"connectionCheckedInEvent": {}}, `, 2)+
			`{"connectionCheckedOutEvent": {}}`, `{"connectionCheckedInEvent": {}}`)+`]`), ""},
		{"load-balanced: the cursor keeps its connection", fileWith(`[{"topologies": ["load-balanced"]}]`, observing(cmap, "")+initialData,
			`, "operations": [`+iterate+`], "expectEvents": [`+once+`]`), ""},
		{"load-balanced: closed before its end", fileWith(`[{"topologies": ["load-balanced"]}]`, observing(cmap, "")+initialData,
			`, "operations": [`+create+`, `+next(1)+`, {"name": "close", "object": "cur"}], "expectEvents": [`+once+`]`), ""},
		{"iterating past the end", fileWith("", entities("")+initialData, `, "operations": [`+iterate+`,
			{"name": "iterateUntilDocumentOrError", "object": "cur"}]`), "no more documents"},
		{"a document that differs", fileWith("", entities("")+initialData, `, "operations": [`+create+`, `+next(2)+`]`), "expectResult"},
		{"iterateOnce", fileWith("", entities("")+initialData, `, "operations": [`+create+`,
			{"name": "iterateOnce", "object": "cur", "expectResult": {"_id": 1}}, {"name": "iterateOnce", "object": "cur", "expectResult": {"_id": 2}}]`), ""},
		{"saveResultAsEntity of a value", fileWith("", entities("")+initialData, `, "operations": [
			{"name": "countDocuments", "object": "coll", "arguments": {"filter": {}}, "saveResultAsEntity": "n"}]`), "saves cursors and collections, not the result of countDocuments"},
		{"a cursor operation with arguments", fileWith("", entities("")+initialData, `, "operations": [`+create+`,
			{"name": "iterateOnce", "object": "cur", "arguments": {"x": 1}}]`), "takes no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// bulkWrite takes every model, each run of one kind a command.
func TestRunnerBulkWrite(t *testing.T) {
	bulk := func(reqs string) string {
		return `{"name": "bulkWrite", "object": "coll", "arguments": {"requests": [` + reqs + `]}}`
	}
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"insertOne requests", oneTest(entities("")+initialData, `, "operations": [`+bulk(`{"insertOne": {"document": {"_id": 4}}}, {"insertOne": {"document": {"_id": 5}}}`)+`],
			"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4}, {"_id": 5}]}]`), ""},
		{"a write error", oneTest(entities("")+initialData, `, "operations": [{"name": "bulkWrite", "object": "coll",
			"arguments": {"requests": [{"insertOne": {"document": {"_id": 1}}}]}, "expectError": {"errorCode": 11000}}]`), ""},
		{"an unknown model", oneTest(entities("")+initialData, `, "operations": [`+bulk(`{"deleteAll": {"filter": {}}}`)+`]`), `unknown field "deleteAll"`},
		{"no requests: a client error", oneTest(entities("")+initialData, `, "operations": [{"name": "bulkWrite", "object": "coll",
			"arguments": {"requests": []}, "expectError": {"isClientError": true}}]`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// A collection's readPreference selects the server of its reads: a
// secondary of a replica set gets the read with $readPreference; one no
// server matches fails the selection.
func TestRunnerCollectionReadPreference(t *testing.T) {
	coll := func(rp string) string {
		return `, "createEntities": [{"client": {"id": "c", "observeEvents": ["commandStartedEvent"], "uriOptions": {"serverSelectionTimeoutMS": 200}}},
			{"database": {"id": "d", "client": "c", "databaseName": "db"}},
			{"collection": {"id": "coll", "database": "d", "collectionName": "coll", "collectionOptions": {"readPreference": ` + rp + `}}}]`
	}
	rs := `[{"topologies": ["replicaset"]}]`
	for _, tc := range []struct {
		name string
		js   string
		want string // as checkOutcome takes it
	}{
		{"secondary", fileWith(rs, coll(`{"mode": "Secondary"}`)+initialData, `, "operations": [`+findOp(`"filter": {"_id": 1}`, `[{"_id": 1}]`)+`],
			"expectEvents": [{"client": "c", "events": [{"commandStartedEvent": {"command": {"find": "coll", "$readPreference": {"mode": "secondary"}}}}]}]`), ""},
		{"unsatisfiable", fileWith(rs, coll(`{"mode": "secondary", "tagSets": [{"dc": "nowhere"}]}`)+initialData,
			`, "operations": [{"name": "find", "object": "coll", "arguments": {"filter": {}}, "expectError": {"isClientError": true}}]`), ""},
		// The database's write concern reaches the server, which fails a w
		// above 1 on a standalone as mongod does.
		{"a database's write concern", fileWith("", `, "createEntities": [{"client": {"id": "c"}}, {"database": {"id": "d", "client": "c", "databaseName": "db",
			"databaseOptions": {"writeConcern": {"w": 5}}}}]`, `, "operations": [{"name": "createCollection", "object": "d", "arguments": {"collection": "x"}, "expectError": {"errorCode": 2}}]`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkOutcome(t, runJSON(t, tc.js), tc.want) })
	}
}

// Behind the runner's load balancer there is one mongos: a client that asks
// for several makes the test skip, but only if the test uses it.
func TestRunnerMultipleMongoses(t *testing.T) {
	lb := `[{"topologies": ["load-balanced"]}]`
	ents := `, "createEntities": [{"client": {"id": "c", "useMultipleMongoses": false}}, {"client": {"id": "m", "useMultipleMongoses": true}},
		{"database": {"id": "d", "client": "c", "databaseName": "db"}}, {"database": {"id": "md", "client": "m", "databaseName": "db"}}]`
	ping := func(db string) string {
		return `{"name": "runCommand", "object": "` + db + `", "arguments": {"commandName": "ping", "command": {"ping": 1}}}`
	}
	checkOutcome(t, runJSON(t, fileWith(lb, ents, `, "operations": [`+ping("d")+`]`)), "")
	checkOutcome(t, runJSON(t, fileWith(lb, ents, `, "operations": [`+ping("md")+`]`)), `skip:client "m" sets useMultipleMongoses`)
	checkOutcome(t, runJSON(t, fileWith(lb, ents, `, "operations": [{"name": "failPoint", "object": "testRunner", "arguments": {"client": "m",
		"failPoint": {"configureFailPoint": "failCommand", "mode": "off"}}}]`)), `skip:client "m" sets useMultipleMongoses`)
	// Elsewhere the option changes nothing.
	checkOutcome(t, runJSON(t, fileWith(`[{"topologies": ["replicaset"]}]`, ents, `, "operations": [`+ping("md")+`]`)), "")
}

// A fail point is disabled at the end of the test on the server it was set
// on: the primary of a replica set.
func TestRunnerFailPointDisabled(t *testing.T) {
	js := fileWith(`[{"topologies": ["replicaset"]}]`, entities(""), `, "operations": [
		{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
			"mode": "alwaysOn", "data": {"failCommands": ["ping"], "errorCode": 2}}}},
		{"name": "runCommand", "object": "d", "arguments": {"commandName": "ping", "command": {"ping": 1}}, "expectError": {"errorCode": 2}}]`)
	r, err := runJSONWith(t, js, func(*testRun) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.internal.RunCommand(r.ctx, "admin", bson.D{{Key: "ping", Value: 1}}); err != nil {
		t.Errorf("a ping on the primary after the test: %v, want the fail point off", err)
	}
}

// A write on a replica set is a retryable write: the Client gives it a
// session and a txnNumber of its own (the runner adds no implicit session to
// it) and sends it again after a network error.
func TestRunnerRetryableWrite(t *testing.T) {
	js := fileWith(`[{"topologies": ["replicaset"]}]`, observing(commands, "")+initialData, `, "operations": [
		{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
			"mode": {"times": 1}, "data": {"failCommands": ["insert"], "closeConnection": true}}}},
		{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 4}}}],
		"expectEvents": [{"client": "c", "events": [
			{"commandStartedEvent": {"commandName": "insert", "command": {"lsid": {"$$exists": true}, "txnNumber": 1}}},
			{"commandFailedEvent": {"commandName": "insert"}},
			{"commandStartedEvent": {"commandName": "insert", "command": {"lsid": {"$$exists": true}, "txnNumber": 1}}},
			{"commandSucceededEvent": {"commandName": "insert"}}]}],
		"outcome": [{"databaseName": "db", "collectionName": "coll", "documents": [{"_id": 1, "x": "a"}, {"_id": 2, "x": "b"}, {"_id": 3, "x": "c"}, {"_id": 4}]}]`)
	checkOutcome(t, runJSON(t, js), "")
}

// A pinned cursor's failed getMore ends the operation only once the error
// rules have cleared the service's connections and the connection is
// checked in: the next operation sees their events.
func TestRunnerPinnedCursorError(t *testing.T) {
	js := fileWith(`[{"topologies": ["load-balanced"]}]`, observing(`["poolClearedEvent", "connectionCheckedInEvent", "connectionClosedEvent"]`, "")+initialData, `, "operations": [
		{"name": "failPoint", "object": "testRunner", "arguments": {"client": "c", "failPoint": {"configureFailPoint": "failCommand",
			"mode": {"times": 1}, "data": {"failCommands": ["getMore"], "closeConnection": true}}}},
		{"name": "createFindCursor", "object": "coll", "arguments": {"filter": {}, "batchSize": 1}, "saveResultAsEntity": "cur"},
		{"name": "iterateUntilDocumentOrError", "object": "cur", "expectResult": {"_id": 1}},
		{"name": "iterateUntilDocumentOrError", "object": "cur", "expectError": {"isClientError": true}},
		{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"poolClearedEvent": {"hasServiceId": true}}, "count": 1}},
		{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"connectionCheckedInEvent": {}}, "count": 2}},
		{"name": "assertEventCount", "object": "testRunner", "arguments": {"client": "c", "event": {"connectionClosedEvent": {"reason": "error"}}, "count": 1}}]`)
	checkOutcome(t, runJSON(t, js), "")
}

// Behind a load balancer, where the Client does not make writes retryable,
// a write carries the implicit session the runner gives its commands.
func TestRunnerLoadBalancedWriteSession(t *testing.T) {
	js := fileWith(`[{"topologies": ["load-balanced"]}]`, observing(commands, ""), `, "operations": [
		{"name": "insertOne", "object": "coll", "arguments": {"document": {"_id": 4}}}],
		"expectEvents": [{"client": "c", "events": [
			{"commandStartedEvent": {"commandName": "insert", "command": {"lsid": {"$$exists": true}}}},
			{"commandSucceededEvent": {"commandName": "insert"}}]}]`)
	checkOutcome(t, runJSON(t, js), "")
}
