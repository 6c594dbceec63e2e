package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/proxy"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// startCommand runs the command with args (and an admin listener on a
// free port) until the test ends, and returns the addresses it prints:
// its listeners', in order, and its admin listener's.
func startCommand(t *testing.T, args ...string) (mongos []string, lb []string, admin string) {
	t.Helper()
	return startCommandLogging(t, io.Discard, args...)
}

// startCommandLogging is startCommand with the command's log (its standard
// error) written to stderr.
func startCommandLogging(t *testing.T, stderr io.Writer, args ...string) (mongos []string, lb []string, admin string) {
	t.Helper()
	args = append([]string{"-admin", "127.0.0.1:0"}, args...)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run(ctx, args, pw, stderr)
		pw.Close()
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr)
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("the command exited with %d, want 0", code)
			}
		case <-time.After(40 * time.Second):
			t.Error("the command did not stop within 40 s of its context's end")
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	want := 0
	for _, a := range args {
		if a == "-listen" || a == "-listen-lb" {
			want++
		}
	}
	if want == 0 {
		want = 1
	}
	deadline := time.After(30 * time.Second)
	for len(mongos)+len(lb) < want || admin == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the command ended before listening")
			}
			if a, ok := strings.CutPrefix(line, "admin on http://"); ok {
				admin, _, _ = strings.Cut(a, "/")
			}
			if addr, ok := strings.CutPrefix(line, "listening on "); ok {
				addr = strings.TrimSuffix(addr, " (TLS)")
				if a, isLB := strings.CutSuffix(addr, " (load balancer)"); isLB {
					lb = append(lb, a)
				} else {
					mongos = append(mongos, addr)
				}
			}
		case <-deadline:
			t.Fatal("the command printed no listening address within 30 s")
		}
	}
	go func() {
		for range lines {
		}
	}()
	return mongos, lb, admin
}

func TestRunWithoutUpstreamServesATestReplicaSet(t *testing.T) {
	mongos, lb, admin := startCommand(t, "-listen", "127.0.0.1:0", "-listen-lb", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, uri := range []string{"mongodb://" + mongos[0] + "/", "mongodb://" + lb[0] + "/?loadBalanced=true"} {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			t.Fatal(err)
		}
		coll := c.Database("demo").Collection("things")
		if _, err := coll.InsertOne(ctx, bson.D{{Key: "uri", Value: uri}}); err != nil {
			t.Fatalf("insert through %s: %v", uri, err)
		}
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "uri", Value: uri}})
		if err != nil || n != 1 {
			t.Fatalf("count through %s = %d, %v; want 1", uri, n, err)
		}
		c.Disconnect(ctx)
	}
	// The admin listener: the metrics of the proxy and of its upstream
	// pools, and the dashboard.
	metrics := httpGet(t, "http://"+admin+"/metrics")
	for _, want := range []string{"mongopool_proxy_operations_total", "mongopool_proxy_app_connections", `mongopool_checkouts_total{address="127.0.0.1:`, "process_cpu_seconds_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if page := httpGet(t, "http://"+admin+"/"); !strings.Contains(page, "<html") {
		t.Errorf("the dashboard at / (redirected): %.200s", page)
	}
}

// httpGet returns the body of a GET of url, which must answer 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	code, body := getStatus(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %q", url, code, body)
	}
	return body
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-max-pool-size", "-1"},
		{"-busy-poll", "-1us"},
		{"-busy-poll", "2ms"},
		{"-slow-op", "-1s"},
		{"-log-level", "loud"},
		{"extra"},
		{"-compressors", "lz4", "-listen", "127.0.0.1:0"},
	} {
		var stderr strings.Builder
		code := run(context.Background(), append([]string{"-admin", ""}, args...), io.Discard, &stderr)
		if code == 0 {
			t.Errorf("%q: exit 0, want an error", args)
		}
		if !strings.Contains(stderr.String(), "mongopool-proxy") {
			t.Errorf("%q: stderr %q does not say what failed", args, stderr.String())
		}
	}
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"mongodb://u:secret@h:1/?x=1": "mongodb://u:xxxxx@h:1/?x=1",
		"mongodb://h:1/":              "mongodb://h:1/",
		"mongodb://u@h:1/":            "mongodb://u@h:1/",
	} {
		if got := redactURI(in); got != want {
			t.Errorf("redactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// -slow-op and the config file's slowOp: 0 is none (the proxy's -1), a
// duration the threshold, a negative one refused.
func TestSlowOpSettings(t *testing.T) {
	for _, c := range []struct {
		flag string
		want time.Duration
	}{{"", time.Second}, {"0", -1}, {"250ms", 250 * time.Millisecond}} {
		args := []string{}
		if c.flag != "" {
			args = append(args, "-slow-op", c.flag)
		}
		o, err := parseFlags(args, io.Discard)
		if err != nil || o.cfg.SlowOperation != c.want {
			t.Errorf("-slow-op %q: %v, %v; want %v", c.flag, o.cfg.SlowOperation, err, c.want)
		}
	}
	path := filepath.Join(t.TempDir(), "config.json")
	for _, c := range []struct {
		slowOp string
		want   time.Duration
		err    string
	}{{"0s", -1, ""}, {"2s", 2 * time.Second, ""}, {"-1s", 0, "slowOp -1s is negative"}} {
		if err := os.WriteFile(path, []byte(`{"slowOp": "`+c.slowOp+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &reloadable{cfg: proxy.Config{SlowOperation: time.Second}}
		err := applyConfigFile(path, r)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("slowOp %q: %v, want an error saying %q", c.slowOp, err, c.err)
		case c.err == "" && (err != nil || r.cfg.SlowOperation != c.want):
			t.Errorf("slowOp %q: %v, %v; want %v", c.slowOp, r.cfg.SlowOperation, err, c.want)
		}
	}
}
