package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestMetricsLint scrapes /metrics of the admin listener after some
// traffic, lints it as Prometheus' promtool would (promlint), and checks
// that the per-application metrics carry the name the client gave in its
// handshake.
func TestMetricsLint(t *testing.T) {
	const app = "metrics-lint-app"
	mongos, _, admin := startCommand(t, "-listen", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + mongos[0] + "/").SetAppName(app))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	coll := c.Database("metrics").Collection("lint")
	for i := range 5 {
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "i", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := coll.CountDocuments(ctx, bson.D{}); err != nil || n != 5 {
		t.Fatalf("count = %d, %v; want 5", n, err)
	}
	// An error of the application's: a command no server knows.
	if err := c.Database("metrics").RunCommand(ctx, bson.D{{Key: "noSuchCommand", Value: 1}}).Err(); err == nil {
		t.Fatal("an unknown command succeeded")
	}

	text := httpGet(t, "http://"+admin+"/metrics")
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("linting /metrics: %v\n%s", err, text)
	}
	for _, p := range problems {
		t.Errorf("/metrics: %s: %s", p.Metric, p.Text)
	}

	// The client's connection, operations, error and operations' time,
	// under its name.
	label := fmt.Sprintf(`{app=%q}`, app)
	for _, m := range []struct {
		name string
		min  float64
	}{
		{"mongopool_proxy_app_connections", 1},
		{"mongopool_proxy_app_operations_total", 6},
		{"mongopool_proxy_app_errors_total", 1},
		{"mongopool_proxy_app_operation_duration_seconds_count", 6},
	} {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m.name+label) + ` (\S+)$`)
		match := re.FindStringSubmatch(text)
		if match == nil {
			t.Errorf("/metrics has no %s%s", m.name, label)
			continue
		}
		var v float64
		if _, err := fmt.Sscan(match[1], &v); err != nil || v < m.min {
			t.Errorf("%s%s = %s, want %v or more", m.name, label, match[1], m.min)
		}
	}
	// The busy polls (-busy-poll's default) and the slow operations: their
	// counts are there, whatever this machine lets them be.
	for _, name := range []string{"mongopool_proxy_busy_polls_total", "mongopool_proxy_busy_poll_hits_total", "mongopool_proxy_slow_operations_total"} {
		if !regexp.MustCompile(`(?m)^` + name + ` \d+$`).MatchString(text) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	// The operations' latency: the inserts, the count and the unknown
	// command, at least.
	if m := regexp.MustCompile(`(?m)^mongopool_proxy_operation_duration_seconds_count (\d+)$`).FindStringSubmatch(text); m == nil {
		t.Error("/metrics has no mongopool_proxy_operation_duration_seconds")
	} else if n, _ := strconv.Atoi(m[1]); n < 7 {
		t.Errorf("mongopool_proxy_operation_duration_seconds_count = %d, want 7 or more", n)
	}
	// The upstream pools: one per member of the test replica set, each
	// made once its monitor has found the member a secondary or the
	// primary, which the operations above need not wait for (the
	// primary's alone).
	upstream := regexp.MustCompile(`(?m)^mongopool_max_connections\{[^}]*pool="upstream"`)
	deadline := time.Now().Add(10 * time.Second)
	for n := len(upstream.FindAllString(text, -1)); n != 3; n = len(upstream.FindAllString(text, -1)) {
		if n > 3 || time.Now().After(deadline) {
			t.Fatalf("%d upstream pools' mongopool_max_connections (after 10s), want 3:\n%s", n, text)
		}
		time.Sleep(10 * time.Millisecond)
		text = httpGet(t, "http://"+admin+"/metrics")
	}
}
