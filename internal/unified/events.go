package unified

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/pool"
)

// eventKind is an event type of the format (observeEvents, expectedEvent).
type eventKind struct {
	// monitor is the eventType of expectEvents the event belongs to:
	// "command", "cmap" or "sdam".
	monitor string
	// pool is the pool event that is this event, 0 for the events the
	// clients do not emit yet: a test that needs one of them is skipped.
	pool pool.EventType
	// fields are the assertions an expectedEvent of this type may make.
	fields []string
}

// eventKinds are the event types of the format, by the names observeEvents
// and expectedEvent give them. The command monitoring and SDAM events come
// with the topology layer; each is one line here once a client emits it.
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

	"commandStartedEvent":   {monitor: "command"},
	"commandSucceededEvent": {monitor: "command"},
	"commandFailedEvent":    {monitor: "command"},

	"serverDescriptionChangedEvent":   {monitor: "sdam"},
	"serverHeartbeatStartedEvent":     {monitor: "sdam"},
	"serverHeartbeatSucceededEvent":   {monitor: "sdam"},
	"serverHeartbeatFailedEvent":      {monitor: "sdam"},
	"topologyDescriptionChangedEvent": {monitor: "sdam"},
	"topologyOpeningEvent":            {monitor: "sdam"},
	"topologyClosedEvent":             {monitor: "sdam"},
}

// monitors are the eventType values of expectedEventsForClient.
var monitors = []string{"command", "cmap", "sdam"}

// eventName returns the format's name of a pool event.
func eventName(t pool.EventType) string {
	for name, k := range eventKinds {
		if k.pool == t {
			return name
		}
	}
	return t.String()
}

// notEmitted is the reason to skip a test that needs an event no client
// emits yet.
func notEmitted(name string) string {
	return fmt.Sprintf("the client emits no %s yet", name)
}

// observedEvent is an event a client's listener saw.
type observedEvent struct {
	name string // as the format names it: "poolClearedEvent"
	ev   pool.Event
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

// newEventLog reads an observeEvents list. It returns the log, and the
// reason to skip the test if the list names events no client emits yet; a
// list the runner cannot read is an error.
func newEventLog(where string, names []bson.RawValue) (*eventLog, string, error) {
	if len(names) == 0 {
		return nil, "", fmt.Errorf("%s: observeEvents is empty (it needs one event type or more)", where)
	}
	l := &eventLog{grew: make(chan struct{})}
	var missing []string
	for i, v := range names {
		name, ok := v.StringValueOK()
		if !ok {
			return nil, "", fmt.Errorf("%s: observeEvents[%d]: want a string, got %s", where, i, show(v))
		}
		k, ok := eventKinds[name]
		if !ok {
			return nil, "", fmt.Errorf("%s: observeEvents[%d]: unknown event type %q", where, i, name)
		}
		if k.pool == 0 {
			missing = append(missing, name)
		}
		l.observe = append(l.observe, name)
	}
	if len(missing) > 0 {
		return l, notEmitted(strings.Join(missing, ", ")), nil
	}
	return l, "", nil
}

func (l *eventLog) observes(name string) bool { return slices.Contains(l.observe, name) }

// handle is the pool's event handler: it keeps the observed events.
func (l *eventLog) handle(e pool.Event) {
	name := eventName(e.Type)
	if !l.observes(name) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.events = append(l.events, observedEvent{name: name, ev: e})
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

// expectedEvent is an expectedEvent of the format, read.
type expectedEvent struct {
	name         string
	kind         eventKind
	hasServiceID *bool
	interrupt    *bool
	reason       *string
}

// parseEvent reads an expectedEvent; monitor, unless "", is the eventType
// its list has. It returns the reason to skip the test if no client emits
// the event yet.
func parseEvent(where string, v bson.RawValue, monitor string) (*expectedEvent, string, error) {
	doc, ok := v.DocumentOK()
	if !ok {
		return nil, "", fmt.Errorf("%s: want a document, got %s", where, show(v))
	}
	elems, err := doc.Elements()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", where, err)
	}
	if len(elems) != 1 {
		return nil, "", fmt.Errorf("%s: an expectedEvent has exactly one key, the event type; got %s", where, show(v))
	}
	name := elems[0].Key()
	k, ok := eventKinds[name]
	if !ok {
		return nil, "", fmt.Errorf("%s: unknown event type %q", where, name)
	}
	if monitor != "" && k.monitor != monitor {
		return nil, "", fmt.Errorf("%s: %s is not a %s event (it is a %s event)", where, name, monitor, k.monitor)
	}
	e := &expectedEvent{name: name, kind: k}
	if k.pool == 0 {
		return e, notEmitted(name), nil
	}
	o := readObject(where+"."+name, elems[0].Value(), k.fields)
	if v, ok := o.boolean("hasServiceId"); ok {
		e.hasServiceID = &v
	}
	if v, ok := o.boolean("interruptInUseConnections"); ok {
		e.interrupt = &v
	}
	if o.has("reason") {
		s := o.str("reason", false)
		e.reason = &s
	}
	return e, "", o.err
}

// mismatch says how an observed event differs from e, "" if it matches.
func (e *expectedEvent) mismatch(o observedEvent) string {
	if o.name != e.name {
		return fmt.Sprintf("got %s, want %s", o.name, e.name)
	}
	if e.hasServiceID != nil && *e.hasServiceID == o.ev.ServiceID.IsZero() {
		if *e.hasServiceID {
			return e.name + ": no serviceId, want one"
		}
		return fmt.Sprintf("%s: serviceId %s, want none", e.name, o.ev.ServiceID)
	}
	if e.interrupt != nil && *e.interrupt != o.ev.Interrupt {
		return fmt.Sprintf("%s: interruptInUseConnections %v, want %v", e.name, o.ev.Interrupt, *e.interrupt)
	}
	if e.reason != nil && *e.reason != o.ev.Reason {
		return fmt.Sprintf("%s: reason %q, want %q", e.name, o.ev.Reason, *e.reason)
	}
	return ""
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
// runner cannot read fails the test at once, and what needs events that no
// client emits yet gives the reason to skip it.
func parseExpectEvents(where string, list []bson.RawValue) ([]eventsCheck, string, error) {
	var checks []eventsCheck
	var skips []string
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
			return nil, "", o.err
		}
		if !slices.Contains(monitors, c.monitor) {
			return nil, "", fmt.Errorf("%s: unknown eventType %q (known: %s)", w, c.monitor, strings.Join(monitors, ", "))
		}
		for j, ev := range events {
			e, skip, err := parseEvent(fmt.Sprintf("%s.events[%d]", w, j), ev, c.monitor)
			if err != nil {
				return nil, "", err
			}
			if skip != "" && !slices.Contains(skips, skip) {
				skips = append(skips, skip)
			}
			c.events = append(c.events, e)
		}
		checks = append(checks, c)
	}
	return checks, strings.Join(skips, "; "), nil
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

func dumpEvents(events []observedEvent) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "  [%d] %s", i, e.name)
		if e.ev.Reason != "" {
			fmt.Fprintf(&b, " reason=%s", e.ev.Reason)
		}
		if e.ev.Type == pool.PoolCleared {
			fmt.Fprintf(&b, " interruptInUseConnections=%v", e.ev.Interrupt)
			if !e.ev.ServiceID.IsZero() {
				fmt.Fprintf(&b, " serviceId=%s", e.ev.ServiceID)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// eventArgs reads the arguments waitForEvent and assertEventCount share:
// the client, which must observe the event, the event and the count.
func (r *testRun) eventArgs(where string, args bson.Raw) (*eventLog, *expectedEvent, int, error) {
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
	e, skip, err := parseEvent(where+" event", ev, "")
	if err != nil {
		return nil, nil, 0, err
	}
	if skip != "" {
		return nil, nil, 0, &skipError{skip}
	}
	c, err := entity[*client](r, where, id)
	if err != nil {
		return nil, nil, 0, err
	}
	if c.events == nil {
		return nil, nil, 0, fmt.Errorf("%s: the client %q observes no events", where, id)
	}
	if !c.events.observes(e.name) {
		return nil, nil, 0, fmt.Errorf("%s: the client %q does not observe %s (observeEvents: %s)", where, id, e.name, strings.Join(c.events.observe, ", "))
	}
	return c.events, e, int(count), nil
}

// waitForEvent waits until the client has observed count matching events,
// those before the wait included, for at most r.waitTimeout.
func (r *testRun) waitForEvent(where string, args bson.Raw) error {
	l, e, want, err := r.eventArgs(where, args)
	if err != nil {
		return err
	}
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
			return fmt.Errorf("%s: %d matching events after %s, want %d; the observed events:\n%s",
				where, n, r.waitTimeout, want, dumpEvents(l.of(e.kind.monitor)))
		case <-r.ctx.Done():
			return fmt.Errorf("%s: %d matching events, want %d: %w", where, n, want, r.ctx.Err())
		}
	}
}

// assertEventCount checks that the client has observed exactly count
// matching events so far.
func (r *testRun) assertEventCount(where string, args bson.Raw) error {
	l, e, want, err := r.eventArgs(where, args)
	if err != nil {
		return err
	}
	if n, _ := l.count(e); n != want {
		return fmt.Errorf("%s: %d matching events, want %d; the observed events:\n%s", where, n, want, dumpEvents(l.of(e.kind.monitor)))
	}
	return nil
}

// eventList is an entity of storeEventsAsEntities: documents of the events
// of the types it lists, in the order the client emitted them, until stop.
type eventList struct {
	id      string
	types   map[pool.EventType]string // the names the documents give them
	mu      sync.Mutex
	stopped bool
	docs    []bson.Raw
}

// newEventLists reads a storeEventsAsEntities list. It returns the lists, and
// the reason to skip the test if one of them names an event no client emits
// yet.
func newEventLists(where string, specs []bson.RawValue) ([]*eventList, string, error) {
	if len(specs) == 0 {
		return nil, "", fmt.Errorf("%s: storeEventsAsEntities is empty (it needs one entry or more)", where)
	}
	var lists []*eventList
	var skips []string
	for i, v := range specs {
		w := fmt.Sprintf("%s.storeEventsAsEntities[%d]", where, i)
		o := readObject(w, v, []string{"id", "events"})
		l := &eventList{id: o.str("id", true), types: map[pool.EventType]string{}}
		names := o.strings("events")
		if o.err == nil && len(names) == 0 {
			o.fail("missing or empty events (it needs one event type or more)")
		}
		if o.err != nil {
			return nil, "", o.err
		}
		for j, name := range names {
			// The specifications' names: "PoolCreatedEvent" is the
			// poolCreatedEvent of observeEvents.
			var k eventKind
			ok := name != "" && 'A' <= name[0] && name[0] <= 'Z'
			if ok {
				k, ok = eventKinds[strings.ToLower(name[:1])+name[1:]]
			}
			if !ok {
				return nil, "", fmt.Errorf("%s.events[%d]: unknown event type %q", w, j, name)
			}
			if k.pool == 0 {
				skips = append(skips, notEmitted(name))
				continue
			}
			l.types[k.pool] = name
		}
		lists = append(lists, l)
	}
	return lists, strings.Join(skips, "; "), nil
}

// handle is the pool's event handler: it stores the listed events, with the
// fields of the CMAP specification, the event's name and the time it was
// observed (observedAt, in seconds since the Unix epoch).
func (l *eventList) handle(e pool.Event) {
	name, ok := l.types[e.Type]
	if !ok {
		return
	}
	now := time.Now()
	d := bson.D{
		{Key: "name", Value: name},
		{Key: "observedAt", Value: float64(now.UnixNano()) / 1e9},
		{Key: "address", Value: e.Address},
	}
	switch e.Type {
	case pool.ConnectionCreated, pool.ConnectionReady, pool.ConnectionClosed, pool.ConnectionCheckedOut, pool.ConnectionCheckedIn:
		d = append(d, bson.E{Key: "connectionId", Value: e.ConnectionID})
	}
	if e.Duration > 0 {
		// BSON has no duration: milliseconds, as the field's name says.
		d = append(d, bson.E{Key: "durationMS", Value: float64(e.Duration) / float64(time.Millisecond)})
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
