package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// simConnector is a pool.Connector that touches no network: each
// establishment takes a random time between minLatency and maxLatency, and
// fails with a network-looking error at rate failRate. It stands in for the
// wire connector (TCP/TLS, hello, auth) until that one lands.
type simConnector struct {
	minLatency, maxLatency time.Duration
	failRate               float64 // in [0, 1]
}

// simAddr is the peer the simulated errors name.
var simAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 27017}

// Connect simulates dial + hello: it honours ctx as a real connector must, and
// calls HelloDone once the "hello" succeeded.
func (s *simConnector) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	t := time.NewTimer(s.latency())
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if rand.Float64() < s.failRate {
		// A *net.OpError is a net.Error: the pool labels it
		// SystemOverloadedError + RetryableError, as it would a real one.
		return nil, &net.OpError{Op: "read", Net: "tcp", Addr: simAddr, Err: errSimReset}
	}
	a.HelloDone(pool.ServiceID{}) // not load-balanced: no serviceId
	return &simLink{id: a.ConnectionID(), closed: make(chan struct{})}, nil
}

var errSimReset = errors.New("connection reset by peer (simulated)")

func (s *simConnector) latency() time.Duration {
	d := s.minLatency
	if span := s.maxLatency - s.minLatency; span > 0 {
		d += rand.N(span)
	}
	return d
}

// simLink is an established simulated connection.
type simLink struct {
	id     int64
	closed chan struct{}
	once   sync.Once
}

// Close tears the link down; an operation running on it fails.
func (l *simLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Err reports whether the link is fit for reuse.
func (l *simLink) Err() error {
	select {
	case <-l.closed:
		return net.ErrClosed
	default:
		return nil
	}
}

// RoundTrip simulates an operation that keeps the connection busy for d. It
// fails if the link is closed under it (a clear with interruptInUseConnections)
// and stops early when ctx ends.
func (l *simLink) RoundTrip(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-l.closed:
		return &net.OpError{Op: "read", Net: "tcp", Addr: simAddr, Err: net.ErrClosed}
	case <-ctx.Done():
		return ctx.Err()
	}
}
