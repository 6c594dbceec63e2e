// Package mongopool connects to MongoDB deployments from a connection string,
// with real connections (TCP or TLS, the hello handshake, compression and
// authentication) held in CMAP pools.
//
// A Client serves any deployment: a standalone server, a replica set, a
// sharded cluster, a load balancer, or a mongodb+srv name for one of them.
// It keeps the topology (package topology: a monitor per server, the SDAM
// rules, a pool per data-bearing server) and selects a server by read
// preference for each operation, retrying retryable reads and writes once:
//
//	c, err := mongopool.Connect(ctx, "mongodb://a:27017,b:27017/?replicaSet=rs0")
//	if err != nil { ... }
//	defer c.Close()
//	reply, err := c.Read(ctx, "db", bson.D{{Key: "count", Value: "orders"}})
//
// A Pool is a client of a single server with its pool in hand, for programs
// that want one endpoint and its pool (CheckOut, CheckIn, Stats):
//
//	p, err := mongopool.Open(ctx, "mongodb://localhost:27017/?maxPoolSize=20")
//	if err != nil { ... }
//	defer p.Close()
//	reply, err := p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
//
// It is a Client of a Single topology (directConnection, or a load
// balancer), with the same monitor, SDAM rules and server selection as any
// other: Open waits for the server and pings it; New returns at once, its
// pool paused until the monitor's first check finds the server, and the
// first command waits for that.
//
// Every event handler (of the pools, the topology, the commands) and the
// logger run on goroutines of the client's, one event at a time and in
// order: neither the topology, nor a monitor, nor an operation ever waits for
// them, and a handler may call the client back, Close included. Flush waits
// for the handlers to have every event so far; Close does not, and Shutdown
// does.
//
// The pool itself is package pool; the layers under it are packages wire,
// handshake, auth, connstring and connection.
package mongopool
