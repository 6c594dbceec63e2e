package proxy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/proxy"
)

// soakSettings are the soak's scale: MONGOPOOL_SOAK_DURATION (a Go
// duration, 6 s by default) and MONGOPOOL_SOAK_CLIENTS (1000 by default)
// make it the longer run bench/README.md describes.
func soakSettings(t *testing.T) (time.Duration, int) {
	d, clients := 6*time.Second, 1000
	if s := os.Getenv("MONGOPOOL_SOAK_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MONGOPOOL_SOAK_DURATION: %v", err)
		}
		d = v
	}
	if s := os.Getenv("MONGOPOOL_SOAK_CLIENTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 10 {
			t.Fatalf("MONGOPOOL_SOAK_CLIENTS %q: want a number, at least 10", s)
		}
		clients = v
	}
	return d, clients
}

// TestSoak runs many clients through the proxy while faults come at
// random: step-downs and elections, a member killed and restarted, clients
// that hang up in the middle of an operation (on the load balancer
// listener, whose cursors and transactions the proxy then releases),
// reloads of the limits. Afterwards every acknowledged write is stored
// once, nothing is left in use or mapped, and the counts add up; the
// package's TestMain checks no goroutine is left.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	duration, clients := soakSettings(t)
	rs := startReplicaSet(t, 3)
	const maxPoolSize = 20
	// Busy polling on, as the daemon has it: with few clients, the faults
	// meet polls under way.
	bp := connection.NewBusyPoller(50 * time.Microsecond)
	p, addr := startProxy(t, rs.URI()+"&maxPoolSize="+strconv.Itoa(maxPoolSize), proxy.Mongos, proxy.Config{BusyPoller: bp})
	lnLB, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(lnLB, proxy.LoadBalancer)

	ctx, cancel := context.WithTimeout(context.Background(), duration+60*time.Second)
	defer cancel()
	// The clients: goroutines over a few driver clients (each a pool of
	// connections to the proxy, as application processes have).
	const drivers = 10
	var dcs []*mongo.Client
	for i := range drivers {
		c, err := mongo.Connect(options.Client().ApplyURI(fmt.Sprintf("mongodb://%s/?maxPoolSize=%d&appName=soak%d", addr, clients/drivers+1, i)).
			SetServerSelectionTimeout(30 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		dcs = append(dcs, c)
	}
	if _, err := dcs[0].Database("soak").Collection("hang").InsertMany(ctx, []any{bson.D{}, bson.D{}, bson.D{}}); err != nil {
		t.Fatal(err)
	}
	var acked sync.Map
	var ops, failed, lostCursors atomic.Int64
	var firstErr atomic.Value
	fail := func(what string, err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, what+": "+err.Error())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			coll := dcs[w%drivers].Database("soak").Collection("c")
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%d-%d", w, i)
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "w", Value: w}}); err != nil {
					fail("insert", err)
					continue
				}
				acked.Store(id, true)
				ops.Add(1)
				if i%10 == 0 {
					cur, err := coll.Find(ctx, bson.D{{Key: "w", Value: w}}, options.Find().SetBatchSize(2).SetLimit(6))
					if err != nil {
						fail("find", err)
						continue
					}
					for cur.Next(ctx) {
					}
					if err := cur.Err(); err != nil {
						// A cursor lives on its server: one killed
						// under it is lost, through a proxy as
						// through a mongos.
						lostCursors.Add(1)
					}
					cur.Close(ctx)
				}
			}
		}()
	}

	// The faults, one at a time: each kind once per round, in a random
	// order, at random moments.
	faults := map[string]int{}
	deadline := time.Now().Add(duration)
	var kinds []int
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
		primary := -1
		for i, m := range rs.Members() {
			if m == rs.Primary() {
				primary = i
			}
		}
		if len(kinds) == 0 {
			kinds = rand.Perm(4)
		}
		kind := kinds[0]
		kinds = kinds[1:]
		switch kind {
		case 0: // a step-down, and an election a moment later
			if primary < 0 {
				continue
			}
			if err := rs.StepDown(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
			if err := rs.Elect((primary + 1 + rand.IntN(2)) % 3); err != nil {
				t.Fatal(err)
			}
			faults["step-down"]++
		case 1: // a member killed (the primary, at times), and restarted
			victim := rand.IntN(3)
			if err := rs.Stop(victim); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(50+rand.IntN(200)) * time.Millisecond)
			if victim == primary {
				if err := rs.Elect((victim + 1 + rand.IntN(2)) % 3); err != nil {
					t.Fatal(err)
				}
				faults["primary killed"]++
			} else {
				faults["secondary killed"]++
			}
			if err := rs.Restart(victim); err != nil {
				t.Fatal(err)
			}
		case 2: // clients that hang up in the middle of operations
			for range 5 {
				nc, err := net.Dial("tcp", lnLB.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				raw := &rawConn{t: t, nc: nc}
				nc.SetDeadline(time.Now().Add(20 * time.Second))
				raw.roundTrip(mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "loadBalanced", Value: true}, {Key: "$db", Value: "admin"}}))
				reply := raw.roundTrip(mustMarshal(t, bson.D{{Key: "find", Value: "hang"}, {Key: "batchSize", Value: 1}, {Key: "$db", Value: "soak"}}))
				if reply.Lookup("cursor", "id").Int64() == 0 {
					t.Fatalf("the hanging client's find: %v", reply)
				}
				raw.send(mustMarshal(t, bson.D{{Key: "count", Value: "hang"}, {Key: "$db", Value: "soak"}}), 0, 0)
				nc.Close() // before the count's reply, with a cursor open
			}
			faults["hang-ups"]++
		case 3: // a reload of the limits
			if err := p.Reconfigure(proxy.Config{QueueTimeout: time.Duration(5+rand.IntN(10)) * time.Second, MaxQueued: 5000 + rand.IntN(5000), BusyPoller: bp}); err != nil {
				t.Fatal(err)
			}
			faults["reload"]++
		}
	}
	close(stop)
	wg.Wait()
	for _, c := range dcs {
		c.Disconnect(ctx)
	}

	if f := failed.Load(); f != 0 {
		t.Errorf("%d operations failed through the faults (first: %v)", f, firstErr.Load())
	}
	if n := lostCursors.Load(); n != 0 && faults["primary killed"] == 0 {
		t.Errorf("%d cursors failed, and no primary, where they live, was killed", n)
	}
	// Every acknowledged insert is there once.
	check, err := mongo.Connect(options.Client().ApplyURI(rs.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer check.Disconnect(ctx)
	total, err := check.Database("soak").Collection("c").CountDocuments(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(0)
	acked.Range(func(_, _ any) bool { n++; return true })
	if total != n {
		t.Errorf("%d documents stored for %d acknowledged inserts", total, n)
	}
	// Nothing left: no client connection, no cursor (the hung-up clients'
	// were killed), nothing in use upstream, within maxPoolSize.
	waitFor := func(what string, cond func() bool) {
		for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Errorf("%s: %+v", what, p.Stats())
				return
			}
		}
	}
	waitFor("client connections left", func() bool { return p.Stats().ClientConns == 0 })
	waitFor("cursors left", func() bool { return p.Stats().Cursors == 0 })
	st := p.Stats()
	for _, pl := range p.Upstream("").Pools() {
		ps := pl.Stats()
		if ps.InUse != 0 || ps.Total > maxPoolSize {
			t.Errorf("upstream pool %s: %d in use, %d in all (maxPoolSize %d)", ps.Address, ps.InUse, ps.Total, maxPoolSize)
		}
	}
	if st.Queued != 0 || st.LongPolls != 0 || st.Pins != 0 {
		t.Errorf("left over: %+v", st)
	}
	var appConns int64
	for _, a := range p.Apps() {
		appConns += a.Connections
	}
	if appConns != 0 || st.AcceptedConns < int64(drivers) {
		t.Errorf("connections by application add up to %d open, %d accepted", appConns, st.AcceptedConns)
	}
	t.Logf("%d clients for %v: %d acknowledged inserts, %d operations relayed, faults %v; held %d retries (%d operations recovered), %d overloaded, %d client connections in all, %d cursors lost with a killed primary; %d busy polls (%d hits)",
		clients, duration, n, st.Operations, faults, st.Held, st.HeldRecovered, st.Overloaded, st.AcceptedConns, lostCursors.Load(), st.BusyPolls, st.BusyPollHits)
}
