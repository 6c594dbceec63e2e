package mongotest

import (
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// defaultFirstBatch is the size of find's first batch when the command
// gives no batchSize, as in MongoDB.
const defaultFirstBatch = 101

// maxBatchBytes bounds the documents of one batch, so that a reply stays
// within the maximum BSON object size, give or take its envelope; a batch
// always holds at least one document.
const maxBatchBytes = MaxBSONObjectSize - 64*1024

// cursor is an open cursor: the documents a find or an aggregate has yet
// to return.
type cursor struct {
	ns   string
	docs []bson.Raw
	left int64 // documents the limit still allows, or -1 for no limit
	// project, if not nil, is applied to each document as it is returned,
	// so that the documents never read cost nothing.
	project   *projection
	projected int // the leading docs already projected
}

// cursors are the server's open cursors. Any connection may use any
// cursor, as with mongod.
type cursors struct {
	mu   sync.Mutex
	m    map[int64]*cursor
	last int64
}

func (cs *cursors) init() { cs.m = map[int64]*cursor{} }

// reset forgets every cursor, as a restart of mongod does.
func (cs *cursors) reset() {
	cs.mu.Lock()
	cs.m = map[int64]*cursor{}
	cs.mu.Unlock()
}

// nextBatch removes the next batch from c: up to n documents (n <= 0 means
// no count limit) within the limit and maxBatchBytes. It reports whether c
// is exhausted afterwards.
func (c *cursor) nextBatch(n int64) ([]bson.Raw, bool) {
	most := int64(len(c.docs))
	if n > 0 && n < most {
		most = n
	}
	if c.left >= 0 && c.left < most {
		most = c.left
	}
	count, size := 0, 0
	for int64(count) < most {
		if c.project != nil && count >= c.projected {
			c.docs[count] = c.project.apply(c.docs[count])
			c.projected = count + 1
		}
		l := len(c.docs[count])
		if count > 0 && size+l > maxBatchBytes {
			break
		}
		size += l
		count++
	}
	batch := c.docs[:count:count]
	c.docs = c.docs[count:]
	c.projected = max(c.projected-count, 0)
	if c.left >= 0 {
		c.left -= int64(count)
	}
	return batch, len(c.docs) == 0 || c.left == 0
}

// open registers c and returns its id.
func (cs *cursors) open(c *cursor) int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.last++
	cs.m[cs.last] = c
	return cs.last
}

// getMore returns the next batch of the cursor id on ns, and the cursor id
// to report: id, or 0 once the cursor is exhausted (and closed).
func (cs *cursors) getMore(id int64, ns string, n int64) ([]bson.Raw, int64, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.m[id]
	if !ok {
		return nil, 0, errorf(codeCursorNotFound, "cursor id %d not found", id)
	}
	if c.ns != ns {
		return nil, 0, errorf(codeUnauthorized,
			"Requested getMore on namespace '%s', but cursor belongs to a different namespace %s", ns, c.ns)
	}
	batch, done := c.nextBatch(n)
	if done {
		delete(cs.m, id)
		id = 0
	}
	return batch, id, nil
}

// kill closes the cursor id on ns and reports whether it was open.
func (cs *cursors) kill(id int64, ns string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.m[id]
	if !ok || c.ns != ns {
		return false
	}
	delete(cs.m, id)
	return true
}
