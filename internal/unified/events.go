package unified

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// eventKind is an event type of the format (observeEvents, expectedEvent).
type eventKind struct {
	// monitor is the eventType of expectEvents the event belongs to:
	// "command", "cmap" or "sdam".
	monitor string
	// pool is the pool event of a cmap event.
	pool pool.EventType
	// command is the command monitoring event of a command event.
	command mongopool.CommandEventType
	// fields are the assertions an expectedEvent of this type may make.
	fields []string
}

// Assertions that the command monitoring events share.
var commandFields = []string{"commandName", "databaseName", "hasServiceId", "hasServerConnectionId"}

// eventKinds are the event types of the format, by the names observeEvents
// and expectedEvent give them.
var eventKinds = map[string]eventKind{
	"poolCreatedEvent":               {monitor: "cmap", pool: pool.PoolCreated},
	"poolReadyEvent":                 {monitor: "cmap", pool: pool.PoolReady},
	"poolClearedEvent":               {monitor: "cmap", pool: pool.PoolCleared, fields: []string{"hasServiceId", "interruptInUseConnections"}},
	"poolClosedEvent":                {monitor: "cmap", pool: pool.PoolClosed},
	"connectionCreatedEvent":         {monitor: "cmap", pool: pool.ConnectionCreated},
	"connectionReadyEvent":           {monitor: "cmap", pool: pool.ConnectionReady},
	"connectionClosedEvent":          {monitor: "cmap", pool: pool.ConnectionClosed, fields: []string{"reason"}},
	"connectionCheckOutStartedEvent": {monitor: "cmap", pool: pool.ConnectionCheckOutStarted},
	"connectionCheckOutFailedEvent":  {monitor: "cmap", pool: pool.ConnectionCheckOutFailed, fields: []string{"reason"}},
	"connectionCheckedOutEvent":      {monitor: "cmap", pool: pool.ConnectionCheckedOut},
	"connectionCheckedInEvent":       {monitor: "cmap", pool: pool.ConnectionCheckedIn},

	"commandStartedEvent":   {monitor: "command", command: mongopool.CommandStarted, fields: append([]string{"command"}, commandFields...)},
	"commandSucceededEvent": {monitor: "command", command: mongopool.CommandSucceeded, fields: append([]string{"reply"}, commandFields...)},
	"commandFailedEvent":    {monitor: "command", command: mongopool.CommandFailed, fields: commandFields},

	"serverDescriptionChangedEvent":   {monitor: "sdam", fields: []string{"previousDescription", "newDescription"}},
	"serverHeartbeatStartedEvent":     {monitor: "sdam", fields: []string{"awaited"}},
	"serverHeartbeatSucceededEvent":   {monitor: "sdam", fields: []string{"awaited"}},
	"serverHeartbeatFailedEvent":      {monitor: "sdam", fields: []string{"awaited"}},
	"topologyDescriptionChangedEvent": {monitor: "sdam", fields: []string{"previousDescription", "newDescription"}},
	"topologyOpeningEvent":            {monitor: "sdam"},
	"topologyClosedEvent":             {monitor: "sdam"},
}

// monitors are the eventType values of expectedEventsForClient.
var monitors = []string{"command", "cmap", "sdam"}

// poolEventName returns the format's name of a pool event, "" for one the
// format has not.
func poolEventName(t pool.EventType) string {
	for name, k := range eventKinds {
		if k.monitor == "cmap" && k.pool == t {
			return name
		}
	}
	return ""
}

// commandEventName returns the format's name of a command monitoring event.
func commandEventName(t mongopool.CommandEventType) string {
	switch t {
	case mongopool.CommandStarted:
		return "commandStartedEvent"
	case mongopool.CommandSucceeded:
		return "commandSucceededEvent"
	}
	return "commandFailedEvent"
}

// sdamEventName returns the format's name of an SDAM event, "" for one the
// format has not (ServerOpening, ServerClosed).
func sdamEventName(e topology.Event) string {
	switch e.(type) {
	case *topology.TopologyOpening:
		return "topologyOpeningEvent"
	case *topology.TopologyDescriptionChanged:
		return "topologyDescriptionChangedEvent"
	case *topology.TopologyClosed:
		return "topologyClosedEvent"
	case *topology.ServerDescriptionChanged:
		return "serverDescriptionChangedEvent"
	case *topology.ServerHeartbeatStarted:
		return "serverHeartbeatStartedEvent"
	case *topology.ServerHeartbeatSucceeded:
		return "serverHeartbeatSucceededEvent"
	case *topology.ServerHeartbeatFailed:
		return "serverHeartbeatFailedEvent"
	}
	return ""
}

// commandEvent is a command monitoring event as the runner keeps it (its
// command and reply are the event's own copies).
type commandEvent struct {
	typ            mongopool.CommandEventType
	name, db       string
	command, reply bson.Raw
	failure        error
	duration       time.Duration
	address        string
	connID         int64
	serverConnID   int64
	serviceID      *bson.ObjectID
	opID           int64
}

// observedEvent is an event a client's listener saw: one of pool, sdam and
// cmd, by its kind's monitor.
type observedEvent struct {
	name string // as the format names it: "poolClearedEvent"
	pool pool.Event
	sdam topology.Event
	cmd  *commandEvent
}

// eventLog is what a client observes of the event types its observeEvents
// lists, until stop.
type eventLog struct {
	observe []string
	mu      sync.Mutex
	stopped bool
	events  []observedEvent
	grew    chan struct{} // closed, and replaced, when events grows
}

// newEventLog reads an observeEvents list; one the runner cannot read is an
// error.
func newEventLog(where string, names []bson.RawValue) (*eventLog, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: observeEvents is empty (it needs one event type or more)", where)
	}
	l := &eventLog{grew: make(chan struct{})}
	for i, v := range names {
		name, ok := v.StringValueOK()
		if !ok {
			return nil, fmt.Errorf("%s: observeEvents[%d]: want a string, got %s", where, i, show(v))
		}
		if _, ok := eventKinds[name]; !ok {
			return nil, fmt.Errorf("%s: observeEvents[%d]: unknown event type %q", where, i, name)
		}
		l.observe = append(l.observe, name)
	}
	return l, nil
}

func (l *eventLog) observes(name string) bool { return slices.Contains(l.observe, name) }

// observesMonitor reports whether the log observes events of a monitor.
func (l *eventLog) observesMonitor(monitor string) bool {
	return slices.ContainsFunc(l.observe, func(n string) bool { return eventKinds[n].monitor == monitor })
}

// handlePool is the pools' event handler.
func (l *eventLog) handlePool(e pool.Event) {
	l.add(observedEvent{name: poolEventName(e.Type), pool: e})
}

// handleTopology receives the SDAM events.
func (l *eventLog) handleTopology(e topology.Event) {
	l.add(observedEvent{name: sdamEventName(e), sdam: e})
}

// handleCommand receives the command monitoring events.
func (l *eventLog) handleCommand(e *commandEvent) {
	l.add(observedEvent{name: commandEventName(e.typ), cmd: e})
}

// add keeps e if its type is observed.
func (l *eventLog) add(e observedEvent) {
	if e.name == "" || !l.observes(e.name) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.events = append(l.events, e)
	close(l.grew)
	l.grew = make(chan struct{})
}

// stop disables the listener, as the format does once the operations end.
func (l *eventLog) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// of returns the events observed so far that belong to a monitor.
func (l *eventLog) of(monitor string) []observedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []observedEvent
	for _, e := range l.events {
		if eventKinds[e.name].monitor == monitor {
			out = append(out, e)
		}
	}
	return out
}

// count returns how many observed events match e, and a channel closed when
// the next event comes.
func (l *eventLog) count(e *expectedEvent) (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.events {
		if e.mismatch(o) == "" {
			n++
		}
	}
	return n, l.grew
}

// expectedEvent is an expectedEvent of the format, read: the assertions it
// makes, nil (or empty) when it does not make them.
type expectedEvent struct {
	name string
	kind eventKind
	// cmap
	hasServiceID *bool
	interrupt    *bool
	reason       *string
	// command
	command, reply            bson.Raw
	commandName, databaseName *string
	hasServerConnectionID     *bool
	// sdam
	awaited           *bool
	previous, current *string // the type of previousDescription, newDescription
	// m matches the command and the reply.
	m *matcher
}

// serverTypes and topologyTypes are the specification's names of the types
// a description assertion may name.
var (
	serverTypes = []string{"Standalone", "Mongos", "PossiblePrimary", "RSPrimary", "RSSecondary", "RSArbiter",
		"RSOther", "RSGhost", "LoadBalancer", "Unknown"}
	topologyTypes = []string{"Single", "ReplicaSetNoPrimary", "ReplicaSetWithPrimary", "Sharded", "LoadBalanced", "Unknown"}
)

// parseEvent reads an expectedEvent; monitor, unless "", is the eventType
// its list has. m matches its command and reply.
func parseEvent(m *matcher, where string, v bson.RawValue, monitor string) (*expectedEvent, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, fmt.Errorf("%s: want a document, got %s", where, show(v))
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(elems) != 1 {
		return nil, fmt.Errorf("%s: an expectedEvent has exactly one key, the event type; got %s", where, show(v))
	}
	name := elems[0].Key()
	k, ok := eventKinds[name]
	if !ok {
		return nil, fmt.Errorf("%s: unknown event type %q", where, name)
	}
	if monitor != "" && k.monitor != monitor {
		return nil, fmt.Errorf("%s: %s is not a %s event (it is a %s event)", where, name, monitor, k.monitor)
	}
	e := &expectedEvent{name: name, kind: k, m: m}
	o := readObject(where+"."+name, elems[0].Value(), k.fields)
	optBool := func(key string) *bool {
		if v, ok := o.boolean(key); ok {
			return &v
		}
		return nil
	}
	optStr := func(key string) *string {
		if o.has(key) {
			s := o.str(key, false)
			return &s
		}
		return nil
	}
	e.hasServiceID = optBool("hasServiceId")
	e.interrupt = optBool("interruptInUseConnections")
	e.reason = optStr("reason")
	e.command = o.document("command", false)
	e.reply = o.document("reply", false)
	e.commandName = optStr("commandName")
	e.databaseName = optStr("databaseName")
	e.hasServerConnectionID = optBool("hasServerConnectionId")
	e.awaited = optBool("awaited")
	types := serverTypes
	if name == "topologyDescriptionChangedEvent" {
		types = topologyTypes
	}
	e.previous = descriptionType(o, "previousDescription", types)
	e.current = descriptionType(o, "newDescription", types)
	return e, o.err
}

// descriptionType reads the description assertion key of o, {type: name},
// whose name must be one of types; nil when o has none.
func descriptionType(o *object, key string, types []string) *string {
	v, ok := o.value(key, false)
	if !ok {
		return nil
	}
	d := readObject(o.where+"."+key, v, []string{"type"})
	var t *string
	if d.has("type") {
		s := d.str("type", false)
		if d.err == nil && !slices.Contains(types, s) {
			d.fail("unknown type %q (known: %s)", s, strings.Join(types, ", "))
		}
		t = &s
	}
	if d.err != nil && o.err == nil {
		o.err = d.err
	}
	return t
}

// mismatch says how an observed event differs from e, "" if it matches.
func (e *expectedEvent) mismatch(o observedEvent) string {
	if o.name != e.name {
		return fmt.Sprintf("got %s, want %s", o.name, e.name)
	}
	switch e.kind.monitor {
	case "cmap":
		return e.poolMismatch(o.pool)
	case "command":
		return e.commandMismatch(o.cmd)
	}
	return e.sdamMismatch(o.sdam)
}

func (e *expectedEvent) poolMismatch(p pool.Event) string {
	if e.hasServiceID != nil && *e.hasServiceID == p.ServiceID.IsZero() {
		if *e.hasServiceID {
			return e.name + ": no serviceId, want one"
		}
		return fmt.Sprintf("%s: serviceId %s, want none", e.name, p.ServiceID)
	}
	if e.interrupt != nil && *e.interrupt != p.Interrupt {
		return fmt.Sprintf("%s: interruptInUseConnections %v, want %v", e.name, p.Interrupt, *e.interrupt)
	}
	if e.reason != nil && *e.reason != p.Reason {
		return fmt.Sprintf("%s: reason %q, want %q", e.name, p.Reason, *e.reason)
	}
	return ""
}

func (e *expectedEvent) commandMismatch(c *commandEvent) string {
	if e.commandName != nil && *e.commandName != c.name {
		return fmt.Sprintf("%s: commandName %q, want %q", e.name, c.name, *e.commandName)
	}
	if e.databaseName != nil && *e.databaseName != c.db {
		return fmt.Sprintf("%s: databaseName %q, want %q", e.name, c.db, *e.databaseName)
	}
	if e.hasServiceID != nil {
		has := c.serviceID != nil && !c.serviceID.IsZero()
		if has != *e.hasServiceID {
			return fmt.Sprintf("%s: serviceId %v, want one: %v", e.name, c.serviceID, *e.hasServiceID)
		}
	}
	if e.hasServerConnectionID != nil && (c.serverConnID > 0) != *e.hasServerConnectionID {
		return fmt.Sprintf("%s: serverConnectionId %d, want one: %v", e.name, c.serverConnID, *e.hasServerConnectionID)
	}
	if e.command != nil {
		if err := e.m.match(docValue(e.command), docValue(c.command), true); err != nil {
			return fmt.Sprintf("%s: command: %v", e.name, err)
		}
	}
	if e.reply != nil {
		if err := e.m.match(docValue(e.reply), docValue(c.reply), true); err != nil {
			return fmt.Sprintf("%s: reply: %v", e.name, err)
		}
	}
	return ""
}

func (e *expectedEvent) sdamMismatch(ev topology.Event) string {
	if e.awaited != nil {
		var awaited bool
		switch h := ev.(type) {
		case *topology.ServerHeartbeatStarted:
			awaited = h.Awaited
		case *topology.ServerHeartbeatSucceeded:
			awaited = h.Awaited
		case *topology.ServerHeartbeatFailed:
			awaited = h.Awaited
		}
		if awaited != *e.awaited {
			return fmt.Sprintf("%s: awaited %v, want %v", e.name, awaited, *e.awaited)
		}
	}
	prev, cur := descriptionTypes(ev)
	if e.previous != nil && *e.previous != prev {
		return fmt.Sprintf("%s: previousDescription of type %s, want %s", e.name, prev, *e.previous)
	}
	if e.current != nil && *e.current != cur {
		return fmt.Sprintf("%s: newDescription of type %s, want %s", e.name, cur, *e.current)
	}
	return ""
}

// descriptionTypes returns the types of a description change's previous and
// new descriptions, "" for other events.
func descriptionTypes(ev topology.Event) (prev, cur string) {
	switch d := ev.(type) {
	case *topology.ServerDescriptionChanged:
		return d.Previous.Type.String(), d.New.Type.String()
	case *topology.TopologyDescriptionChanged:
		return d.Previous.Type.String(), d.New.Type.String()
	}
	return "", ""
}

// eventsCheck is one expectedEventsForClient, read.
type eventsCheck struct {
	where   string
	client  string
	monitor string
	events  []*expectedEvent
	extraOK bool
}

// parseExpectEvents reads a test's expectEvents before it runs: what the
// runner cannot read fails the test at once.
func parseExpectEvents(m *matcher, where string, list []bson.RawValue) ([]eventsCheck, error) {
	var checks []eventsCheck
	for i, v := range list {
		w := fmt.Sprintf("%s[%d]", where, i)
		o := readObject(w, v, []string{"client", "eventType", "events", "ignoreExtraEvents"})
		c := eventsCheck{where: w, client: o.str("client", true), monitor: "command"}
		if o.has("eventType") {
			c.monitor = o.str("eventType", false)
		}
		events := o.array("events", true)
		c.extraOK, _ = o.boolean("ignoreExtraEvents")
		if o.err != nil {
			return nil, o.err
		}
		if !slices.Contains(monitors, c.monitor) {
			return nil, fmt.Errorf("%s: unknown eventType %q (known: %s)", w, c.monitor, strings.Join(monitors, ", "))
		}
		for j, ev := range events {
			e, err := parseEvent(m, fmt.Sprintf("%s.events[%d]", w, j), ev, c.monitor)
			if err != nil {
				return nil, err
			}
			c.events = append(c.events, e)
		}
		checks = append(checks, c)
	}
	return checks, nil
}

// checkEvents checks the events a client observed against one
// expectedEventsForClient: the same events in the same order, with more at
// the end only if ignoreExtraEvents.
func (r *testRun) checkEvents(c eventsCheck) error {
	cl, err := entity[*client](r, c.where, c.client)
	if err != nil {
		return err
	}
	if cl.events == nil {
		return fmt.Errorf("%s: the client %q observes no events", c.where, c.client)
	}
	got := cl.events.of(c.monitor)
	for i, e := range c.events {
		if i >= len(got) {
			return fmt.Errorf("%s: %d events, want %d; missing events[%d] %s\ngot:\n%s", c.where, len(got), len(c.events), i, e.name, dumpEvents(got))
		}
		if m := e.mismatch(got[i]); m != "" {
			return fmt.Errorf("%s: events[%d] does not match the event [%d]: %s\ngot:\n%s", c.where, i, i, m, dumpEvents(got))
		}
	}
	if !c.extraOK && len(got) > len(c.events) {
		return fmt.Errorf("%s: %d events, want %d; the extra ones:\n%s", c.where, len(got), len(c.events), dumpEvents(got[len(c.events):]))
	}
	return nil
}

// dumpEvents describes events for a failure's message, with the fields
// the assertions read.
func dumpEvents(events []observedEvent) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "  [%d] %s", i, e.name)
		switch {
		case e.cmd != nil:
			fmt.Fprintf(&b, " %s on %s (%s, connection %d)", e.cmd.name, e.cmd.db, e.cmd.address, e.cmd.connID)
			if e.cmd.serviceID != nil {
				fmt.Fprintf(&b, " serviceId=%s", e.cmd.serviceID.Hex())
			}
			if e.cmd.failure != nil {
				fmt.Fprintf(&b, ": %v", e.cmd.failure)
			}
		case e.sdam != nil:
			if prev, cur := descriptionTypes(e.sdam); prev != "" {
				fmt.Fprintf(&b, " %s -> %s", prev, cur)
			}
			switch h := e.sdam.(type) {
			case *topology.ServerDescriptionChanged:
				fmt.Fprintf(&b, " %s", h.Address)
			case *topology.ServerHeartbeatStarted:
				fmt.Fprintf(&b, " %s awaited=%v", h.Address, h.Awaited)
			case *topology.ServerHeartbeatSucceeded:
				fmt.Fprintf(&b, " %s awaited=%v", h.Address, h.Awaited)
			case *topology.ServerHeartbeatFailed:
				fmt.Fprintf(&b, " %s awaited=%v: %v", h.Address, h.Awaited, h.Failure)
			}
		default:
			if e.pool.Reason != "" {
				fmt.Fprintf(&b, " reason=%s", e.pool.Reason)
			}
			if e.pool.Type == pool.PoolCleared {
				fmt.Fprintf(&b, " interruptInUseConnections=%v", e.pool.Interrupt)
				if !e.pool.ServiceID.IsZero() {
					fmt.Fprintf(&b, " serviceId=%s", e.pool.ServiceID)
				}
			}
			if e.pool.Address != "" {
				fmt.Fprintf(&b, " %s", e.pool.Address)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// eventArgs reads the arguments waitForEvent and assertEventCount share:
// the client, which must observe the event, the event and the count.
func (r *testRun) eventArgs(where string, args bson.Raw) (*client, *expectedEvent, int, error) {
	a := readObject(where+" arguments", docValue(args), []string{"client", "event", "count"})
	id := a.str("client", true)
	ev, _ := a.value("event", true)
	count, _ := a.integer("count", true)
	if a.err != nil {
		return nil, nil, 0, a.err
	}
	if count < 0 {
		return nil, nil, 0, fmt.Errorf("%s: count %d is negative", where, count)
	}
	e, err := parseEvent(r.match, where+" event", ev, "")
	if err != nil {
		return nil, nil, 0, err
	}
	if err := r.canObserve(e); err != nil {
		return nil, nil, 0, err
	}
	c, err := r.usableClient(where, id)
	if err != nil {
		return nil, nil, 0, err
	}
	if c.events == nil {
		return nil, nil, 0, fmt.Errorf("%s: the client %q observes no events", where, id)
	}
	if !c.events.observes(e.name) {
		return nil, nil, 0, fmt.Errorf("%s: the client %q does not observe %s (observeEvents: %s)", where, id, e.name, strings.Join(c.events.observe, ", "))
	}
	return c, e, int(count), nil
}

// waitForEvent waits until the client has observed count matching events,
// those before the wait included, for at most r.waitTimeout. The events
// come as the Client delivers them: the wait needs no flush.
func (r *testRun) waitForEvent(where string, args bson.Raw) error {
	c, e, want, err := r.eventArgs(where, args)
	if err != nil {
		return err
	}
	l := c.events
	timer := time.NewTimer(r.waitTimeout)
	defer timer.Stop()
	for {
		n, grew := l.count(e)
		if n >= want {
			return nil
		}
		select {
		case <-grew:
		case <-timer.C:
			// An event that came as the time ran out counts: select
			// picks either of two channels ready together.
			if n, _ = l.count(e); n >= want {
				return nil
			}
			return fmt.Errorf("%s: %d matching events after %s, want %d; the observed events:\n%s",
				where, n, r.waitTimeout, want, dumpEvents(l.of(e.kind.monitor)))
		case <-r.ctx.Done():
			return fmt.Errorf("%s: %d matching events, want %d: %w", where, n, want, r.ctx.Err())
		}
	}
}

// assertEventCount checks that the client has observed exactly count
// matching events so far: those it emitted before the assertion, which a
// flush has it deliver first.
func (r *testRun) assertEventCount(where string, args bson.Raw) error {
	c, e, want, err := r.eventArgs(where, args)
	if err != nil {
		return err
	}
	if err := c.flush(r.ctx, r.flushTimeout); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	l := c.events
	if n, _ := l.count(e); n != want {
		return fmt.Errorf("%s: %d matching events, want %d; the observed events:\n%s", where, n, want, dumpEvents(l.of(e.kind.monitor)))
	}
	return nil
}

// eventList is an entity of storeEventsAsEntities: documents of the events
// of the types it lists, in the order the client emitted them, until stop.
type eventList struct {
	id      string
	names   map[string]string // the documents' names, by the format's names
	mu      sync.Mutex
	stopped bool
	docs    []bson.Raw
}

// newEventLists reads a storeEventsAsEntities list.
func newEventLists(where string, specs []bson.RawValue) ([]*eventList, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s: storeEventsAsEntities is empty (it needs one entry or more)", where)
	}
	var lists []*eventList
	for i, v := range specs {
		w := fmt.Sprintf("%s.storeEventsAsEntities[%d]", where, i)
		o := readObject(w, v, []string{"id", "events"})
		l := &eventList{id: o.str("id", true), names: map[string]string{}}
		names := o.strings("events")
		if o.err == nil && len(names) == 0 {
			o.fail("missing or empty events (it needs one event type or more)")
		}
		if o.err != nil {
			return nil, o.err
		}
		for j, name := range names {
			// The specifications' names: "PoolCreatedEvent" is the
			// poolCreatedEvent of observeEvents.
			var format string
			ok := name != "" && 'A' <= name[0] && name[0] <= 'Z'
			if ok {
				format = strings.ToLower(name[:1]) + name[1:]
				_, ok = eventKinds[format]
			}
			if !ok {
				return nil, fmt.Errorf("%s.events[%d]: unknown event type %q", w, j, name)
			}
			l.names[format] = name
		}
		lists = append(lists, l)
	}
	return lists, nil
}

// storesMonitor reports whether the list stores events of a monitor.
func (l *eventList) storesMonitor(monitor string) bool {
	for name := range l.names {
		if eventKinds[name].monitor == monitor {
			return true
		}
	}
	return false
}

// handlePool stores a pool event, with the fields of the CMAP
// specification.
func (l *eventList) handlePool(e pool.Event) {
	name, ok := l.names[poolEventName(e.Type)]
	if !ok {
		return
	}
	d := eventDoc(name, e.Address)
	switch e.Type {
	case pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed, pool.ConnectionCheckedOut, pool.ConnectionCheckedIn:
		d = append(d, bson.E{Key: "connectionId", Value: e.ConnectionID})
	}
	if e.Duration > 0 {
		d = append(d, durationMS(e.Duration))
	}
	if e.Reason != "" {
		d = append(d, bson.E{Key: "reason", Value: e.Reason})
	}
	switch e.Type {
	case pool.PoolCleared:
		if !e.ServiceID.IsZero() {
			d = append(d, bson.E{Key: "serviceId", Value: bson.ObjectID(e.ServiceID)})
		}
		d = append(d, bson.E{Key: "interruptInUseConnections", Value: e.Interrupt})
	case pool.PoolCreated:
		keys := make([]string, 0, len(e.Options))
		for k := range e.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		opts := bson.D{}
		for _, k := range keys {
			opts = append(opts, bson.E{Key: k, Value: e.Options[k]})
		}
		d = append(d, bson.E{Key: "options", Value: opts})
	}
	l.store(d)
}

// handleTopology stores an SDAM event, with the fields of the SDAM
// specification the format can hold: the server's address, awaited,
// durationMS and failure of the heartbeats, the types of the descriptions
// of a change.
func (l *eventList) handleTopology(e topology.Event) {
	name, ok := l.names[sdamEventName(e)]
	if !ok {
		return
	}
	var d bson.D
	switch h := e.(type) {
	case *topology.ServerHeartbeatStarted:
		d = append(eventDoc(name, h.Address), bson.E{Key: "awaited", Value: h.Awaited})
	case *topology.ServerHeartbeatSucceeded:
		d = append(eventDoc(name, h.Address), bson.E{Key: "awaited", Value: h.Awaited}, durationMS(h.Duration))
	case *topology.ServerHeartbeatFailed:
		d = append(eventDoc(name, h.Address), bson.E{Key: "awaited", Value: h.Awaited}, durationMS(h.Duration),
			bson.E{Key: "failure", Value: errorText(h.Failure)})
	case *topology.ServerDescriptionChanged:
		d = eventDoc(name, h.Address)
	default:
		d = eventDoc(name, "")
	}
	if prev, cur := descriptionTypes(e); prev != "" {
		d = append(d, bson.E{Key: "previousDescription", Value: bson.D{{Key: "type", Value: prev}}},
			bson.E{Key: "newDescription", Value: bson.D{{Key: "type", Value: cur}}})
	}
	l.store(d)
}

// handleCommand stores a command monitoring event, with the fields of the
// command monitoring specification but the command and the reply.
func (l *eventList) handleCommand(e *commandEvent) {
	name, ok := l.names[commandEventName(e.typ)]
	if !ok {
		return
	}
	d := append(eventDoc(name, e.address),
		bson.E{Key: "commandName", Value: e.name}, bson.E{Key: "databaseName", Value: e.db},
		bson.E{Key: "connectionId", Value: e.connID})
	if e.serverConnID > 0 {
		d = append(d, bson.E{Key: "serverConnectionId", Value: e.serverConnID})
	}
	if e.serviceID != nil {
		d = append(d, bson.E{Key: "serviceId", Value: *e.serviceID})
	}
	if e.typ != mongopool.CommandStarted {
		d = append(d, durationMS(e.duration))
	}
	if e.failure != nil {
		d = append(d, bson.E{Key: "failure", Value: errorText(e.failure)})
	}
	l.store(d)
}

// eventDoc begins the document of an event: its name, when it was observed
// (in seconds since the Unix epoch) and the server's address, if any.
func eventDoc(name, address string) bson.D {
	d := bson.D{
		{Key: "name", Value: name},
		{Key: "observedAt", Value: float64(time.Now().UnixNano()) / 1e9},
	}
	if address != "" {
		d = append(d, bson.E{Key: "address", Value: address})
	}
	return d
}

// durationMS is a duration as the documents give it: BSON has no duration,
// so milliseconds, as the field's name says.
func durationMS(d time.Duration) bson.E {
	return bson.E{Key: "durationMS", Value: float64(d) / float64(time.Millisecond)}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// store keeps an event's document, unless the list is stopped.
func (l *eventList) store(d bson.D) {
	doc, err := bson.Marshal(d)
	if err != nil {
		return // cannot happen: every value above has a BSON type
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.docs = append(l.docs, doc)
	}
}

// stop disables the listener.
func (l *eventList) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

// documents returns the stored events.
func (l *eventList) documents() []bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.docs)
}
