package mongopool

import (
	"bytes"
	"errors"
	"slices"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/wire"
)

// This file implements the gossip of the cluster time (the sessions
// specification) and causal consistency (its specification): the client
// keeps the highest $clusterTime its servers' replies carried and sends it
// with every command; an explicit session keeps the operationTime of its
// last command and, when causally consistent (the default), sends it as
// readConcern.afterClusterTime with the next command that takes a read
// concern, so that it reads what the session wrote and read before, on
// whichever member. Monitoring and the handshake gossip nothing.

// clusterTime is a $clusterTime document and its timestamp.
type clusterTime struct {
	ts  bson.Timestamp
	doc bson.Raw
}

// after reports whether ct is later than other (a nil other is earliest).
func (ct *clusterTime) after(other *clusterTime) bool {
	return other == nil || ct.ts.After(other.ts)
}

// advanceClusterTime makes ct the pointer's value if it is later.
func advanceClusterTime(p *atomic.Pointer[clusterTime], ct *clusterTime) {
	for {
		cur := p.Load()
		if !ct.after(cur) || p.CompareAndSwap(cur, ct) {
			return
		}
	}
}

// parseClusterTime reads a $clusterTime document.
func parseClusterTime(doc bson.Raw) (*clusterTime, bool) {
	t, i, ok := doc.Lookup("clusterTime").TimestampOK()
	if !ok {
		return nil, false
	}
	return &clusterTime{ts: bson.Timestamp{T: t, I: i}, doc: slices.Clone(doc)}, true
}

// timeKeySuffix ends the names of both fields, $clusterTime and
// operationTime, as they appear in the BSON of a reply: one scan for it
// passes over a reply without them (a standalone's) without parsing.
var timeKeySuffix = []byte("Time\x00")

// noteTimes takes in the $clusterTime and operationTime of the reply to o
// (an error's reply included): the client's and o's session's cluster time
// advance, and so does the explicit session's operation time.
func (c *Client) noteTimes(o *operation, reply bson.Raw, err error) {
	if reply == nil {
		var ce *wire.CommandError
		if !errors.As(err, &ce) {
			return
		}
		reply = ce.Raw
	}
	if !bytes.Contains(reply, timeKeySuffix) {
		return
	}
	if d, ok := reply.Lookup("$clusterTime").DocumentOK(); ok {
		if t, i, ok := d.Lookup("clusterTime").TimestampOK(); ok {
			// Most replies carry the time the client knows already:
			// those cost no copy.
			ts := bson.Timestamp{T: t, I: i}
			var parsed *clusterTime
			later := func(cur *clusterTime) bool { return cur == nil || ts.After(cur.ts) }
			if later(c.clusterTime.Load()) {
				parsed = &clusterTime{ts: ts, doc: slices.Clone(d)}
				advanceClusterTime(&c.clusterTime, parsed)
			}
			if s := o.explicit; s != nil && later(s.clusterTime.Load()) {
				if parsed == nil {
					parsed = &clusterTime{ts: ts, doc: slices.Clone(d)}
				}
				advanceClusterTime(&s.clusterTime, parsed)
			}
		}
	}
	if s := o.explicit; s != nil {
		if t, i, ok := reply.Lookup("operationTime").TimestampOK(); ok {
			s.AdvanceOperationTime(bson.Timestamp{T: t, I: i})
		}
	}
}

// clusterTimeFor returns the $clusterTime to send with o: the later of the
// client's and o's session's, nil if neither knows one.
func (c *Client) clusterTimeFor(o *operation) bson.Raw {
	ct := c.clusterTime.Load()
	if s := o.explicit; s != nil {
		if sct := s.clusterTime.Load(); sct != nil && sct.after(ct) {
			ct = sct
		}
	}
	if ct == nil {
		return nil
	}
	return ct.doc
}

// afterClusterTimeCommands are the commands that take
// readConcern.afterClusterTime (the read and write concern specification).
var afterClusterTimeCommands = map[string]bool{
	"find": true, "aggregate": true, "distinct": true, "count": true,
	"insert": true, "update": true, "delete": true, "findAndModify": true, "bulkWrite": true,
	"create": true, "createIndexes": true, "drop": true, "dropDatabase": true, "dropIndexes": true,
}

// afterClusterTime returns the operationTime o's command must read after:
// its causally consistent session's, for a command that takes a read
// concern (not one of RunCommand's, as the specification says), outside a
// transaction or for its first command; ok is false when there is none.
func afterClusterTime(o *operation) (bson.Timestamp, bool) {
	s := o.explicit
	if s == nil || o.kind == opCommand || (o.tx != nil && !o.tx.first) || !s.causal {
		return bson.Timestamp{}, false
	}
	if o.tx == nil && !afterClusterTimeCommands[commandName(o.cmd)] {
		return bson.Timestamp{}, false
	}
	return s.OperationTime()
}

// readConcernWith returns rc (a readConcern document, or nil) with
// afterClusterTime: ts, unless rc has one.
func readConcernWith(rc bson.Raw, ts bson.Timestamp) bson.Raw {
	idx, out := bsoncore.AppendDocumentStart(nil)
	elems, _ := rc.Elements()
	for _, e := range elems {
		if e.Key() == "afterClusterTime" {
			return rc
		}
		out = append(out, e...)
	}
	out = bsoncore.AppendTimestampElement(out, "afterClusterTime", ts.T, ts.I)
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// withoutKey returns cmd without its top-level field key.
func withoutKey(cmd bson.Raw, key string) bson.Raw {
	idx, out := bsoncore.AppendDocumentStart(nil)
	elems, _ := cmd.Elements()
	for _, e := range elems {
		if e.Key() != key {
			out = append(out, e...)
		}
	}
	out, _ = bsoncore.AppendDocumentEnd(out, idx)
	return out
}

// SessionOption configures a Session (StartSession).
type SessionOption func(*Session)

// WithCausalConsistency makes the session causally consistent (the
// default for explicit sessions, as the causal consistency specification
// says) or not: a causally consistent session's commands that take a read
// concern read after its previous commands (readConcern.afterClusterTime),
// on whichever server they run. Unacknowledged writes are not part of it:
// their operation time is never known.
func WithCausalConsistency(on bool) SessionOption {
	return func(s *Session) { s.causal = on }
}

// OperationTime returns the operationTime of the session's latest command
// (or the one AdvanceOperationTime gave), and false when there is none
// yet (or the deployment, a standalone, reports none).
func (s *Session) OperationTime() (bson.Timestamp, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opTime, s.hasOpTime
}

// AdvanceOperationTime advances the session's operation time to ts if ts
// is later, so that the session reads after what another session did.
func (s *Session) AdvanceOperationTime(ts bson.Timestamp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hasOpTime || ts.After(s.opTime) {
		s.opTime, s.hasOpTime = ts, true
	}
}

// ClusterTime returns the session's cluster time, the $clusterTime document
// of its latest reply (or of AdvanceClusterTime), nil if none.
func (s *Session) ClusterTime() bson.Raw {
	if ct := s.clusterTime.Load(); ct != nil {
		return ct.doc
	}
	return nil
}

// AdvanceClusterTime advances the session's cluster time to doc, a
// $clusterTime document ({clusterTime: <timestamp>, signature: ...}), if
// it is later. The client's own cluster time, which its other commands
// send, moves only with the servers' replies.
func (s *Session) AdvanceClusterTime(doc bson.Raw) error {
	ct, ok := parseClusterTime(doc)
	if !ok {
		return errors.New("mongopool: AdvanceClusterTime: the document has no clusterTime timestamp")
	}
	advanceClusterTime(&s.clusterTime, ct)
	return nil
}
