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
//     newServerDescription (within bounds a hostile reply cannot push), and
//     its Equal;
//   - description.go: Description (the TopologyDescription), whose servers
//     are a persistent tree (internal/ptree) with what the rules need of all
//     of them kept at every node (the primaries, the least session timeout,
//     the first incompatible server), so that an update makes a new
//     Description in O(log n) and shares the rest with the one before; and
//     the initial one newDescription makes from a connection string's
//     Settings;
//   - update.go: Description.apply, the "Updating the TopologyDescription"
//     rules, returning an update that tells the servers added and removed
//     and whether the Description changed, from the servers it touched;
//   - apperror.go: the "Error handling" rules as decisions: what an
//     application's error (decideAppError) or a failed check
//     (decideCheckError) does to the server's description and pool, and
//     replyError, which finds such an error in a command's reply;
//     classify.go turns the errors of connections and operations into the
//     appErrors those rules read;
//   - events.go: the SDAM events, and those that opening (openEvents), an
//     update (update.events) and closing (closeEvents) publish;
//   - rtt.go: roundTrips, the moving average and the recent minimum of a
//     server's round trip times;
//   - readpref.go, selection.go: read preferences and server selection
//     (Description.SelectCandidates: the suitable servers within the latency
//     window, with maximum staleness and deprioritized servers; choose: the
//     two random choices);
//   - srv.go: Description.applySRV, what a rescan of a mongodb+srv name's
//     SRV records does to an Unknown or Sharded topology.
//
// The running layer is built on it:
//
//   - monitor.go, rttmonitor.go: monitor, a goroutine per server that
//     checks it on a connection of its own, with the streaming protocol or
//     by polling, and measures its round trip time;
//   - topology.go: Topology, which holds the current Description, starts
//     and stops the monitors as servers come and go, applies their checks
//     and the application's errors (Server.OperationFailed,
//     Server.ReplyReceived), makes a pool per data-bearing server (through
//     Config.NewPool) and marks it ready, clears it or closes it as the
//     rules say, queues the events, and selects servers (SelectServer),
//     waiting for the topology to change when none is suitable;
//   - poolset.go: PoolSet, more pools per server beside the topology's own
//     (another credential's), made, cleared and closed with them, so that
//     clients of several credentials share the monitors and the selection;
//   - srvpoll.go: Topology.StartSRVPolling, the rescans of a mongodb+srv
//     name's SRV records for a sharded cluster.
//
// Decisions are taken and carried out under the Topology's lock, in work
// proportional to what they change: the new Description is published to
// selection as an immutable snapshot (read without a lock), the pools are
// marked ready or cleared, the events queued; what may block (a monitor or a
// pool stopped, a check canceled) is done after the lock by the goroutine
// that decided it, or on a goroutine of the topology's. The event handler
// and the logger run on a goroutine of their own, which nothing waits for:
// they may call the Topology back. The mongopool package's Client is the
// entry point most programs use.
package topology
