package mongotest

import (
	"os"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// maxIncomingConnections is the connection limit serverStatus reports
// connections.available against: mongod's default net.maxIncomingConnections.
// The server enforces no limit.
const maxIncomingConnections = 1000000

// serverStatus runs {serverStatus: 1}: the server's identity and uptime,
// and its connections section as mongod reports it: current (open now),
// available (the limit less current), totalCreated (accepted since start)
// and active (running a command, this one included).
func (s *Server) serverStatus(req *request) (bson.D, error) {
	major, minor := versionOf(s.cfg.maxWireVersion)
	st := s.Stats()
	process := "mongod"
	if s.role == roleMongos {
		process = "mongos"
	}
	uptime := time.Since(s.started)
	return bson.D{
		{Key: "host", Value: s.advertised},
		{Key: "version", Value: versionString(major, minor)},
		{Key: "process", Value: process},
		{Key: "pid", Value: int64(os.Getpid())},
		{Key: "uptime", Value: uptime.Seconds()},
		{Key: "uptimeMillis", Value: uptime.Milliseconds()},
		{Key: "uptimeEstimate", Value: int64(uptime.Seconds())},
		{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
		{Key: "connections", Value: bson.D{
			{Key: "current", Value: int32(st.ConnectionsOpen)},
			{Key: "available", Value: int32(maxIncomingConnections - st.ConnectionsOpen)},
			{Key: "totalCreated", Value: st.ConnectionsAccepted},
			{Key: "active", Value: int32(s.active.Load())},
		}},
	}, nil
}
