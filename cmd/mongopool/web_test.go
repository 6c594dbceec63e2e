package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// -http serves the dashboard of the run's pool while the run lasts: its
// snapshot shows the pool, /metrics its series; the server is gone after.
func TestRunDashboard(t *testing.T) {
	srv := startTestServer(t)
	c := mustParse(t, "-uri", srv.URI(), "-duration", "3s", "-goroutines", "4", "-http", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	code := make(chan int, 1)
	go func() {
		var errOut strings.Builder
		n := run(ctx, c, pw, &errOut)
		pw.CloseWithError(io.EOF)
		code <- n
	}()
	lines := bufio.NewScanner(pr)
	var url string
	for url == "" && lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "mongopool: dashboard at "); ok {
			url = u
		}
	}
	if url == "" {
		t.Fatal("no dashboard address in the output")
	}
	rest := make(chan string, 1)
	go func() { // the report goes on: read it, or the run blocks on it
		var b strings.Builder
		for lines.Scan() {
			b.WriteString(lines.Text() + "\n")
		}
		rest <- b.String()
	}()
	client := &http.Client{Timeout: 10 * time.Second}

	// The pool appears in the stream of snapshots once the run has opened
	// it and made a connection.
	var snap struct {
		Pools []struct {
			Name    string `json:"name"`
			Address string `json:"address"`
			Total   int    `json:"total"`
		} `json:"pools"`
	}
	resp, err := client.Get(url + "events")
	if err != nil {
		t.Fatal(err)
	}
	frames := bufio.NewScanner(resp.Body)
	frames.Buffer(nil, 1<<22)
	for len(snap.Pools) == 0 || snap.Pools[0].Total == 0 {
		if !frames.Scan() {
			t.Fatalf("the stream ended (%v) without a pool with connections: %+v", frames.Err(), snap)
		}
		if data, ok := strings.CutPrefix(frames.Text(), "data: "); ok {
			if err := json.Unmarshal([]byte(data), &snap); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp.Body.Close()
	if p := snap.Pools[0]; p.Name != webPool || p.Address != srv.Addr() {
		t.Errorf("dashboard pool %+v, want %q at %s", p, webPool, srv.Addr())
	}
	resp, err = client.Get(url + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `mongopool_connections{address="` + srv.Addr() + `",pool="pool",state="idle"}`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics has no %s:\n%.2000s", want, body)
	}

	select {
	case n := <-code:
		if n != 0 {
			t.Errorf("exit code %d\n%s", n, <-rest)
		}
	case <-ctx.Done():
		t.Fatal("the run did not end")
	}
	if _, err := client.Get(url); err == nil {
		t.Error("the dashboard still answers after the run")
	}
}
