package unified

import (
	"context"
	"crypto/rand"
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

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// clientURIOptions are the URI options (in lower case, as they are matched)
// that have an effect on the runner's clients: those mongopool.New applies,
// and retryReads and retryWrites, which the runner handles (see client). Any
// other option in uriOptions fails the test, since the client would ignore
// it, except those of skippedURIOptions.
var clientURIOptions = []string{
	"appname", "maxpoolsize", "minpoolsize", "maxidletimems", "maxconnecting",
	"waitqueuetimeoutms", "timeoutms", "connecttimeoutms", "sockettimeoutms",
	"heartbeatfrequencyms", "loadbalanced", "compressors", "zlibcompressionlevel",
	"tls", "ssl", "tlsinsecure", "tlsallowinvalidcertificates", "tlsallowinvalidhostnames",
	"tlscafile", "tlscertificatekeyfile", "tlscertificatekeyfilepassword",
	"authmechanism", "authsource", "authmechanismproperties",
	"retryreads", "retrywrites", "servermonitoringmode",
}

// skippedURIOptions are the URI options a driver may choose not to support,
// which the clients do not: a test that sets one is skipped, not failed.
var skippedURIOptions = map[string]string{
	"waitqueuesize":     "the deprecated waitQueueSize, which the CMAP specification lets a driver leave out",
	"waitqueuemultiple": "the deprecated waitQueueMultiple, which the CMAP specification lets a driver leave out",
	// Not yet: it comes with the topology layer, as its events do.
	"serverselectiontimeoutms": "serverSelectionTimeoutMS yet: server selection comes with the topology layer",
}

// client is a client entity: a mongopool.Pool with what a driver's client adds
// that the tests can see. Commands carry an implicit session (an lsid from
// the client's pool of server sessions) when the server supports sessions, and
// close ends the pooled sessions with endSessions before closing the pool, as
// the driver sessions specification has a client do. The client does not
// retry: with retryReads on (the default), a read that fails with a
// retryable error is reported as something the runner cannot do, and so is
// a write with retryWrites on (the default) outside a single server's
// topology.
type client struct {
	id          string
	p           *mongopool.Pool
	logs        *capture     // nil unless observeLogMessages
	events      *eventLog    // nil unless observeEvents
	lists       []*eventList // of storeEventsAsEntities
	retryReads  bool
	retryWrites bool
	sessions    bool
	topology    string

	mu     sync.Mutex
	idle   [][]byte // server session ids, most recently used last
	closed bool
}

// newClient builds the client entity described by spec, against the
// server at base (a URI with the runner's credentials and no options), with
// the event lists of its storeEventsAsEntities in lists. What the runner
// cannot do fails before what makes it skip the test: a *skipError comes
// only when the rest of spec can be run.
func newClient(where string, spec bson.RawValue, base string, sessions bool, topology string) (*client, error) {
	o := readObject(where, spec,
		[]string{"id", "uriOptions", "observeLogMessages", "useMultipleMongoses", "observeEvents",
			"ignoreCommandMonitoringEvents", "observeSensitiveCommands", "storeEventsAsEntities"},
		"serverApi", "autoEncryptOpts", "awaitMinPoolSizeMS", "observeTracingMessages")
	c := &client{id: o.str("id", true), sessions: sessions, topology: topology}
	uriOpts := o.document("uriOptions", false)
	observe := o.document("observeLogMessages", false)
	if _, ok := o.boolean("useMultipleMongoses"); ok && (topology == "sharded" || topology == "load-balanced") {
		o.fail("useMultipleMongoses: the runner runs only single servers, not a %s topology", topology)
	}
	hasObserve, hasStore := o.has("observeEvents"), o.has("storeEventsAsEntities")
	observeEvents := o.array("observeEvents", false)
	store := o.array("storeEventsAsEntities", false)
	// They concern command monitoring events only, which no client emits
	// yet: a test that observes any is skipped.
	o.strings("ignoreCommandMonitoringEvents")
	o.boolean("observeSensitiveCommands")
	if o.err != nil {
		return nil, o.err
	}
	uri, skips, err := c.clientURI(base, uriOpts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	var opts []pool.Option
	if hasObserve {
		var skip string
		if c.events, skip, err = newEventLog(where, observeEvents); err != nil {
			return nil, err
		}
		skips = appendSkip(skips, skip)
		opts = append(opts, pool.WithEventHandler(c.events.handle))
	}
	if hasStore {
		var skip string
		if c.lists, skip, err = newEventLists(where, store); err != nil {
			return nil, err
		}
		skips = appendSkip(skips, skip)
		for _, l := range c.lists {
			opts = append(opts, pool.WithEventHandler(l.handle))
		}
	}
	if observe != nil {
		if c.logs, err = newCapture(observe); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		opts = append(opts, pool.WithLogger(slog.New(c.logs.handler())))
	}
	if len(skips) > 0 {
		return nil, &skipError{strings.Join(skips, "; ")}
	}
	p, err := mongopool.New(uri, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: creating the client: %w", where, err)
	}
	if w := p.Warnings(); len(w) > 0 {
		p.Close()
		return nil, fmt.Errorf("%s: the connection string has problems the client would ignore: %s", where, strings.Join(w, "; "))
	}
	c.p = p
	return c, nil
}

func appendSkip(skips []string, skip string) []string {
	if skip == "" {
		return skips
	}
	return append(skips, skip)
}

// clientURI adds uriOptions to base and returns the result, and the reasons
// to skip the test for options the clients may leave out; it sets the
// client's retryReads and retryWrites.
func (c *client) clientURI(base string, opts bson.Raw) (uri string, skips []string, err error) {
	c.retryReads, c.retryWrites = true, true
	if opts == nil {
		return base, nil, nil
	}
	elems, err := opts.Elements()
	if err != nil {
		return "", nil, fmt.Errorf("uriOptions: %w", err)
	}
	var q []string
	for _, e := range elems {
		k, v := e.Key(), e.Value()
		if why, ok := skippedURIOptions[strings.ToLower(k)]; ok {
			skips = append(skips, fmt.Sprintf("uriOptions.%s: the clients do not support %s", k, why))
			continue
		}
		if !slices.Contains(clientURIOptions, strings.ToLower(k)) {
			return "", nil, fmt.Errorf("uriOptions.%s: the runner's clients do not apply this option", k)
		}
		if strings.EqualFold(k, "serverMonitoringMode") && v.Type == bson.TypeString && v.StringValue() == "stream" {
			// The clients poll, as "poll" and "auto" ask.
			skips = append(skips, "uriOptions.serverMonitoringMode: the clients' monitor does not stream yet (it polls)")
			continue
		}
		if _, _, ok := operator(v); ok {
			return "", nil, fmt.Errorf("uriOptions.%s: %s: the runner has no value to put in its place", k, show(v))
		}
		s, err := uriValue(v)
		if err != nil {
			return "", nil, fmt.Errorf("uriOptions.%s: %w", k, err)
		}
		for _, retry := range []struct {
			name string
			flag *bool
		}{{"retryReads", &c.retryReads}, {"retryWrites", &c.retryWrites}} {
			if strings.EqualFold(k, retry.name) {
				if *retry.flag, err = strconv.ParseBool(s); err != nil {
					return "", nil, fmt.Errorf("uriOptions.%s: %s is not a boolean", k, show(v))
				}
			}
		}
		q = append(q, escape(k)+"="+s)
	}
	if len(q) == 0 {
		return base, skips, nil
	}
	return base + "?" + strings.Join(q, "&"), skips, nil
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

// command runs cmd on db, with an implicit session when the server supports
// sessions.
func (c *client) command(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	var id []byte
	if c.sessions {
		var err error
		if id, err = c.acquire(); err != nil {
			return nil, err
		}
		cmd = append(cmd, bson.E{Key: "lsid", Value: lsid(id)})
	} else if c.isClosed() {
		return nil, errClientClosed
	}
	reply, err := c.p.RunCommand(ctx, db, cmd)
	if id != nil {
		c.release(id, err)
	}
	return reply, err
}

func (c *client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// acquire takes the most recently used server session, or makes a new one.
func (c *client) acquire() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClientClosed
	}
	if n := len(c.idle); n > 0 {
		id := c.idle[n-1]
		c.idle = c.idle[:n-1]
		return id, nil
	}
	id := make([]byte, 16) // a version 4 UUID
	rand.Read(id)
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id, nil
}

// release returns a session to the pool, unless a network error made it
// dirty: the server may not have seen the end of its use.
func (c *client) release(id []byte, err error) {
	if err != nil && isNetworkError(err) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.idle = append(c.idle, id)
	}
}

func lsid(id []byte) bson.D {
	return bson.D{{Key: "id", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: id}}}
}

// close ends the pooled sessions, as a driver's client does, then closes the
// pool. Closing twice does nothing.
func (c *client) close(ctx context.Context) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	if len(idle) > 0 {
		ids := bson.A{}
		for _, id := range idle {
			ids = append(ids, lsid(id))
		}
		// A driver ignores the outcome: the server forgets sessions anyway.
		c.p.RunCommand(ctx, "admin", bson.D{{Key: "endSessions", Value: ids}})
	}
	c.p.Close()
}

// retryableRead reports whether a driver with retryReads on would retry a
// read that failed with err: a network error, an error labelled
// RetryableError (such as a PoolClearedError) or a server error with one of
// the retryable codes of the retryable reads specification.
func retryableRead(err error) bool {
	if pool.HasErrorLabel(err, pool.LabelRetryable) {
		return true
	}
	var ce *wire.CommandError
	if errors.As(err, &ce) {
		return slices.Contains(retryableCodes, ce.Code)
	}
	return isNetworkError(err)
}

// retryableCodes are the server error codes after which reads are retried.
var retryableCodes = []int32{
	6,     // HostUnreachable
	7,     // HostNotFound
	89,    // NetworkTimeout
	91,    // ShutdownInProgress
	134,   // ReadConcernMajorityNotAvailableYet
	189,   // PrimarySteppedDown
	262,   // ExceededTimeLimit
	9001,  // SocketException
	10107, // NotWritablePrimary
	11600, // InterruptedAtShutdown
	11602, // InterruptedDueToReplStateChange
	13435, // NotPrimaryNoSecondaryOk
	13436, // NotPrimaryOrSecondary
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
