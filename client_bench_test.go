package mongopool_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
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

// A transaction of one update, committed (WithTransaction), on the client
// and, in the same run against the same kind of server, on the official
// driver: the ratio of the two is the figure to read. The collection holds
// one document: the test server copies a collection for each transaction
// that uses it, which would otherwise be most of the cost.
func BenchmarkTransaction(b *testing.B) {
	ctx := context.Background()
	b.Run("mongopool", func(b *testing.B) {
		c := benchClient(b)
		s, err := c.StartSession()
		if err != nil {
			b.Fatal(err)
		}
		defer s.EndSession(ctx)
		inc := bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{bson.D{
			{Key: "q", Value: bson.D{{Key: "_id", Value: 1}}},
			{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}},
			{Key: "upsert", Value: true},
		}}}}
		b.ReportAllocs()
		for b.Loop() {
			err := s.WithTransaction(ctx, func(ctx context.Context) error {
				_, err := c.Write(ctx, "db", inc, mongopool.WithSession(s))
				return err
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("driver", func(b *testing.B) {
		rs, err := mongotest.StartReplicaSet("rs", 1)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { rs.Close() })
		client, err := mongo.Connect(options.Client().ApplyURI(rs.URI()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { client.Disconnect(context.Background()) })
		coll := client.Database("db").Collection("c")
		s, err := client.StartSession()
		if err != nil {
			b.Fatal(err)
		}
		defer s.EndSession(ctx)
		b.ReportAllocs()
		for b.Loop() {
			_, err := s.WithTransaction(ctx, func(ctx context.Context) (any, error) {
				return coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 1}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}}, options.UpdateOne().SetUpsert(true))
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDoAllocatesNothing: Do, which the proxy calls for every operation it
// relays, allocates nothing of its own (its fn sends nothing here), with a
// logger that hears the selections' Info messages as without one: the
// selection log's criteria were copied to the heap, and a command's name
// looked up in no command made an error, each time.
func TestDoAllocatesNothing(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx := context.Background()
	for _, logged := range []bool{false, true} {
		var opts []mongopool.ClientOption
		if logged {
			opts = append(opts, mongopool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))))
		}
		c, err := mongopool.Connect(ctx, rs.URI(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		noop := func(*connection.Conn) error { return nil }
		if err := c.Do(ctx, noop); err != nil { // the connection made
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			if err := c.Do(ctx, noop); err != nil {
				t.Fatal(err)
			}
		})
		c.Close()
		if allocs != 0 {
			t.Errorf("Do (logger: %v): %v allocations, want 0", logged, allocs)
		}
	}
}
