// Package topology is the pure core of server discovery and monitoring
// (SDAM): the client's view of a deployment (a standalone, a replica set, a
// sharded cluster or a load balancer) and the rules that change it, with no
// I/O, no goroutines and no pools. Every function takes values and returns
// values; the caller holds the lock, talks to the servers and carries out
// the decisions.
//
// What is here, one idea per file:
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
//   - events.go: the SDAM events, and those that opening (Open), an update
//     (Update.Events) and closing (Close) publish.
//
// The tests run the specification's unit tests (testdata/spec/sdam) through
// these functions alone.
//
// What will come on top, in packages or files of their own: the monitors
// (a goroutine per server that checks it every heartbeatFrequencyMS, on a
// connection of its own, and feeds Apply and DecideCheckError), a pool per
// data-bearing server driven by the decisions (cleared, marked ready),
// server selection over a Description, and the topology object that holds
// the current Description under a lock and publishes the events.
package topology
