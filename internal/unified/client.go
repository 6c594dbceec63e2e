package unified

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

// clientURIOptions are the URI options (in lower case, as they are matched)
// that mongopool.NewClient applies. Any other option in uriOptions fails
// the test, since the client would ignore it, except those of
// skippedURIOptions.
var clientURIOptions = []string{
	"appname", "maxpoolsize", "minpoolsize", "maxidletimems", "maxconnecting",
	"waitqueuetimeoutms", "timeoutms", "connecttimeoutms", "sockettimeoutms",
	"heartbeatfrequencyms", "loadbalanced", "compressors", "zlibcompressionlevel",
	"tls", "ssl", "tlsinsecure", "tlsallowinvalidcertificates", "tlsallowinvalidhostnames",
	"tlscafile", "tlscertificatekeyfile", "tlscertificatekeyfilepassword",
	"authmechanism", "authsource", "authmechanismproperties",
	"retryreads", "retrywrites", "servermonitoringmode",
	"replicaset", "directconnection", "serverselectiontimeoutms", "localthresholdms",
	"readpreference", "readpreferencetags", "maxstalenessseconds",
	"w", "wtimeoutms", "journal", "readconcernlevel",
}

// skippedURIOptions are the URI options the client does not apply and a
// test may need: a test that sets one is skipped, not failed, with the
// reason given here.
var skippedURIOptions = map[string]string{
	"waitqueuesize":     "the deprecated waitQueueSize, which the CMAP specification lets a driver leave out",
	"waitqueuemultiple": "the deprecated waitQueueMultiple, which the CMAP specification lets a driver leave out",
}

// opKind is how a client entity runs a command: as RunCommand, as a
// retryable read (Client.Read) or as a retryable write (Client.Write).
type opKind uint8

const (
	opCommand opKind = iota
	opRead
	opWrite
)

// client is a client entity: a mongopool.Client, with what a driver's client
// adds that the tests can see and the Client leaves to its user. The Client
// gives commands their implicit sessions and ends them at its Close.
type client struct {
	id string
	cl *mongopool.Client
	// logs, events and lists are what the entity observes: nil unless
	// observeLogMessages, observeEvents, storeEventsAsEntities.
	logs   *capture
	events *eventLog
	lists  []*eventList
	// sessions is true when the deployment supports sessions.
	sessions bool
	// unusable, when not empty, is why the test cannot use the
	// entity: it asks for several mongoses behind the load balancer, or
	// for the Stable API.
	unusable string
	// Command monitoring events: the commands ignored, and whether the
	// sensitive ones are observed.
	ignoreCommands   []string
	observeSensitive bool

	mu      sync.Mutex
	closed  bool
	cursors []*cursor // open cursors, closed with the client
	// topo is the topology's Description as the last
	// TopologyDescriptionChanged event gave it; changed is closed, and
	// replaced, at each event.
	topo    topology.Description
	changed chan struct{}
	// sensitiveStarts are the hellos with speculativeAuthenticate under
	// way, by connection: their outcome events are sensitive too.
	sensitiveStarts map[string]bool
}

// newClient builds the client entity described by spec, against the
// deployment dep, with the event lists of its storeEventsAsEntities in
// lists. sessions is true when the deployment supports sessions. What the
// runner cannot do fails before what makes it skip the test: a *skipError
// comes only when the rest of spec can be run.
func newClient(where string, spec bson.RawValue, dep *deployment, sessions, failPoints bool) (*client, error) {
	o := readObject(where, spec,
		[]string{"id", "uriOptions", "observeLogMessages", "useMultipleMongoses", "observeEvents",
			"ignoreCommandMonitoringEvents", "observeSensitiveCommands", "storeEventsAsEntities", "serverApi"},
		"autoEncryptOpts", "awaitMinPoolSizeMS", "observeTracingMessages")
	c := &client{
		id:              o.str("id", true),
		sessions:        sessions,
		changed:         make(chan struct{}),
		sensitiveStarts: map[string]bool{},
	}
	uriOpts := o.document("uriOptions", false)
	observe := o.document("observeLogMessages", false)
	multiple, _ := o.boolean("useMultipleMongoses")
	if multiple && dep.topology == "load-balanced" {
		// The format would have the client reach a load balancer in front
		// of several mongoses; the runner's has one. The entity is made
		// all the same: a test skips only if it uses it.
		c.unusable = fmt.Sprintf("client %q sets useMultipleMongoses: the test deployment's load balancer has one mongos behind it, not several", c.id)
	}
	if api := o.document("serverApi", false); api != nil {
		a := readObject(where+".serverApi", docValue(api), []string{"version", "strict", "deprecationErrors"})
		a.str("version", true)
		a.boolean("strict")
		a.boolean("deprecationErrors")
		if a.err != nil {
			return nil, a.err
		}
		// Made all the same: a test skips only if it uses it.
		c.unusable = fmt.Sprintf("client %q sets serverApi: the Client has no Stable API (it sends no apiVersion)", c.id)
	}
	hasObserve, hasStore := o.has("observeEvents"), o.has("storeEventsAsEntities")
	observeEvents := o.array("observeEvents", false)
	store := o.array("storeEventsAsEntities", false)
	c.ignoreCommands = o.strings("ignoreCommandMonitoringEvents")
	c.observeSensitive, _ = o.boolean("observeSensitiveCommands")
	if o.err != nil {
		return nil, o.err
	}
	q, skips, err := clientOptions(uriOpts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if failPoints && !hasOption(uriOpts, "heartbeatFrequencyMS") {
		// As the format allows for a test that configures fail points: the
		// monitors see what a fail point does in half a second, not in
		// the ten of the default heartbeat, which a test's waits would
		// otherwise race (a heartbeat due when waitForEvent gives up).
		q = append(q, "heartbeatFrequencyMS=500")
	}
	var opts []mongopool.ClientOption
	var poolOpts []pool.Option
	if hasObserve {
		if c.events, err = newEventLog(where, observeEvents); err != nil {
			return nil, err
		}
		poolOpts = append(poolOpts, pool.WithEventHandler(c.events.handlePool))
	}
	if hasStore {
		if c.lists, err = newEventLists(where, store); err != nil {
			return nil, err
		}
		for _, l := range c.lists {
			poolOpts = append(poolOpts, pool.WithEventHandler(l.handlePool))
		}
	}
	if len(poolOpts) > 0 {
		opts = append(opts, mongopool.WithPoolOptions(poolOpts...))
	}
	// The SDAM events always go through the entity: waitForPrimaryChange
	// and recordTopologyDescription follow the topology by them.
	opts = append(opts, mongopool.WithTopologyEventHandler(c.topologyEvent))
	if c.observesCommands() {
		opts = append(opts, mongopool.WithCommandEventHandler(c.commandEvent))
	}
	if observe != nil {
		if c.logs, err = newCapture(observe); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		opts = append(opts, mongopool.WithLogger(slog.New(c.logs.handler())))
	}
	if c.logs != nil {
		if _, ok := c.logs.observe["command"]; ok {
			skips = append(skips, "observeLogMessages.command: the Client logs no command messages (its log components are connection, topology and serverSelection)")
		}
	}
	if len(skips) > 0 {
		return nil, &skipError{strings.Join(skips, "; ")}
	}
	cl, err := mongopool.NewClient(dep.uriOfClient(q, multiple), opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: creating the client: %w", where, err)
	}
	if w := cl.Warnings(); len(w) > 0 {
		cl.Close()
		return nil, fmt.Errorf("%s: the connection string has problems the client would ignore: %s", where, strings.Join(w, "; "))
	}
	c.cl = cl
	return c, nil
}

// observesCommands reports whether the entity observes or stores command
// monitoring events.
func (c *client) observesCommands() bool {
	if c.events != nil && c.events.observesMonitor("command") {
		return true
	}
	for _, l := range c.lists {
		if l.storesMonitor("command") {
			return true
		}
	}
	return false
}

// clientOptions returns uriOptions as a connection string's key=value
// options, and the reasons to skip the test for options the client does not
// apply.
func clientOptions(opts bson.Raw) (q []string, skips []string, err error) {
	if opts == nil {
		return nil, nil, nil
	}
	elems, err := opts.Elements()
	if err != nil {
		return nil, nil, fmt.Errorf("uriOptions: %w", err)
	}
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if why, ok := skippedURIOptions[strings.ToLower(k)]; ok {
			skips = append(skips, fmt.Sprintf("uriOptions.%s: the client does not support %s", k, why))
			continue
		}
		if !slices.Contains(clientURIOptions, strings.ToLower(k)) {
			return nil, nil, fmt.Errorf("uriOptions.%s: the runner's clients do not apply this option", k)
		}
		if _, _, ok := operator(v); ok {
			return nil, nil, fmt.Errorf("uriOptions.%s: %s: the runner has no value to put in its place", k, show(v))
		}
		if strings.EqualFold(k, "readPreferenceTags") && v.Type == bson.TypeArray {
			// One tag set per string, each a readPreferenceTags option.
			vals, _ := v.Array().Values()
			for i, t := range vals {
				s, ok := t.StringValueOK()
				if !ok {
					return nil, nil, fmt.Errorf("uriOptions.%s[%d]: want a string, got %s", k, i, show(t))
				}
				q = append(q, escape(k)+"="+escapeTags(s))
			}
			continue
		}
		s, err := uriValue(v)
		if err != nil {
			return nil, nil, fmt.Errorf("uriOptions.%s: %w", k, err)
		}
		if strings.EqualFold(k, "retryWrites") || strings.EqualFold(k, "retryReads") {
			if _, err := strconv.ParseBool(s); err != nil {
				return nil, nil, fmt.Errorf("uriOptions.%s: %s is not a boolean", k, show(v))
			}
		}
		q = append(q, escape(k)+"="+s)
	}
	return q, skips, nil
}

// hasOption reports whether uriOptions sets the option name (whose case the
// connection string ignores).
func hasOption(opts bson.Raw, name string) bool {
	elems, _ := opts.Elements()
	for _, e := range elems {
		if strings.EqualFold(e.Key(), name) {
			return true
		}
	}
	return false
}

// escapeTags escapes a tag set of readPreferenceTags ("dc:ny,rack:1"),
// keeping its separators.
func escapeTags(s string) string {
	var parts []string
	for _, tag := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(tag, ":")
		parts = append(parts, escape(k)+":"+escape(v))
	}
	return strings.Join(parts, ",")
}

// uriValue writes a uriOptions value as a connection string does.
func uriValue(v bson.RawValue) (string, error) {
	switch v.Type {
	case bson.TypeString:
		return escape(v.StringValue()), nil
	case bson.TypeBoolean:
		return strconv.FormatBool(v.Boolean()), nil
	case bson.TypeInt32, bson.TypeInt64:
		return strconv.FormatInt(v.AsInt64(), 10), nil
	case bson.TypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return strconv.FormatInt(int64(f), 10), nil
		}
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	case bson.TypeEmbeddedDocument: // authMechanismProperties: key:value,...
		elems, err := v.Document().Elements()
		if err != nil {
			return "", err
		}
		var parts []string
		for _, e := range elems {
			s, err := uriValue(e.Value())
			if err != nil || e.Value().Type == bson.TypeEmbeddedDocument {
				return "", fmt.Errorf("%s: not a value a connection string can hold", e.Key())
			}
			parts = append(parts, escape(e.Key())+":"+s)
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("%s is not a value a connection string can hold", show(v))
}

// escape percent-encodes all but the unreserved characters of RFC 3986.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

var errClientClosed = errors.New("the client entity is closed")

// run runs cmd on db as k says; the Client gives it an implicit session
// when the deployment supports sessions.
func (c *client) run(ctx context.Context, k opKind, db string, cmd bson.D, opts ...mongopool.CommandOption) (bson.Raw, error) {
	reply, err := c.runRaw(ctx, k, db, cmd, opts...)
	if we := (*mongopool.WriteErrors)(nil); errors.As(err, &we) {
		// A driver raises the first write error as the server's error,
		// with the reply's labels.
		reply, err = nil, writeErrorOf(we.Reply)
	}
	return reply, err
}

// runRaw is run, with a write's errors as Client.Write returns them.
func (c *client) runRaw(ctx context.Context, k opKind, db string, cmd bson.D, opts ...mongopool.CommandOption) (bson.Raw, error) {
	if c.isClosed() {
		return nil, errClientClosed
	}
	switch k {
	case opRead:
		return c.cl.Read(ctx, db, cmd, opts...)
	case opWrite:
		return c.cl.Write(ctx, db, cmd, opts...)
	}
	return c.cl.RunCommand(ctx, db, cmd, opts...)
}

func (c *client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// close closes the open cursors, then the Client, which ends its pooled
// sessions. Closing twice does nothing.
func (c *client) close(ctx context.Context) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	cursors := c.cursors
	c.cursors = nil
	c.mu.Unlock()
	for _, cur := range cursors {
		cur.close(ctx)
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cl.Close()
}

// flush returns once the entity's listeners have had every event and log
// message the Client emitted before the call, those of its closing
// included if it is closed, or fails after timeout. The Client delivers
// them asynchronously, in order, on goroutines of its own: an assertion
// on what the entity observed (expectEvents, expectLogMessages,
// assertEventCount, recordTopologyDescription, an event list) is made
// after a flush, as a runner for a driver with asynchronous event
// publishers does.
func (c *client) flush(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.cl.Flush(ctx); err != nil {
		return fmt.Errorf("the client %q has not delivered the events and log messages it emitted before the flush within %s: %w", c.id, timeout, err)
	}
	return nil
}

// addCursor keeps an open cursor, to close it with the client.
func (c *client) addCursor(cur *cursor) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errClientClosed
	}
	c.cursors = append(c.cursors, cur)
	return nil
}

// dropCursor forgets a closed cursor.
func (c *client) dropCursor(cur *cursor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.cursors, cur); i >= 0 {
		c.cursors = slices.Delete(c.cursors, i, i+1)
	}
}

// topologyEvent is the Client's SDAM event handler: it follows the
// topology's Description and hands the event to the observers.
func (c *client) topologyEvent(e topology.Event) {
	if tdc, ok := e.(*topology.TopologyDescriptionChanged); ok {
		c.mu.Lock()
		c.topo = tdc.New
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
	}
	if c.events != nil {
		c.events.handleTopology(e)
	}
	for _, l := range c.lists {
		l.handleTopology(e)
	}
}

// description returns the topology's Description as the events told it,
// and a channel closed when it next changes.
func (c *client) description() (topology.Description, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.topo, c.changed
}

// sensitiveCommands are the commands whose events the command monitoring
// specification has the runner ignore unless observeSensitiveCommands.
var sensitiveCommands = []string{
	"authenticate", "saslstart", "saslcontinue", "getnonce",
	"createuser", "updateuser", "copydbgetnonce", "copydbsaslstart", "copydb",
}

// commandEvent is the Client's command event handler: it drops the events
// the format says to ignore (configureFailPoint, ignoreCommandMonitoringEvents,
// the sensitive commands unless observeSensitiveCommands) and hands the
// others to the observers. The event's command and reply are the handler's
// to keep.
func (c *client) commandEvent(e mongopool.CommandEvent) {
	if strings.EqualFold(e.Name, "configureFailPoint") || slices.Contains(c.ignoreCommands, e.Name) {
		return
	}
	if !c.observeSensitive && c.sensitive(e) {
		return
	}
	ev := &commandEvent{
		typ: e.Type, name: e.Name, db: e.Database,
		command: orEmpty(e.Command), reply: orEmpty(e.Reply),
		failure: e.Failure, duration: e.Duration, address: e.Address,
		connID: e.ConnectionID, serverConnID: e.ServerConnectionID, serviceID: e.ServiceID, opID: e.OperationID,
	}
	if c.events != nil {
		c.events.handleCommand(ev)
	}
	for _, l := range c.lists {
		l.handleCommand(ev)
	}
}

// orEmpty returns d, or an empty document for none: a sensitive command's
// events have their command and reply redacted so.
func orEmpty(d bson.Raw) bson.Raw {
	if len(d) == 0 {
		return emptyDoc
	}
	return d
}

// sensitive reports whether e is an event of a sensitive command: one of
// sensitiveCommands, or a hello with speculativeAuthenticate, whose command
// and reply the Client leaves empty (and whose outcome comes on the same
// connection as its start).
func (c *client) sensitive(e mongopool.CommandEvent) bool {
	lower := strings.ToLower(e.Name)
	if slices.Contains(sensitiveCommands, lower) {
		return true
	}
	if lower != "hello" && lower != "ismaster" {
		return false
	}
	key := e.Address + "/" + strconv.FormatInt(e.ConnectionID, 10)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Type {
	case mongopool.CommandStarted:
		if len(e.Command) == 0 {
			c.sensitiveStarts[key] = true
			return true
		}
		return false
	default:
		s := c.sensitiveStarts[key]
		delete(c.sensitiveStarts, key)
		return s
	}
}

// isNetworkError reports an error of the connection rather than of the
// server's reply.
func isNetworkError(err error) bool {
	var ce *wire.CommandError
	if errors.As(err, &ce) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
