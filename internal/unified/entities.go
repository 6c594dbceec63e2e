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
	}
	return fmt.Sprintf("%T", v)
}

// database is a database entity: a client, a database name, and the read
// preference of its reads, if its options give one.
type database struct {
	client   *client
	name     string
	readPref *topology.ReadPref
}

// collection is a collection entity: a database, a collection name, and the
// read preference of its reads (its database's unless its options give
// one).
type collection struct {
	db       *database
	name     string
	readPref *topology.ReadPref
}

// readOptions returns the options of a read on the collection: its read
// preference, if it has one.
func (c *collection) readOptions() []mongopool.CommandOption {
	if c.readPref == nil {
		return nil
	}
	return []mongopool.CommandOption{mongopool.WithReadPreference(*c.readPref)}
}

// entityOptions reads a collectionOrDatabaseOptions document: the runner
// applies its readPreference.
func entityOptions(where string, doc bson.Raw) (*topology.ReadPref, error) {
	if doc == nil {
		return nil, nil
	}
	o := readObject(where, docValue(doc), []string{"readPreference"}, "readConcern", "writeConcern", "timeoutMS")
	rp := o.document("readPreference", false)
	if o.err != nil || rp == nil {
		return nil, o.err
	}
	pref, err := readPreference(where+".readPreference", rp)
	if err != nil {
		return nil, err
	}
	return &pref, nil
}

// entityTypes are the entity types the runner creates.
var entityTypes = []string{"client", "database", "collection", "thread"}

// unavailableEntities are the entity types of the format that stand for
// what the project does not have: a test that creates one is skipped, with
// the reason given here.
var unavailableEntities = map[string]string{
	"session":          "explicit sessions (session entities): the client has no session API, and the test server no transactions",
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
		rp, err := entityOptions(where+".databaseOptions", opts)
		if err != nil {
			return err
		}
		c, err := entity[*client](r, where, clientID)
		if err != nil {
			return err
		}
		return r.entities.add(where, id, &database{client: c, name: name, readPref: rp})
	case "collection":
		o := readObject(where, spec, []string{"id", "database", "collectionName", "collectionOptions"})
		id, dbID, name := o.str("id", true), o.str("database", true), o.str("collectionName", true)
		opts := o.document("collectionOptions", false)
		if o.err != nil {
			return o.err
		}
		rp, err := entityOptions(where+".collectionOptions", opts)
		if err != nil {
			return err
		}
		db, err := entity[*database](r, where, dbID)
		if err != nil {
			return err
		}
		if rp == nil {
			rp = db.readPref
		}
		return r.entities.add(where, id, &collection{db: db, name: name, readPref: rp})
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
