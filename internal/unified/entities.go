package unified

import (
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
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
	}
	return fmt.Sprintf("%T", v)
}

// database is a database entity: a client and a database name.
type database struct {
	client *client
	name   string
}

// collection is a collection entity: a database and a collection name.
type collection struct {
	db   *database
	name string
}

// entityTypes are the entity types the runner creates; the format has
// others, which fail the test by name.
var entityTypes = []string{"client", "database", "collection", "thread"}

// createEntities creates the entities of a createEntities list, in order.
func (r *testRun) createEntities(where string, list []bson.RawValue) error {
	for i, e := range list {
		w := fmt.Sprintf("%s[%d]", where, i)
		o := readObject(w, e, entityTypes, "clientEncryption", "session", "bucket")
		if o.err != nil {
			return o.err
		}
		elems, err := o.doc.Elements()
		if err != nil || len(elems) != 1 {
			return fmt.Errorf("%s: an entity has exactly one key, its type; got %s", w, show(e))
		}
		typ, spec := elems[0].Key(), elems[0].Value()
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
		c, err := newClient(where, spec, r.base, r.sessions, r.server.Topology)
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
		o := readObject(where, spec, []string{"id", "client", "databaseName"}, "databaseOptions")
		id, clientID, name := o.str("id", true), o.str("client", true), o.str("databaseName", true)
		if o.err != nil {
			return o.err
		}
		c, err := entity[*client](r, where, clientID)
		if err != nil {
			return err
		}
		return r.entities.add(where, id, &database{client: c, name: name})
	case "collection":
		o := readObject(where, spec, []string{"id", "database", "collectionName"}, "collectionOptions")
		id, dbID, name := o.str("id", true), o.str("database", true), o.str("collectionName", true)
		if o.err != nil {
			return o.err
		}
		db, err := entity[*database](r, where, dbID)
		if err != nil {
			return err
		}
		return r.entities.add(where, id, &collection{db: db, name: name})
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
