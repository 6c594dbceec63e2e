package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
