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
	rs := startReplicaSet(b, 1)
	p, addr := startProxy(b, rs.URI(), proxy.Mongos, proxy.Config{})
	seed := dialRaw(b, addr)
	seed.roundTrip(mustMarshal(b, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "x"}}}}, {Key: "$db", Value: "db"}}))
	find := mustMarshal(b, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}, {Key: "singleBatch", Value: true}, {Key: "$db", Value: "db"}})
	for _, target := range []struct{ name, addr string }{{"direct", rs.Primary().Addr()}, {"proxy", addr}} {
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
	_ = p
}

// BenchmarkFindByIDParallel is BenchmarkFindByID from 64 clients at once.
func BenchmarkFindByIDParallel(b *testing.B) {
	rs := startReplicaSet(b, 1)
	_, addr := startProxy(b, rs.URI(), proxy.Mongos, proxy.Config{})
	seed := dialRaw(b, addr)
	seed.roundTrip(mustMarshal(b, bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}, {Key: "v", Value: "x"}}}}, {Key: "$db", Value: "db"}}))
	find := mustMarshal(b, bson.D{{Key: "find", Value: "c"}, {Key: "filter", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: 1}, {Key: "singleBatch", Value: true}, {Key: "$db", Value: "db"}})
	for _, target := range []struct{ name, addr string }{{"direct", rs.Primary().Addr()}, {"proxy", addr}} {
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
