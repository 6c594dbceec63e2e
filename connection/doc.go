// Package connection establishes and runs one connection to a MongoDB server:
// dial (TCP or a Unix socket), TLS, the hello handshake with compression
// negotiation, authentication, then commands over OP_MSG (compressed when
// negotiated), including the exhaust commands whose replies the server
// streams (RoundTripExhaust, ReadMore), as a server monitor's awaitable hello
// is. It knows nothing of pooling: the mongopool package adapts it to the
// pool's Connector.
package connection
