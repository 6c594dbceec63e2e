package proxy_test

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/proxy"
)

// BenchmarkFindByID is a find by _id from a raw-wire client, through the
// proxy and straight to the same server, in one run: the difference is
// the proxy's hop.
func BenchmarkFindByID(b *testing.B) {
	direct, addr, find := findByID(b)
	for _, target := range []struct{ name, addr string }{{"direct", direct}, {"proxy", addr}} {
		b.Run(target.name, func(b *testing.B) {
			c := dialRaw(b, target.addr)
			c.roundTrip(mustMarshal(b, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}}))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c.nc.SetDeadline(time.Time{})
				if c.roundTrip(find).Lookup("ok").Double() != 1 {
					b.Fatal("find failed")
				}
			}
		})
	}
}

// BenchmarkFindByIDParallel is BenchmarkFindByID from 64 clients at once.
func BenchmarkFindByIDParallel(b *testing.B) {
	direct, addr, find := findByID(b)
	for _, target := range []struct{ name, addr string }{{"direct", direct}, {"proxy", addr}} {
		b.Run(target.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				c := dialRaw(b, target.addr)
				c.nc.SetDeadline(time.Time{})
				for pb.Next() {
					c.roundTrip(find)
				}
			})
		})
	}
}

// findByID starts a replica set of one member and a proxy in front of it,
// stores the document {_id: 1}, and returns the primary's address, the
// proxy's and the find by _id of the benchmarks.
func findByID(tb testing.TB) (direct, proxied string, find bson.Raw) {
	tb.Helper()
	rs := startReplicaSet(tb, 1)
	_, proxied = startProxy(tb, rs.URI(), proxy.Mongos, proxy.Config{})
	seed := dialRaw(tb, proxied)
	seed.roundTrip(mustMarshal(tb, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "x"}}}}, {Key: "$db", Value: "db"}}))
	find = mustMarshal(tb, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}, {Key: "singleBatch", Value: true}, {Key: "$db", Value: "db"}})
	return rs.Primary().Addr(), proxied, find
}
