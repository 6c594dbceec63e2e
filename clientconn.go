package mongopool

import (
	"context"
	"errors"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// ErrConnClosed is the error of a command run on a Conn after its Close.
var ErrConnClosed = errors.New("mongopool: the Conn is closed")

// Conn is a connection checked out of a server's pool for the caller's
// exclusive use, for several commands that must run on one connection (a
// cursor's getMore on a load balancer's, an exhaust stream, commands that
// read what the previous ones left on the connection). Get one with
// [Client.Conn] and give it back with Close: until then the pool counts it
// in use (its leak detector, if on, watches it), and Shutdown waits for it.
// Its commands are not retried; their errors go through the SDAM rules as
// those of RunCommand do, and a network error closes the connection, after
// which its commands fail. A Conn runs one command at a time.
type Conn struct {
	c  *Client
	s  *topology.Server
	p  *pool.Pool
	pc *pool.Conn
	cn *connection.Conn
	rp topology.ReadPref

	mu     sync.Mutex // protects following fields; held through a command
	closed bool
}

// Conn selects a server (the primary, unless WithReadPreference says
// otherwise) and checks a connection out of its pool for the caller, who
// must Close the Conn.
func (c *Client) Conn(ctx context.Context, opts ...CommandOption) (*Conn, error) {
	if c.closed.Load() || !c.ops.enter() {
		return nil, topology.ErrClosed
	}
	o := &operation{kind: opCommand, readPref: topology.ReadPref{Mode: topology.ModePrimary}}
	for _, opt := range opts {
		opt(o)
	}
	s, err := c.topo.SelectServer(ctx, c.selector(o, nil), c.operationOf(o))
	if err != nil {
		c.ops.leave()
		return nil, err
	}
	p, pc, err := c.checkOut(ctx, s)
	if err != nil {
		s.Done()
		c.ops.leave()
		return nil, err
	}
	return &Conn{c: c, s: s, p: p, pc: pc, cn: pc.Link().(*connection.Conn), rp: o.readPref}, nil
}

// Address returns the address of the connection's server.
func (cn *Conn) Address() string { return cn.s.Address() }

// RunCommand runs cmd (a document: bson.D, a map, a struct, bson.Raw) on
// database db over the connection and returns the reply; a reply with ok: 0
// is returned as a *wire.CommandError. It is not retried. The client's
// command event handler hears of it, and timeoutMS bounds it (maxTimeMS
// included) as it does the client's operations.
func (cn *Conn) RunCommand(ctx context.Context, db string, cmd any) (bson.Raw, error) {
	raw, err := withDB(cmd, db)
	if err != nil {
		return nil, err
	}
	o := &operation{kind: opCommand, cmd: raw, readPref: cn.rp, hasReadPref: true}
	defer cn.c.endSession(o)
	return cn.run(ctx, o)
}

// run runs o over the connection, once.
func (cn *Conn) run(ctx context.Context, o *operation) (bson.Raw, error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed {
		return nil, ErrConnClosed
	}
	if err := cn.cn.Err(); err != nil {
		return nil, err // broken by an earlier error, or interrupted by a clear
	}
	c := cn.c
	c.numberOp(o)
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return c.exchange(ctx, cn.s, cn.pc, cn.cn, o)
}

// Do calls fn with the connection, for what RunCommand cannot send (a
// message relayed as it came, with its document sequences and flags; an
// exhaust stream read with ReadMore): the Conn's counterpart of
// [Client.Do]. The error fn returns goes through the SDAM rules as a
// command's does; it is not retried. fn must leave the connection ready for
// the next command (an exhaust stream read to its end).
func (cn *Conn) Do(ctx context.Context, fn func(*connection.Conn) error) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed {
		return ErrConnClosed
	}
	if err := cn.cn.Err(); err != nil {
		return err // broken by an earlier error, or interrupted by a clear
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := fn(cn.cn)
	cn.c.observe(cn.s, cn.pc, cn.cn, nil, err)
	if err != nil {
		if ie := cn.pc.Err(); ie != nil {
			err = ie // interrupted by a clear: see Client.attempt
		}
	}
	return err
}

// Close gives the connection back to its pool (which closes it if it broke)
// and ends the Conn's part in the client's operations. It waits for a
// command under way; a second Close does nothing.
func (cn *Conn) Close() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed {
		return nil
	}
	cn.closed = true
	err := cn.p.CheckIn(cn.pc)
	cn.s.Done()
	cn.c.ops.leave()
	return err
}
