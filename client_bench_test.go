package mongopool_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
)

// benchClient is a client of a one-member replica set of the test server,
// in process: the allocations counted are the client's and the server's.
func benchClient(b *testing.B) *mongopool.Client {
	b.Helper()
	rs, err := mongotest.StartReplicaSet("rs", 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	c, err := mongopool.Connect(context.Background(), rs.URI())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// A Read (find by _id) and a Write (insert of one document, a retryable
// write) per operation.
func BenchmarkClient(b *testing.B) {
	ctx := context.Background()
	b.Run("Read", func(b *testing.B) {
		c := benchClient(b)
		if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}}); err != nil {
			b.Fatal(err)
		}
		find := bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Read(ctx, "db", find); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Write", func(b *testing.B) {
		c := benchClient(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i}}}}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A cursor's Next that runs a getMore (batches of one document).
func BenchmarkCursorGetMore(b *testing.B) {
	ctx := context.Background()
	c := benchClient(b)
	const n = 1000
	docs := make(bson.A, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}}
	}
	if _, err := c.Write(ctx, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}}); err != nil {
		b.Fatal(err)
	}
	find := bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 1}}
	var cur *mongopool.Cursor
	b.ReportAllocs()
	for b.Loop() {
		if cur == nil || !cur.Next(ctx) {
			if cur != nil {
				if err := cur.Err(); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if cur, err = c.Cursor(ctx, "db", find, mongopool.WithBatchSize(1)); err != nil {
				b.Fatal(err)
			}
			cur.Next(ctx) // the find's document
		}
	}
	cur.Close(ctx)
}
