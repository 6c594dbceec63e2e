package unified

import (
	"context"
	"errors"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
)

// cursor is a cursor entity (createFindCursor, createCommandCursor): a
// mongopool.Cursor, whose getMores and killCursors go to the server (in a
// load-balanced deployment, over the connection) its command ran on, with
// the command's session.
type cursor struct {
	c   *client
	cur *mongopool.Cursor

	mu     sync.Mutex
	closed bool
}

// createFindCursor runs a find and returns its cursor, unread.
func (r *testRun) createFindCursor(where string, coll *collection, args bson.Raw) (result, error) {
	cmd, batchSize, s, err := r.findCommand(where, coll, args, false)
	if err != nil {
		return result{}, err
	}
	return r.newCursor(coll.db.client, coll.db.name, cmd, batchSize, withGetMoreComment(coll.readOptions(s), cmd))
}

// newCursor runs cmd as a cursor of the client's and returns it, unread,
// as a cursor entity.
func (r *testRun) newCursor(c *client, db string, cmd bson.D, batchSize int64, opts []mongopool.CommandOption) (result, error) {
	mc, err := r.openCursor(c, db, cmd, batchSize, opts)
	if err != nil {
		return result{}, err
	}
	cur := &cursor{c: c, cur: mc}
	if mc.ID() != 0 {
		if err := c.addCursor(cur); err != nil {
			cur.close(r.ctx)
			return result{}, err
		}
	}
	return result{entity: cur}, nil
}

// openCursor runs cmd as a cursor of the client's (a retryable read, whose
// getMores go to its server), with opts and getMores of batchSize if
// positive.
func (r *testRun) openCursor(c *client, db string, cmd bson.D, batchSize int64, opts []mongopool.CommandOption) (*mongopool.Cursor, error) {
	if c.isClosed() {
		return nil, errClientClosed
	}
	if batchSize > 0 {
		opts = append(opts, mongopool.WithBatchSize(int32(min(batchSize, 1<<31-1))))
	}
	return c.cl.Cursor(r.ctx, db, cmd, opts...)
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
