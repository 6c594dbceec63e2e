// Package topology is server discovery and monitoring (SDAM) and server
// selection: the client's view of a deployment (a standalone, a replica
// set, a sharded cluster or a load balancer), the rules that change it, the
// monitors that feed it, a pool per data-bearing server that it drives, and
// the choice of a server for each operation.
//
// It has two layers. The pure core takes values and returns values, with no
// I/O, no goroutines and no pools; the specification's unit tests run
// through it alone:
//
//   - servertype.go: ServerType and TopologyType, with the specification's
//     names;
//   - server.go, hello.go: ServerDescription, made from a hello reply by
//     NewServerDescription (within bounds a hostile reply cannot push), and
//     its Equal;
//   - description.go: Description (the TopologyDescription) and the
//     initial one NewDescription makes from a connection string's Settings;
//   - update.go: Description.Apply, the "Updating the TopologyDescription"
//     rules, returning an Update that tells the servers added and removed;
//   - apperror.go: the "Error handling" rules as decisions: what an
//     application's error (DecideAppError) or a failed check
//     (DecideCheckError) does to the server's description and pool, and
//     ReplyError, which finds such an error in a command's reply;
//     classify.go turns the errors of connections and operations into the
//     AppErrors those rules read;
//   - events.go: the SDAM events, and those that opening (Open), an update
//     (Update.Events) and closing (Close) publish;
//   - rtt.go: RTT, the moving average and the recent minimum of a server's
//     round trip times;
//   - readpref.go, selection.go: read preferences and server selection
//     (Description.SelectCandidates: the suitable servers within the latency
//     window, with maximum staleness and deprioritized servers; Choose: the
//     two random choices);
//   - srv.go: Description.ApplySRV, what a rescan of a mongodb+srv name's
//     SRV records does to an Unknown or Sharded topology.
//
// The running layer is built on it:
//
//   - monitor.go, rttmonitor.go: Monitor, a goroutine per server that
//     checks it on a connection of its own, with the streaming protocol or
//     by polling, and measures its round trip time;
//   - topology.go: Topology, which holds the current Description, starts
//     and stops the monitors as servers come and go, applies their checks
//     and the application's errors, makes a pool per data-bearing server
//     (through Config.NewPool) and marks it ready, clears it or closes it
//     as the rules say, publishes the events, and selects servers
//     (SelectServer), waiting for the topology to change when none is
//     suitable;
//   - srvpoll.go: Topology.StartSRVPolling, the rescans of a mongodb+srv
//     name's SRV records for a sharded cluster.
//
// Decisions are taken under the Topology's lock and carried out outside it,
// in the order they were taken, so that event handlers and pools never run
// under a lock of this package and a pool is never marked ready after a
// later error cleared it. The mongopool package's Client is the entry point
// most programs use.
package topology
