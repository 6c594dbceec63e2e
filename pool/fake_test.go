package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// fakeConnector is a Connector for tests, with switches for failures and
// delays. The zero value connects at once and never fails.
type fakeConnector struct {
	mu sync.Mutex
	// Delay is how long each establishment takes (honouring its context).
	Delay time.Duration
	// Block, if not nil, holds every establishment until it is closed or the
	// establishment's context ends.
	Block chan struct{}
	// FailBeforeHello and FailAfterHello, if not nil, make establishments fail
	// with that error before or after calling HelloDone.
	FailBeforeHello error
	FailAfterHello  error
	// ServiceID, if set, is reported through HelloDone (load-balanced mode).
	ServiceID func(connID int64) pool.ServiceID
	// SkipHelloDone leaves HelloDone uncalled.
	SkipHelloDone bool

	started  atomic.Int64 // Connect calls
	inFlight atomic.Int64 // Connect calls not yet returned
	peak     atomic.Int64 // most Connect calls in flight at once
	links    []*fakeLink
}

func (f *fakeConnector) Connect(ctx context.Context, a *pool.Attempt) (pool.Link, error) {
	f.started.Add(1)
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	f.mu.Lock()
	delay, block := f.Delay, f.Block
	before, after, svc, skip := f.FailBeforeHello, f.FailAfterHello, f.ServiceID, f.SkipHelloDone
	f.mu.Unlock()

	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if before != nil {
		return nil, before
	}
	if !skip {
		var id pool.ServiceID
		if svc != nil {
			id = svc(a.ConnectionID())
		}
		a.HelloDone(id)
	}
	if after != nil {
		return nil, after
	}
	l := &fakeLink{id: a.ConnectionID()}
	f.mu.Lock()
	f.links = append(f.links, l)
	f.mu.Unlock()
	return l, nil
}

// set changes switches while establishments may be running.
func (f *fakeConnector) set(fn func(f *fakeConnector)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// allLinks returns the links made so far.
func (f *fakeConnector) allLinks() []*fakeLink {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeLink(nil), f.links...)
}

// openLinks counts the links not closed yet.
func (f *fakeConnector) openLinks() int {
	n := 0
	for _, l := range f.allLinks() {
		if !l.closed.Load() {
			n++
		}
	}
	return n
}

// fakeLink is the Link of fakeConnector. Use blocks until the link is closed
// (an interrupted operation) or its context ends.
type fakeLink struct {
	id     int64
	closed atomic.Bool
	closes atomic.Int32
	mu     sync.Mutex
	err    error
	done   chan struct{}
	once   sync.Once
}

func (l *fakeLink) doneCh() chan struct{} {
	l.once.Do(func() { l.done = make(chan struct{}) })
	return l.done
}

func (l *fakeLink) Close() error {
	l.closes.Add(1)
	if l.closed.CompareAndSwap(false, true) {
		close(l.doneCh())
	}
	return nil
}

func (l *fakeLink) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && l.closed.Load() {
		return errLinkClosed
	}
	return l.err
}

// fail makes the link report err, as a connection that met a network error.
func (l *fakeLink) fail(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

var errLinkClosed = errors.New("fake link: use of closed connection")

// Use stands for an operation in progress: it returns when the link is closed
// under it (an error) or ctx ends (nil).
func (l *fakeLink) Use(ctx context.Context) error {
	select {
	case <-l.doneCh():
		return errLinkClosed
	case <-ctx.Done():
		return nil
	}
}
