package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool/dashboard"
	"github.com/mongopool/mongopool/internal/pooltest"
	"github.com/mongopool/mongopool/pool"
)

// hangLimit bounds every wait of the tests, so that a regression that leaves
// one waiting fails in seconds with a message: the bound of the shared pool
// helpers.
const hangLimit = pooltest.HangLimit

// newDashboard returns a dashboard served on 127.0.0.1, both closed when the
// test ends.
func newDashboard(t *testing.T, opts ...dashboard.Option) (*dashboard.Dashboard, *httptest.Server) {
	t.Helper()
	d, err := dashboard.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() {
		// The dashboard first: it ends the streams, which the server's
		// Close waits for.
		d.Close()
		srv.Close()
	})
	return d, srv
}

// The JSON of a snapshot, as the page reads it.
type snapshotJSON struct {
	Time       int64      `json:"time"`
	IntervalMS float64    `json:"intervalMs"`
	Pools      []poolJSON `json:"pools"`
}

type poolJSON struct {
	Name               string           `json:"name"`
	Address            string           `json:"address"`
	State              string           `json:"state"`
	Generation         uint64           `json:"generation"`
	Idle               int              `json:"idle"`
	InUse              int              `json:"inUse"`
	Pending            int              `json:"pending"`
	Total              int              `json:"total"`
	Waiting            int              `json:"waiting"`
	Wait               percentilesJSON  `json:"wait"`
	Establish          percentilesJSON  `json:"establish"`
	WaitAllTime        percentilesJSON  `json:"waitAllTime"`
	EstablishAllTime   percentilesJSON  `json:"establishAllTime"`
	EventsPerSecond    *float64         `json:"eventsPerSecond"`
	CheckOutsPerSecond *float64         `json:"checkOutsPerSecond"`
	Options            []optionJSON     `json:"options"`
	Totals             totalsJSON       `json:"totals"`
	Listening          bool             `json:"listening"`
	EventCounts        map[string]int64 `json:"eventCounts"`
	DroppedEvents      int64            `json:"droppedEvents"`
	PoolEvents         []eventJSON      `json:"poolEvents"`
	Events             []eventJSON      `json:"events"`
	CheckOuts          []eventJSON      `json:"checkOuts"`
}

type percentilesJSON struct {
	Samples uint64   `json:"samples"`
	P50     *float64 `json:"p50"`
	P90     *float64 `json:"p90"`
	P99     *float64 `json:"p99"`
	Mean    *float64 `json:"mean"`
}

type optionJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Live  bool   `json:"live"`
}

type totalsJSON struct {
	Created         int64 `json:"created"`
	Closed          int64 `json:"closed"`
	EstablishFailed int64 `json:"establishFailed"`
	CheckedOut      int64 `json:"checkedOut"`
	CheckOutFailed  int64 `json:"checkOutFailed"`
	Timeouts        int64 `json:"timeouts"`
	Clears          int64 `json:"clears"`
	Leaks           int64 `json:"leaks"`
}

type eventJSON struct {
	Seq          uint64  `json:"seq"`
	Time         int64   `json:"time"`
	Type         string  `json:"type"`
	ConnectionID int64   `json:"connectionId"`
	DurationMS   float64 `json:"durationMs"`
	Reason       string  `json:"reason"`
	Error        string  `json:"error"`
	Interrupt    bool    `json:"interruptInUse"`
}

// pool returns the pool of that name in s, or nil.
func (s *snapshotJSON) pool(name string) *poolJSON {
	for i := range s.Pools {
		if s.Pools[i].Name == name {
			return &s.Pools[i]
		}
	}
	return nil
}

// option returns the value of the option of that name, or "".
func (p *poolJSON) option(name string) string {
	for _, o := range p.Options {
		if o.Name == name {
			return o.Value
		}
	}
	return ""
}

// get fetches path from the server, failing the test on an error or a
// status other than want; it returns the response and its body.
func get(t *testing.T, srv *httptest.Server, path string, want int) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d; body:\n%s", path, resp.StatusCode, want, body)
	}
	return resp, string(body)
}

// flush waits until the event handlers of p have had its events so far:
// the pool delivers them on a goroutine of its own, after the change they
// report.
func flush(t *testing.T, p *pool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("the pool's events were not delivered within %v: %v", hangLimit, err)
	}
}

// snapshotOf fetches and decodes /snapshot.
func snapshotOf(t *testing.T, srv *httptest.Server) snapshotJSON {
	t.Helper()
	_, body := get(t, srv, "/snapshot", http.StatusOK)
	var s snapshotJSON
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("/snapshot is not a snapshot: %v\n%s", err, body)
	}
	return s
}

// waitSnapshot fetches /snapshot until ok accepts it, and fails the test if
// none does within hangLimit.
func waitSnapshot(t *testing.T, srv *httptest.Server, what string, ok func(*snapshotJSON) bool) snapshotJSON {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		s := snapshotOf(t, srv)
		if ok(&s) {
			return s
		}
		if time.Now().After(deadline) {
			js, _ := json.MarshalIndent(s, "", "  ")
			t.Fatalf("no snapshot within %v shows %s; the last:\n%s", hangLimit, what, js)
		}
		time.Sleep(5 * time.Millisecond) // polling an HTTP endpoint: there is nothing to await
	}
}

// A stream reads the frames of /events.
type stream struct {
	t      *testing.T
	resp   *http.Response
	frames chan frame
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// A frame is one server-sent event of /events, decoded, or the error that
// ended the stream.
type frame struct {
	s   snapshotJSON
	raw string
	err error
}

// openStream opens /events; the stream is closed when the test ends.
func openStream(t *testing.T, srv *httptest.Server) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET /events: status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("GET /events: Content-Type %q, want text/event-stream", ct)
	}
	st := &stream{t: t, resp: resp, frames: make(chan frame, 1), cancel: cancel}
	st.done.Add(1)
	go st.read()
	t.Cleanup(st.close)
	return st
}

func (st *stream) read() {
	defer st.done.Done()
	defer close(st.frames)
	sc := bufio.NewScanner(st.resp.Body)
	sc.Buffer(nil, 16<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: "))
		case line == "" && data.Len() > 0:
			f := frame{raw: data.String()}
			f.err = json.Unmarshal([]byte(f.raw), &f.s)
			data.Reset()
			st.frames <- f
		}
	}
	if err := sc.Err(); err != nil {
		st.frames <- frame{err: err}
	}
}

// next returns the next frame, failing the test if none comes within
// hangLimit, the stream ends, or the frame is not a snapshot.
func (st *stream) next() snapshotJSON {
	st.t.Helper()
	select {
	case f, ok := <-st.frames:
		if !ok {
			st.t.Fatal("/events ended")
		}
		if f.err != nil {
			st.t.Fatalf("/events: %v\n%s", f.err, f.raw)
		}
		return f.s
	case <-time.After(hangLimit):
		st.t.Fatalf("no frame of /events within %v", hangLimit)
	}
	panic("unreachable")
}

// until reads frames until ok accepts one, and fails the test if none does
// within hangLimit.
func (st *stream) until(what string, ok func(*snapshotJSON) bool) snapshotJSON {
	st.t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		s := st.next()
		if ok(&s) {
			return s
		}
		if time.Now().After(deadline) {
			js, _ := json.MarshalIndent(s, "", "  ")
			st.t.Fatalf("no frame within %v shows %s; the last:\n%s", hangLimit, what, js)
		}
	}
}

// ended waits for the stream to end from the server's side, and fails the
// test if it does not within hangLimit.
func (st *stream) ended() {
	st.t.Helper()
	deadline := time.After(hangLimit)
	for {
		select {
		case f, ok := <-st.frames:
			if !ok || f.err != nil {
				return
			}
		case <-deadline:
			st.t.Fatalf("/events did not end within %v", hangLimit)
		}
	}
}

func (st *stream) close() {
	st.cancel()
	st.resp.Body.Close()
	go func() {
		for range st.frames {
		}
	}()
	st.done.Wait()
}

// httptestServer serves h on 127.0.0.1 until the test ends.
func httptestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
