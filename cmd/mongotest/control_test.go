package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// testTimeout bounds every wait of the tests.
const testTimeout = 30 * time.Second

// controlServer starts a deployment of o and serves its control endpoint on
// an httptest server; both end with the test. shutdowns counts the POST
// /shutdown requests.
func controlServer(t *testing.T, o *settings) (d *deployment, base string, shutdowns *atomic.Int32) {
	t.Helper()
	d, err := startDeployment(o)
	if err != nil {
		t.Fatal(err)
	}
	shutdowns = &atomic.Int32{}
	d.ctl = newController(d, func() { shutdowns.Add(1) }, io.Discard)
	srv := httptest.NewServer(d.ctl)
	t.Cleanup(func() {
		srv.Close()
		if err := d.close(); err != nil {
			t.Errorf("closing the deployment: %v", err)
		}
	})
	return d, srv.URL, shutdowns
}

// call sends a request to the control endpoint and returns the status and
// the JSON reply, which every reply must be.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	status, reply, err := request(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, reply
}

// request is call for any goroutine: it returns what is wrong rather than
// fail the test.
func request(ctx context.Context, method, url, body string) (int, map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return 0, nil, fmt.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	var reply map[string]any
	if err := json.Unmarshal(data, &reply); err != nil {
		return 0, nil, fmt.Errorf("%s %s: %d, not JSON: %q", method, url, resp.StatusCode, data)
	}
	ok, _ := reply["ok"].(bool)
	if ok != (resp.StatusCode == http.StatusOK) {
		return 0, nil, fmt.Errorf("%s %s: status %d with ok %v", method, url, resp.StatusCode, reply["ok"])
	}
	if msg, _ := reply["error"].(string); !ok && msg == "" {
		return 0, nil, fmt.Errorf("%s %s: %d without an error message: %s", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode, reply, nil
}

// mustCall is call that fails the test unless the reply is 200.
func mustCall(t *testing.T, method, url, body string) map[string]any {
	t.Helper()
	status, reply := call(t, method, url, body)
	if status != http.StatusOK {
		t.Fatalf("%s %s: %d %v", method, url, status, reply["error"])
	}
	return reply
}

// primaryOf returns /status's primary, -1 for none.
func primaryOf(t *testing.T, base string) int {
	t.Helper()
	st := mustCall(t, "GET", base+"/status", "")
	if st["primary"] == nil {
		return -1
	}
	return int(st["primary"].(float64))
}

func TestControlBadRequests(t *testing.T) {
	_, base, _ := controlServer(t, &settings{members: 3, setName: "rs0"})
	cases := []struct {
		method, path, body string
		status             int
		want               string // in the error
	}{
		{"GET", "/nothing", "", 404, `no such path "/nothing"`},
		{"GET", "/stepdown", "", 405, "/stepdown takes POST, not GET"},
		{"POST", "/status", "", 405, "/status takes GET"},
		{"POST", "/elect", "", 400, "the parameter member, a member's index, is missing"},
		{"POST", "/elect?member=x", "", 400, `member="x": a member's index is an integer`},
		{"POST", "/elect?member=3", "", 400, "member=3: the replica set's members are 0 to 2"},
		{"POST", "/elect?member=-1", "", 400, "members are 0 to 2"},
		{"POST", "/elect?member=1&member=2", "", 400, "the parameter member is given 2 times"},
		{"POST", "/elect?membr=1", "", 400, `/elect takes the parameters member, not "membr"`},
		{"POST", "/elect?member=0", "", 409, "Elect(0): the member is already primary"},
		{"POST", "/heal?member=1", "", 409, "Heal(1): the member is not partitioned"},
		{"POST", "/restart?member=1", "", 409, "the member runs; Stop it first"},
		{"POST", "/status?x=1", "", 405, "takes GET"},
		{"GET", "/status?x=1", "", 400, `/status takes no parameter, not "x"`},
		{"POST", "/lag?member=1", "", 400, "the parameter ms"},
		{"POST", "/lag?member=1&ms=-5", "", 400, "the lag is an integer of milliseconds from 0"},
		{"POST", "/lag?member=1&ms=1e3", "", 400, "the lag is an integer"},
		{"POST", "/lag?member=1&ms=99999999999999", "", 400, "the lag is an integer"},
		{"POST", "/stepdown?next=7", "", 400, "next=7"},
		{"POST", "/stats", "", 405, "takes GET"},
		{"GET", "/stats?member=9", "", 400, "member=9"},
		{"POST", "/failpoint", "", 400, "the body is empty"},
		{"POST", "/failpoint", "[1,2]", 400, "the body is not a JSON object"},
		{"POST", "/failpoint", `{"mode":`, 400, "the body is not a JSON object"},
		{"POST", "/failpoint", `{"mode": "sometimes", "data": {"failCommands": ["insert"], "errorCode": 1}}`, 400, "mode"},
		{"POST", "/failpoint", `{"mode": "alwaysOn", "data": {"failCommands": ["insert"], "errorCod": 1}}`, 400, "data.errorCod is not supported"},
		{"POST", "/failpoint", `{"configureFailPoint": "other", "mode": "off"}`, 400, "other not found"},
		{"POST", "/failpoint", `{"mode": "off"}` + strings.Repeat(" ", maxBody), 413, "larger than 65536 bytes"},
		{"POST", "/failpoint?member=5", `{"mode": "off"}`, 400, "member=5"},
		// The controls of a sharded cluster.
		{"POST", "/stepdown?shard=0", "", 400, "shard=0: this is a replica set, not a sharded cluster: leave shard out"},
		{"GET", "/stats?shard=1", "", 400, "this is a replica set, not a sharded cluster"},
		{"POST", "/mongos/stop?member=0", "", 400, "/mongos/stop controls a sharded cluster, and this is a replica set: start mongotest with -mongos N -shards K"},
		{"POST", "/mongos/failpoint?member=0", `{"mode": "off"}`, 400, "controls a sharded cluster, and this is a replica set"},
		{"GET", "/shardof?db=app", "", 400, "/shardof controls a sharded cluster"},
	}
	for _, c := range cases {
		status, reply := call(t, c.method, base+c.path, c.body)
		msg, _ := reply["error"].(string)
		if status != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %d %q, want %d and %q", c.method, c.path, status, msg, c.status, c.want)
		}
	}
	// None of it changed the set.
	if p := primaryOf(t, base); p != 0 {
		t.Errorf("primary %d after the bad requests, want 0", p)
	}
}

func TestControlStandalone(t *testing.T) {
	d, base, shutdowns := controlServer(t, &settings{})
	st := mustCall(t, "GET", base+"/status", "")
	members := st["members"].([]any)
	if st["topology"] != "standalone" || st["primary"] != nil || len(members) != 1 ||
		members[0].(map[string]any)["state"] != "STANDALONE" || members[0].(map[string]any)["host"] != d.servers[0].Addr() {
		t.Errorf("status of a standalone: %v", st)
	}
	for _, path := range []string{"/stepdown", "/elect?member=0", "/stop?member=0", "/lag?member=0&ms=1"} {
		status, reply := call(t, "POST", base+path, "")
		if msg, _ := reply["error"].(string); status != 400 || !strings.Contains(msg, "controls a replica set, and this is a standalone") {
			t.Errorf("POST %s on a standalone: %d %q", path, status, msg)
		}
	}
	for _, path := range []string{"/mongos/restart?member=0", "/failpoint?shard=0"} {
		status, reply := call(t, "POST", base+path, `{"mode":"off"}`)
		if msg, _ := reply["error"].(string); status != 400 || !strings.Contains(msg, "this is a standalone") {
			t.Errorf("POST %s on a standalone: %d %q", path, status, msg)
		}
	}
	if status, reply := call(t, "POST", base+"/failpoint?member=1", `{"mode":"off"}`); status != 400 ||
		!strings.Contains(reply["error"].(string), "a standalone is member 0") {
		t.Errorf("/failpoint?member=1 on a standalone: %d %v", status, reply)
	}
	// A fail point on the standalone, seen by a client.
	mustCall(t, "POST", base+"/failpoint", `{"mode": {"times": 1}, "data": {"failCommands": ["ping"], "errorCode": 2}}`)
	client := connect(t, d.uri)
	err := client.Database("admin").RunCommand(t.Context(), bson.D{{Key: "ping", Value: 1}}).Err()
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Errorf("ping with the fail point: %v, want code 2", err)
	}
	stats := mustCall(t, "GET", base+"/stats", "")["members"].([]any)[0].(map[string]any)
	if stats["failCommandFired"] != 1.0 {
		t.Errorf("/stats failCommandFired: %v, want 1", stats["failCommandFired"])
	}

	mustCall(t, "POST", base+"/shutdown", "")
	if n := shutdowns.Load(); n != 1 {
		t.Errorf("POST /shutdown called shutdown %d times", n)
	}
}

func TestControlReplicaSet(t *testing.T) {
	d, base, _ := controlServer(t, &settings{members: 3, setName: "rs0"})
	state := func(i int) map[string]any {
		st := mustCall(t, "GET", base+"/status", "")
		return st["members"].([]any)[i].(map[string]any)
	}

	// A step-down elects the next member; next=none elects no one, and
	// next=i elects member i.
	r := mustCall(t, "POST", base+"/stepdown", "")
	if r["oldPrimary"] != 0.0 || r["primary"] != 1.0 || r["primaryHost"] != d.servers[1].Addr() {
		t.Errorf("/stepdown: %v, want 0 -> 1", r)
	}
	if p := primaryOf(t, base); p != 1 {
		t.Errorf("primary %d after /stepdown, want 1", p)
	}
	r = mustCall(t, "POST", base+"/stepdown?next=none", "")
	if r["oldPrimary"] != 1.0 || r["primary"] != nil || primaryOf(t, base) != -1 {
		t.Errorf("/stepdown?next=none: %v", r)
	}
	if status, reply := call(t, "POST", base+"/stepdown", ""); status != 409 || !strings.Contains(reply["error"].(string), "no primary") {
		t.Errorf("/stepdown without a primary: %d %v", status, reply)
	}
	if status, reply := call(t, "POST", base+"/failpoint", `{"mode":"off"}`); status != 409 || !strings.Contains(reply["error"].(string), "no primary") {
		t.Errorf("/failpoint without a primary nor member: %d %v", status, reply)
	}
	mustCall(t, "POST", base+"/elect?member=2", "")
	r = mustCall(t, "POST", base+"/stepdown?next=0", "")
	if r["oldPrimary"] != 2.0 || r["primary"] != 0.0 {
		t.Errorf("/stepdown?next=0: %v", r)
	}

	// The next member after the primary that runs and is not partitioned:
	// 1 is stopped, 2 partitioned, so the primary is elected again.
	mustCall(t, "POST", base+"/stop?member=1", "")
	if s := state(1)["state"]; s != "STOPPED" {
		t.Errorf("member 1 after /stop: %v", s)
	}
	mustCall(t, "POST", base+"/partition?member=2", "")
	if p := state(2)["partitioned"]; p != true {
		t.Errorf("member 2 after /partition: partitioned %v", p)
	}
	r = mustCall(t, "POST", base+"/stepdown", "")
	if r["primary"] != 0.0 {
		t.Errorf("/stepdown with 1 stopped and 2 partitioned: %v, want 0 again", r)
	}
	if status, reply := call(t, "POST", base+"/elect?member=1", ""); status != 409 || !strings.Contains(reply["error"].(string), "stopped") {
		t.Errorf("/elect of a stopped member: %d %v", status, reply)
	}
	if status, reply := call(t, "POST", base+"/failpoint?member=1", `{"mode": "off"}`); status != 409 ||
		!strings.Contains(reply["error"].(string), "member 1 of the replica set is stopped: restart it first") {
		t.Errorf("/failpoint on a stopped member: %d %v", status, reply)
	}
	mustCall(t, "POST", base+"/restart?member=1", "")
	mustCall(t, "POST", base+"/heal?member=2", "")
	if s := state(1); s["state"] != "SECONDARY" || state(2)["partitioned"] != false {
		t.Errorf("after /restart and /heal: %v, %v", s, state(2))
	}

	// Lag, and its end.
	if r := mustCall(t, "POST", base+"/lag?member=2&ms=15000", ""); r["lagMs"] != 15000.0 {
		t.Errorf("/lag: %v", r)
	}
	if l := state(2)["lagMs"]; l != 15000.0 {
		t.Errorf("member 2's lagMs: %v", l)
	}
	mustCall(t, "POST", base+"/lag?member=2&ms=0", "")
	if l := state(2)["lagMs"]; l != 0.0 {
		t.Errorf("member 2's lagMs after ms=0: %v", l)
	}

	// A fail point on the primary by default, on member i when asked.
	if r := mustCall(t, "POST", base+"/failpoint", `{"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": {"failCommands": ["find"], "errorCode": 2}}`); r["member"] != 0.0 || r["count"] != 0.0 {
		t.Errorf("/failpoint: %v", r)
	}
	if r := mustCall(t, "POST", base+"/failpoint?member=2", `{"mode": "off"}`); r["member"] != 2.0 {
		t.Errorf("/failpoint?member=2: %v", r)
	}
	mustCall(t, "POST", base+"/failpoint", `{"mode": "off"}`)

	one := mustCall(t, "GET", base+"/stats?member=1", "")
	if one["member"] != 1.0 || one["stats"].(map[string]any)["commands"] == nil {
		t.Errorf("/stats?member=1: %v", one)
	}
}

// TestControlConcurrent runs controls at once: they are serialized, and
// the state /status reports is the set's.
func TestControlConcurrent(t *testing.T) {
	_, base, _ := controlServer(t, &settings{members: 3, setName: "rs0"})
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 10 {
				// Some of these fail (409) as others change the set: that is
				// expected; what is checked is that each gets a JSON reply,
				// 200 or 409.
				for _, path := range []string{"/stepdown", "/stop?member=2", "/restart?member=2"} {
					status, reply, err := request(t.Context(), "POST", base+path, "")
					if err != nil || (status != 200 && status != 409) {
						t.Errorf("POST %s: %d %v %v", path, status, reply, err)
					}
				}
				if _, _, err := request(t.Context(), "GET", base+"/status", ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 4 {
		select {
		case <-done:
		case <-time.After(testTimeout):
			t.Fatal("the concurrent controls did not end")
		}
	}
	// Whatever the order, member 2 is stopped or runs as /status says: a
	// restart of it succeeds exactly when it is stopped.
	stopped := mustCall(t, "GET", base+"/status", "")["members"].([]any)[2].(map[string]any)["state"] == "STOPPED"
	status, _ := call(t, "POST", base+"/restart?member=2", "")
	if (status == 200) != stopped {
		t.Errorf("member 2 reported stopped %v, but /restart answered %d", stopped, status)
	}
}

// connect connects the official driver to uri; the client is disconnected
// when the test ends, if the test did not (see disconnect).
func connect(t *testing.T, uri string, opts ...*options.ClientOptions) *mongo.Client {
	t.Helper()
	all := append([]*options.ClientOptions{options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second)}, opts...)
	client, err := mongo.Connect(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := client.Disconnect(ctx); err != nil && !errors.Is(err, mongo.ErrClientDisconnected) {
			t.Errorf("Disconnect: %v", err)
		}
	})
	return client
}

// disconnect disconnects client. The tests do it before they stop the
// command: the official driver's Disconnect may wait for its monitor's
// next check, 10s (heartbeatFrequencyMS) away, once the servers are gone.
func disconnect(t *testing.T, client *mongo.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	if err := client.Disconnect(ctx); err != nil {
		t.Errorf("Disconnect: %v", err)
	}
}

func TestControlShardedCluster(t *testing.T) {
	d, base, _ := controlServer(t, &settings{mongoses: 2, shards: 2, shardMembers: 3})
	status := func() map[string]any { return mustCall(t, "GET", base+"/status", "") }
	shard := func(st map[string]any, k int) map[string]any { return st["shards"].([]any)[k].(map[string]any) }
	mongos := func(st map[string]any, i int) map[string]any { return st["mongoses"].([]any)[i].(map[string]any) }

	st := status()
	if st["topology"] != "sharded" || st["uri"] != d.uri || st["members"] != nil || len(st["mongoses"].([]any)) != 2 || len(st["shards"].([]any)) != 2 {
		t.Fatalf("/status of a sharded cluster: %v", st)
	}
	for i, s := range d.sc.Mongoses() {
		if m := mongos(st, i); m["host"] != s.Addr() || m["state"] != "RUNNING" || m["member"] != float64(i) {
			t.Errorf("/status mongos %d: %v", i, m)
		}
	}
	for k, rs := range d.sc.Shards() {
		sh := shard(st, k)
		members := sh["members"].([]any)
		if sh["shard"] != float64(k) || sh["setName"] != rs.Name() || sh["primary"] != 0.0 || sh["primaryHost"] != rs.Members()[0].Addr() || len(members) != 3 {
			t.Errorf("/status shard %d: %v", k, sh)
		}
		for i, m := range members {
			if m := m.(map[string]any); m["host"] != rs.Members()[i].Addr() || m["state"] != map[bool]string{true: "PRIMARY", false: "SECONDARY"}[i == 0] {
				t.Errorf("/status shard %d member %d: %v", k, i, m)
			}
		}
	}

	cases := []struct {
		method, path, body string
		status             int
		want               string // in the error
	}{
		{"POST", "/stepdown", "", 400, "the parameter shard, a shard's index (0 to 1), is missing: on a sharded cluster, /stepdown addresses a shard's members"},
		{"POST", "/stepdown?shard=2", "", 400, "shard=2: the cluster's shards are 0 to 1"},
		{"POST", "/stepdown?shard=-1", "", 400, "shard=-1: the cluster's shards are 0 to 1"},
		{"POST", "/stepdown?shard=one", "", 400, `shard="one": a shard's index is an integer`},
		{"POST", "/stepdown?shard=0&next=3", "", 400, "next=3: shard 0's members are 0 to 2"},
		{"POST", "/elect?shard=1&member=3", "", 400, "member=3: shard 1's members are 0 to 2"},
		{"POST", "/elect?shard=1", "", 400, "the parameter member, a member's index, is missing"},
		{"POST", "/elect?shard=1&member=0", "", 409, "Elect(0): the member is already primary"},
		{"POST", "/lag?member=1&ms=5", "", 400, "the parameter shard"},
		{"POST", "/failpoint", `{"mode": "off"}`, 400, "the parameter shard, a shard's index (0 to 1), is missing: on a sharded cluster, /failpoint addresses a shard's members; /mongos/failpoint?member=i sets one on a mongos"},
		{"POST", "/failpoint?shard=0&member=7", `{"mode": "off"}`, 400, "member=7: shard 0's members are 0 to 2"},
		{"GET", "/stats?member=0", "", 400, "/mongos/stats?member=i is a mongos's"},
		{"GET", "/stats?shard=5", "", 400, "shard=5: the cluster's shards are 0 to 1"},
		{"POST", "/mongos/stop", "", 400, "the parameter member, a mongos's index (0 to 1), is missing"},
		{"POST", "/mongos/stop?member=2", "", 400, "member=2: the cluster's mongoses are 0 to 1"},
		{"POST", "/mongos/stop?member=-1", "", 400, "member=-1: the cluster's mongoses are 0 to 1"},
		{"POST", "/mongos/stop?member=x", "", 400, `member="x": a mongos's index is an integer`},
		{"POST", "/mongos/stop?shard=0&member=0", "", 400, `/mongos/stop takes the parameters member, not "shard"`},
		{"GET", "/mongos/stop?member=0", "", 405, "/mongos/stop takes POST, not GET"},
		{"POST", "/mongos/restart?member=1", "", 409, "RestartMongos(1): the mongos runs; StopMongos it first"},
		{"POST", "/mongos/failpoint?member=0", "", 400, "the body is empty"},
		{"POST", "/mongos/failpoint?member=3", `{"mode": "off"}`, 400, "member=3: the cluster's mongoses are 0 to 1"},
		{"POST", "/mongos/failpoint?member=0", `{"mode": "sometimes"}`, 400, "mode"},
		{"GET", "/mongos/stats?member=9", "", 400, "member=9: the cluster's mongoses are 0 to 1"},
		{"GET", "/shardof", "", 400, "the parameter db, a database's name, is missing"},
		{"GET", "/shardof?db=", "", 400, "db is empty"},
		{"GET", "/shardof?db=a.b", "", 400, `db="a.b": a database's name`},
		{"GET", "/mongos/nothing", "", 404, `no such path "/mongos/nothing"`},
	}
	for _, c := range cases {
		status, reply := call(t, c.method, base+c.path, c.body)
		msg, _ := reply["error"].(string)
		if status != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %d %q, want %d and %q", c.method, c.path, status, msg, c.status, c.want)
		}
	}

	// /shardof says where a database lives, as mongotest places it.
	for _, db := range []string{"app", "orders", "x1", "admin"} {
		r := mustCall(t, "GET", base+"/shardof?db="+db, "")
		k := d.sc.ShardOf(db)
		if r["db"] != db || r["shard"] != float64(k) || r["setName"] != d.sc.Shards()[k].Name() || r["primary"] != 0.0 {
			t.Errorf("/shardof?db=%s: %v, want shard %d", db, r, k)
		}
	}

	// A step-down of shard 1 elects its next member; shard 0 keeps its
	// primary.
	r := mustCall(t, "POST", base+"/stepdown?shard=1", "")
	if r["shard"] != 1.0 || r["oldPrimary"] != 0.0 || r["primary"] != 1.0 || r["primaryHost"] != d.sc.Shards()[1].Members()[1].Addr() {
		t.Errorf("/stepdown?shard=1: %v", r)
	}
	if st := status(); shard(st, 1)["primary"] != 1.0 || shard(st, 0)["primary"] != 0.0 {
		t.Errorf("after /stepdown?shard=1: primaries %v and %v, want 0 and 1", shard(st, 0)["primary"], shard(st, 1)["primary"])
	}
	if d.sc.Shards()[1].Primary() != d.sc.Shards()[1].Members()[1] {
		t.Error("shard 1's primary is not member 1")
	}
	r = mustCall(t, "POST", base+"/stepdown?shard=0&next=none", "")
	if r["primary"] != nil || shard(status(), 0)["primary"] != nil {
		t.Errorf("/stepdown?shard=0&next=none: %v", r)
	}
	if status, reply := call(t, "POST", base+"/stepdown?shard=0", ""); status != 409 || reply["error"] != "StepDown: shard 0 has no primary" {
		t.Errorf("/stepdown of shard 0 without a primary: %d %v", status, reply)
	}
	if status, reply := call(t, "POST", base+"/failpoint?shard=0", `{"mode": "off"}`); status != 409 ||
		!strings.Contains(reply["error"].(string), "shard 0 has no primary: give the member, ?shard=0&member=i") {
		t.Errorf("/failpoint of shard 0 without a primary: %d %v", status, reply)
	}
	if r := mustCall(t, "POST", base+"/elect?shard=0&member=2", ""); r["shard"] != 0.0 || r["member"] != 2.0 || r["primary"] != 2.0 {
		t.Errorf("/elect?shard=0&member=2: %v", r)
	}
	if r := mustCall(t, "GET", base+"/shardof?db=admin", ""); r["primary"] != 2.0 {
		t.Errorf("/shardof?db=admin after the election: %v", r)
	}

	// A shard's members stop, restart, partition and lag apart from the
	// other shard's.
	mustCall(t, "POST", base+"/stop?shard=1&member=2", "")
	mustCall(t, "POST", base+"/partition?shard=0&member=1", "")
	mustCall(t, "POST", base+"/lag?shard=0&member=0&ms=2500", "")
	st = status()
	m12 := shard(st, 1)["members"].([]any)[2].(map[string]any)
	m02 := shard(st, 0)["members"].([]any)[2].(map[string]any)
	m01 := shard(st, 0)["members"].([]any)[1].(map[string]any)
	m00 := shard(st, 0)["members"].([]any)[0].(map[string]any)
	if m12["state"] != "STOPPED" || m02["state"] != "PRIMARY" || m01["partitioned"] != true || m00["lagMs"] != 2500.0 {
		t.Errorf("shard members after the controls: %v %v %v %v", m12, m02, m01, m00)
	}
	if status, reply := call(t, "POST", base+"/failpoint?shard=1&member=2", `{"mode": "off"}`); status != 409 ||
		!strings.Contains(reply["error"].(string), "member 2 of shard 1 is stopped") {
		t.Errorf("/failpoint on a stopped shard member: %d %v", status, reply)
	}
	if status, _ := call(t, "POST", base+"/stop?shard=1&member=2", ""); status != 409 {
		t.Errorf("a second /stop of a stopped shard member: %d", status)
	}
	mustCall(t, "POST", base+"/restart?shard=1&member=2", "")
	mustCall(t, "POST", base+"/heal?shard=0&member=1", "")
	mustCall(t, "POST", base+"/lag?shard=0&member=0&ms=0", "")

	// A fail point on shard k's primary fails the commands a mongos sends
	// there; a fail point on a mongos, those it receives.
	db := "app"
	k := d.sc.ShardOf(db)
	client := connect(t, d.uri)
	coll := client.Database(db).Collection("c")
	if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	r = mustCall(t, "POST", fmt.Sprintf("%s/failpoint?shard=%d", base, k), `{"mode": {"times": 1}, "data": {"failCommands": ["find"], "errorCode": 2}}`)
	if r["shard"] != float64(k) || r["member"] != float64(c2i(t, shard(status(), k)["primary"])) {
		t.Errorf("/failpoint?shard=%d: %v", k, r)
	}
	var ce mongo.CommandError
	if err := coll.FindOne(t.Context(), bson.D{}).Err(); !errors.As(err, &ce) || ce.Code != 2 {
		t.Errorf("a find with the fail point on its shard's primary: %v, want code 2", err)
	}
	if err := coll.FindOne(t.Context(), bson.D{}).Err(); err != nil {
		t.Errorf("the find after the fail point's one time: %v", err)
	}

	m1 := connect(t, "mongodb://"+d.sc.Mongoses()[1].Addr()+"/")
	if r := mustCall(t, "POST", base+"/mongos/failpoint?member=1", `{"mode": {"times": 1}, "data": {"failCommands": ["ping"], "errorCode": 2}}`); r["member"] != 1.0 {
		t.Errorf("/mongos/failpoint?member=1: %v", r)
	}
	if err := m1.Ping(t.Context(), nil); !errors.As(err, &ce) || ce.Code != 2 {
		t.Errorf("a ping of mongos 1 with its fail point: %v, want code 2", err)
	}
	if n := mustCall(t, "GET", base+"/mongos/stats?member=1", "")["stats"].(map[string]any)["failCommandFired"]; n != 1.0 {
		t.Errorf("mongos 1's failCommandFired: %v", n)
	}
	if n := mustCall(t, "GET", base+"/mongos/stats", "")["mongoses"].([]any)[0].(map[string]any)["failCommandFired"]; n != 0.0 {
		t.Errorf("mongos 0's failCommandFired: %v, want 0", n)
	}

	// A mongos stops and restarts on its port.
	addr := d.sc.Mongoses()[0].Addr()
	if r := mustCall(t, "POST", base+"/mongos/stop?member=0", ""); r["member"] != 0.0 || r["host"] != addr {
		t.Errorf("/mongos/stop?member=0: %v", r)
	}
	if s := mongos(status(), 0)["state"]; s != "STOPPED" {
		t.Errorf("mongos 0 after /mongos/stop: %v", s)
	}
	if conn, err := net.DialTimeout("tcp", addr, testTimeout); err == nil {
		conn.Close()
		t.Errorf("the stopped mongos %s takes connections", addr)
	}
	if status, reply := call(t, "POST", base+"/mongos/stop?member=0", ""); status != 409 || !strings.Contains(reply["error"].(string), "StopMongos(0): the mongos is stopped already") {
		t.Errorf("a second /mongos/stop: %d %v", status, reply)
	}
	if status, reply := call(t, "POST", base+"/mongos/failpoint?member=0", `{"mode": "off"}`); status != 409 ||
		!strings.Contains(reply["error"].(string), "mongos 0 is stopped: restart it first") {
		t.Errorf("/mongos/failpoint on a stopped mongos: %d %v", status, reply)
	}
	mustCall(t, "POST", base+"/mongos/restart?member=0", "")
	if s := mongos(status(), 0)["state"]; s != "RUNNING" {
		t.Errorf("mongos 0 after /mongos/restart: %v", s)
	}
	m0 := connect(t, "mongodb://"+addr+"/")
	if err := m0.Ping(t.Context(), nil); err != nil {
		t.Errorf("a ping of the restarted mongos: %v", err)
	}

	// /stats: every server, one shard, one member.
	all := mustCall(t, "GET", base+"/stats", "")
	if len(all["mongoses"].([]any)) != 2 || len(all["shards"].([]any)) != 2 || len(all["shards"].([]any)[1].(map[string]any)["members"].([]any)) != 3 {
		t.Errorf("/stats of a sharded cluster: %v", all)
	}
	if r := mustCall(t, "GET", base+"/stats?shard=1", ""); r["shard"] != 1.0 || len(r["members"].([]any)) != 3 {
		t.Errorf("/stats?shard=1: %v", r)
	}
	one := mustCall(t, "GET", fmt.Sprintf("%s/stats?shard=%d&member=%d", base, k, c2i(t, shard(status(), k)["primary"])), "")
	if n, _ := one["stats"].(map[string]any)["commands"].(map[string]any)["insert"].(float64); one["shard"] != float64(k) || n < 1 {
		t.Errorf("/stats of the primary of shard %d, which took the insert: %v", k, one)
	}
	for _, cl := range []*mongo.Client{client, m0, m1} {
		disconnect(t, cl)
	}
}

// c2i returns the index of a JSON reply, a number.
func c2i(t *testing.T, v any) int {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v is not an index", v)
	}
	return int(f)
}
