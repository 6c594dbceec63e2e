// Package testkit holds helpers that the tests of several packages share:
// measuring what a function allocates, a context whose deadline passes at a
// chosen point, hello replies of any size, loopback socket pairs, and a
// bounded wait for a condition that no event announces. It is for tests
// only: no package of the library imports it outside its _test.go files.
package testkit

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Allocated returns the bytes the process allocated while f ran. It collects
// garbage first, so that the count starts from a quiet heap; allocations of
// other goroutines running at the same time are counted too.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// LeastAllocated runs f n times and returns the least of the bytes the
// process allocated while it ran (see Allocated): for an f that allocates
// the same each time, the allocations of other goroutines (a parallel test,
// the runtime) do not count unless they came during every run.
func LeastAllocated(n int, f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range max(n, 1) {
		least = min(least, Allocated(f))
	}
	return least
}

// ExpiresAfter returns a context whose deadline passes at a point the test
// chooses rather than at a time: its Err reports nil for the first calls
// calls, then context.DeadlineExceeded. Its Done channel never closes, so
// only code that polls Err sees the deadline.
func ExpiresAfter(calls int64) context.Context {
	c := &expiringCtx{Context: context.Background()}
	c.left.Store(calls)
	return c
}

type expiringCtx struct {
	context.Context
	left atomic.Int64 // calls of Err left before the deadline passes
}

func (c *expiringCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.DeadlineExceeded
	}
	return nil
}

// HugeArrayHello returns a valid hello reply, {isWritablePrimary: true,
// maxWireVersion: 21, key: [entry(0), ..., entry(n-1)], ok: 1.0}, encoded
// in one pass: millions of entries cost their bytes and no more, where
// bson.Marshal would hold a value for each.
func HugeArrayHello(key string, n int, entry func(i int) string) bson.Raw {
	doc := make([]byte, 4, 64)
	doc = append(element(doc, bson.TypeBoolean, "isWritablePrimary"), 1)
	doc = binary.LittleEndian.AppendUint32(element(doc, bson.TypeInt32, "maxWireVersion"), 21)
	doc = element(doc, bson.TypeArray, key)
	arr := len(doc)
	doc = append(doc, 0, 0, 0, 0)
	for i := range n {
		s := entry(i)
		doc = element(doc, bson.TypeString, strconv.Itoa(i))
		doc = binary.LittleEndian.AppendUint32(doc, uint32(len(s)+1))
		doc = append(append(doc, s...), 0)
	}
	doc = append(doc, 0)
	binary.LittleEndian.PutUint32(doc[arr:], uint32(len(doc)-arr))
	doc = binary.LittleEndian.AppendUint64(element(doc, bson.TypeDouble, "ok"), math.Float64bits(1))
	doc = append(doc, 0)
	binary.LittleEndian.PutUint32(doc, uint32(len(doc)))
	return doc
}

// element appends the type and the key of a BSON element; its value comes
// next.
func element(dst []byte, t bson.Type, key string) []byte {
	return append(append(append(dst, byte(t)), key...), 0)
}

// TCPPair returns both ends of a loopback TCP connection, closed when the
// test ends.
func TCPPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		client.Close()
		t.Fatal("the loopback listener accepted nothing")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// WaitFor waits for cond to hold, asking every millisecond, and fails the
// test after 10 s: for a state that no event or channel announces (a
// server's count, say).
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
