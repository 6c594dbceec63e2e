package unified

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/topology"
)

// session is a session entity: an explicit mongopool.Session of a client
// entity, with the default options of its transactions.
type session struct {
	id       string
	c        *client
	s        *mongopool.Session
	defaults txnOptions // sessionOptions.defaultTransactionOptions

	mu sync.Mutex
	// lsid is the session's lsid once known: $$sessionLsid matches it
	// after endSession too.
	lsid bson.Raw
	// txn are the options of the session's last transaction.
	txn   txnOptions
	ended bool
}

// txnOptions are the options of a transaction: those the Client takes, and
// the read preference of its reads, which the runner gives each read of the
// transaction, as a driver does, in place of its collection's.
type txnOptions struct {
	readConcern  *string
	writeConcern bson.D
	maxCommit    *time.Duration
	readPref     *topology.ReadPref
}

// over returns o with the options that o does not set taken from base, as
// a transaction's options inherit from the session's defaults.
func (o txnOptions) over(base txnOptions) txnOptions {
	if o.readConcern == nil {
		o.readConcern = base.readConcern
	}
	if o.writeConcern == nil {
		o.writeConcern = base.writeConcern
	}
	if o.maxCommit == nil {
		o.maxCommit = base.maxCommit
	}
	if o.readPref == nil {
		o.readPref = base.readPref
	}
	return o
}

// client returns the options as the Client takes them.
func (o txnOptions) client() *mongopool.TransactionOptions {
	var out mongopool.TransactionOptions
	if o.readConcern != nil {
		out.ReadConcern = *o.readConcern
	}
	out.WriteConcern = o.writeConcern
	if o.maxCommit != nil {
		out.MaxCommitTime = *o.maxCommit
	}
	return &out
}

// txnOptionKeys are the fields of a transaction's options (TransactionOptions).
var txnOptionKeys = []string{"readConcern", "writeConcern", "readPreference", "maxCommitTimeMS"}

// readTxnOptions reads the transaction options of o (startTransaction's and
// withTransaction's arguments, defaultTransactionOptions).
func readTxnOptions(o *object) (txnOptions, error) {
	var t txnOptions
	if rc := o.document("readConcern", false); rc != nil {
		level, err := readConcernLevel(o.where+" readConcern", rc)
		if err != nil {
			return t, err
		}
		t.readConcern = &level
	}
	if wc := o.document("writeConcern", false); wc != nil {
		d, err := writeConcern(o.where+" writeConcern", wc)
		if err != nil {
			return t, err
		}
		t.writeConcern = d
	}
	if ms, ok := o.integer("maxCommitTimeMS", false); ok {
		if ms < 0 {
			o.fail("maxCommitTimeMS %d is negative", ms)
		}
		d := time.Duration(ms) * time.Millisecond
		t.maxCommit = &d
	}
	if rp := o.document("readPreference", false); rp != nil {
		pref, err := readPreference(o.where+" readPreference", rp)
		if err != nil {
			return t, err
		}
		t.readPref = &pref
	}
	return t, o.err
}

// readConcernLevel reads a readConcern document: its level.
func readConcernLevel(where string, doc bson.Raw) (string, error) {
	o := readObject(where, docValue(doc), []string{"level"})
	level := o.str("level", true)
	return level, o.err
}

// writeConcern reads a writeConcern document of the format (w, journal,
// wtimeoutMS) and returns it as a command's writeConcern field (w, j,
// wtimeout).
func writeConcern(where string, doc bson.Raw) (bson.D, error) {
	o := readObject(where, docValue(doc), []string{"w", "journal", "wtimeoutMS"})
	d := bson.D{}
	if v, ok := o.value("w", false); ok {
		switch v.Type {
		case bson.TypeString:
			d = append(d, bson.E{Key: "w", Value: v.StringValue()})
		default:
			n, _ := o.integer("w", false)
			d = append(d, bson.E{Key: "w", Value: int32(n)})
		}
	}
	if j, ok := o.boolean("journal"); ok {
		d = append(d, bson.E{Key: "j", Value: j})
	}
	if ms, ok := o.integer("wtimeoutMS", false); ok {
		d = append(d, bson.E{Key: "wtimeout", Value: ms})
	}
	return d, o.err
}

// newSession creates the session entity of spec, causally consistent unless
// its causalConsistency is false. A session of a feature the Client has not
// (snapshot reads) skips the test, naming it.
func (r *testRun) newSession(where string, spec bson.RawValue) (*session, error) {
	o := readObject(where, spec, []string{"id", "client", "sessionOptions"})
	id, clientID := o.str("id", true), o.str("client", true)
	opts := o.document("sessionOptions", false)
	if o.err != nil {
		return nil, o.err
	}
	c, err := entity[*client](r, where, clientID) // a test that uses it skips if it is unusable
	if err != nil {
		return nil, err
	}
	var defaults txnOptions
	var skip string
	causal := true // the default of explicit sessions (the causal consistency specification)
	if opts != nil {
		so := readObject(where+".sessionOptions", docValue(opts),
			[]string{"causalConsistency", "defaultTransactionOptions", "snapshot", "snapshotTime"}, "defaultTimeoutMS")
		if v, ok := so.boolean("causalConsistency"); ok {
			causal = v
		}
		snapshot, _ := so.boolean("snapshot")
		so.str("snapshotTime", false)
		dto := so.document("defaultTransactionOptions", false)
		if so.err != nil {
			return nil, so.err
		}
		if dto != nil {
			t := readObject(where+".sessionOptions.defaultTransactionOptions", docValue(dto), txnOptionKeys)
			if defaults, err = readTxnOptions(t); err != nil {
				return nil, err
			}
		}
		if snapshot || so.has("snapshotTime") {
			skip = "snapshot reads (a session with snapshot: true): the Client's sessions have no snapshot option"
		}
	}
	if skip != "" {
		return nil, &skipError{fmt.Sprintf("%s: the project has no %s", where, skip)}
	}
	if c.isClosed() {
		return nil, fmt.Errorf("%s: %w", where, errClientClosed)
	}
	s, err := c.cl.StartSession(mongopool.WithCausalConsistency(causal))
	if err != nil {
		return nil, fmt.Errorf("%s: StartSession: %w", where, err)
	}
	return &session{id: id, c: c, s: s, defaults: defaults}, nil
}

// lsidDoc returns the session's lsid (which takes its server session if no
// command has yet), or an error if it ended before anyone asked.
func (s *session) lsidDoc() (bson.Raw, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lsid == nil && !s.ended {
		s.lsid = slices.Clone(s.s.ID())
	}
	if s.lsid == nil {
		return nil, fmt.Errorf("the session %q has no lsid", s.id)
	}
	return s.lsid, nil
}

// end ends the session, keeping its lsid for $$sessionLsid first. Ending
// twice does nothing.
func (s *session) end(ctx context.Context) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	if s.lsid == nil {
		s.lsid = slices.Clone(s.s.ID())
	}
	s.ended = true
	s.mu.Unlock()
	s.s.EndSession(ctx)
}

// inTransaction reports whether the session has a transaction under way.
func (s *session) inTransaction() bool {
	if s == nil {
		return false
	}
	st := s.s.TransactionState()
	return st == "starting" || st == "in_progress"
}

// txnReadPref returns the read preference of the transaction under way, nil
// for the client's.
func (s *session) txnReadPref() *topology.ReadPref {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txn.readPref
}

// start starts a transaction with opts over the session's defaults.
func (s *session) start(opts txnOptions) error {
	opts = opts.over(s.defaults)
	if err := s.s.StartTransaction(opts.client()); err != nil {
		return err
	}
	s.mu.Lock()
	s.txn = opts
	s.mu.Unlock()
	return nil
}

// sessionLsid returns the lsid of the session entity id, for $$sessionLsid.
func (r *testRun) sessionLsid(id string) (bson.Raw, error) {
	s, err := entity[*session](r, "", id)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), ": "))
	}
	return s.lsidDoc()
}

// sessionArg returns the session entity the session argument of an
// operation names, nil if it names none.
func (r *testRun) sessionArg(where string, a *object) (*session, error) {
	id := a.str("session", false)
	if a.err != nil {
		return nil, &runnerError{a.err}
	}
	if id == "" {
		return nil, nil
	}
	s, err := entity[*session](r, where, id)
	if err != nil {
		return nil, &runnerError{err}
	}
	return s, nil
}

// options returns the option that runs a command in the session; none for
// a nil session.
func (s *session) options() []mongopool.CommandOption {
	if s == nil {
		return nil
	}
	return []mongopool.CommandOption{mongopool.WithSession(s.s)}
}

// sessionOperation runs an operation of a session entity.
func (r *testRun) sessionOperation(where, name string, s *session, args bson.Raw) (result, error) {
	switch name {
	case "startTransaction":
		a := arguments(where, args, txnOptionKeys)
		opts, err := readTxnOptions(a)
		if err != nil {
			return result{}, &runnerError{err}
		}
		return result{}, s.start(opts)
	case "commitTransaction", "abortTransaction", "endSession":
		if a := arguments(where, args, nil); a.err != nil {
			return result{}, &runnerError{a.err}
		}
		switch name {
		case "commitTransaction":
			return result{}, s.s.CommitTransaction(r.ctx)
		case "abortTransaction":
			return result{}, s.s.AbortTransaction(r.ctx)
		}
		s.end(r.ctx)
		return result{}, nil
	case "withTransaction":
		return r.withTransaction(where, s, args)
	}
	return result{}, &runnerError{fmt.Errorf("%s: unknown operation %q for a session", where, name)}
}

// callbackFailure is the failure of an assertion of an operation of a
// withTransaction callback: it ends the callback, and the test.
type callbackFailure struct{ err error }

func (e *callbackFailure) Error() string { return e.err.Error() }
func (e *callbackFailure) Unwrap() error { return e.err }

// withTransaction runs Session.WithTransaction with a callback that runs the
// operations of the callback argument in order, each with its assertions:
// an operation's error goes back to WithTransaction whatever the operation
// expected (so that it may retry), and a failed assertion ends the callback
// and the test.
func (r *testRun) withTransaction(where string, s *session, args bson.Raw) (result, error) {
	a := arguments(where, args, append([]string{"callback"}, txnOptionKeys...))
	ops := a.array("callback", true)
	opts, err := readTxnOptions(a)
	if err != nil {
		return result{}, &runnerError{err}
	}
	opts = opts.over(s.defaults)
	calls := 0
	err = s.s.WithTransaction(r.ctx, func(context.Context) error {
		s.mu.Lock()
		s.txn = opts // WithTransaction has started the transaction
		s.mu.Unlock()
		calls++
		for i, op := range ops {
			w := fmt.Sprintf("%s callback (call %d) operation %d", where, calls, i)
			opErr, fail := r.runOperation(w, op)
			if fail != nil {
				return &callbackFailure{fail}
			}
			if opErr != nil {
				return opErr
			}
		}
		return nil
	}, opts.client())
	var cf *callbackFailure
	if errors.As(err, &cf) {
		var skip *skipError
		if errors.As(cf.err, &skip) {
			return result{}, skip
		}
		return result{}, &runnerError{cf.err}
	}
	return result{}, err
}

// sessionSpecial runs the special operations that assert a session's state.
func (r *testRun) sessionSpecial(where, name string, args bson.Raw) error {
	known := []string{"session"}
	if name == "assertSessionTransactionState" {
		known = append(known, "state")
	}
	a := arguments(where, args, known)
	id := a.str("session", true)
	state := a.str("state", name == "assertSessionTransactionState")
	if a.err != nil {
		return a.err
	}
	s, err := entity[*session](r, where, id)
	if err != nil {
		return err
	}
	switch name {
	case "assertSessionTransactionState":
		states := []string{"none", "starting", "in_progress", "committed", "aborted"}
		if !slices.Contains(states, state) {
			return fmt.Errorf("%s: unknown transaction state %q (known: %s)", where, state, strings.Join(states, ", "))
		}
		if got := s.s.TransactionState(); got != state {
			return fmt.Errorf("%s: the session %q is in the transaction state %s, want %s", where, id, got, state)
		}
	case "assertSessionPinned":
		if s.s.PinnedServer() == "" {
			return fmt.Errorf("%s: the session %q is not pinned", where, id)
		}
	case "assertSessionUnpinned":
		if p := s.s.PinnedServer(); p != "" {
			return fmt.Errorf("%s: the session %q is pinned to %s", where, id, p)
		}
	case "assertSessionDirty", "assertSessionNotDirty":
		if want := name == "assertSessionDirty"; s.s.Dirty() != want {
			return fmt.Errorf("%s: the session %q is dirty: %v, want %v", where, id, !want, want)
		}
	}
	return nil
}

// lsidsOfLastTwo returns the lsids of the last two commands the client's
// command started events tell of, once they are flushed.
func (r *testRun) lsidsOfLastTwo(where string, args bson.Raw) (bson.Raw, bson.Raw, error) {
	a := arguments(where, args, []string{"client"})
	id := a.str("client", true)
	if a.err != nil {
		return nil, nil, a.err
	}
	c, err := r.usableClient(where, id)
	if err != nil {
		return nil, nil, err
	}
	if c.events == nil || !c.events.observes("commandStartedEvent") {
		return nil, nil, fmt.Errorf("%s: the client %q does not observe commandStartedEvent", where, id)
	}
	if err := c.flush(r.ctx, r.flushTimeout); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	var started []*commandEvent
	for _, e := range c.events.of("command") {
		if e.name == "commandStartedEvent" {
			started = append(started, e.cmd)
		}
	}
	if len(started) < 2 {
		return nil, nil, fmt.Errorf("%s: the client %q has observed %d commands, want 2 or more", where, id, len(started))
	}
	var lsids [2]bson.Raw
	for i, e := range started[len(started)-2:] {
		l, ok := e.command.Lookup("lsid").DocumentOK()
		if !ok {
			return nil, nil, fmt.Errorf("%s: the command %s has no lsid", where, e.name)
		}
		lsids[i] = l
	}
	return lsids[0], lsids[1], nil
}

// targetedFailPoint sets a fail point on the server the session is pinned
// to, through a client of its own connected to that server only (the
// format's last resort, for a driver that cannot target a server), and
// records where it is.
func (r *testRun) targetedFailPoint(where string, args bson.Raw) error {
	a := arguments(where, args, []string{"session", "failPoint"})
	id := a.str("session", true)
	fp := a.document("failPoint", true)
	if a.err != nil {
		return a.err
	}
	s, err := entity[*session](r, where, id)
	if err != nil {
		return err
	}
	address := s.s.PinnedServer()
	if address == "" {
		return fmt.Errorf("%s: the session %q is not pinned to a server", where, id)
	}
	fpName, ok := fp.Lookup("configureFailPoint").StringValueOK()
	if !ok {
		return fmt.Errorf("%s: failPoint %s has no configureFailPoint name", where, show(docValue(fp)))
	}
	if err := checkFailPointName(where, fpName); err != nil {
		return err
	}
	if r.dep.members[address] == nil {
		return fmt.Errorf("%s: the session %q is pinned to %s, which is no server of the deployment", where, id, address)
	}
	cl, err := mongopool.NewClient(r.dep.uriOf(address))
	if err != nil {
		return fmt.Errorf("%s: a client of %s: %w", where, address, err)
	}
	defer cl.Close()
	if _, err := cl.RunCommand(r.ctx, "admin", fp); err != nil {
		return fmt.Errorf("%s: setting the fail point %s on %s: %w", where, show(docValue(fp)), address, err)
	}
	r.failPoints = append(r.failPoints, setFailPoint{name: fpName, address: address})
	return nil
}

// assertNamespace runs assertCollectionExists, assertCollectionNotExists,
// assertIndexExists and assertIndexNotExists through the internal client.
func (r *testRun) assertNamespace(where, name string, args bson.Raw) error {
	index := strings.HasPrefix(name, "assertIndex")
	known := []string{"databaseName", "collectionName"}
	if index {
		known = append(known, "indexName")
	}
	a := arguments(where, args, known)
	db, coll := a.str("databaseName", true), a.str("collectionName", true)
	indexName := a.str("indexName", index)
	if a.err != nil {
		return a.err
	}
	var names []string
	var err error
	if index {
		names, err = r.internalNames(db, bson.D{{Key: "listIndexes", Value: coll}})
		if isNamespaceNotFound(err) {
			names, err = nil, nil // no collection, no index
		}
	} else {
		names, err = r.internalNames(db, bson.D{{Key: "listCollections", Value: 1}, {Key: "filter", Value: bson.D{{Key: "name", Value: coll}}}})
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	want := !strings.HasSuffix(name, "NotExists")
	what, target := "collection", coll
	if index {
		what, target = "index", indexName
	}
	if slices.Contains(names, target) != want {
		if want {
			return fmt.Errorf("%s: the %s %s does not exist in %s.%s (there are %v)", where, what, target, db, coll, names)
		}
		return fmt.Errorf("%s: the %s %s exists in %s.%s", where, what, target, db, coll)
	}
	return nil
}

// internalNames runs a listing command (listCollections, listIndexes)
// through the internal client and returns the names it lists.
func (r *testRun) internalNames(db string, cmd bson.D) ([]string, error) {
	cur, err := r.internal.Cursor(r.ctx, db, cmd)
	if err != nil {
		return nil, err
	}
	docs, err := cur.All(r.ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range docs {
		if n, ok := d.Lookup("name").StringValueOK(); ok {
			names = append(names, n)
		}
	}
	return names, nil
}
