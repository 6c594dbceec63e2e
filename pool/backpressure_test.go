package pool_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// Network errors and timeouts up to the hello get the backpressure labels;
// errors that cannot come from overload, and errors during authentication, do
// not. Each case runs in a synctest bubble: a regression that leaves the
// check-out waiting fails it at once, not after a limit per case.
func TestBackpressureLabels(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name        string
		before      error // fails before HelloDone
		after       error // fails after it
		wantLabels  bool
		wantAuthErr bool
	}{
		{"connection refused", refused, nil, true, false},
		{"reset during hello", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, nil, true, false},
		{"EOF during hello", fmt.Errorf("reading hello reply: %w", io.EOF), nil, true, false},
		{"EOF during TLS handshake", fmt.Errorf("tls handshake: %w", io.ErrUnexpectedEOF), nil, true, false},
		{"socket timeout", fmt.Errorf("hello: %w", os.ErrDeadlineExceeded), nil, true, false},
		{"DNS failure", &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}, nil, false, false},
		{"unknown authority", fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), nil, false, false},
		{"certificate verification", &tls.CertificateVerificationError{Err: errors.New("expired")}, nil, false, false},
		{"hostname mismatch", x509.HostnameError{Host: "db.example"}, nil, false, false},
		{"TLS alert", tls.AlertError(42), nil, false, false},
		{"server error reply", errors.New("hello failed: (NotWritablePrimary) node is recovering"), nil, false, false},
		{"EOF during authentication", nil, fmt.Errorf("saslContinue: %w", io.EOF), false, true},
		{"authentication failed", nil, errors.New("(AuthenticationFailed) bad password"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeConnector{FailBeforeHello: tc.before, FailAfterHello: tc.after}
				p, _ := newPool(t, f)
				mustReady(t, p)
				_, err := checkOut(t, context.Background(), p)
				var ce *pool.ConnectionError
				if !errors.As(err, &ce) {
					t.Fatalf("check-out: %v, want a ConnectionError", err)
				}
				for _, l := range []string{pool.LabelSystemOverloaded, pool.LabelRetryable} {
					if got := pool.HasErrorLabel(err, l); got != tc.wantLabels {
						t.Errorf("label %s: %v, want %v (error %v)", l, got, tc.wantLabels, err)
					}
				}
				if ce.DuringAuth != tc.wantAuthErr {
					t.Errorf("DuringAuth %v, want %v", ce.DuringAuth, tc.wantAuthErr)
				}
				if !errors.Is(err, tc.before) && !errors.Is(err, tc.after) {
					t.Errorf("the connector's error is not wrapped: %v", err)
				}
				if s := p.Stats(); s.Total != 0 || s.EstablishFailed != 1 || s.ClosedError != 1 {
					t.Errorf("stats %+v", s)
				}
			})
		})
	}
}

// The pool's own establishment timeout is a timeout: labelled.
func TestEstablishTimeoutIsLabelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeConnector{Block: make(chan struct{})}
		p, _ := newPool(t, f, pool.WithConnectTimeout(50*time.Millisecond))
		mustReady(t, p)
		_, err := checkOut(t, context.Background(), p)
		if !errors.Is(err, context.DeadlineExceeded) || !pool.HasErrorLabel(err, pool.LabelSystemOverloaded) {
			t.Fatalf("check-out: %v, want a labelled establishment timeout", err)
		}
	})
}

// The establish-error handler hears of a failure before the connection is
// closed and before the check-out fails, so that a topology layer clearing the
// pool there produces the specification's order of events.
func TestEstablishErrorHandlerOrder(t *testing.T) {
	f := &fakeConnector{FailBeforeHello: io.EOF}
	var p *pool.Pool
	log := newEvLog()
	var handled error
	p, err := pool.New("127.0.0.1:27017", f, pool.WithEventHandler(log.handle),
		pool.WithEstablishErrorHandler(func(err error) {
			handled = err
			p.Clear(pool.ClearOptions{Cause: err})
		}))
	if err != nil {
		t.Fatal(err)
	}
	log.pool = p
	defer closePool(t, p)
	mustReady(t, p)
	_, err = checkOut(t, context.Background(), p)
	if err == nil || handled == nil || !errors.Is(err, io.EOF) {
		t.Fatalf("check-out %v, handler saw %v", err, handled)
	}
	got := log.types(pool.PoolCreated, pool.PoolReady)
	want := []string{"ConnectionCheckOutStarted", "ConnectionCreated", "ConnectionPoolCleared", "ConnectionClosed", "ConnectionCheckOutFailed"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// Close waits for the pool's goroutines, among them an establishment whose
// error handler clears the pool (as SDAM does on a handshake error) while
// Close runs: that Clear must not wait for Close, nor Close for it.
func TestCloseWhileEstablishErrorHandlerClears(t *testing.T) {
	c := pool.ConnectorFunc(func(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
		return nil, io.EOF
	})
	entered, closing := make(chan struct{}), make(chan struct{})
	var noPoolClosed atomic.Bool
	var p *pool.Pool
	p, err := pool.New("127.0.0.1:27017", c,
		pool.WithEventHandler(func(e pool.Event) {
			if e.Type == pool.PoolClosed {
				close(closing)
			}
		}),
		pool.WithEstablishErrorHandler(func(err error) {
			close(entered)
			// Close has begun once PoolClosed is out. The handler runs on a
			// goroutine of the pool's, which Close waits for: it must not
			// wait for ever either.
			timer := time.NewTimer(hangLimit)
			defer timer.Stop()
			select {
			case <-closing:
			case <-timer.C:
				noPoolClosed.Store(true)
			}
			p.Clear(pool.ClearOptions{Cause: err})
		}))
	if err != nil {
		t.Fatal(err)
	}
	mustReady(t, p)
	checkedOut := make(chan error, 1)
	go func() {
		_, err := p.CheckOut(context.Background())
		checkedOut <- err
	}()
	recv(t, entered, "the establish-error handler")
	closePool(t, p)
	if noPoolClosed.Load() {
		t.Fatal("Close emitted no PoolClosed while the establish-error handler was running")
	}
	if err := recv(t, checkedOut, "the check-out whose establishment failed"); err == nil {
		t.Fatal("the check-out whose connection failed succeeded")
	}
}
