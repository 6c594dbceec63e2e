package topology

// The comparison of the monitoring folder's outcomes: the SDAM events
// published since the last phase, in order. The descriptions in events are
// compared by the fields the files give: a topology's type, set name and
// servers (as a set, by address); a server's address, type, hosts,
// passives and arbiters (as sets), primary and set name (absent meaning
// none).

import (
	"encoding/json"
	"fmt"
	"strings"
)

type (
	specEventFields struct {
		TopologyID string           `json:"topologyId"`
		Address    *string          `json:"address"`
		Previous   *json.RawMessage `json:"previousDescription"`
		New        *json.RawMessage `json:"newDescription"`
	}
	specEventTopology struct {
		TopologyType string            `json:"topologyType"`
		SetName      opt               `json:"setName"`
		Servers      []json.RawMessage `json:"servers"`
	}
	specEventServer struct {
		Address  string   `json:"address"`
		Type     string   `json:"type"`
		Hosts    []string `json:"hosts"`
		Passives []string `json:"passives"`
		Arbiters []string `json:"arbiters"`
		Primary  opt      `json:"primary"`
		SetName  opt      `json:"setName"`
	}
)

// specEventNames are the events the format names, with the fields each has:
// a field of one that it does not have fails the test.
var specEventNames = map[string]struct{ address, descriptions bool }{
	"topology_opening_event":             {},
	"topology_closed_event":              {},
	"topology_description_changed_event": {descriptions: true},
	"server_opening_event":               {address: true},
	"server_closed_event":                {address: true},
	"server_description_changed_event":   {address: true, descriptions: true},
}

func (r *specRun) checkEvents(phase string, want []map[string]json.RawMessage) {
	t := r.t
	for i, w := range want {
		for name := range w {
			if _, known := specEventNames[name]; !known {
				t.Fatalf("%s: event %d: unknown event %q", phase, i, name)
			}
		}
	}
	if len(r.events) != len(want) {
		t.Errorf("%s: %d events, want %d:\n got: %s\nwant: %s", phase, len(r.events), len(want), showEvents(r.events), showWant(want))
		return
	}
	for i, w := range want {
		if len(w) != 1 {
			t.Fatalf("%s: event %d has %d names, want 1", phase, i, len(w))
		}
		for name, raw := range w {
			r.checkEvent(fmt.Sprintf("%s: event %d (%s)", phase, i, name), r.events[i], name, raw)
		}
	}
}

func (r *specRun) checkEvent(where string, got Event, name string, raw json.RawMessage) {
	t := r.t
	shape, known := specEventNames[name]
	if !known {
		t.Fatalf("%s: unknown event %q", where, name)
	}
	var w specEventFields
	if err := decodeStrict(raw, &w); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if (w.Address != nil) != shape.address || (w.Previous != nil || w.New != nil) != shape.descriptions ||
		shape.descriptions && (w.Previous == nil || w.New == nil) {
		t.Fatalf("%s: fields %s do not fit the event", where, raw)
	}
	if w.TopologyID == "" {
		t.Fatalf("%s: no topologyId", where)
	}
	// The files' topologyId is a placeholder: every event must carry the
	// one topology's id.
	var id, addr string
	switch e := got.(type) {
	case *TopologyOpening:
		id = e.TopologyID.Hex()
		r.sameEvent(where, name, "topology_opening_event")
	case *TopologyClosed:
		id = e.TopologyID.Hex()
		r.sameEvent(where, name, "topology_closed_event")
	case *ServerOpening:
		id, addr = e.TopologyID.Hex(), e.Address
		r.sameEvent(where, name, "server_opening_event")
	case *ServerClosed:
		id, addr = e.TopologyID.Hex(), e.Address
		r.sameEvent(where, name, "server_closed_event")
	case *ServerDescriptionChanged:
		id, addr = e.TopologyID.Hex(), e.Address
		if r.sameEvent(where, name, "server_description_changed_event") {
			r.checkEventServer(where+": previousDescription", e.Previous, *w.Previous)
			r.checkEventServer(where+": newDescription", e.New, *w.New)
		}
	case *TopologyDescriptionChanged:
		id = e.TopologyID.Hex()
		if r.sameEvent(where, name, "topology_description_changed_event") {
			r.checkEventTopology(where+": previousDescription", e.Previous, *w.Previous)
			r.checkEventTopology(where+": newDescription", e.New, *w.New)
		}
	default:
		t.Errorf("%s: got %T", where, got)
		return
	}
	if id != r.id.Hex() {
		t.Errorf("%s: topologyId %s, want the topology's %s", where, id, r.id.Hex())
	}
	if w.Address != nil && addr != *w.Address {
		t.Errorf("%s: address %s, want %s", where, addr, *w.Address)
	}
}

func (r *specRun) sameEvent(where, want, got string) bool {
	if want != got {
		r.t.Errorf("%s: got %s", where, got)
		return false
	}
	return true
}

func (r *specRun) checkEventTopology(where string, d Description, raw json.RawMessage) {
	var w specEventTopology
	if err := decodeStrict(raw, &w); err != nil {
		r.t.Fatalf("%s: %v", where, err)
	}
	if d.Type.String() != w.TopologyType {
		r.t.Errorf("%s: topologyType %s, want %s", where, d.Type, w.TopologyType)
	}
	r.checkAbsentString(where+": setName", d.SetName, w.SetName)
	servers := d.Servers()
	if len(servers) != len(w.Servers) {
		r.t.Errorf("%s: %d servers, want %d", where, len(servers), len(w.Servers))
		return
	}
	for _, ws := range w.Servers {
		var addr struct {
			Address string `json:"address"`
		}
		if err := json.Unmarshal(ws, &addr); err != nil {
			r.t.Fatalf("%s: %v", where, err)
		}
		s, ok := d.Server(addr.Address)
		if !ok {
			r.t.Errorf("%s: no server %s", where, addr.Address)
			continue
		}
		r.checkEventServer(where+": server "+addr.Address, s, ws)
	}
}

func (r *specRun) checkEventServer(where string, s ServerDescription, raw json.RawMessage) {
	var w specEventServer
	if err := decodeStrict(raw, &w); err != nil {
		r.t.Fatalf("%s: %v", where, err)
	}
	if s.Address != w.Address {
		r.t.Errorf("%s: address %s, want %s", where, s.Address, w.Address)
	}
	if s.Type.String() != w.Type {
		r.t.Errorf("%s: type %s, want %s", where, s.Type, w.Type)
	}
	for _, l := range []struct {
		name      string
		got, want []string
	}{{"hosts", s.Hosts, w.Hosts}, {"passives", s.Passives, w.Passives}, {"arbiters", s.Arbiters, w.Arbiters}} {
		if !sameSet(l.got, l.want) {
			r.t.Errorf("%s: %s %v, want %v", where, l.name, l.got, l.want)
		}
	}
	r.checkAbsentString(where+": primary", s.Primary, w.Primary)
	r.checkAbsentString(where+": setName", s.SetName, w.SetName)
}

// checkAbsentString compares a string field of an event's description,
// absent or null meaning none.
func (r *specRun) checkAbsentString(where, got string, w opt) {
	if !w.set {
		w = opt{set: true, raw: json.RawMessage("null")}
	}
	r.checkString(where, got, w)
}

func showEvents(events []Event) string {
	var b strings.Builder
	for _, e := range events {
		switch e := e.(type) {
		case *ServerDescriptionChanged:
			fmt.Fprintf(&b, "[SDC %s %s->%s] ", e.Address, e.Previous.Type, e.New.Type)
		case *TopologyDescriptionChanged:
			fmt.Fprintf(&b, "[TDC %s->%s] ", e.Previous.Type, e.New.Type)
		case *ServerOpening:
			fmt.Fprintf(&b, "[ServerOpening %s] ", e.Address)
		case *ServerClosed:
			fmt.Fprintf(&b, "[ServerClosed %s] ", e.Address)
		default:
			fmt.Fprintf(&b, "[%T] ", e)
		}
	}
	return b.String()
}

func showWant(want []map[string]json.RawMessage) string {
	var names []string
	for _, w := range want {
		for n := range w {
			names = append(names, n)
		}
	}
	return strings.Join(names, " ")
}
