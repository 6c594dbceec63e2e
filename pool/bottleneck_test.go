package pool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

func blockingConnector() *fakeConnector { return &fakeConnector{Block: make(chan struct{})} }

// A WaitQueueTimeoutError names the limit the check-out met, as a field and
// in its message after the specification's, which Message returns alone.
func TestErrorWaitQueueTimeoutBottleneck(t *testing.T) {
	clearCause := errors.New("server went away")
	cases := []struct {
		name string
		f    func() *fakeConnector // made in the test's bubble, where its channels must be
		opts []pool.Option
		// setup brings the pool to the state under test; it returns what
		// to do once the check-out gave up.
		setup    func(t *testing.T, p *pool.Pool, f *fakeConnector) (after func())
		want     pool.Bottleneck
		text     string // in Error()
		name2    string // Bottleneck.String()
		inUse    int
		pending  int
		failures int
	}{
		{
			name: "maxPoolSize",
			opts: []pool.Option{pool.WithMaxPoolSize(1)},
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				c := mustCheckOut(t, p)
				return func() { mustCheckIn(t, p, c) }
			},
			want: pool.BottleneckMaxPoolSize, name2: "maxPoolSize",
			text:  "maxPoolSize reached with 1 in use and 0 being established",
			inUse: 1,
		},
		{
			name: "maxConnecting",
			f:    blockingConnector,
			opts: []pool.Option{pool.WithMaxPoolSize(0), pool.WithMaxConnecting(1)},
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				first := checkOutAsync(context.Background(), p) // its establishment hangs
				synctest.Wait()
				return func() {
					close(f.Block)
					r := recv(t, first, "the first check-out")
					must(t, r.err)
					mustCheckIn(t, p, r.c)
				}
			},
			want: pool.BottleneckMaxConnecting, name2: "maxConnecting",
			text:    "maxConnecting reached with 1 being established",
			pending: 1,
		},
		{
			name: "its own establishment",
			f:    blockingConnector,
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				return func() { close(f.Block) }
			},
			want: pool.BottleneckEstablishing, name2: "establishing",
			text:    "waiting for a connection still being established",
			pending: 1,
		},
		{
			// The pool is full, but with the connection being established
			// for the check-out: that establishment is what it waits for.
			name: "its own establishment in a full pool",
			f:    blockingConnector,
			opts: []pool.Option{pool.WithMaxPoolSize(1)},
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				return func() { close(f.Block) }
			},
			want: pool.BottleneckEstablishing, name2: "establishing",
			text:    "waiting for a connection still being established",
			pending: 1,
		},
		{
			// One connection in use, one being established for the first
			// waiter: the second waits for room.
			name: "maxPoolSize with an establishment for another",
			f:    blockingConnector,
			opts: []pool.Option{pool.WithMaxPoolSize(2), pool.WithMaxConnecting(1)}, // both reached: maxPoolSize says more
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				f.set(func(f *fakeConnector) { f.Block = nil })
				c := mustCheckOut(t, p)
				block := make(chan struct{})
				f.set(func(f *fakeConnector) { f.Block = block })
				first := checkOutAsync(context.Background(), p)
				synctest.Wait()
				return func() {
					close(block)
					r := recv(t, first, "the first check-out")
					must(t, r.err)
					mustCheckIn(t, p, r.c)
					mustCheckIn(t, p, c)
				}
			},
			want: pool.BottleneckMaxPoolSize, name2: "maxPoolSize",
			text:  "maxPoolSize reached with 1 in use and 1 being established",
			inUse: 1, pending: 1,
		},
		{
			name: "backoff after a failed establishment",
			f:    func() *fakeConnector { return &fakeConnector{FailBeforeHello: errRefused} },
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				var ce *pool.ConnectionError
				if _, err := checkOut(t, context.Background(), p); !errors.As(err, &ce) {
					t.Fatalf("first check-out: %v, want the establishment's error", err)
				}
				return func() {}
			},
			want: pool.BottleneckBackoff, name2: "backoff",
			text:     "establishments held back after failures",
			failures: 1,
		},
		{
			name: "paused by a clear",
			f:    blockingConnector,
			setup: func(t *testing.T, p *pool.Pool, f *fakeConnector) func() {
				// The check-out under test waits for its own establishment
				// when the clear comes: it keeps waiting, and only that
				// connection can serve it now.
				go func() {
					synctest.Wait()
					if err := p.Clear(pool.ClearOptions{Cause: clearCause}); err != nil {
						t.Error(err)
					}
				}()
				return func() { close(f.Block) }
			},
			want: pool.BottleneckPaused, name2: "paused",
			text:    "pool paused by a clear caused by: server went away",
			pending: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeConnector{}
				if tc.f != nil {
					f = tc.f()
				}
				p := errNewPool(t, f, tc.opts...)
				mustReady(t, p)
				after := tc.setup(t, p, f)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				defer cancel()
				_, err := checkOut(t, ctx, p)
				var e *pool.WaitQueueTimeoutError
				if !errors.As(err, &e) {
					t.Fatalf("check-out: %v, want a WaitQueueTimeoutError", err)
				}
				if e.Bottleneck != tc.want || e.Bottleneck.String() != tc.name2 {
					t.Errorf("Bottleneck %v (%d), want %v", e.Bottleneck, e.Bottleneck, tc.want)
				}
				if e.InUse != tc.inUse || e.Pending != tc.pending || e.EstablishFailures != tc.failures {
					t.Errorf("in use %d, pending %d, failures %d; want %d, %d, %d", e.InUse, e.Pending, e.EstablishFailures, tc.inUse, tc.pending, tc.failures)
				}
				if (e.ClearCause == clearCause) != (tc.want == pool.BottleneckPaused) {
					t.Errorf("ClearCause %v", e.ClearCause)
				}
				if e.Message() != errSpecWaitQueueTimeout {
					t.Errorf("Message() = %q, want the specification's %q alone", e.Message(), errSpecWaitQueueTimeout)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, errSpecWaitQueueTimeout+" (address "+errAddr+")") || !strings.Contains(msg, tc.text) {
					t.Errorf("message %q: want the specification's message, then %q", msg, tc.text)
				}
				after()
			})
		})
	}
}

// A check-out whose context was done before it began met no limit of the
// pool, and says so.
func TestErrorWaitQueueTimeoutNoBottleneck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := errNewPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
		mustReady(t, p)
		c := mustCheckOut(t, p) // the pool is full, but the check-out does not look
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := checkOut(t, ctx, p)
		var e *pool.WaitQueueTimeoutError
		if !errors.As(err, &e) || e.Bottleneck != pool.BottleneckNone || e.Bottleneck.String() != "none" {
			t.Fatalf("check-out with a canceled context: %v, want a WaitQueueTimeoutError that names no bottleneck", err)
		}
		if !strings.Contains(err.Error(), "no limit of the pool reached") {
			t.Errorf("message %q does not say that no limit was reached", err)
		}
		mustCheckIn(t, p, c)
	})
}

// Errors built by hand, and bottlenecks out of range, print without a panic.
func TestErrorWaitQueueTimeoutBottleneckConstructed(t *testing.T) {
	for _, tc := range []struct {
		e    pool.WaitQueueTimeoutError
		want string
	}{
		{pool.WaitQueueTimeoutError{Bottleneck: pool.BottleneckPaused}, "pool paused by a clear (no cause given)"},
		{pool.WaitQueueTimeoutError{Bottleneck: pool.BottleneckMaxPoolSize, InUse: 3, Pending: 2}, "maxPoolSize reached with 3 in use and 2 being established"},
		{pool.WaitQueueTimeoutError{Bottleneck: pool.Bottleneck(200)}, "Bottleneck(200)"},
	} {
		if !strings.Contains(tc.e.Error(), tc.want) {
			t.Errorf("%q does not contain %q", tc.e.Error(), tc.want)
		}
	}
	if got := pool.Bottleneck(200).String(); got != "Bottleneck(200)" {
		t.Errorf("String of an unknown bottleneck: %q", got)
	}
}
