package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// fakeSRV is a resolver whose SRV records the test changes, and which
// records when it was asked, for what, and how each look-up ended.
type fakeSRV struct {
	t0 time.Time

	mu      sync.Mutex
	records []*net.SRV
	err     error
	delay   time.Duration // how long a look-up takes
	hang    bool          // a look-up waits for its context to end
	calls   []string      // "at name": when (since t0) and what was looked up
	ends    []error       // how each look-up ended
}

func newFakeSRV(ports ...uint16) *fakeSRV {
	f := &fakeSRV{t0: time.Now()}
	f.set(ports...)
	return f
}

// set makes the records those of localhost.test.build.10gen.cc on ports,
// and the look-ups succeed (in delay).
func (f *fakeSRV) set(ports ...uint16) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records, f.err, f.hang = nil, nil, false
	for _, p := range ports {
		f.records = append(f.records, &net.SRV{Target: "localhost.test.build.10gen.cc.", Port: p, Priority: uint16(p), Weight: 5})
	}
}

func (f *fakeSRV) change(fn func(f *fakeSRV)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeSRV) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("%v _%s._%s.%s", time.Since(f.t0), service, proto, name))
	delay, hang, err := f.delay, f.hang, f.err
	records := make([]*net.SRV, len(f.records))
	for i, r := range f.records {
		c := *r
		records[i] = &c
	}
	f.mu.Unlock()
	end := func(err error) (string, []*net.SRV, error) {
		f.mu.Lock()
		f.ends = append(f.ends, err)
		f.mu.Unlock()
		if err != nil {
			return "", nil, err
		}
		return "_" + service + "._" + proto + "." + name + ".", records, nil
	}
	if hang {
		<-ctx.Done()
		return end(ctx.Err())
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return end(ctx.Err())
		}
	}
	return end(err)
}

func (*fakeSRV) LookupTXT(context.Context, string) ([]string, error) {
	return nil, errors.New("a rescan must not look TXT records up")
}

// lookups returns the look-ups so far, and forgets them.
func (f *fakeSRV) lookups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// test1 is the SRV name of test1.test.build.10gen.cc, which the tests poll.
const test1 = "_mongodb._tcp.test1.test.build.10gen.cc"

func at(d time.Duration, name string) string { return fmt.Sprintf("%v %s", d, name) }

// shardedHarness is a harness whose topology is a sharded cluster of
// mongoses at seeds, all checked.
func shardedHarness(t *testing.T, seeds ...string) *harness {
	t.Helper()
	h := newHarness(t, Settings{Seeds: seeds})
	for _, a := range seeds {
		h.check(a, mongosHello())
	}
	if d := h.topo.Description(); d.Type != Sharded || d.Len() != len(seeds) {
		t.Fatalf("the topology is %s", d.Summary())
	}
	h.take()
	h.takeStarted()
	h.takePools()
	return h
}

func startPolling(t *testing.T, h *harness, p SRVPolling) {
	t.Helper()
	if err := h.topo.StartSRVPolling(p); err != nil {
		t.Fatal(err)
	}
}

func serversOf(d Description) string {
	var out []string
	for _, sd := range d.Servers() {
		out = append(out, sd.Address+"="+sd.Type.String())
	}
	return strings.Join(out, " ")
}

// TestSRVPollingRescans checks a rescan every rescanSRVIntervalMS (60 s),
// counted from the end of the one before, and its changes applied as the
// prose tests 1 and 2 say: a new host added, with its monitor, and a host
// gone removed, its monitor and pool closed.
func TestSRVPollingRescans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardedHarness(t, srv17, srv18)
		f := newFakeSRV(27017, 27018)
		startPolling(t, h, SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc"})

		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		if got := f.lookups(); len(got) != 0 {
			t.Fatalf("looked up before 60 s: %v", got)
		}
		f.set(27017, 27018, 27019) // 1. a record added
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, want := f.lookups(), []string{at(time.Minute, test1)}; !slices.Equal(got, want) {
			t.Fatalf("look-ups %v, want %v", got, want)
		}
		if got, want := h.take(), "ServerOpening "+srv19+"\nTopologyDescriptionChanged Sharded(2)->Sharded(3)"; got != want {
			t.Fatalf("after a record was added:\n%s\nwant:\n%s", got, want)
		}
		if got := h.takeStarted(); got != srv19 {
			t.Fatalf("monitors started: %s, want %s", got, srv19)
		}
		if got, want := serversOf(h.topo.Description()), srv17+"=Mongos "+srv18+"=Mongos "+srv19+"=Unknown"; got != want {
			t.Fatalf("servers %s, want %s", got, want)
		}

		// A look-up that takes 5 s: the next one is 60 s after its end.
		f.change(func(f *fakeSRV) { f.delay = 5 * time.Second })
		f.set(27017, 27019) // 2. a record removed
		time.Sleep(time.Minute + 5*time.Second)
		synctest.Wait()
		if got, want := h.take(), "ServerClosed "+srv18+"\nTopologyDescriptionChanged Sharded(3)->Sharded(2)"; got != want {
			t.Fatalf("after a record was removed:\n%s\nwant:\n%s", got, want)
		}
		if got, want := h.takePools(), "ConnectionPoolClosed "+srv18; !strings.Contains(got, want) {
			t.Fatalf("pool events after a record was removed:\n%s\nwant %s", got, want)
		}
		if _, _, closed := h.monitor(srv18).counts(); closed != 1 {
			t.Fatalf("the monitor of %s was closed %d times, want once", srv18, closed)
		}
		f.change(func(f *fakeSRV) { f.delay = 0 })
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, want := f.lookups(), []string{at(2*time.Minute, test1), at(3*time.Minute+5*time.Second, test1)}; !slices.Equal(got, want) {
			t.Fatalf("look-ups %v, want %v", got, want)
		}
		if got := h.take(); got != "" {
			t.Fatalf("a rescan that found the same records changed the topology:\n%s", got)
		}
	})
}

// TestSRVPollingLeavesTheTopologyOnFailures runs the prose tests 6 to 8 and
// more: a look-up that fails, times out, returns no record, or only records
// that fail verification, changes nothing, and the next rescan comes after
// heartbeatFrequencyMS rather than 60 s, until one finds hosts.
func TestSRVPollingLeavesTheTopologyOnFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(f *fakeSRV)
		took time.Duration // how long the failing look-up takes
	}{
		{"6. a time-out", func(f *fakeSRV) { f.hang = true }, 10 * time.Second},
		{"7. a failure", func(f *fakeSRV) {
			f.err = &net.DNSError{Err: "no such host", Name: test1, IsNotFound: true}
		}, 0},
		{"8. no record", func(f *fakeSRV) { f.records = nil }, 0},
		{"records outside the domain", func(f *fakeSRV) {
			f.records = []*net.SRV{{Target: "localhost.evil.build.10gen.cc.", Port: 27019}}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := shardedHarness(t, srv17, srv18)
				before := h.topo.Description()
				f := newFakeSRV(27017, 27018)
				f.change(tc.fail)
				startPolling(t, h, SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc", HeartbeatFrequency: 20 * time.Second})
				time.Sleep(time.Minute + tc.took + 20*time.Second + tc.took)
				synctest.Wait()
				if got := h.take(); got != "" || !h.topo.Description().Equal(before) {
					t.Fatalf("failed rescans changed the topology: %s\n%s", h.topo.Description().Summary(), got)
				}
				f.set(27017, 27019)
				time.Sleep(20 * time.Second)
				synctest.Wait()
				if got, want := serversOf(h.topo.Description()), srv17+"=Mongos "+srv19+"=Unknown"; got != want {
					t.Fatalf("after the records came back: servers %s, want %s", got, want)
				}
				time.Sleep(time.Minute - time.Millisecond)
				synctest.Wait()
				time.Sleep(time.Millisecond)
				synctest.Wait()
				want := []string{
					at(time.Minute, test1),
					at(time.Minute+tc.took+20*time.Second, test1),
					at(time.Minute+2*tc.took+40*time.Second, test1),
					at(2*time.Minute+2*tc.took+40*time.Second, test1),
				}
				if got := f.lookups(); !slices.Equal(got, want) {
					t.Fatalf("look-ups %v, want %v", got, want)
				}
			})
		})
	}
}

// TestSRVPollingMaxHosts runs the prose test 12 through the poller: with
// srvMaxHosts 2, the host still there is kept and one new one joins it.
func TestSRVPollingMaxHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardedHarness(t, srv17, srv18)
		f := newFakeSRV(27017, 27019, 27020)
		startPolling(t, h, SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc", SRVMaxHosts: 2})
		time.Sleep(time.Minute)
		synctest.Wait()
		d := h.topo.Description()
		_, kept := d.Server(srv17)
		_, has19 := d.Server(srv19)
		_, has20 := d.Server(srv20)
		if d.Len() != 2 || !kept || has19 == has20 {
			t.Fatalf("servers %s; want %s and one of %s and %s", serversOf(d), srv17, srv19, srv20)
		}
	})
}

// TestSRVPollingServiceName runs the prose test 13: the rescan looks up the
// records of the srvServiceName.
func TestSRVPollingServiceName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Settings{Seeds: []string{srv17}})
		f := newFakeSRV(27019, 27020)
		startPolling(t, h, SRVPolling{Resolver: f, Host: "test22.test.build.10gen.cc", ServiceName: "customname"})
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := f.lookups(), []string{at(time.Minute, "_customname._tcp.test22.test.build.10gen.cc")}; !slices.Equal(got, want) {
			t.Fatalf("look-ups %v, want %v", got, want)
		}
		if got, want := serversOf(h.topo.Description()), srv19+"=Unknown "+srv20+"=Unknown"; got != want {
			t.Fatalf("servers %s, want %s", got, want)
		}
	})
}

// TestSRVPollingOnlyUnknownOrSharded checks that a load-balanced topology
// (the prose test 9) and one found to be a replica set are not rescanned.
func TestSRVPollingOnlyUnknownOrSharded(t *testing.T) {
	t.Run("9. load balanced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Settings{Seeds: []string{srv17}, LoadBalanced: true})
			f := newFakeSRV(27017, 27018)
			startPolling(t, h, SRVPolling{Resolver: f, Host: "test3.test.build.10gen.cc"})
			time.Sleep(2 * time.Minute)
			synctest.Wait()
			if got := f.lookups(); len(got) != 0 {
				t.Fatalf("a load-balanced topology was rescanned: %v", got)
			}
			if got, want := serversOf(h.topo.Description()), srv17+"=LoadBalancer"; got != want {
				t.Fatalf("servers %s, want %s", got, want)
			}
		})
	})
	t.Run("replica set", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, Settings{Seeds: []string{srv17}})
			f := newFakeSRV(27017, 27018)
			startPolling(t, h, SRVPolling{Resolver: f, Host: "test3.test.build.10gen.cc"})
			time.Sleep(time.Minute)
			synctest.Wait()
			if got := f.lookups(); len(got) != 1 {
				t.Fatalf("an Unknown topology: look-ups %v, want one", got)
			}
			h.check(srv17, primaryHello(srv17))
			f.set(27017, 27019)
			time.Sleep(3 * time.Minute)
			synctest.Wait()
			if got := f.lookups(); len(got) != 0 {
				t.Fatalf("a replica set was rescanned: %v", got)
			}
			if got, want := serversOf(h.topo.Description()), srv17+"=RSPrimary"; got != want {
				t.Fatalf("servers %s, want %s", got, want)
			}
		})
	})
}

// TestSRVPollingStopsAtClose checks that closing the topology ends the
// look-up under way (its context ends) and the rescans; the bubble's end
// checks that the poller's goroutine ended.
func TestSRVPollingStopsAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardedHarness(t, srv17, srv18)
		f := newFakeSRV(27017, 27018)
		f.change(func(f *fakeSRV) { f.hang = true })
		startPolling(t, h, SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc", Timeout: time.Hour})
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.lookups(); len(got) != 1 {
			t.Fatalf("look-ups %v, want one under way", got)
		}
		if err := h.topo.Close(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		f.mu.Lock()
		ends := slices.Clone(f.ends)
		f.mu.Unlock()
		if len(ends) != 1 || !errors.Is(ends[0], context.Canceled) {
			t.Fatalf("the look-up under way ended with %v, want context.Canceled", ends)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := f.lookups(); len(got) != 0 {
			t.Fatalf("rescans after Close: %v", got)
		}
		if err := h.topo.StartSRVPolling(SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("StartSRVPolling after Close: %v, want ErrClosed", err)
		}
	})
}

// TestSRVPollingRefuses checks that StartSRVPolling refuses an incomplete
// configuration, naming what is missing.
func TestSRVPollingRefuses(t *testing.T) {
	h := newHarness(t, Settings{Seeds: []string{srv17}})
	f := newFakeSRV(27017)
	for _, tc := range []struct {
		p    SRVPolling
		want string
	}{
		{SRVPolling{Host: "test1.test.build.10gen.cc"}, "SRVPolling.Resolver is nil"},
		{SRVPolling{Resolver: f}, "SRVPolling.Host is empty"},
		{SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc", SRVMaxHosts: -1}, "SRVPolling.SRVMaxHosts is -1"},
		{SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc", Interval: -time.Second}, "SRVPolling.Interval is -1s"},
	} {
		if err := h.topo.StartSRVPolling(tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartSRVPolling(%+v): %v; want an error saying %q", tc.p, err, tc.want)
		}
	}
}

// TestSRVPollingLogs checks that a rescan logs the records it leaves out in
// one message, naming ten of them at most, and a look-up that failed, with
// its error.
func TestSRVPollingLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &srvLogs{}
		topo, err := New(Config{
			Settings: Settings{Seeds: []string{srv17}},
			NewPool: func(address string, _ func(error)) (*pool.Pool, error) {
				return nil, errors.New("no pool in this test")
			},
			startMonitor: func(address string, h monitorHandler) serverMonitor { return &fakeMonitor{address: address, h: h} },
			Logger:       slog.New(logs),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer topo.Close()
		f := newFakeSRV(27017)
		f.change(func(f *fakeSRV) {
			for port := range uint16(12) {
				f.records = append(f.records, &net.SRV{Target: "localhost.evil.build.10gen.cc.", Port: 27100 + port})
			}
		})
		if err := topo.StartSRVPolling(SRVPolling{Resolver: f, Host: "test1.test.build.10gen.cc"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		f.change(func(f *fakeSRV) { f.err = errors.New("server misbehaving") })
		time.Sleep(time.Minute)
		synctest.Wait()
		var shown []string
		for port := range 10 {
			shown = append(shown, fmt.Sprintf("localhost.evil.build.10gen.cc.:%d", 27100+port))
		}
		evil := fmt.Sprintf("%q", strings.Join(shown, ", "))
		got := logs.lines()
		want := []string{
			`WARN "SRV rescan left out records that are not in the domain of the connection string's host, or have no port" component=topology srvHost=test1.test.build.10gen.cc records=` + evil + ` count=12`,
			`WARN "SRV rescan found no host; the topology is left as it is, and the records looked up again after heartbeatFrequencyMS" component=topology srvHost=test1.test.build.10gen.cc failure="SRV look-up of _mongodb._tcp.test1.test.build.10gen.cc failed: server misbehaving"`,
		}
		if !slices.Equal(got, want) {
			t.Fatalf("logs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// srvLogs records the log records at level Info and above, but the
// topology's Debug events, as lines.
type srvLogs struct {
	mu    sync.Mutex
	recs  []string
	attrs []slog.Attr
}

func (l *srvLogs) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (l *srvLogs) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *srvLogs) WithGroup(string) slog.Handler                 { return l }
func (l *srvLogs) Handle(_ context.Context, r slog.Record) error {
	line := fmt.Sprintf("%s %q", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "topologyId" {
			line += fmt.Sprintf(" %s=%s", a.Key, quoteIfSpaced(a.Value.String()))
		}
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, line)
	l.mu.Unlock()
	return nil
}

func (l *srvLogs) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

func quoteIfSpaced(s string) string {
	if strings.ContainsAny(s, " ") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
