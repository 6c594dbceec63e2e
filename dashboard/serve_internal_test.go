package dashboard

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamEndsWithClient checks that a stream of /events ends as soon as
// its client goes away, not at its next frame.
func TestStreamEndsWithClient(t *testing.T) {
	d, err := New(WithInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(d)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The first frame, then the stream waits an hour for the next.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	if n := d.streams.Load(); n != 1 {
		t.Fatalf("%d streams served, want 1", n)
	}
	cancel()
	// The server's Close waits for the handlers that still run.
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's handler still runs 10s after its client went away")
	}
	if n := d.streams.Load(); n != 0 {
		t.Errorf("%d streams counted after they ended", n)
	}
}
