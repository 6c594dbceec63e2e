package unified

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
)

// cursor is a cursor entity (createFindCursor): the documents of the
// current batch not yet returned, and the server's cursor while it has
// more. In a load-balanced deployment the cursor keeps the connection of
// its find until it is exhausted or closed, as the load balancer
// specification has a driver pin it (the load balancer sends each
// connection to one mongos, which alone knows the cursor); elsewhere each
// getMore checks a connection out, on the server the find ran on.
type cursor struct {
	c    *client
	db   string
	coll string
	// batchSize and limit are find's: the getMores ask for no more.
	batchSize, limit int64
	// opts select the server of the getMores: the find's.
	opts []mongopool.CommandOption

	mu       sync.Mutex
	id       int64      // the server's cursor, 0 once it has no more
	docs     []bson.Raw // the batch's documents not yet returned
	returned int64      // documents returned so far
	pin      *pinned    // the connection kept, in a load-balanced deployment
	closed   bool
}

// createFindCursor runs a find and returns its cursor, unread.
func (r *testRun) createFindCursor(where string, coll *collection, args bson.Raw) (result, error) {
	cmd, batchSize, limit, err := findCommand(where, coll, args)
	if err != nil {
		return result{}, err
	}
	c := coll.db.client
	cur := &cursor{c: c, db: coll.db.name, coll: coll.name, batchSize: batchSize, limit: limit, opts: coll.readOptions()}
	var reply bson.Raw
	if c.pinCursors {
		cur.pin = c.pinConnection(r.ctx, cur.opts)
		reply, err = cur.pin.run(r.ctx, c, coll.db.name, cmd)
	} else {
		reply, err = c.run(r.ctx, opRead, coll.db.name, cmd, cur.opts...)
	}
	if err != nil {
		cur.release()
		return result{}, err
	}
	docs := bson.A{}
	if cur.id, err = cursorBatch(reply, "firstBatch", &docs); err != nil {
		cur.release()
		return result{}, err
	}
	for _, d := range docs {
		cur.docs = append(cur.docs, d.(bson.Raw))
	}
	if cur.id == 0 {
		cur.release()
	} else if err := c.addCursor(cur); err != nil {
		cur.close(r.ctx)
		return result{}, err
	}
	return result{entity: cur}, nil
}

// errCursorExhausted is the iteration of a cursor that has no more
// documents.
var errCursorExhausted = errors.New("the cursor has no more documents")

// next returns the cursor's next document, with getMores until one comes
// (once only if once). An error ends the cursor: a driver does not use a
// cursor whose getMore failed.
func (cur *cursor) next(ctx context.Context, once bool) (bson.Raw, error) {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.closed {
		return nil, errors.New("the cursor is closed")
	}
	for len(cur.docs) == 0 {
		if cur.id == 0 {
			return nil, &runnerError{errCursorExhausted}
		}
		more := bson.D{{Key: "getMore", Value: cur.id}, {Key: "collection", Value: cur.coll}}
		n := cur.batchSize
		if left := cur.limit - cur.returned; cur.limit > 0 && (n == 0 || left < n) {
			n = left
		}
		if n > 0 {
			more = append(more, bson.E{Key: "batchSize", Value: n})
		}
		var reply bson.Raw
		var err error
		if cur.pin != nil {
			reply, err = cur.pin.run(ctx, cur.c, cur.db, more)
		} else {
			reply, err = cur.c.run(ctx, opCommand, cur.db, more, cur.opts...)
		}
		docs := bson.A{}
		if err == nil {
			cur.id, err = cursorBatch(reply, "nextBatch", &docs)
		}
		if err != nil {
			cur.id = 0
			cur.releaseLocked()
			return nil, err
		}
		for _, d := range docs {
			cur.docs = append(cur.docs, d.(bson.Raw))
		}
		if cur.id == 0 {
			cur.releaseLocked()
		}
		if once && len(cur.docs) == 0 {
			return nil, nil
		}
	}
	d := cur.docs[0]
	cur.docs = cur.docs[1:]
	cur.returned++
	return d, nil
}

// close kills the server's cursor if it has more (errors are ignored, as
// the format says) and gives its connection back. Closing twice does
// nothing.
func (cur *cursor) close(ctx context.Context) {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.closed {
		return
	}
	cur.closed = true
	if cur.id != 0 {
		kill := bson.D{{Key: "killCursors", Value: cur.coll}, {Key: "cursors", Value: bson.A{cur.id}}}
		if cur.pin != nil {
			cur.pin.run(ctx, cur.c, cur.db, kill)
		} else {
			cur.c.run(ctx, opCommand, cur.db, kill, cur.opts...)
		}
		cur.id = 0
	}
	cur.releaseLocked()
	cur.docs = nil
	cur.c.dropCursor(cur)
}

func (cur *cursor) release() {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	cur.releaseLocked()
}

// releaseLocked gives the pinned connection back, if the cursor has one.
func (cur *cursor) releaseLocked() {
	if cur.pin != nil {
		cur.pin.release()
		cur.pin = nil
	}
}

// pinned is the connection a client entity keeps for a cursor (a
// mongopool.Conn) until release, or until a command on it fails: the
// connection goes back to its pool then, so that its events come before
// the operation's end.
type pinned struct {
	conn *mongopool.Conn
	err  error // why there is no connection: the Conn's error
}

// pinConnection checks out the connection of the server opts select.
func (c *client) pinConnection(ctx context.Context, opts []mongopool.CommandOption) *pinned {
	conn, err := c.cl.Conn(ctx, opts...)
	return &pinned{conn: conn, err: err}
}

// run runs cmd on db over the pinned connection (the Client gives it an
// implicit session).
func (p *pinned) run(ctx context.Context, c *client, db string, cmd bson.D) (bson.Raw, error) {
	if p.conn == nil {
		if p.err == nil {
			return nil, errors.New("the cursor's connection is no longer pinned")
		}
		return nil, fmt.Errorf("the cursor's connection: %w", p.err)
	}
	reply, err := p.conn.RunCommand(ctx, db, cmd)
	if err != nil {
		p.release()
		p.err = err
	}
	return reply, err
}

// release ends the pinning: the connection goes back to its pool.
func (p *pinned) release() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
}
