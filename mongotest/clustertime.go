package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file gives the replies of replica set members and of a sharded
// cluster's mongoses their $clusterTime and operationTime, as mongod and
// mongos give them (the causal consistency and sessions specifications:
// drivers gossip the one and read after the other). Replication here is
// instantaneous, so the cluster time is the time of the set's last write,
// and it is also the operationTime of any command: every member has every
// write. The signature is the one mongod gives without keys (a zero hash,
// keyId 0). A standalone gives neither, as mongod. The replies of hello
// have neither either: drivers never gossip the cluster time of the
// monitoring commands (the sessions specification), and leaving them out
// keeps a heartbeat's reply within the logging specification's default
// document length, as the logging tests expect of it.

// zeroHash is the signature hash of a cluster time without keys; never
// modified.
var zeroHash = bson.Binary{Subtype: 0, Data: make([]byte, 20)}

// clusterTimeFields returns the $clusterTime and operationTime of the reply
// to req, nil where the server gives none.
func (s *Server) clusterTimeFields(req *request) []bson.E {
	if h, ok := handlers[req.name]; ok && h.legacy {
		return nil // hello
	}
	ts, ok := s.clusterTime()
	if !ok {
		return nil
	}
	return []bson.E{
		{Key: "$clusterTime", Value: bson.D{
			{Key: "clusterTime", Value: ts},
			{Key: "signature", Value: bson.D{
				{Key: "hash", Value: zeroHash},
				{Key: "keyId", Value: int64(0)},
			}},
		}},
		{Key: "operationTime", Value: ts},
	}
}

// clusterTime returns the server's cluster time: its replica set's last
// write, or on a mongos of a cluster the latest of its shards'.
func (s *Server) clusterTime() (bson.Timestamp, bool) {
	switch {
	case s.rs != nil:
		return s.rs.lastOpTime(), true
	case s.router != nil:
		var latest bson.Timestamp
		for _, rs := range s.router.sc.shards {
			if ts := rs.lastOpTime(); ts.After(latest) {
				latest = ts
			}
		}
		return latest, true
	}
	return bson.Timestamp{}, false
}

// lastOpTime returns the opTime of the set's last write.
func (rs *ReplicaSet) lastOpTime() bson.Timestamp {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.opTS
}

// hasField reports whether d has a field named key.
func hasField(d bson.D, key string) bool {
	for _, e := range d {
		if e.Key == key {
			return true
		}
	}
	return false
}
