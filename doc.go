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
// A Pool is a single server's pool, for programs that want one endpoint and
// its pool in hand:
//
//	p, err := mongopool.Open(ctx, "mongodb://localhost:27017/?maxPoolSize=20")
//	if err != nil { ... }
//	defer p.Close()
//	reply, err := p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
//
// Open connects and pings before it returns; New builds the same pool without
// connecting, as a driver's client constructor does, so that the first
// check-out establishes the first connection.
//
// A pool plays the part of server discovery and monitoring for its one
// server. When establishing a connection fails during the handshake or
// authentication with an error that does not carry the SystemOverloadedError
// label, the server is taken as unknown: the pool is cleared and paused
// (check-outs fail with a retryable pool.PoolClearedError) until a monitor sees
// the server answer a hello again, checking every heartbeatFrequencyMS and at
// most every 500ms when a check-out meets the paused pool. In load-balanced
// mode only the failed connection's service is cleared, and nothing is paused.
// See New.
//
// The pool itself is package pool; the layers under it are packages wire,
// handshake, auth, connstring and connection.
package mongopool
