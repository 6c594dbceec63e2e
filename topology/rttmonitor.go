package topology

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
)

// rttStats is a server's RTT, shared by its monitor and its RTT goroutine.
type rttStats struct {
	mu  sync.Mutex
	rtt roundTrips
}

func (s *rttStats) add(sample time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rtt.Add(sample)
}

func (s *rttStats) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rtt.Reset()
}

// get returns the moving average and the minimum of the samples, and false
// when there is none.
func (s *rttStats) get() (avg, least time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	avg, ok = s.rtt.Average()
	return avg, s.rtt.Min(), ok
}

// rttMonitor measures a server's round trip time while its monitor streams,
// as the specification's RTT thread does: a hello every heartbeat on a
// connection of its own (the handshake's hello first), its duration a sample.
// Replies are ignored and errors never reported (they would need a pool
// generation to be told from stale ones): a failed round closes the
// connection, and the next one, a heartbeat later, makes another. It
// publishes no event.
type rttMonitor struct {
	conn      connection.Config // the monitor's
	heartbeat time.Duration
	timeout   time.Duration // connectTimeoutMS, for each hello; 0 for none
	stats     *rttStats
}

// run measures until ctx ends.
func (r *rttMonitor) run(ctx context.Context) {
	var c *connection.Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	helloOK := false
	for {
		sample, err := r.measure(ctx, &c, &helloOK)
		if err == nil {
			r.stats.add(sample)
		} else if c != nil {
			c.Close()
			c = nil
		}
		t := time.NewTimer(r.heartbeat)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// measure takes one sample: the handshake's hello on a new connection
// (stored in *cp), or a hello on the connection.
func (r *rttMonitor) measure(ctx context.Context, cp **connection.Conn, helloOK *bool) (time.Duration, error) {
	if *cp == nil {
		var rtt time.Duration
		c, err := connection.Dial(ctx, &r.conn, connection.Hooks{HelloReply: func(_ bson.Raw, d time.Duration) { rtt = d }})
		if err != nil {
			return 0, err
		}
		*cp, *helloOK = c, c.Description().HelloOK
		return rtt, nil
	}
	cmd, err := helloCommand(*helloOK, nil, 0)
	if err != nil {
		return 0, err
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	start := time.Now()
	reply, err := (*cp).RoundTrip(ctx, cmd)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	*helloOK, _ = reply.Lookup("helloOk").BooleanOK()
	return d, nil
}
