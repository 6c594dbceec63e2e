package mongotest

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// LimitConnectionRate makes the server admit new connections at most at
// rate a second, in bursts of up to burst, as the ingress connection rate
// limiter of MongoDB 8.2 does with its queue off: a token bucket of burst
// tokens, full at first, that gains rate tokens a second. A connection that
// finds no token is closed as soon as it is accepted, before anything is
// read from it, so that the client's handshake fails with a network error:
// the error a driver's pool labels SystemOverloadedError and RetryableError
// (the client backpressure specification), and backs off after. The
// connections open already are not affected.
//
// A rate of 0 admits burst connections and then none. A burst of 0 turns the
// limit off (rate must then be 0 too). Stats.ConnectionsRejected counts the
// connections refused. It returns an error, and changes nothing, for a
// negative, infinite or NaN rate, a negative burst, or a rate without a
// burst.
func (s *Server) LimitConnectionRate(rate float64, burst int) error {
	switch {
	case math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0:
		return fmt.Errorf("mongotest: LimitConnectionRate: the rate must be a finite number of connections a second, 0 or more; got %v", rate)
	case burst < 0:
		return fmt.Errorf("mongotest: LimitConnectionRate: the burst must be 0 (no limit) or more; got %d", burst)
	case burst == 0 && rate != 0:
		return fmt.Errorf("mongotest: LimitConnectionRate: a rate of %v a second needs a burst of at least 1 (a burst of 0 turns the limit off)", rate)
	}
	var b *tokenBucket
	if burst > 0 {
		b = newTokenBucket(rate, burst, time.Now())
	}
	s.admission.mu.Lock()
	s.admission.bucket = b
	s.admission.mu.Unlock()
	return nil
}

// admission is the connection rate limit of LimitConnectionRate.
type admission struct {
	mu     sync.Mutex
	bucket *tokenBucket // nil: no limit
}

// admitConnection reports whether the rate limit lets a connection accepted now in.
func (s *Server) admitConnection() bool {
	a := &s.admission
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bucket == nil || a.bucket.take(time.Now())
}

// tokenBucket holds up to burst tokens and gains rate tokens a second; each
// admitted connection takes one.
type tokenBucket struct {
	rate   float64 // tokens a second
	burst  float64 // the most it holds
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

func newTokenBucket(rate float64, burst int, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// take brings the bucket up to now and takes a token if it holds one.
func (b *tokenBucket) take(now time.Time) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
