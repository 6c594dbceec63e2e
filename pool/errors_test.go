package pool_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The specification's error messages. Its prose writes "a Connection", its
// test files "a connection"; the comparison ignores case.
const (
	errSpecPoolClosed       = "Attempted to check out a connection from closed connection pool"
	errSpecWaitQueueTimeout = "Timed out while checking out a connection from connection pool"
)

const errAddr = "db1.example.com:27017"

func errHasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// errNewPool makes a pool for errAddr, closed when the test ends.
func errNewPool(t *testing.T, f *fakeConnector, opts ...pool.Option) *pool.Pool {
	t.Helper()
	p, err := pool.New(errAddr, f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closePool(t, p) })
	return p
}

// errSentinels checks which of the pool's sentinels err matches.
func errSentinels(t *testing.T, err error, want error) {
	t.Helper()
	for _, s := range []error{pool.ErrPoolClosed, pool.ErrPoolCleared, pool.ErrWaitQueueTimeout, pool.ErrNotFromThisPool, pool.ErrNotCheckedOut} {
		if got := errors.Is(err, s); got != (s == want) {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", err, s, got, s == want)
		}
	}
}

// errTypes checks which of the pool's error types err is.
func errTypes(t *testing.T, err error, want string) {
	t.Helper()
	var (
		closed  *pool.PoolClosedError
		cleared *pool.PoolClearedError
		timeout *pool.WaitQueueTimeoutError
		conn    *pool.ConnectionError
	)
	for name, got := range map[string]bool{
		"PoolClosedError":       errors.As(err, &closed),
		"PoolClearedError":      errors.As(err, &cleared),
		"WaitQueueTimeoutError": errors.As(err, &timeout),
		"ConnectionError":       errors.As(err, &conn),
	} {
		if got != (name == want) {
			t.Errorf("errors.As(%v, *%s) = %v, want %v", err, name, got, name == want)
		}
	}
}

func TestErrorPoolClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := errNewPool(t, &fakeConnector{})
		mustReady(t, p)
		closePool(t, p)
		c, err := checkOut(t, context.Background(), p)
		if err == nil {
			t.Fatalf("check-out from a closed pool returned connection %d", c.ID())
		}
		if !errHasPrefixFold(err.Error(), errSpecPoolClosed) {
			t.Errorf("message %q does not begin with %q", err, errSpecPoolClosed)
		}
		if !strings.Contains(err.Error(), errAddr) {
			t.Errorf("message %q does not name the address", err)
		}
		errSentinels(t, err, pool.ErrPoolClosed)
		errTypes(t, err, "PoolClosedError")
		var pe *pool.PoolClosedError
		if errors.As(err, &pe) && pe.Address != errAddr {
			t.Errorf("Address = %q", pe.Address)
		}
		if pool.HasErrorLabel(err, pool.LabelRetryable) {
			t.Error("PoolClosedError is retryable")
		}
		wrapped := fmt.Errorf("op: %w", err)
		errSentinels(t, wrapped, pool.ErrPoolClosed)

		// Readying a closed pool fails with ErrPoolClosed too.
		if err := p.Ready(); !errors.Is(err, pool.ErrPoolClosed) {
			t.Errorf("Ready after Close: %v, want ErrPoolClosed", err)
		}
	})
}

// A check-out waiting in the queue when the pool closes fails with
// PoolClosedError.
func TestErrorPoolClosedWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := errNewPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
		mustReady(t, p)
		c := mustCheckOut(t, p)
		res := checkOutAsync(context.Background(), p)
		synctest.Wait()
		closePool(t, p)
		err := recv(t, res, "the waiting check-out").err
		errSentinels(t, err, pool.ErrPoolClosed)
		errTypes(t, err, "PoolClosedError")
		if !errHasPrefixFold(err.Error(), errSpecPoolClosed) || !strings.Contains(err.Error(), errAddr) {
			t.Errorf("message %q", err)
		}
		must(t, p.CheckIn(c))
	})
}

func TestErrorPoolCleared(t *testing.T) {
	cause := errors.New("connection reset by peer")
	t.Run("paused at creation, no cause", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := errNewPool(t, &fakeConnector{})
			_, err := checkOut(t, context.Background(), p)
			errSentinels(t, err, pool.ErrPoolCleared)
			errTypes(t, err, "PoolClearedError")
			// The specification's message presumes a cause ("was cleared
			// because another operation failed with: <error>"); without one
			// the message need only begin the same way and name the pool.
			if want := "Connection pool for " + errAddr; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q does not begin with %q", err, want)
			}
			if !pool.HasErrorLabel(err, pool.LabelRetryable) {
				t.Error("no RetryableError label")
			}
			var ce *pool.PoolClearedError
			if errors.As(err, &ce) && (ce.Cause != nil || ce.Interrupted || ce.Address != errAddr || errors.Unwrap(err) != nil) {
				t.Errorf("PoolClearedError %+v", ce)
			}
		})
	})
	t.Run("after a clear with a cause", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := errNewPool(t, &fakeConnector{})
			mustReady(t, p)
			must(t, p.Clear(pool.ClearOptions{Cause: cause}))
			_, err := checkOut(t, context.Background(), p)
			errSentinels(t, err, pool.ErrPoolCleared)
			errTypes(t, err, "PoolClearedError")
			want := "Connection pool for " + errAddr + " was cleared because another operation failed with: " + cause.Error()
			if err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
			if !errors.Is(err, cause) || errors.Unwrap(err) != cause {
				t.Errorf("%v does not unwrap to its cause", err)
			}
			var ce *pool.PoolClearedError
			if errors.As(err, &ce) && ce.Cause != cause {
				t.Errorf("Cause = %v", ce.Cause)
			}
			if !pool.HasErrorLabel(err, pool.LabelRetryable) {
				t.Error("no RetryableError label")
			}
			if !pool.HasErrorLabel(fmt.Errorf("op: %w", err), pool.LabelRetryable) {
				t.Error("no RetryableError label once wrapped")
			}
			if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
				t.Error("SystemOverloadedError label on PoolClearedError")
			}
		})
	})
	t.Run("waiting check-out evicted by a clear", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := errNewPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
			mustReady(t, p)
			c := mustCheckOut(t, p)
			res := checkOutAsync(context.Background(), p)
			synctest.Wait()
			must(t, p.Clear(pool.ClearOptions{Cause: cause}))
			err := recv(t, res, "the waiting check-out").err
			errSentinels(t, err, pool.ErrPoolCleared)
			errTypes(t, err, "PoolClearedError")
			if !errors.Is(err, cause) || !pool.HasErrorLabel(err, pool.LabelRetryable) {
				t.Errorf("%v: no cause or no label", err)
			}
			must(t, p.CheckIn(c))
		})
	})
}

// A clear with interruptInUseConnections gives the user of a checked-out
// connection the Interrupted form of PoolClearedError.
func TestErrorPoolClearedInterrupted(t *testing.T) {
	cause := fmt.Errorf("heartbeat: %w", os.ErrDeadlineExceeded)
	want := "Connection to " + errAddr + " interrupted due to server monitor timeout: heartbeat: i/o timeout"
	t.Run("Conn.Err", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := errNewPool(t, &fakeConnector{})
			mustReady(t, p)
			c := mustCheckOut(t, p)
			if err := c.Err(); err != nil {
				t.Fatalf("Err before the clear: %v", err)
			}
			must(t, p.Clear(pool.ClearOptions{Cause: cause, InterruptInUse: true}))
			err := c.Err()
			if err == nil {
				t.Fatal("Err after an interrupting clear is nil")
			}
			if err.Error() != want {
				t.Errorf("message %q, want %q", err, want)
			}
			errSentinels(t, err, pool.ErrPoolCleared)
			errTypes(t, err, "PoolClearedError")
			var ce *pool.PoolClearedError
			if errors.As(err, &ce) && (!ce.Interrupted || ce.Cause != cause || ce.Address != errAddr) {
				t.Errorf("PoolClearedError %+v", ce)
			}
			if !pool.HasErrorLabel(err, pool.LabelRetryable) || !errors.Is(err, cause) {
				t.Errorf("%v: no label or no cause", err)
			}
			must(t, p.CheckIn(c))
		})
	})
	t.Run("Do", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := errNewPool(t, &fakeConnector{})
			mustReady(t, p)
			done := make(chan error, 1)
			go func() {
				done <- p.Do(context.Background(), func(c *pool.Conn) error {
					return c.Link().(*fakeLink).Use(context.Background())
				})
			}()
			synctest.Wait()
			must(t, p.Clear(pool.ClearOptions{Cause: cause, InterruptInUse: true}))
			err := recv(t, done, "the interrupted Do")
			if err == nil || err.Error() != want {
				t.Errorf("Do: %v, want %q", err, want)
			}
			errSentinels(t, err, pool.ErrPoolCleared)
			if !pool.HasErrorLabel(err, pool.LabelRetryable) {
				t.Error("no RetryableError label")
			}
		})
	})
}

func TestErrorWaitQueueTimeout(t *testing.T) {
	cases := []struct {
		name string
		opts []pool.Option
		// ctx returns the second check-out's context.
		ctx         func() (context.Context, context.CancelFunc)
		cancelAfter time.Duration // cancel the context after this long, if > 0
		limit       string
		cause       error
		waited      time.Duration
	}{
		{
			name:   "waitQueueTimeoutMS",
			opts:   []pool.Option{pool.WithWaitQueueTimeout(50 * time.Millisecond)},
			limit:  "waitQueueTimeoutMS",
			cause:  context.DeadlineExceeded,
			waited: 50 * time.Millisecond,
		},
		{
			name:   "timeoutMS",
			opts:   []pool.Option{pool.WithTimeout(30 * time.Millisecond)},
			limit:  "timeoutMS",
			cause:  context.DeadlineExceeded,
			waited: 30 * time.Millisecond,
		},
		{
			name:   "timeoutMS before waitQueueTimeoutMS",
			opts:   []pool.Option{pool.WithWaitQueueTimeout(100 * time.Millisecond), pool.WithTimeout(30 * time.Millisecond)},
			limit:  "timeoutMS",
			cause:  context.DeadlineExceeded,
			waited: 30 * time.Millisecond,
		},
		{
			name:   "waitQueueTimeoutMS before timeoutMS",
			opts:   []pool.Option{pool.WithWaitQueueTimeout(30 * time.Millisecond), pool.WithTimeout(100 * time.Millisecond)},
			limit:  "waitQueueTimeoutMS",
			cause:  context.DeadlineExceeded,
			waited: 30 * time.Millisecond,
		},
		{
			name: "context deadline before the pool's limits",
			opts: []pool.Option{pool.WithWaitQueueTimeout(100 * time.Millisecond), pool.WithTimeout(100 * time.Millisecond)},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			limit:  "context deadline",
			cause:  context.DeadlineExceeded,
			waited: 20 * time.Millisecond,
		},
		{
			name: "context canceled",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			},
			cancelAfter: 10 * time.Millisecond,
			limit:       "context canceled",
			cause:       context.Canceled,
			waited:      10 * time.Millisecond,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := errNewPool(t, &fakeConnector{}, append([]pool.Option{pool.WithMaxPoolSize(1)}, tc.opts...)...)
				mustReady(t, p)
				held, err := checkOut(t, context.Background(), p)
				must(t, err)

				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tc.ctx != nil {
					ctx, cancel = tc.ctx()
				}
				defer cancel()
				if tc.cancelAfter > 0 {
					time.AfterFunc(tc.cancelAfter, cancel)
				}
				start := time.Now()
				c, err := checkOut(t, ctx, p)
				if err == nil {
					t.Fatalf("second check-out got connection %d", c.ID())
				}
				if elapsed := time.Since(start); elapsed != tc.waited {
					t.Errorf("check-out failed after %v, want %v", elapsed, tc.waited)
				}
				errSentinels(t, err, pool.ErrWaitQueueTimeout)
				errTypes(t, err, "WaitQueueTimeoutError")
				for _, cause := range []error{context.DeadlineExceeded, context.Canceled} {
					if got := errors.Is(err, cause); got != (cause == tc.cause) {
						t.Errorf("errors.Is(err, %v) = %v", cause, got)
					}
				}
				msg := err.Error()
				if !errHasPrefixFold(msg, errSpecWaitQueueTimeout) {
					t.Errorf("message %q does not begin with %q", msg, errSpecWaitQueueTimeout)
				}
				for _, s := range []string{errAddr, tc.limit, "maxPoolSize: 1", "in use: 1", "maxConnecting: 2", "establishing: 0", "still waiting: 0"} {
					if !strings.Contains(msg, s) {
						t.Errorf("message %q does not contain %q", msg, s)
					}
				}
				var we *pool.WaitQueueTimeoutError
				if errors.As(err, &we) {
					if we.Limit != tc.limit || we.Address != errAddr || we.MaxPoolSize != 1 || we.InUse != 1 ||
						we.MaxConnecting != 2 || we.Pending != 0 || we.Waiting != 0 || we.Waited != tc.waited {
						t.Errorf("WaitQueueTimeoutError %+v", *we)
					}
					if we.Timeout() != (tc.cause == context.DeadlineExceeded) {
						t.Errorf("Timeout() = %v", we.Timeout())
					}
				}
				if pool.HasErrorLabel(err, pool.LabelRetryable) {
					t.Error("WaitQueueTimeoutError is retryable")
				}
				must(t, p.CheckIn(held))
			})
		})
	}
}

// A context that is already done fails the check-out before it waits.
func TestErrorWaitQueueTimeoutContextDoneBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := errNewPool(t, &fakeConnector{})
		mustReady(t, p)

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := checkOut(t, ctx, p)
		errSentinels(t, err, pool.ErrWaitQueueTimeout)
		if !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("canceled context: %v", err)
		}
		if !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("message %q does not name the limit", err)
		}

		ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err = checkOut(t, ctx, p)
		errSentinels(t, err, pool.ErrWaitQueueTimeout)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Errorf("expired context: %v", err)
		}
		if !strings.Contains(err.Error(), "context deadline") || !errHasPrefixFold(err.Error(), errSpecWaitQueueTimeout) {
			t.Errorf("message %q", err)
		}
	})
}

// The counts of the message say what held the check-out up: connections in
// use, establishments under way, other waiters.
func TestErrorWaitQueueTimeoutCounts(t *testing.T) {
	t.Run("other waiters", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := errNewPool(t, &fakeConnector{}, pool.WithMaxPoolSize(1))
			mustReady(t, p)
			held, err := checkOut(t, context.Background(), p)
			must(t, err)
			// Two check-outs wait without limit; the third gives up.
			var dones []chan error
			for range 2 {
				done := make(chan error, 1)
				dones = append(dones, done)
				go func() {
					c, err := p.CheckOut(context.Background())
					if err == nil {
						err = p.CheckIn(c)
					}
					done <- err
				}()
			}
			synctest.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, err = checkOut(t, ctx, p)
			for _, s := range []string{"context deadline", "maxPoolSize: 1", "in use: 1", "establishing: 0", "still waiting: 2"} {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("message %v does not contain %q", err, s)
				}
			}
			must(t, p.CheckIn(held))
			for _, d := range dones {
				must(t, recv(t, d, "a waiting check-out"))
			}
		})
	})
	t.Run("establishing, unlimited pool", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			block := make(chan struct{})
			p := errNewPool(t, &fakeConnector{Block: block}, pool.WithMaxPoolSize(0), pool.WithMaxConnecting(1))
			mustReady(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, err := checkOut(t, ctx, p)
			for _, s := range []string{"context deadline", "maxPoolSize: unlimited", "in use: 0", "maxConnecting: 1", "establishing: 1", "still waiting: 0"} {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("message %v does not contain %q", err, s)
				}
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v is not DeadlineExceeded", err)
			}
			close(block)
		})
	})
}

func TestErrorConnection(t *testing.T) {
	netErr := fmt.Errorf("dial: %w", io.EOF)
	authErr := errors.New("authentication failed")
	cases := []struct {
		name       string
		f          *fakeConnector
		cause      error
		duringAuth bool
		labels     bool // SystemOverloadedError and RetryableError
	}{
		{"network error before the hello", &fakeConnector{FailBeforeHello: netErr}, netErr, false, true},
		{"error during authentication", &fakeConnector{FailAfterHello: authErr}, authErr, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := errNewPool(t, tc.f)
				mustReady(t, p)
				_, err := checkOut(t, context.Background(), p)
				if err == nil {
					t.Fatal("check-out succeeded")
				}
				errSentinels(t, err, nil)
				errTypes(t, err, "ConnectionError")
				if !errors.Is(err, tc.cause) {
					t.Errorf("%v does not unwrap to %v", err, tc.cause)
				}
				if !strings.Contains(err.Error(), errAddr) || !strings.Contains(err.Error(), tc.cause.Error()) {
					t.Errorf("message %q does not name the address and the cause", err)
				}
				var ce *pool.ConnectionError
				if errors.As(err, &ce) {
					if ce.Address != errAddr || ce.ConnectionID != 1 || ce.DuringAuth != tc.duringAuth || ce.Err != tc.cause {
						t.Errorf("ConnectionError %+v", *ce)
					}
				}
				for _, l := range []string{pool.LabelSystemOverloaded, pool.LabelRetryable} {
					if got := pool.HasErrorLabel(err, l); got != tc.labels {
						t.Errorf("HasErrorLabel(%s) = %v, want %v", l, got, tc.labels)
					}
				}
			})
		})
	}
}

// CheckIn of a connection that is not checked out, or of another pool's.
func TestErrorCheckIn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := errNewPool(t, &fakeConnector{})
		other, err := pool.New("db2.example.com:27017", &fakeConnector{})
		must(t, err)
		defer other.Close()
		mustReady(t, p)
		mustReady(t, other)
		c, err := checkOut(t, context.Background(), p)
		must(t, err)

		err = other.CheckIn(c)
		errSentinels(t, err, pool.ErrNotFromThisPool)
		if err == nil || !strings.Contains(err.Error(), "db2.example.com:27017") {
			t.Errorf("foreign check-in: %v", err)
		}
		err = p.CheckIn(nil)
		errSentinels(t, err, pool.ErrNotFromThisPool)

		must(t, p.CheckIn(c))
		err = p.CheckIn(c)
		errSentinels(t, err, pool.ErrNotCheckedOut)
		if err == nil || !strings.Contains(err.Error(), errAddr) {
			t.Errorf("double check-in: %v", err)
		}
		must(t, other.Close())
	})
}

// Constructed errors: the messages for the cases a test cannot easily bring
// about.
func TestErrorMessagesConstructed(t *testing.T) {
	// Interrupted: the specification's message for a clear after a
	// monitor's timeout, or one without a cause; another cause is named.
	for _, tc := range []struct {
		cause error
		want  string
	}{
		{nil, "Connection to " + errAddr + " interrupted due to server monitor timeout"},
		{context.DeadlineExceeded, "Connection to " + errAddr + " interrupted due to server monitor timeout: context deadline exceeded"},
		{errors.New("cleared by the application"), "Connection to " + errAddr + " interrupted because its pool was cleared: cleared by the application"},
	} {
		e := &pool.PoolClearedError{Address: errAddr, Cause: tc.cause, Interrupted: true}
		if e.Error() != tc.want {
			t.Errorf("%q, want %q", e.Error(), tc.want)
		}
	}
	e := &pool.PoolClearedError{}
	e = &pool.PoolClearedError{Address: errAddr, Cause: errors.New("boom")}
	if want := "Connection pool for " + errAddr + " was cleared because another operation failed with: boom"; e.Error() != want {
		t.Errorf("%q, want %q", e.Error(), want)
	}
	e = &pool.PoolClearedError{Address: errAddr}
	if !strings.HasPrefix(e.Error(), "Connection pool for "+errAddr) {
		t.Errorf("%q does not begin with the pool's address", e.Error())
	}
	w := &pool.WaitQueueTimeoutError{Address: errAddr, Limit: "waitQueueTimeoutMS", MaxPoolSize: 0, MaxConnecting: 2, InUse: 3, Pending: 1, Waiting: 4,
		EstablishFailures: 5, LastEstablishError: errors.New("connection refused")}
	for _, s := range []string{errAddr, "waitQueueTimeoutMS", "maxPoolSize: unlimited", "in use: 3", "maxConnecting: 2", "establishing: 1", "still waiting: 4",
		"after 5 failed in a row, the last with: connection refused"} {
		if !strings.Contains(w.Error(), s) {
			t.Errorf("%q does not contain %q", w.Error(), s)
		}
	}
	if !errHasPrefixFold(w.Error(), errSpecWaitQueueTimeout) {
		t.Errorf("%q does not begin with %q", w.Error(), errSpecWaitQueueTimeout)
	}
}
