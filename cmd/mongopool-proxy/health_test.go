package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool/mongotest"
)

// getStatus returns the status and body of a GET of url (see httpGet).
func getStatus(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// waitStatus waits until a GET of url answers code, for up to 20 s, and
// returns the body.
func waitStatus(t *testing.T, url string, code int) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, body := getStatus(t, url)
		body = strings.TrimSpace(body)
		if got == code {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d %q for 20 s, want %d", url, got, body, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// /healthz says the process answers; /readyz that it takes new clients:
// not while it drains, nor while no upstream server is reachable.
func TestHealthEndpoints(t *testing.T) {
	rs := startRS(t)
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0", "-shutdown-timeout", "20s")
	base := "http://" + d.admin
	if code, body := getStatus(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	// Ready once the upstream is discovered.
	if body := waitStatus(t, base+"/readyz", http.StatusOK); body != "ready" {
		t.Errorf("/readyz: %q", body)
	}

	// /status: proxyStatus as JSON.
	code, body := getStatus(t, base+"/status?clients=true")
	var status struct {
		OK         float64
		Clients    struct{ List []any }
		Operations struct{ Relayed int64 }
		Upstreams  []struct{ Address, Type string }
	}
	if err := json.Unmarshal([]byte(body), &status); code != http.StatusOK || err != nil {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if status.OK != 1 || len(status.Upstreams) != 1 || status.Upstreams[0].Type != "RSPrimary" || status.Clients.List == nil {
		t.Errorf("/status: %+v\n%s", status, body)
	}

	// A drain with an operation under way: not ready, still alive.
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, Times: 1, BlockTime: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + d.addr + "/").SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The proxy is gone by then: its endSessions would wait for
		// server selection.
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		c.Disconnect(dctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	found := make(chan error, 1)
	go func() {
		found <- c.Database("db").Collection("c").FindOne(ctx, bson.D{}).Err()
	}()
	for deadline := time.Now().Add(20 * time.Second); rs.Primary().Stats().Commands["find"] == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the find did not reach the server within 20 s")
		}
	}
	d.cancel()
	body = waitStatus(t, base+"/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "draining") {
		t.Errorf("/readyz while draining: %q", body)
	}
	if code, _ := getStatus(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining: %d", code)
	}
	if err := <-found; err != nil && err != mongo.ErrNoDocuments {
		t.Errorf("the find under way when the drain began: %v", err)
	}
}

func TestReadyzWithoutUpstream(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	d := startDaemon(t, "-upstream", rs.URI(), "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	waitStatus(t, "http://"+d.admin+"/readyz", http.StatusOK)
	rs.Close()
	body := waitStatus(t, "http://"+d.admin+"/readyz", http.StatusServiceUnavailable)
	if !strings.Contains(body, "no upstream server that holds data is reachable") {
		t.Errorf("/readyz with the replica set gone: %q", body)
	}
}
