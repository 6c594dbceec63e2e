package mongopool

import (
	"crypto/rand"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// serverSession is a logical session of the server's, as the client keeps it
// for the implicit sessions of its commands: its id (lsid), the number of
// its last transaction (retryable writes), and when it was last used.
type serverSession struct {
	id       [16]byte // a UUID, sent as binary subtype 4
	lsid     bson.Raw // {id: <id>}, the lsid field's document, made once
	txn      int64
	lastUsed time.Time
}

// sessionPool keeps the server sessions the client's commands use, most
// recently used first, as the sessions specification's server session pool:
// a session serves one operation at a time, and one that the server may have
// expired (unused for logicalSessionTimeoutMinutes less a minute) is dropped.
type sessionPool struct {
	mu       sync.Mutex // protects following fields
	sessions []*serverSession
	ended    [][16]byte // ids dropped, to end at Close; bounded
}

// maxEnded bounds the ids a sessionPool keeps to end at Close: endSessions
// takes at most 10,000 ids, and the server expires the others anyway.
const maxEnded = 10000

// get returns a session the server has not expired, given its session timeout.
func (sp *sessionPool) get(timeout time.Duration, now time.Time) *serverSession {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for len(sp.sessions) > 0 {
		s := sp.sessions[len(sp.sessions)-1]
		sp.sessions = sp.sessions[:len(sp.sessions)-1]
		if now.Sub(s.lastUsed) < timeout-time.Minute {
			return s
		}
		sp.endLocked(s)
	}
	s := &serverSession{}
	_, _ = rand.Read(s.id[:])     // crypto/rand.Read never fails
	s.id[6] = s.id[6]&0x0f | 0x40 // version 4
	s.id[8] = s.id[8]&0x3f | 0x80 // variant 10
	s.lsid = lsidDoc(s.id)
	return s
}

// put returns a session after use.
func (sp *sessionPool) put(s *serverSession, now time.Time) {
	s.lastUsed = now
	sp.mu.Lock()
	sp.sessions = append(sp.sessions, s)
	sp.mu.Unlock()
}

// discard lets a dirty session go: a network error met it, so the server
// may hold it in a state the client does not know (the sessions
// specification). It is ended at Close with the others.
func (sp *sessionPool) discard(s *serverSession) {
	sp.mu.Lock()
	sp.endLocked(s)
	sp.mu.Unlock()
}

func (sp *sessionPool) endLocked(s *serverSession) {
	if len(sp.ended) < maxEnded {
		sp.ended = append(sp.ended, s.id)
	}
}

// drain returns the ids of every session, to end them, and empties the pool.
func (sp *sessionPool) drain() [][16]byte {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	ids := sp.ended
	for _, s := range sp.sessions {
		if len(ids) == maxEnded {
			break
		}
		ids = append(ids, s.id)
	}
	sp.sessions, sp.ended = nil, nil
	return ids
}

// lsid returns the session's id as the lsid field's document.
func lsidDoc(id [16]byte) bson.Raw {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendBinaryElement(doc, "id", bson.TypeBinaryUUID, id[:])
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}
