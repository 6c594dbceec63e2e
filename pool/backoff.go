package pool

import (
	"math/rand/v2"
	"time"
)

// Backoff of establishments after failures. A server that refuses
// connections, or fails them in the handshake, must not be dialled again at
// once: the background population for minPoolSize would otherwise redial
// without pause (tens of thousands of times a second against a refused port),
// and so would every check-out. After n consecutive failed establishments,
// none starts for a delay drawn between half and all of min(maxBackoff,
// baseBackoff * 2^n), the client backpressure specification's exponential
// backoff, with its jitter kept above one half so that a run of small draws
// cannot make it spin. The first success, and a Ready after a clear (the
// server was found fit again), end it.
const (
	baseBackoff = 100 * time.Millisecond
	maxBackoff  = 10 * time.Second
)

// backoff is the pool's state of backoff; guarded by pool.mu.
type backoff struct {
	failures int       // consecutive failed establishments
	until    time.Time // no establishment starts before this
	last     error     // the last failure
}

// backoffDelay returns the delay after the nth consecutive failure.
func backoffDelay(n int) time.Duration {
	step := maxBackoff
	if n < 16 { // 100ms * 2^7 is past maxBackoff already; no overflow either way
		step = min(maxBackoff, baseBackoff<<n)
	}
	return step/2 + rand.N(step/2+1)
}

// establishFailedBackoffLocked counts a failed establishment.
func (p *Pool) establishFailedBackoffLocked(err error) {
	p.backoff.failures++
	p.backoff.last = err
	p.backoff.until = time.Now().Add(backoffDelay(p.backoff.failures))
}

// endBackoffLocked ends the backoff: an establishment succeeded, or the pool
// was made ready again.
func (p *Pool) endBackoffLocked() {
	p.backoff = backoff{}
	p.stopRetryLocked()
}

// backingOffLocked reports whether the backoff forbids an establishment now.
func (p *Pool) backingOffLocked() bool {
	return p.backoff.failures > 0 && time.Now().Before(p.backoff.until)
}

// armRetryLocked arranges for the wait queue and minPoolSize to be served
// again when the backoff ends, unless that is arranged already.
func (p *Pool) armRetryLocked() {
	if p.retry != nil || p.state == statePoolClosed {
		return
	}
	p.wg.Add(1)
	p.retry = time.AfterFunc(time.Until(p.backoff.until), p.retryNow)
}

// stopRetryLocked cancels the retry armRetryLocked arranged, if it has not
// started.
func (p *Pool) stopRetryLocked() {
	if p.retry != nil && p.retry.Stop() {
		p.wg.Done()
	}
	p.retry = nil
}

// retryNow serves the wait queue, then minPoolSize, at the end of a backoff.
// The waiters come first: an establishment for minPoolSize would count as one
// for the oldest waiter (see dispatchLocked), yet its failure fails no
// check-out, so that a waiter behind a population that keeps failing would
// never get an establishment of its own, nor its error.
func (p *Pool) retryNow() {
	defer p.wg.Done()
	p.observed()
	p.mu.Lock()
	p.retry = nil
	p.changedLocked()
	var ob outbox
	p.dispatchLocked(&ob)
	if p.state == stateReady {
		p.populateLocked(&ob)
	}
	p.releaseLocked(&ob)
}
