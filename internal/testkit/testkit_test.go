package testkit_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/internal/testkit"
)

// TestAllocated: a megabyte allocated inside f is counted, and nothing
// near it when f allocates nothing.
func TestAllocated(t *testing.T) {
	var b []byte
	if got := testkit.Allocated(func() { b = make([]byte, 1<<20) }); got < 1<<20 {
		t.Errorf("a 1 MiB slice counted as %d bytes", got)
	}
	runtime.KeepAlive(b)
	if got := testkit.Allocated(func() {}); got >= 1<<20 {
		t.Errorf("an empty function counted as %d bytes", got)
	}
}

// TestExpiresAfter: Err is nil for the given number of calls, then
// context.DeadlineExceeded for good.
func TestExpiresAfter(t *testing.T) {
	ctx := testkit.ExpiresAfter(3)
	for i := range 3 {
		if err := ctx.Err(); err != nil {
			t.Fatalf("call %d: %v, want nil", i+1, err)
		}
	}
	for i := range 2 {
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d: %v, want context.DeadlineExceeded", 4+i, err)
		}
	}
	if err := testkit.ExpiresAfter(0).Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ExpiresAfter(0): first call %v, want context.DeadlineExceeded", err)
	}
}

// TestHugeArrayHello: the reply is byte for byte what bson.Marshal makes of
// the same document, whatever the number of entries.
func TestHugeArrayHello(t *testing.T) {
	for _, n := range []int{0, 1, 12} {
		entry := func(i int) string { return "e" + strconv.Itoa(i*7) }
		arr := bson.A{}
		for i := range n {
			arr = append(arr, entry(i))
		}
		want, err := bson.Marshal(bson.D{
			{Key: "isWritablePrimary", Value: true},
			{Key: "maxWireVersion", Value: int32(21)},
			{Key: "hosts", Value: arr},
			{Key: "ok", Value: 1.0},
		})
		if err != nil {
			t.Fatal(err)
		}
		got := testkit.HugeArrayHello("hosts", n, entry)
		if err := got.Validate(); err != nil {
			t.Fatalf("%d entries: invalid BSON: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%d entries:\n got %v\nwant %v", n, got, bson.Raw(want))
		}
	}
}

func TestLeastAllocated(t *testing.T) {
	runs := 0
	var sink []byte
	got := testkit.LeastAllocated(3, func() {
		runs++
		if runs == 2 {
			sink = make([]byte, 1<<10) // only the second run allocates
		}
	})
	_ = sink
	if runs != 3 || got >= 1<<10 {
		t.Errorf("3 runs, one allocating 1 KiB: %d runs, least %d bytes", runs, got)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	testkit.WaitFor(t, "three asks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond asked %d times, want 3", n)
	}
}
