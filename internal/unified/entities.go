package unified

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/topology"
)

// entityMap is a test's entities by name. Thread entities use it at the
// same time as the test, hence the lock.
type entityMap struct {
	mu    sync.Mutex
	m     map[string]any
	order []string // names in the order of creation
}

func newEntityMap() *entityMap { return &entityMap{m: map[string]any{}} }

// add stores an entity under a name no other has.
func (e *entityMap) add(where, id string, v any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.m[id]; dup {
		return fmt.Errorf("%s: an entity named %q already exists", where, id)
	}
	e.m[id] = v
	e.order = append(e.order, id)
	return nil
}

func (e *entityMap) get(id string) (any, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.m[id]
	return v, ok
}

// all returns the entities of type T, in the order of creation.
func all[T any](e *entityMap) []T {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []T
	for _, id := range e.order {
		if v, ok := e.m[id].(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// entity returns the entity named id, which must be of type T.
func entity[T any](r *testRun, where, id string) (T, error) {
	var zero T
	v, ok := r.entities.get(id)
	if !ok {
		return zero, fmt.Errorf("%s: no entity named %q", where, id)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("%s: %q is a %s, not a %s", where, id, kindName(v), kindName(zero))
	}
	return t, nil
}

// kindName names an entity's type as the format does.
func kindName(v any) string {
	switch v.(type) {
	case *client:
		return "client"
	case *database:
		return "database"
	case *collection:
		return "collection"
	case *thread:
		return "thread"
	case *eventList:
		return "event list"
	case *cursor:
		return "cursor"
	case *topologyDescription:
		return "topology description"
	case *session:
		return "session"
	}
	return fmt.Sprintf("%T", v)
}

// database is a database entity: a client, a database name, and the
// options its databaseOptions give.
type database struct {
	client *client
	name   string
	nsOptions
}

// collection is a collection entity: a database, a collection name, and the
// options its collectionOptions give (its database's where they give none).
type collection struct {
	db   *database
	name string
	nsOptions
}

// nsOptions are the options of a database or collection entity
// (collectionOrDatabaseOptions) that its operations apply, as a driver's
// database and collection objects do: the read preference and read concern
// of its reads, the write concern of its writes. In a transaction, the
// transaction's apply instead.
type nsOptions struct {
	readPref     *topology.ReadPref
	readConcern  bson.D // {level: ...}; nil for none
	writeConcern bson.D // nil for none
}

// over returns o with the options it does not set taken from base.
func (o nsOptions) over(base nsOptions) nsOptions {
	if o.readPref == nil {
		o.readPref = base.readPref
	}
	if o.readConcern == nil {
		o.readConcern = base.readConcern
	}
	if o.writeConcern == nil {
		o.writeConcern = base.writeConcern
	}
	return o
}

// readOptions returns the options of a read in the session s (nil for
// none): the session, and the read preference of the transaction under way
// if any, else the entity's.
func (o nsOptions) readOptions(s *session) []mongopool.CommandOption {
	opts := s.options()
	rp := o.readPref
	if s.inTransaction() {
		rp = s.txnReadPref()
	}
	if rp != nil {
		opts = append(opts, mongopool.WithReadPreference(*rp))
	}
	return opts
}

// readCommand returns cmd with the entity's read concern, but in a
// transaction (whose first command the Client gives the transaction's).
func (o nsOptions) readCommand(cmd bson.D, s *session) bson.D {
	if o.readConcern == nil || s.inTransaction() {
		return cmd
	}
	return append(cmd, bson.E{Key: "readConcern", Value: o.readConcern})
}

// writeCommand returns cmd with the entity's write concern, but in a
// transaction (whose commit and abort carry the transaction's).
func (o nsOptions) writeCommand(cmd bson.D, s *session) bson.D {
	if o.writeConcern == nil || s.inTransaction() {
		return cmd
	}
	return append(cmd, bson.E{Key: "writeConcern", Value: o.writeConcern})
}

// unacknowledged reports whether the entity's writes in s are
// unacknowledged (w: 0).
func (o nsOptions) unacknowledged(s *session) bool {
	if s.inTransaction() {
		return false
	}
	for _, e := range o.writeConcern {
		if e.Key == "w" {
			n, ok := e.Value.(int32)
			return ok && n == 0
		}
	}
	return false
}

// entityOptions reads a collectionOrDatabaseOptions document: readPreference,
// readConcern and writeConcern.
func entityOptions(where string, doc bson.Raw) (nsOptions, error) {
	var out nsOptions
	if doc == nil {
		return out, nil
	}
	o := readObject(where, docValue(doc), []string{"readPreference", "readConcern", "writeConcern"}, "timeoutMS")
	rp := o.document("readPreference", false)
	rc := o.document("readConcern", false)
	wc := o.document("writeConcern", false)
	if o.err != nil {
		return out, o.err
	}
	if rp != nil {
		pref, err := readPreference(where+".readPreference", rp)
		if err != nil {
			return out, err
		}
		out.readPref = &pref
	}
	if rc != nil {
		level, err := readConcernLevel(where+".readConcern", rc)
		if err != nil {
			return out, err
		}
		out.readConcern = bson.D{{Key: "level", Value: level}}
	}
	if wc != nil {
		d, err := writeConcern(where+".writeConcern", wc)
		if err != nil {
			return out, err
		}
		out.writeConcern = d
	}
	return out, nil
}

// entityTypes are the entity types the runner creates.
var entityTypes = []string{"client", "database", "collection", "session", "thread"}

// unavailableEntities are the entity types of the format that stand for
// what the project does not have: a test that creates one is skipped, with
// the reason given here.
var unavailableEntities = map[string]string{
	"bucket":           "GridFS (bucket entities)",
	"clientEncryption": "client-side field level encryption (clientEncryption entities)",
}

// createEntities creates the entities of a createEntities list, in order.
func (r *testRun) createEntities(where string, list []bson.RawValue) error {
	for i, e := range list {
		w := fmt.Sprintf("%s[%d]", where, i)
		known := append(slices.Clone(entityTypes), slices.Collect(maps.Keys(unavailableEntities))...)
		o := readObject(w, e, known)
		if o.err != nil {
			return o.err
		}
		elems, err := o.doc.Elements()
		if err != nil || len(elems) != 1 {
			return fmt.Errorf("%s: an entity has exactly one key, its type; got %s", w, show(e))
		}
		typ, spec := elems[0].Key(), elems[0].Value()
		if why, ok := unavailableEntities[typ]; ok {
			return &skipError{fmt.Sprintf("%s: the project has no %s", w, why)}
		}
		w += "." + typ
		if err := r.createEntity(w, typ, spec); err != nil {
			return err
		}
	}
	return nil
}

func (r *testRun) createEntity(where, typ string, spec bson.RawValue) error {
	switch typ {
	case "client":
		c, err := newClient(where, spec, r.dep, r.sessions, r.setsFailPoints)
		if err != nil {
			return err
		}
		if err := r.entities.add(where, c.id, c); err != nil {
			c.close(r.ctx)
			return err
		}
		for _, l := range c.lists {
			if err := r.entities.add(where+" storeEventsAsEntities", l.id, l); err != nil {
				return err
			}
		}
		return nil
	case "database":
		o := readObject(where, spec, []string{"id", "client", "databaseName", "databaseOptions"})
		id, clientID, name := o.str("id", true), o.str("client", true), o.str("databaseName", true)
		opts := o.document("databaseOptions", false)
		if o.err != nil {
			return o.err
		}
		nso, err := entityOptions(where+".databaseOptions", opts)
		if err != nil {
			return err
		}
		c, err := entity[*client](r, where, clientID)
		if err != nil {
			return err
		}
		return r.entities.add(where, id, &database{client: c, name: name, nsOptions: nso})
	case "collection":
		o := readObject(where, spec, []string{"id", "database", "collectionName", "collectionOptions"})
		id, dbID, name := o.str("id", true), o.str("database", true), o.str("collectionName", true)
		opts := o.document("collectionOptions", false)
		if o.err != nil {
			return o.err
		}
		nso, err := entityOptions(where+".collectionOptions", opts)
		if err != nil {
			return err
		}
		db, err := entity[*database](r, where, dbID)
		if err != nil {
			return err
		}
		return r.entities.add(where, id, &collection{db: db, name: name, nsOptions: nso.over(db.nsOptions)})
	case "session":
		s, err := r.newSession(where, spec)
		if err != nil {
			return err
		}
		if err := r.entities.add(where, s.id, s); err != nil {
			s.end(r.ctx)
			return err
		}
		return nil
	case "thread":
		o := readObject(where, spec, []string{"id"})
		id := o.str("id", true)
		if o.err != nil {
			return o.err
		}
		th := newThread(id)
		if err := r.entities.add(where, id, th); err != nil {
			th.stop()
			<-th.done
			return err
		}
		return nil
	}
	return fmt.Errorf("%s: unknown entity type %q", where, typ)
}
