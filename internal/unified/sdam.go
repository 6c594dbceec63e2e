package unified

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/topology"
)

// topologyDescription is a TopologyDescription entity, which
// recordTopologyDescription saves.
type topologyDescription struct {
	desc topology.Description
}

// recordTopologyDescription saves the client's current TopologyDescription
// as an entity: the one the last TopologyDescriptionChanged event gave,
// once the client has delivered those emitted before the operation.
func (r *testRun) recordTopologyDescription(where string, args bson.Raw) error {
	a := arguments(where, args, []string{"client", "id"})
	clientID, id := a.str("client", true), a.str("id", true)
	if a.err != nil {
		return a.err
	}
	c, err := r.usableClient(where, clientID)
	if err != nil {
		return err
	}
	if err := c.flush(r.ctx, r.flushTimeout); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	d, _ := c.description()
	return r.entities.add(where, id, &topologyDescription{desc: d})
}

// assertTopologyType checks the type of a TopologyDescription entity.
func (r *testRun) assertTopologyType(where string, args bson.Raw) error {
	a := arguments(where, args, []string{"topologyDescription", "topologyType"})
	id, want := a.str("topologyDescription", true), a.str("topologyType", true)
	if a.err == nil && !slices.Contains(topologyTypes, want) {
		a.fail("unknown topologyType %q (known: %s)", want, strings.Join(topologyTypes, ", "))
	}
	if a.err != nil {
		return a.err
	}
	td, err := entity[*topologyDescription](r, where, id)
	if err != nil {
		return err
	}
	if got := td.desc.Type.String(); got != want {
		return fmt.Errorf("%s: %q is a %s topology, want %s: %s", where, id, got, want, td.desc.Summary())
	}
	return nil
}

// defaultPrimaryChangeTimeout is waitForPrimaryChange's timeout when the
// operation gives none, as the format says.
const defaultPrimaryChangeTimeout = 10 * time.Second

// waitForPrimaryChange waits until the client's topology has a primary
// other than the one of a recorded TopologyDescription (any primary, if it
// had none).
func (r *testRun) waitForPrimaryChange(where string, args bson.Raw) error {
	a := arguments(where, args, []string{"client", "priorTopologyDescription", "timeoutMS"})
	clientID, priorID := a.str("client", true), a.str("priorTopologyDescription", true)
	ms, hasTimeout := a.integer("timeoutMS", false)
	if a.err == nil && hasTimeout && ms <= 0 {
		a.fail("timeoutMS %d is not positive", ms)
	}
	if a.err != nil {
		return a.err
	}
	c, err := r.usableClient(where, clientID)
	if err != nil {
		return err
	}
	prior, err := entity[*topologyDescription](r, where, priorID)
	if err != nil {
		return err
	}
	timeout := defaultPrimaryChangeTimeout
	if hasTimeout {
		timeout = time.Duration(ms) * time.Millisecond
	}
	was := primaryOf(prior.desc)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		d, changed := c.description()
		if p := primaryOf(d); p != "" && p != was {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("%s: no primary other than %q within %v; the topology: %s", where, was, timeout, d.Summary())
		case <-r.ctx.Done():
			return fmt.Errorf("%s: %w", where, r.ctx.Err())
		}
	}
}

// primaryOf returns the address of d's primary, "" when it has none.
func primaryOf(d topology.Description) string {
	for _, sd := range d.Servers() {
		if sd.Type == topology.RSPrimary {
			return sd.Address
		}
	}
	return ""
}
