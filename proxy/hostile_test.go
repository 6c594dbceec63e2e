package proxy_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/proxy"
)

// heapInUse returns the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A flood of connections that each claim the largest message and send a
// hundred bytes of it: the proxy allocates for what arrives, not for what
// is claimed, holds no upstream connection for them, serves others, and
// closes them after HandshakeTimeout.
func TestFloodOfHalfMessages(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{HandshakeTimeout: 3 * time.Second})
	const conns = 1000
	before := heapInUse()
	claim := binary.LittleEndian.AppendUint32(nil, 48000000)
	claim = append(claim, make([]byte, 112)...)
	binary.LittleEndian.PutUint32(claim[12:], 2013)
	var ncs []net.Conn
	for range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write(claim); err != nil {
			t.Fatal(err)
		}
		ncs = append(ncs, nc)
	}
	deadline := time.Now().Add(20 * time.Second)
	for p.Stats().ClientConns < conns {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections accepted", p.Stats().ClientConns, conns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Others are served meanwhile, and nothing upstream is held.
	if dialRaw(t, addr).roundTrip(mustMarshal(t, bson.D{{Key: "count", Value: "c"}, {Key: "$db", Value: "db"}})).Lookup("ok").Double() != 1 {
		t.Fatal("a count failed during the flood")
	}
	for _, pl := range p.Upstream("").Pools() {
		if n := pl.Stats().InUse; n != 0 {
			t.Fatalf("%d upstream connections in use for half messages", n)
		}
	}
	grown := int64(heapInUse()) - int64(before)
	t.Logf("%d connections claiming 48 MB each: the heap grew by %.1f MB", conns, float64(grown)/(1<<20))
	if grown > 100<<20 {
		t.Fatalf("the heap grew by %d MB for %d half messages: allocations follow the claims", grown>>20, conns)
	}
	// They are closed once HandshakeTimeout passes.
	for _, nc := range ncs {
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("a stalled connection: %v, want it closed", err)
		}
	}
}

// Clients that send requests and never read the replies: each is
// disconnected once a reply cannot be written for WriteTimeout, with
// memory bounded and the others served.
func TestClientsThatNeverRead(t *testing.T) {
	rs := startReplicaSet(t, 1)
	p, addr := startProxy(t, rs.URI(), proxy.Mongos, proxy.Config{WriteTimeout: 500 * time.Millisecond})
	seed := dialRaw(t, addr)
	seed.roundTrip(mustMarshal(t, bson.D{{Key: "insert", Value: "big"}, {Key: "documents", Value: bson.A{bson.D{{Key: "b", Value: make([]byte, 256<<10)}}}}, {Key: "$db", Value: "db"}}))
	find := wireMsg(t, mustMarshal(t, bson.D{{Key: "find", Value: "big"}, {Key: "$db", Value: "db"}}))
	// 200 here; MONGOPOOL_NONREADERS=1000 runs the thousand the notes
	// report (about 17 s: each client's replies fill the kernel's buffers
	// before a write blocks).
	clients := 200
	if n, err := strconv.Atoi(os.Getenv("MONGOPOOL_NONREADERS")); err == nil && n > 0 {
		clients = n
	}
	before := heapInUse()
	var wg sync.WaitGroup
	// Each client's receive buffer is small, as a client that stopped
	// reading fills it soon, so that the proxy's writes block after a
	// reply or two rather than after megabytes.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	var ncs []net.Conn
	for range clients {
		nc, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ncs = append(ncs, nc)
	}
	// All connected, they start at once.
	start := make(chan struct{})
	for _, nc := range ncs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			nc.SetWriteDeadline(time.Now().Add(60 * time.Second))
			for {
				if _, err := nc.Write(find); err != nil {
					// The proxy closed it: a reset, or a write that
					// can no longer go through.
					return
				}
			}
		}()
	}
	close(start)
	// The proxy disconnects every one of them.
	deadline := time.Now().Add(60 * time.Second)
	for p.Stats().ClientConns > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the clients that never read are still connected after 60 s", p.Stats().ClientConns-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	seed.nc.SetDeadline(time.Now().Add(20 * time.Second))
	if seed.roundTrip(mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})).Lookup("ok").Double() != 1 {
		t.Fatal("another client was affected")
	}
	for _, nc := range ncs {
		nc.Close() // the writers stop
	}
	wg.Wait()
	grown := int64(heapInUse()) - int64(before)
	t.Logf("%d clients that never read: all disconnected, the heap grew by %.1f MB", clients, float64(grown)/(1<<20))
	if grown > 64<<20 {
		t.Fatalf("the heap grew by %d MB", grown>>20)
	}
}
