package integration

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/embedded"
	"github.com/mongopool/mongopool/internal/nodejs"
	"github.com/mongopool/mongopool/proxy"
)

// startProxyToFerretDB starts FerretDB, and a proxy in front of it with a
// client of maxPoolSize 4; all end with the test, the proxy's Serve
// returning ErrClosed. It returns the proxy, its client and its address.
func startProxyToFerretDB(t *testing.T) (*proxy.Proxy, *mongopool.Client, string) {
	t.Helper()
	s := startFerretDB(t, embedded.Options{})
	client, err := mongopool.NewClient(s.URI() + "?maxPoolSize=4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	p, err := proxy.New(client, proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln, proxy.Mongos) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-served; !errors.Is(err, proxy.ErrClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return p, client, ln.Addr().String()
}

// The proxy in front of a server we did not write, with the official Go
// driver as its client: CRUD, a cursor's getMores and its killCursors,
// compression on both hops.
func TestProxyToFerretDB(t *testing.T) {
	p, client, addr := startProxyToFerretDB(t)
	ctx := testCtx(t)
	for _, uri := range []string{"mongodb://" + addr + "/", "mongodb://" + addr + "/?compressors=zstd"} {
		c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(context.Background())
		coll := c.Database("proxied").Collection("things")
		if err := coll.Drop(ctx); err != nil {
			t.Fatalf("%s: drop: %v", uri, err)
		}
		var docs []any
		for i := range 25 {
			docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "sq", Value: i * i}})
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			t.Fatalf("%s: insertMany: %v", uri, err)
		}
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(4).SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		var got []bson.M
		if err := cur.All(ctx, &got); err != nil || len(got) != 25 {
			t.Fatalf("%s: a cursor with getMores: %d documents, %v", uri, len(got), err)
		}
		cur, err = coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(2))
		if err != nil || !cur.Next(ctx) {
			t.Fatalf("%s: find: %v", uri, err)
		}
		if err := cur.Close(ctx); err != nil {
			t.Fatalf("%s: killCursors: %v", uri, err)
		}
		if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: 3}}, bson.D{{Key: "$set", Value: bson.D{{Key: "sq", Value: -9}}}}); err != nil {
			t.Fatalf("%s: updateOne: %v", uri, err)
		}
		if n, err := coll.CountDocuments(ctx, bson.D{{Key: "sq", Value: bson.D{{Key: "$lt", Value: 0}}}}); err != nil || n != 1 {
			t.Fatalf("%s: count = %d, %v", uri, n, err)
		}
		if _, err := coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: 20}}}}); err != nil {
			t.Fatalf("%s: deleteMany: %v", uri, err)
		}
	}
	if st := p.Stats(); st.Cursors != 0 || st.Operations == 0 {
		t.Fatalf("proxy stats %+v: want operations and no cursor left", st)
	}
	for _, pl := range client.Pools() {
		if n := pl.Stats().Total; n > 4 {
			t.Fatalf("%d upstream connections, above maxPoolSize 4", n)
		}
	}
}

// TestNodeThroughProxyToFerretDB runs nodetest/'s Node.js tests, the official
// Node.js driver and mongosh as pinned in cmd/mongotest/nodetest, through
// the proxy to FerretDB.
func TestNodeThroughProxyToFerretDB(t *testing.T) {
	packages, err := filepath.Abs(filepath.Join("..", "..", "mongotest", "nodetest"))
	if err != nil {
		t.Fatal(err)
	}
	node := nodejs.OrSkip(t, packages)
	_, _, addr := startProxyToFerretDB(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "ferretdb.test.mjs")
	cmd.Dir = "nodetest"
	cmd.Env = append(os.Environ(), "PROXY_URI=mongodb://"+addr+"/", "NODE_PACKAGES="+packages, "NO_COLOR=1")
	nodejs.SetProcessGroup(cmd)
	cmd.Cancel = func() error { return nodejs.KillProcessGroup(cmd) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("node --test ferretdb.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
	if !strings.Contains(string(out), "ℹ fail 0") || !strings.Contains(string(out), "ℹ skipped 0") {
		t.Fatal("the Node.js tests did not all pass")
	}
}
