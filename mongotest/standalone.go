package mongotest

import (
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// codeAwaitStandaloneCounterAhead is mongod's refusal, on a standalone, of
// an awaitable hello whose topologyVersion has the server's processId and
// another counter (src/mongo/db/repl/replication_info.cpp); a replica set
// member refuses a greater counter with codeAwaitCounterAhead instead.
const codeAwaitStandaloneCounterAhead = 51764

// helloStandalone returns the first fields of a standalone mongod's hello
// reply: isWritablePrimary (ismaster for legacy hello) and, from MongoDB
// 4.4 (maxWireVersion 9), topologyVersion, after the wait of an awaitable
// hello; it sets req.next for an exhaust one.
//
// A standalone's topologyVersion never changes while it runs: its
// processId is new at each start and its counter stays 0. mongod therefore
// answers an awaitable hello that carries it after maxAwaitTimeMS, and one
// that carries another process's at once, which is what lets drivers
// stream a standalone's hellos rather than poll them (the streaming
// protocol of the SDAM spec's server monitoring).
func (s *Server) helloStandalone(req *request) (bson.D, error) {
	writable := "isWritablePrimary"
	if req.name != "hello" {
		writable = "ismaster"
	}
	d := bson.D{{Key: writable, Value: true}}
	if !s.streams() {
		// mongod 4.2 knows no awaitable hello: it ignores the fields.
		return d, nil
	}
	aw, err := parseAwait(req)
	if err != nil {
		return nil, err
	}
	if aw != nil {
		s.stats.awaitableHello()
		if err := s.awaitChange(req, aw); err != nil {
			return nil, err
		}
	}
	tv := bson.D{{Key: "processId", Value: s.processID}, {Key: "counter", Value: int64(0)}}
	if aw != nil && req.flags&wire.ExhaustAllowed != 0 {
		req.next = nextHello(req.body, tv)
	}
	return append(d, bson.E{Key: "topologyVersion", Value: tv}), nil
}

// topology returns the server's topologyVersion and a channel closed when
// it next changes: a replica set member's, or a standalone's, which does
// not change while the process runs (a nil channel, which never closes).
func (s *Server) topology() (pid bson.ObjectID, counter int64, changed <-chan struct{}) {
	if s.rs == nil {
		return s.processID, 0, nil
	}
	s.rs.mu.Lock()
	defer s.rs.mu.Unlock()
	m := s.rs.members[s.self]
	return m.processID, m.counter, m.changed
}
