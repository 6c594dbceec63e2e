package mongotest

import (
	"maps"
	"sync"

	"github.com/mongopool/mongopool/wire"
)

// Stats is what a server has seen since Start, as Server.Stats reports it.
// The maps are copies, never nil, that the caller may keep.
type Stats struct {
	// ConnectionsAccepted counts the connections accepted.
	ConnectionsAccepted int64
	// ConnectionsRejected counts the connections that the rate limit of
	// LimitConnectionRate closed as soon as they were accepted; they are
	// not in ConnectionsAccepted.
	ConnectionsRejected int64
	// ConnectionsOpen is the number of connections open now.
	ConnectionsOpen int64
	// ProtocolErrors counts the connections the server closed because the
	// client broke the wire protocol (bad lengths, invalid BSON, a wrong
	// checksum, an unknown opcode or compressor, ...).
	ProtocolErrors int64
	// Commands counts the commands received, by name as sent (so "isMaster"
	// and "hello" count apart), unknown ones included.
	Commands map[string]int64
	// OpQueries counts the legacy OP_QUERY messages received.
	OpQueries int64
	// CompressedReceived and CompressedSent count the OP_COMPRESSED messages
	// received and sent, by compressor name ("snappy", "zlib", "zstd",
	// "noop").
	CompressedReceived map[string]int64
	CompressedSent     map[string]int64
	// Authentications and AuthFailures count the authentication
	// conversations that succeeded and failed, by mechanism. A speculative
	// attempt that the server declines is not a failure: the client goes on
	// with a normal conversation.
	Authentications map[string]int64
	AuthFailures    map[string]int64
	// FailCommandFired counts the times the failCommand fail point fired
	// (blocked, failed or closed a command, or added a writeConcernError),
	// whatever it was set to: the count configureFailPoint reports.
	FailCommandFired int64
	// DocumentsExamined counts the stored documents that queries (of
	// find, count, update, delete, aggregate, ...) tested against a
	// filter, as serverStatus's metrics.queryExecutor.scannedObjects does
	// in mongod: a query on _id examines one document, not the collection.
	// The members of a replica set share their store, and this count: each
	// reports the documents all of them examined.
	DocumentsExamined int64
	// AwaitableHellos counts the awaitable hellos received (with
	// topologyVersion and maxAwaitTimeMS), whether they waited or not,
	// each reply of an exhaust stream included: the server monitoring of
	// a driver that streams. HellosAwaiting is the number of them waiting
	// now for a change of the server's topologyVersion.
	AwaitableHellos int64
	HellosAwaiting  int64
	// ExhaustReplies counts the replies sent with the moreToCome flag: the
	// replies of exhaust hellos but the last.
	ExhaustReplies int64
	// TransactionWaits counts the times a command outside transactions
	// waited for an open transaction that holds a document it writes (or
	// a collection it drops or indexes), as mongod's writes wait for a
	// transaction's locks; TransactionWaiting is the number waiting now.
	TransactionWaits   int64
	TransactionWaiting int64
	// JavaScriptCalls counts the calls into JavaScript ($where runs one
	// per document, $function one per evaluation); JavaScriptRunning is
	// the number running now. JavaScriptInterrupted counts the calls the
	// server stopped, by the codeName of the failure: MaxTimeMSExpired
	// (the command's maxTimeMS), Interrupted (WithJavaScriptTimeout),
	// ClientDisconnect (the client hung up), InterruptedDueToReplStateChange
	// (a step-down), InterruptedAtShutdown (Close, or a member's Stop).
	JavaScriptCalls       int64
	JavaScriptRunning     int64
	JavaScriptInterrupted map[string]int64
}

// stats collects a Stats.
type stats struct {
	mu sync.Mutex
	s  Stats
}

func (st *stats) init() {
	st.s = Stats{
		Commands:              map[string]int64{},
		CompressedReceived:    map[string]int64{},
		CompressedSent:        map[string]int64{},
		JavaScriptInterrupted: map[string]int64{},
		Authentications:       map[string]int64{},
		AuthFailures:          map[string]int64{},
	}
}

// Stats returns a snapshot of what the server has seen.
func (s *Server) Stats() Stats {
	st := &s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.s
	out.Commands = maps.Clone(st.s.Commands)
	out.CompressedReceived = maps.Clone(st.s.CompressedReceived)
	out.CompressedSent = maps.Clone(st.s.CompressedSent)
	out.Authentications = maps.Clone(st.s.Authentications)
	out.AuthFailures = maps.Clone(st.s.AuthFailures)
	out.JavaScriptInterrupted = maps.Clone(st.s.JavaScriptInterrupted)
	out.DocumentsExamined = s.store.examined.Load()
	return out
}

func (st *stats) update(f func(*Stats)) {
	st.mu.Lock()
	f(&st.s)
	st.mu.Unlock()
}

func (st *stats) connOpened() {
	st.update(func(s *Stats) { s.ConnectionsAccepted++; s.ConnectionsOpen++ })
}
func (st *stats) connRejected()  { st.update(func(s *Stats) { s.ConnectionsRejected++ }) }
func (st *stats) connClosed()    { st.update(func(s *Stats) { s.ConnectionsOpen-- }) }
func (st *stats) protocolError() { st.update(func(s *Stats) { s.ProtocolErrors++ }) }
func (st *stats) opQuery()       { st.update(func(s *Stats) { s.OpQueries++ }) }
func (st *stats) command(name string) {
	st.update(func(s *Stats) { s.Commands[name]++ })
}
func (st *stats) compressedReceived(id wire.CompressorID) {
	st.update(func(s *Stats) { s.CompressedReceived[id.String()]++ })
}
func (st *stats) compressedSent(id wire.CompressorID) {
	st.update(func(s *Stats) { s.CompressedSent[id.String()]++ })
}
func (st *stats) authenticated(mech string, ok bool) {
	st.update(func(s *Stats) {
		if ok {
			s.Authentications[mech]++
		} else {
			s.AuthFailures[mech]++
		}
	})
}
func (st *stats) awaitableHello()  { st.update(func(s *Stats) { s.AwaitableHellos++ }) }
func (st *stats) awaiting(n int64) { st.update(func(s *Stats) { s.HellosAwaiting += n }) }
func (st *stats) exhaustReply()    { st.update(func(s *Stats) { s.ExhaustReplies++ }) }
func (st *stats) transactionWait(n int64) {
	st.update(func(s *Stats) {
		if n > 0 {
			s.TransactionWaits++
		}
		s.TransactionWaiting += n
	})
}
