package topology

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Event is one of the SDAM monitoring events: *TopologyOpening,
// *TopologyDescriptionChanged, *TopologyClosed, *ServerOpening,
// *ServerDescriptionChanged, *ServerClosed, and the heartbeat events
// *ServerHeartbeatStarted, *ServerHeartbeatSucceeded and
// *ServerHeartbeatFailed.
type Event interface {
	sdamEvent()
}

// TopologyOpening is published when a topology is opened, before anything
// else.
type TopologyOpening struct {
	TopologyID bson.ObjectID
}

// TopologyDescriptionChanged is published when the topology's description
// changes (by Description.Equal).
type TopologyDescriptionChanged struct {
	TopologyID    bson.ObjectID
	Previous, New Description
}

// TopologyClosed is published when a topology is closed, after everything
// else.
type TopologyClosed struct {
	TopologyID bson.ObjectID
}

// ServerOpening is published when a server is added to the topology (its
// monitor starts).
type ServerOpening struct {
	TopologyID bson.ObjectID
	Address    string
}

// ServerDescriptionChanged is published when a check, or an error, changes
// a server's description (by ServerDescription.Equal).
type ServerDescriptionChanged struct {
	TopologyID    bson.ObjectID
	Address       string
	Previous, New ServerDescription
}

// ServerClosed is published when a server is removed from the topology
// (its monitor stops).
type ServerClosed struct {
	TopologyID bson.ObjectID
	Address    string
}

// ServerHeartbeatStarted is published by a monitor when it begins a check.
// Awaited is true for a check of the streaming protocol.
type ServerHeartbeatStarted struct {
	Address string
	Awaited bool
	// ConnectionID is the monitor's number for the connection the check
	// runs on (1 for its first; a check that makes a connection has the
	// number of the one it makes); ServerConnectionID is the server's id
	// for it, the connectionId of its hello, 0 until the server said it.
	ConnectionID, ServerConnectionID int64
}

// ServerHeartbeatSucceeded is published by a monitor when a check succeeds.
type ServerHeartbeatSucceeded struct {
	Address  string
	Duration time.Duration
	Reply    bson.Raw
	Awaited  bool
	// ConnectionID and ServerConnectionID are as in ServerHeartbeatStarted.
	ConnectionID, ServerConnectionID int64
}

// ServerHeartbeatFailed is published by a monitor when a check fails.
type ServerHeartbeatFailed struct {
	Address  string
	Duration time.Duration
	Failure  error
	Awaited  bool
	// ConnectionID and ServerConnectionID are as in ServerHeartbeatStarted.
	ConnectionID, ServerConnectionID int64
}

func (*TopologyOpening) sdamEvent()            {}
func (*TopologyDescriptionChanged) sdamEvent() {}
func (*TopologyClosed) sdamEvent()             {}
func (*ServerOpening) sdamEvent()              {}
func (*ServerDescriptionChanged) sdamEvent()   {}
func (*ServerClosed) sdamEvent()               {}
func (*ServerHeartbeatStarted) sdamEvent()     {}
func (*ServerHeartbeatSucceeded) sdamEvent()   {}
func (*ServerHeartbeatFailed) sdamEvent()      {}

// Open returns the initial Description of the topology id with settings s
// (see newDescription) and the events of its opening: TopologyOpening, a
// TopologyDescriptionChanged from an empty Unknown topology to the initial
// one, and a ServerOpening for each server, by address. A LoadBalanced
// topology's load balancer starts as an Unknown server that becomes the
// LoadBalancer at once, with its ServerDescriptionChanged and
// TopologyDescriptionChanged, as the load balancer specification requires.
func openEvents(id bson.ObjectID, s Settings) (Description, []Event, error) {
	d, err := newDescription(s)
	if err != nil {
		return Description{}, nil, err
	}
	first := d
	if d.Type == LoadBalanced {
		for c := d.servers.Cursor(); c.Next(); {
			first.servers = first.servers.Set(c.Key(), unknownServer(c.Key(), nil))
		}
	}
	events := []Event{
		&TopologyOpening{TopologyID: id},
		&TopologyDescriptionChanged{TopologyID: id, New: first},
	}
	for _, sd := range first.Servers() {
		events = append(events, &ServerOpening{TopologyID: id, Address: sd.Address})
	}
	if d.Type == LoadBalanced {
		for _, sd := range d.Servers() {
			prev, _ := first.Server(sd.Address)
			events = append(events, &ServerDescriptionChanged{TopologyID: id, Address: sd.Address, Previous: prev, New: sd})
		}
		events = append(events, &TopologyDescriptionChanged{TopologyID: id, Previous: first, New: d})
	}
	return d, events, nil
}

// Events returns the events that the update u of the topology id publishes,
// in order: a ServerDescriptionChanged for the server whose description was
// applied, if it changed it; a ServerClosed for each server removed and a
// ServerOpening for each one added; and a TopologyDescriptionChanged if the
// topology's description changed. Equal descriptions publish nothing: a
// check that finds the server as it was is silent. Other servers whose
// descriptions the update changed in passing (an old primary marked
// Unknown, a PossiblePrimary hint) have no ServerDescriptionChanged of
// their own; the TopologyDescriptionChanged shows them. An update that was
// not applied publishes nothing.
func (u update) events(id bson.ObjectID) []Event {
	if !u.Applied {
		return nil
	}
	var events []Event
	if !u.PreviousServer.Equal(u.Server) {
		events = append(events, &ServerDescriptionChanged{TopologyID: id, Address: u.Address, Previous: u.PreviousServer, New: u.Server})
	}
	for _, a := range u.Removed {
		events = append(events, &ServerClosed{TopologyID: id, Address: a})
	}
	for _, a := range u.Added {
		events = append(events, &ServerOpening{TopologyID: id, Address: a})
	}
	if u.Changed {
		events = append(events, &TopologyDescriptionChanged{TopologyID: id, Previous: u.Previous, New: u.Description})
	}
	return events
}

// Close returns the Description of the topology id once closed, an Unknown
// topology without servers, and the events of its closing: a ServerClosed
// for each server, by address, a TopologyDescriptionChanged from d to the
// closed Description, and TopologyClosed.
func closeEvents(id bson.ObjectID, d Description) (Description, []Event) {
	var events []Event
	for _, sd := range d.Servers() {
		events = append(events, &ServerClosed{TopologyID: id, Address: sd.Address})
	}
	closed := Description{}
	if !d.Equal(closed) {
		events = append(events, &TopologyDescriptionChanged{TopologyID: id, Previous: d, New: closed})
	}
	events = append(events, &TopologyClosed{TopologyID: id})
	return closed, events
}
