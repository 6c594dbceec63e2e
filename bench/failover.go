package bench

// Shape 8, failover: each client on an in-process replica set of its own,
// under a load of retryable inserts and reads, while the primary steps down
// and another member is elected.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
)

// failoverShapeName names shape 8 in the report.
const failoverShapeName = "8 failover"

// FailoverShape is the number of the failover scenario among the shapes.
const FailoverShape = 8

// FailoverConfig is the failover scenario: Goroutines goroutines, the even
// ones inserting documents of unique _ids, the odd ones finding one by _id
// with read preference primaryPreferred, against a replica set of Members
// members (with the clients' defaults: heartbeatFrequencyMS 10 s,
// retryWrites and retryReads on). After Before of load the primary steps
// down and the next member is elected at once; the load goes on for After
// past the first write the new primary acknowledges.
type FailoverConfig struct {
	Members    int
	Goroutines int
	Before     time.Duration
	After      time.Duration
	// Limit bounds every wait of a round: for the first write on the new
	// primary, and each operation (which then counts as failed).
	Limit time.Duration
}

// FullFailover returns the scenario of the full run.
func FullFailover() FailoverConfig {
	return FailoverConfig{Members: 3, Goroutines: 32, Before: time.Second, After: time.Second, Limit: 30 * time.Second}
}

// SmokeFailover returns the scenario on a tiny scale, for the smoke test: the
// same load and failover, a tenth as long.
func SmokeFailover() FailoverConfig {
	return FailoverConfig{Members: 3, Goroutines: 32, Before: 100 * time.Millisecond, After: 100 * time.Millisecond, Limit: 30 * time.Second}
}

// failoverClient is a client of the replica set, reduced to the scenario's
// two operations.
type failoverClient interface {
	insert(ctx context.Context, id int64) error
	find(ctx context.Context, id int64) error
	// flush returns once the monitoring handlers have had every event
	// of the operations that have returned (see Pool.Flush).
	flush(ctx context.Context) error
	close()
}

const (
	failoverDB   = "bench"
	failoverColl = "failover"
)

var primaryPreferred = topology.ReadPref{Mode: topology.ModePrimaryPreferred}

type mongopoolFailover struct{ c *mongopool.Client }

func (m mongopoolFailover) insert(ctx context.Context, id int64) error {
	return insertID(ctx, m.c, failoverDB, failoverColl, id)
}

// insertID inserts the document {_id: id} with c. A write error comes in a
// reply with ok: 1: it is returned as an error, as the official driver
// reports it.
func insertID(ctx context.Context, c *mongopool.Client, db, coll string, id int64) error {
	reply, err := c.Write(ctx, db, bson.D{
		{Key: "insert", Value: coll},
		{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: id}}}},
	})
	if err != nil {
		return err
	}
	if we, err := reply.LookupErr("writeErrors"); err == nil {
		return fmt.Errorf("write error: %v", we)
	}
	return nil
}

func (m mongopoolFailover) find(ctx context.Context, id int64) error {
	_, err := m.c.Read(ctx, failoverDB, bson.D{
		{Key: "find", Value: failoverColl},
		{Key: "filter", Value: bson.D{{Key: "_id", Value: id}}},
		{Key: "limit", Value: 1},
		{Key: "singleBatch", Value: true},
	}, mongopool.WithReadPreference(primaryPreferred))
	return err
}

func (m mongopoolFailover) flush(ctx context.Context) error { return m.c.Flush(ctx) }

// close closes the client, then waits for its handlers to have the
// closing's events, which Close does not.
func (m mongopoolFailover) close() {
	m.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.c.Flush(ctx)
}

type officialFailover struct {
	c           *mongo.Client
	coll, reads *mongo.Collection
}

func (o officialFailover) insert(ctx context.Context, id int64) error {
	_, err := o.coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}})
	return err
}

func (o officialFailover) find(ctx context.Context, id int64) error {
	err := o.reads.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil // the insert of that _id may have failed, or not be there yet
	}
	return err
}

func (o officialFailover) flush(context.Context) error { return nil }

func (o officialFailover) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o.c.Disconnect(ctx)
}

// newFailoverClient connects a client of kind k to uri with its defaults.
// w hears, from the client's command monitoring, the inserts under way and
// the server that acknowledged each, and, from its SDAM events, the primary
// of every new description of the topology.
func newFailoverClient(k Kind, uri string, w *ackWatch) (failoverClient, error) {
	switch k {
	case Mongopool:
		// An operation's attempts share its OperationID, and its events
		// come in order: the key of an attempt until its outcome.
		c, err := mongopool.NewClient(uri,
			mongopool.WithCommandEventHandler(func(e mongopool.CommandEvent) {
				if e.Name != "insert" {
					return
				}
				switch e.Type {
				case mongopool.CommandStarted:
					w.started(e.OperationID, e.Command)
				case mongopool.CommandSucceeded:
					w.finished(e.OperationID, e.Address, true)
				case mongopool.CommandFailed:
					w.finished(e.OperationID, e.Address, false)
				}
			}),
			mongopool.WithTopologyEventHandler(func(e topology.Event) {
				if ch, ok := e.(*topology.TopologyDescriptionChanged); ok {
					for _, sd := range ch.New.Servers() {
						if sd.Type == topology.RSPrimary {
							w.primary(sd.Address)
						}
					}
				}
			}))
		if err != nil {
			return nil, err
		}
		return mongopoolFailover{c}, nil
	case Official:
		// The driver's connection id is "host:port[-n]"; an attempt is
		// keyed by its request id.
		addr := func(connID string) string { a, _, _ := strings.Cut(connID, "["); return a }
		mon := &event.CommandMonitor{
			Started: func(_ context.Context, e *event.CommandStartedEvent) {
				if e.CommandName == "insert" {
					w.started(e.RequestID, e.Command)
				}
			},
			Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
				if e.CommandName == "insert" {
					w.finished(e.RequestID, addr(e.ConnectionID), true)
				}
			},
			Failed: func(_ context.Context, e *event.CommandFailedEvent) {
				if e.CommandName == "insert" {
					w.finished(e.RequestID, addr(e.ConnectionID), false)
				}
			},
		}
		smon := &event.ServerMonitor{TopologyDescriptionChanged: func(e *event.TopologyDescriptionChangedEvent) {
			for _, sd := range e.NewDescription.Servers {
				if sd.Kind == "RSPrimary" {
					w.primary(sd.Addr.String())
				}
			}
		}}
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetMonitor(mon).SetServerMonitor(smon))
		if err != nil {
			return nil, err
		}
		db := c.Database(failoverDB)
		return officialFailover{
			c:     c,
			coll:  db.Collection(failoverColl),
			reads: db.Collection(failoverColl, options.Collection().SetReadPreference(readpref.PrimaryPreferred())),
		}, nil
	}
	return nil, fmt.Errorf("bench: no client of kind %q", k)
}

// ackWatch finds, from a client's command monitoring, the inserts that the
// server it is told to watch acknowledged, and from its SDAM events the first
// description of the topology in which that server is the primary.
//
// mongopool delivers its events on goroutines of its own, after the
// operations that caused them may have returned: the moment a handler hears
// of a reply says little of when the client had it. So an acknowledged insert
// is named by its _id, which its CommandStarted event carries, and the time
// of the acknowledgement is taken by the goroutine that made the insert, when
// its call returned, for both clients alike (see firstReturned).
type ackWatch struct {
	addr atomic.Pointer[string]

	mu      sync.Mutex
	pending map[int64]int64 // the _id of each insert attempt under way, by its key
	acked   []int64         // the _ids of the inserts that the watched server acknowledged
	once    sync.Once
	first   chan struct{} // closed when the handler hears of the first of them

	seenOnce sync.Once
	seen     atomic.Pointer[time.Time]
}

func newAckWatch() *ackWatch {
	return &ackWatch{pending: make(map[int64]int64), first: make(chan struct{})}
}

func (w *ackWatch) watch(addr string) { w.addr.Store(&addr) }

// started records the _id of the insert cmd, an attempt known by key until
// its outcome.
func (w *ackWatch) started(key int64, cmd bson.Raw) {
	id, ok := cmd.Lookup("documents", "0", "_id").AsInt64OK()
	if !ok {
		return
	}
	w.mu.Lock()
	w.pending[key] = id
	w.mu.Unlock()
}

// finished records the outcome of the attempt known by key, on the server at
// addr.
func (w *ackWatch) finished(key int64, addr string, ok bool) {
	a := w.addr.Load()
	w.mu.Lock()
	id, known := w.pending[key]
	delete(w.pending, key)
	hit := ok && known && a != nil && *a == addr
	if hit {
		w.acked = append(w.acked, id)
	}
	w.mu.Unlock()
	if hit {
		w.once.Do(func() { close(w.first) })
	}
}

func (w *ackWatch) primary(addr string) {
	if a := w.addr.Load(); a != nil && *a == addr {
		w.seenOnce.Do(func() { now := time.Now(); w.seen.Store(&now) })
	}
}

// ackedIDs returns the _ids of the inserts the watched server acknowledged.
func (w *ackWatch) ackedIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acked)
}

// insertDone is an insert that succeeded: its _id, and when its call
// returned, since the start of the load.
type insertDone struct {
	id int64
	at time.Duration
}

// firstReturned returns the earliest return among the inserts done whose
// _id is in ids; false if none is.
func firstReturned(done [][]insertDone, ids []int64) (time.Duration, bool) {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var first time.Duration
	found := false
	for _, ds := range done {
		for _, d := range ds {
			if want[d.id] && (!found || d.at < first) {
				first, found = d.at, true
			}
		}
	}
	return first, found
}

// failoverRun is one round of one client.
type failoverRun struct {
	failover time.Duration // election to the return of the first insert the new primary acknowledged; 0 if none
	seen     time.Duration // election to the first description with the new primary; 0 if none
	done     int64         // operations that ended, successful or not
	failed   int64
	elapsed  time.Duration    // of the load
	errors   map[string]int64 // failed operations by message
}

// maxErrorKinds bounds the distinct error messages kept per round: the
// others are counted under one line.
const maxErrorKinds = 20

// failoverRound runs the scenario once for the client of kind k, on a
// replica set of its own.
func failoverRound(k Kind, cfg FailoverConfig) (failoverRun, error) {
	var r failoverRun
	rs, err := mongotest.StartReplicaSet("rs", cfg.Members)
	if err != nil {
		return r, err
	}
	defer rs.Close()
	w := newAckWatch()
	c, err := newFailoverClient(k, rs.URI(), w)
	if err != nil {
		return r, err
	}
	// The client closes first, while the set answers: the official driver's
	// Disconnect ends its sessions on a server it selects, and waits for one
	// until its context ends once the set is gone.
	defer c.close()

	// Warm: a primary known, and a connection to it.
	var nextID atomic.Int64
	warm, cancel := context.WithTimeout(context.Background(), cfg.Limit)
	err = c.insert(warm, nextID.Add(1))
	if err == nil {
		err = c.find(warm, 1)
	}
	cancel()
	if err != nil {
		return r, fmt.Errorf("%s: before the failover: %w", k, err)
	}

	var (
		mu      sync.Mutex
		stop    atomic.Bool
		wg      sync.WaitGroup
		done    atomic.Int64
		failed  atomic.Int64
		byError = map[string]int64{}
		// The inserts that succeeded, per goroutine: when each
		// returned.
		inserted = make([][]insertDone, cfg.Goroutines)
	)
	start := time.Now()
	for g := range cfg.Goroutines {
		wg.Go(func() {
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
				var err error
				if g%2 == 0 {
					id := nextID.Add(1)
					if err = c.insert(ctx, id); err == nil {
						inserted[g] = append(inserted[g], insertDone{id, time.Since(start)})
					}
				} else {
					err = c.find(ctx, 1+rand.Int64N(nextID.Load()))
				}
				cancel()
				done.Add(1)
				if err != nil {
					failed.Add(1)
					msg := err.Error()
					mu.Lock()
					if _, ok := byError[msg]; ok || len(byError) < maxErrorKinds {
						byError[msg]++
					} else {
						byError["(other errors)"]++
					}
					mu.Unlock()
				}
			}
		})
	}
	endLoad := func() {
		stop.Store(true)
		wg.Wait()
		r.elapsed = time.Since(start)
		r.done, r.failed, r.errors = done.Load(), failed.Load(), byError
	}

	time.Sleep(cfg.Before)
	old := slices.Index(rs.Members(), rs.Primary())
	next := (old + 1) % cfg.Members
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
	err = rs.StepDown(sctx)
	cancel()
	if err != nil {
		endLoad()
		return r, fmt.Errorf("step-down: %w", err)
	}
	w.watch(rs.Members()[next].Addr())
	elected := time.Now()
	if err := rs.Elect(next); err != nil {
		endLoad()
		return r, fmt.Errorf("election of member %d: %w", next, err)
	}
	limit := time.NewTimer(cfg.Limit)
	select {
	case <-w.first:
	case <-limit.C:
		// No write on the new primary within the limit: the round's figure
		// says so (failover 0), its failed operations say why.
	}
	limit.Stop()
	time.Sleep(cfg.After)
	endLoad()
	fctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
	err = c.flush(fctx)
	cancel()
	if err != nil {
		return r, fmt.Errorf("%s: waiting for the monitoring events: %w", k, err)
	}
	if at, ok := firstReturned(inserted, w.ackedIDs()); ok {
		r.failover = max(at-elected.Sub(start), time.Nanosecond)
	}
	if seen := w.seen.Load(); seen != nil {
		r.seen = seen.Sub(elected)
	}
	return r, nil
}

// Failover is shape 8: for each client, Rounds rounds of the failover
// scenario cfg, alternating the clients, each on a replica set of its own;
// the medians are kept, and the official driver's errors noted.
func (s *Suite) Failover(cfg FailoverConfig) error {
	kinds := []Kind{Mongopool, Official}
	runs := map[Kind][]failoverRun{}
	rounds := max(s.Rounds, 1)
	for i := range rounds {
		for _, k := range kinds {
			s.progress("shape 8: failover, %s, round %d of %d", k, i+1, rounds)
			r, err := failoverRound(k, cfg)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			runs[k] = append(runs[k], r)
		}
	}
	cas := fmt.Sprintf("%d members, %d goroutines (inserts; finds by _id, primaryPreferred), step-down then election after %s, load until %s past the first write on the new primary; median of %d rounds",
		cfg.Members, cfg.Goroutines, cfg.Before, cfg.After, rounds)
	failedTotal := map[Kind]int64{}
	for _, k := range kinds {
		rs := runs[k]
		var acked, seen []time.Duration
		var done, failed, rates []float64
		errs := map[string]int64{}
		for _, r := range rs {
			if r.failover > 0 {
				acked = append(acked, r.failover)
			}
			if r.seen > 0 {
				seen = append(seen, r.seen)
			}
			done = append(done, float64(r.done))
			failed = append(failed, float64(r.failed))
			rates = append(rates, float64(r.done)/r.elapsed.Seconds())
			failedTotal[k] += r.failed
			for m, n := range r.errors {
				errs[m] += n
			}
		}
		s.row(failoverShapeName, cas, k,
			Fig{"new primary seen", failoverFig(seen, len(rs))},
			Fig{"failover", failoverFig(acked, len(rs))},
			Fig{"failed ops", fmt.Sprintf("%.0f", medianOf(failed))},
			Fig{"failed, all rounds", fmt.Sprint(failedTotal[k])},
			Fig{"ops done", fmt.Sprintf("%.0f", medianOf(done))},
			Fig{"ops/s", fmt.Sprintf("%.0f", medianOf(rates))},
		)
		if len(errs) > 0 {
			s.note("Shape 8, %s: %d operations failed over %d rounds: %s.", k, failedTotal[k], len(rs), errorList(errs))
		}
	}
	s.check(failoverShapeName, "no operation of mongopool's fails",
		fmt.Sprintf("%d failed over %d rounds (official: %d)", failedTotal[Mongopool], rounds, failedTotal[Official]),
		failedTotal[Mongopool] == 0)
	s.note("Shape 8: failover is the time from the election to the return of the first insert acknowledged by the new primary, " +
		"taken by the goroutine that made it (the server that acknowledged it comes from the client's command monitoring, " +
		"matched by the insert's _id once every event was delivered: mongopool delivers them on a goroutine of its own, " +
		"later than the reply); new primary seen, from the election to the moment the client's SDAM event handler hears of " +
		"the first description of the topology that has it as the primary (the official driver calls it on the goroutine " +
		"that changes the description, mongopool on a goroutine of its own: its delay is counted); median (min-max) of the rounds.")
	return nil
}

// failoverFig renders the failover times: their median and range, and how
// many rounds saw no write on the new primary at all.
func failoverFig(ds []time.Duration, rounds int) string {
	if len(ds) == 0 {
		return fmt.Sprintf("none in %d rounds", rounds)
	}
	slices.Sort(ds)
	v := fmtDur(ds[len(ds)/2])
	if len(ds) > 1 {
		v += fmt.Sprintf(" (%s-%s)", fmtDur(ds[0]), fmtDur(ds[len(ds)-1]))
	}
	if missed := rounds - len(ds); missed > 0 {
		v += fmt.Sprintf("; none in %d rounds", missed)
	}
	return v
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// errorList renders errors by message, the most frequent first: "12 × `msg`".
func errorList(errs map[string]int64) string {
	msgs := make([]string, 0, len(errs))
	for m := range errs {
		msgs = append(msgs, m)
	}
	slices.SortFunc(msgs, func(a, b string) int {
		return cmp.Or(cmp.Compare(errs[b], errs[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = fmt.Sprintf("%d × `%s`", errs[m], m)
	}
	return strings.Join(parts, "; ")
}
