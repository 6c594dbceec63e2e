// Package mongopool opens a connection pool to one MongoDB endpoint from a
// connection string, with real connections: TCP or TLS, the hello handshake,
// compression and authentication.
//
//	p, err := mongopool.Open(ctx, "mongodb://localhost:27017/?maxPoolSize=20")
//	if err != nil { ... }
//	defer p.Close()
//	reply, err := p.RunCommand(ctx, "admin", bson.D{{Key: "ping", Value: 1}})
//
// The pool itself is package pool; the layers under it are packages wire,
// handshake, auth, connstring and connection.
package mongopool
