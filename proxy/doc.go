// Package proxy is a MongoDB pooling proxy: drivers of any language connect
// to it as they would to a mongos (or to a load balancer in front of
// mongoses), and their operations share the few pooled connections of one
// mongopool.Client per upstream server.
//
// The proxy answers every handshake itself (hello, isMaster and ismaster,
// over OP_MSG and OP_QUERY, in the opcode they came in), with the upstream
// servers' real wire-version range, its own topologyVersion and awaitable,
// streamed hello, so that drivers monitor it as they would a mongos and
// never reach the upstream servers' monitors. Every other command is routed
// per operation through the client's topology:
//
//   - a read by its $readPreference (mode, tags, maxStalenessSeconds), a
//     write to the primary;
//   - a getMore to the server that made its cursor, each id of a killCursors
//     to its own server; the cursor ids clients see are the proxy's, unique
//     across servers, mapped to the servers' own ids;
//   - the commands of a transaction, in a sharded cluster, to the mongos its
//     first command went to (the transactions specification's pinning), by
//     lsid;
//   - behind a load balancer (a loadBalanced=true upstream), a cursor's
//     getMores and killCursors, and the commands of a transaction, over the
//     upstream connection its first command went over, held for it until it
//     ends (Config.MaxPinned of them at most);
//   - a retryable write (one with a txnNumber, outside a transaction), a
//     commit or abort, and a retryable read held through a primary change and
//     retried on the new primary, with the same lsid and txnNumber, for up to
//     Config.ElectionHold, rather than failed back to every client.
//
// A request is read whole before an upstream connection is checked out for
// it, and the connection is checked back in before the reply is written, so
// a slow or stalled client never holds one. The wait for a connection is
// bounded (Config.QueueTimeout, and the command's own maxTimeMS, which is
// reduced by the time spent waiting), and so is the number of waiting
// operations (Config.MaxQueued): beyond it, operations are answered at once
// with the SystemOverloadedError and RetryableError labels, on which current
// drivers back off and retry.
//
// A reply is written from within the read of the client's next request, and
// an upstream request from within the read of its reply: each read then
// waits for bytes that come after the write instead of finding the socket
// empty first, two system calls saved per operation. A client that sends a
// request before it has the reply to the one before (it pipelines) waits
// once, up to 250ms, for that request to be read; its replies are then
// written at once.
//
// With Config.Users, clients authenticate to the proxy as they would to
// mongod (SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509 over a TLS listener),
// against stored SCRAM keys, never a password; each user's operations go
// to the pools of its upstream credential (Config.Upstreams: clients made
// with mongopool.WithSharedTopology of the proxy's, so that one monitor per
// server serves them all), and its cursors and pinned transactions are its
// own. Reconfigure changes the limits, SetUsers the users and
// SetUpstreams the upstream credentials while the proxy runs; Pause and
// Resume hold an upstream's new operations for a maintenance; Reconnect
// replaces an upstream's connections with new ones; Shutdown drains.
//
// The proxyStatus command (db.adminCommand({proxyStatus: 1}) from mongosh)
// reports the proxy's clients (by application name and address), its
// operations, queue and overload counts, its busy polls (see
// Config.BusyPoller), its pinned cursors and transactions and each
// upstream server's pool; Stats, Apps and Clients
// give the same to Go, and metrics/prometheus's ProxyCollector to
// Prometheus.
//
// The daemon is cmd/mongopool-proxy, a module of its own.
package proxy
