package mongopool

import (
	"context"
	"fmt"
	"sync/atomic"
)

// opGate counts the operations under way, and turns new ones away once the
// client is closing, so that Shutdown can wait for the last one.
type opGate struct {
	n       atomic.Int64
	closing atomic.Bool
	idle    chan struct{} // a send when the last operation leaves a closing gate
}

func newOpGate() *opGate { return &opGate{idle: make(chan struct{}, 1)} }

// enter counts an operation in; false once the gate is closing.
func (g *opGate) enter() bool {
	g.n.Add(1)
	if g.closing.Load() {
		g.leave()
		return false
	}
	return true
}

// leave counts an operation out.
func (g *opGate) leave() {
	if g.n.Add(-1) == 0 && g.closing.Load() {
		select {
		case g.idle <- struct{}{}:
		default:
		}
	}
}

// close turns new operations away; wait then waits for those under way.
func (g *opGate) close() { g.closing.Store(true) }

// wait waits until no operation is under way, or ctx ends.
func (g *opGate) wait(ctx context.Context) error {
	for g.n.Load() > 0 {
		select {
		case <-g.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Shutdown closes the client once the operations under way have ended: new
// operations fail at once with topology.ErrClosed, those under way go on
// (their retries included) until they end or ctx does. Then the client is
// closed as by [Client.Close]; if ctx ended first, the connections still in
// use are closed under their operations, which fail, and Shutdown returns an
// error wrapping ctx's. Unlike Close, it then waits, until ctx ends, for the
// event handlers to have every event, those of the closing included: called
// from a handler, it waits until ctx ends.
func (c *Client) Shutdown(ctx context.Context) error {
	c.ops.close()
	waitErr := c.ops.wait(ctx)
	unfinished := c.ops.n.Load() // counted before the interruptions end them
	pools := c.Pools()
	err := c.Close()
	defer c.Flush(ctx) // the handlers' backlog is theirs: its end is not an error
	if waitErr == nil {
		return err
	}
	for _, p := range pools {
		p.Shutdown(ctx) // ctx has ended: interrupts the connections in use, at once
	}
	return fmt.Errorf("mongopool: shutting down the client: %d operations were still under way: %w", unfinished, waitErr)
}
