package unified

import (
	"context"
	"errors"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
)

// cursor is a cursor entity (createFindCursor): a mongopool.Cursor, whose
// getMores and killCursors go to the server (in a load-balanced
// deployment, over the connection) its find ran on, with the find's
// session.
type cursor struct {
	c   *client
	cur *mongopool.Cursor

	mu     sync.Mutex
	closed bool
}

// createFindCursor runs a find and returns its cursor, unread.
func (r *testRun) createFindCursor(where string, coll *collection, args bson.Raw) (result, error) {
	cmd, batchSize, err := findCommand(where, coll, args)
	if err != nil {
		return result{}, err
	}
	mc, err := r.openCursor(coll, cmd, batchSize)
	if err != nil {
		return result{}, err
	}
	c := coll.db.client
	cur := &cursor{c: c, cur: mc}
	if mc.ID() != 0 {
		if err := c.addCursor(cur); err != nil {
			cur.close(r.ctx)
			return result{}, err
		}
	}
	return result{entity: cur}, nil
}

// openCursor runs cmd as a cursor of the collection's client (a retryable
// read, whose getMores go to its server), with getMores of batchSize if
// positive.
func (r *testRun) openCursor(coll *collection, cmd bson.D, batchSize int64) (*mongopool.Cursor, error) {
	c := coll.db.client
	if c.isClosed() {
		return nil, errClientClosed
	}
	opts := coll.readOptions()
	if batchSize > 0 {
		opts = append(opts, mongopool.WithBatchSize(int32(min(batchSize, 1<<31-1))))
	}
	return c.cl.Cursor(r.ctx, coll.db.name, cmd, opts...)
}

// errCursorExhausted is the iteration of a cursor that has no more
// documents.
var errCursorExhausted = errors.New("the cursor has no more documents")

// next returns the cursor's next document, with getMores until one comes
// (one at most if once: then nil when it brought none). An error ends the
// cursor: a driver does not use a cursor whose getMore failed.
func (cur *cursor) next(ctx context.Context, once bool) (bson.Raw, error) {
	cur.mu.Lock()
	defer cur.mu.Unlock()
	if cur.closed {
		return nil, errors.New("the cursor is closed")
	}
	more := cur.cur.Next
	if once {
		more = cur.cur.TryNext
	}
	if more(ctx) {
		return cur.cur.Current(), nil
	}
	if err := cur.cur.Err(); err != nil {
		return nil, err
	}
	if cur.cur.ID() == 0 {
		return nil, &runnerError{errCursorExhausted}
	}
	return nil, nil // iterateOnce: the getMore brought nothing
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
	cur.cur.Close(ctx)
	cur.c.dropCursor(cur)
}
