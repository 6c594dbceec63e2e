package topology

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/pool"
)

// NewPoolFunc makes the pool of the server at address: see Config.NewPool,
// whose rules hold for a PoolSet's too.
type NewPoolFunc func(address string, establishFailed func(error)) (*pool.Pool, error)

// PoolSet is a pool per server of a topology beside the topology's own: its
// connections are its own (those of another credential, say), the rest is
// shared. The topology's monitors, its Description and its server selection
// serve every set, so that clients of several credentials make one monitor
// per server, see the deployment alike and balance their operations together
// (a server's operations in progress count every set's).
//
// A set's pool of a server is made when the topology's own is, made ready
// with it, and closed with it when the server leaves the topology. The SDAM
// rules apply to an error met on a set's connection as to one met on the
// topology's own: compared with the generation of the set's pool, and when
// they mark the server Unknown or clear its pool, every pool of the server
// is cleared, since every connection to it is in doubt. The one exception is
// a credential the server refuses (a command error while authenticating,
// other than the state changes: "not writable primary", "node is
// recovering", a shutdown):
// the server answered, and the other sets' credentials may be good, so only
// the pool of the set whose credential was refused is cleared (its
// check-outs fail at once, with the server's error), and it is made ready
// again minHeartbeatFrequencyMS later (500ms), when the server's own pool is
// ready: a refused credential is tried no more often than that.
//
// A PoolSet is safe for concurrent use. Close it when done; the topology's
// Close closes its pools too.
type PoolSet struct {
	t       *Topology
	i       int // in Server.more
	newPool NewPoolFunc

	// Fields protected by t.mu:
	closed bool
	// err is why newPool failed, if it did: the set has no pool of that
	// server, and Err tells why.
	err error
	// made are the set's pools whose events may not all be delivered yet,
	// for Flush.
	made []*pool.Pool
}

// AddPoolSet adds a PoolSet to the topology, whose pools newPool makes: at
// once for the servers that have a pool already (ready if theirs is), and
// for the others when the topology makes theirs. newPool is called under
// the topology's lock, as Config.NewPool is, and follows its rules.
func (t *Topology) AddPoolSet(newPool NewPoolFunc) (*PoolSet, error) {
	if newPool == nil {
		return nil, fmt.Errorf("topology: AddPoolSet: newPool is nil")
	}
	var fx effects
	t.mu.Lock()
	defer t.unlock(&fx)
	if t.closed {
		return nil, ErrClosed
	}
	ps := &PoolSet{t: t, newPool: newPool, i: len(t.sets)}
	if i := slices.Index(t.sets, nil); i >= 0 {
		ps.i = i
		t.sets[i] = ps
	} else {
		t.sets = append(t.sets, ps)
	}
	for c := t.servers.Cursor(); c.Next(); {
		s := c.Value()
		own := s.pool.Load()
		if own == nil {
			continue
		}
		if p := ps.poolLocked(s); p != nil && own.Stats().State == "ready" {
			p.Ready()
		}
	}
	return ps, nil
}

// pool returns the pool of s in ps, nil for the topology's own.
func (ps *PoolSet) pool(s *Server) *pool.Pool {
	if ps == nil {
		return s.pool.Load()
	}
	return ps.Pool(s)
}

// Pool returns the set's pool of s; nil while s has no pool (as
// Server.Pool), once the set is closed, or when it could not be made (see
// Err).
func (ps *PoolSet) Pool(s *Server) *pool.Pool {
	if more := s.more.Load(); more != nil && ps.i < len(*more) && (*more)[ps.i].set == ps {
		return (*more)[ps.i].pool
	}
	return nil
}

// setPool is a server's pool of a set. The set is told, since the index of
// a set closed is another's later, while a removed server may keep the first
// one's pool until it is closed.
type setPool struct {
	set  *PoolSet
	pool *pool.Pool
}

// Err returns why the set lacks a pool of a server that has one: ErrClosed
// once the set or its topology is closed, or why its newPool failed.
func (ps *PoolSet) Err() error {
	ps.t.mu.Lock()
	defer ps.t.mu.Unlock()
	switch {
	case ps.closed || ps.t.closed:
		return ErrClosed
	case ps.err != nil:
		return ps.err
	}
	return nil
}

// poolLocked returns the set's pool of s, making it if s has none; nil if it
// cannot be made (Err then says why).
func (ps *PoolSet) poolLocked(s *Server) *pool.Pool {
	if p := ps.Pool(s); p != nil {
		return p
	}
	p, err := ps.newPool(s.address, func(err error) { ps.t.establishFailed(ps, s, err) })
	if err != nil {
		ps.err = fmt.Errorf("topology: cannot make the pool of %s: %w", s.address, err)
		return nil
	}
	ps.made = append(slices.DeleteFunc(ps.made, delivered), p)
	s.setMoreLocked(ps.i, setPool{ps, p})
	return p
}

// setMoreLocked makes sp the server's pool at index i (the zero setPool:
// none), publishing a new list.
func (s *Server) setMoreLocked(i int, sp setPool) {
	var next []setPool
	if more := s.more.Load(); more != nil {
		next = slices.Clone(*more)
	}
	if i >= len(next) {
		if sp.pool == nil {
			return
		}
		next = append(next, make([]setPool, i+1-len(next))...)
	}
	next[i] = sp
	s.more.Store(&next)
}

// OperationFailed is Server.OperationFailed for an error met on a
// connection of the set's pool of s.
func (ps *PoolSet) OperationFailed(s *Server, gen uint64, svc *bson.ObjectID, broken bool, err error) {
	if e, ok := operationError(s.address, gen, svc, broken, err); ok {
		ps.t.handleError(ps, e)
	}
}

// ReplyReceived is Server.ReplyReceived for a reply received on a
// connection of the set's pool of s.
func (ps *PoolSet) ReplyReceived(s *Server, gen uint64, svc *bson.ObjectID, reply bson.Raw) {
	if !bytes.Contains(reply, writeConcernErrorKey) {
		return
	}
	if e, ok := replyError(s.address, reply); ok {
		e.Phase, e.Generation, e.ServiceID = afterHandshake, gen, svc
		ps.t.handleError(ps, e)
	}
}

// Flush returns once the event handlers of the set's pools have had every
// event emitted before the call (those of pools closed since included), or
// with ctx's error when ctx ends first.
func (ps *PoolSet) Flush(ctx context.Context) error {
	ps.t.mu.Lock()
	pools := slices.Clone(ps.made)
	ps.t.mu.Unlock()
	for _, p := range pools {
		if err := p.Flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Close takes the set out of the topology and closes its pools, which the
// topology and its other sets go on without. It returns once they are
// closed. Later calls do nothing.
func (ps *PoolSet) Close() error {
	t := ps.t
	var fx effects
	t.mu.Lock()
	if ps.closed {
		t.unlock(&fx)
		return nil
	}
	ps.closed = true
	if ps.i < len(t.sets) && t.sets[ps.i] == ps {
		t.sets[ps.i] = nil
	}
	var pools []*pool.Pool
	for c := t.servers.Cursor(); c.Next(); {
		if p := ps.Pool(c.Value()); p != nil {
			pools = append(pools, p)
			c.Value().setMoreLocked(ps.i, setPool{})
		}
	}
	t.unlock(&fx)
	var closing sync.WaitGroup
	for _, p := range pools {
		closing.Go(func() { p.Close() })
	}
	closing.Wait()
	return nil
}
