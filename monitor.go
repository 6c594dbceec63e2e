package mongopool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/handshake"
	"github.com/mongopool/mongopool/internal/goid"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// monitorLoop is the server monitor of the server monitoring specification,
// with its polling protocol: it checks the server with a hello on a
// connection of its own (never one of the pool's, and without
// authentication) every heartbeatFrequencyMS, counted from the end of the
// previous check, or sooner when asked, but never within
// minHeartbeatFrequency of it. The pool starts ready, as if the server had
// just been checked: the first check comes a heartbeat after New.
func (s *sdam) monitorLoop() {
	defer s.wg.Done()
	// A handler of the PoolReady event this goroutine delivers may close the
	// Pool: close must not wait for this goroutine then.
	s.monitor.Store(goid.Current())
	var conn *connection.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	var last time.Time // when the last check ended
	again := false
	for {
		if !again && !s.wait(last) {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		epoch, wasKnown := s.epoch, !s.unknown
		ctx, cancel := context.WithCancel(s.ctx)
		s.cancelCheck = cancel
		s.mu.Unlock()

		desc, err := s.checkServer(ctx, &conn)
		cancel()
		last = time.Now()
		if err != nil && conn != nil {
			conn.Close()
			conn = nil
		}
		if s.ctx.Err() != nil {
			return
		}
		applied := s.checked(epoch, desc, err)
		// A server known until now that fails with a network error is
		// checked again at once: the specification's "retry hello once",
		// as a single dropped connection is not a dead server.
		var ce *wire.CommandError
		again = applied && err != nil && wasKnown && !errors.As(err, &ce)
	}
}

// wait waits for the next check: a heartbeat after last (or after the start),
// or a request, but not before minHeartbeatFrequency after last. It returns
// false when the monitor is stopped.
func (s *sdam) wait(last time.Time) bool {
	heartbeat := time.NewTimer(s.heartbeat)
	defer heartbeat.Stop()
	select {
	case <-s.ctx.Done():
		return false
	case <-heartbeat.C:
	case <-s.wake:
	}
	if last.IsZero() {
		return true
	}
	if rest := minHeartbeatFrequency - time.Since(last); rest > 0 {
		t := time.NewTimer(rest)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// checkServer runs one check: on a new connection the handshake is the check;
// on the connection of the previous check, a hello command.
func (s *sdam) checkServer(ctx context.Context, conn **connection.Conn) (*handshake.Description, error) {
	if *conn == nil {
		c, err := connection.Dial(ctx, &s.check, connection.Hooks{})
		if err != nil {
			return nil, err
		}
		*conn = c
		return c.Description(), nil
	}
	c := *conn
	cmd := bson.D{{Key: "hello", Value: 1}}
	if !c.Description().HelloOK {
		cmd = bson.D{{Key: "isMaster", Value: 1}, {Key: "helloOk", Value: true}}
	}
	raw, err := withDB(cmd, "admin")
	if err != nil {
		return nil, err
	}
	reply, err := c.RoundTrip(ctx, raw)
	if err != nil {
		return nil, err
	}
	hs := s.check.Handshake
	hs.Address = s.check.Address
	return handshake.Parse(reply, hs)
}

// checked applies the outcome of a check that began at epoch, unless a
// decision made since marked the server Unknown (the check is stale then, as
// the specification's cancelled check is). A success marks the pool ready; a
// failure marks the server Unknown and clears the pool, interrupting the
// connections in use if the check timed out. It reports whether the outcome
// was applied.
func (s *sdam) checked(epoch uint64, desc *handshake.Description, err error) bool {
	s.mu.Lock()
	s.cancelCheck = nil
	if s.closed || epoch != s.epoch {
		s.mu.Unlock()
		return false
	}
	if err == nil {
		s.unknown = false
		s.version = desc.TopologyVersion
		s.postLocked(func(p *pool.Pool) { p.Ready() })
		return true
	}
	s.unknownLocked()
	s.version = nil
	cause := fmt.Errorf("the server monitor's check of %s failed: %w", s.check.Address, err)
	interrupt := isTimeout(err)
	s.clearLocked(pool.ClearOptions{Cause: cause, InterruptInUse: interrupt})
	return true
}
