package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
)

// An operation interrupted by the job's own periodic clear fails with an
// error that carries the job's cause, and counts as caused by -clear-every,
// not as a failure of the server.
func TestClearCause(t *testing.T) {
	srv := startTestServer(t)
	// The first insert waits in the server until the clear interrupts it
	// (or the server closes).
	if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, BlockTime: time.Hour, Times: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mp, err := mongopool.Open(ctx, srv.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Close()
	w := &workload{pool: mp, db: "mongopool_demo_test"}
	var r results
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.operation(ctx, &r, w.insertCommand(bson.NewObjectID(), 0, 0), false)
	}()
	if err := srv.WaitForFailPoint(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := clearOnce(mp.Pool(), true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the clear did not interrupt the operation")
	}
	var cleared *pool.PoolClearedError
	if !errors.As(r.lastOpErr, &cleared) || !cleared.Interrupted {
		t.Fatalf("the operation failed with %v (%T), want an interrupted *pool.PoolClearedError", r.lastOpErr, r.lastOpErr)
	}
	if !errors.Is(cleared.Cause, errClearEvery) || !strings.Contains(errClearEvery.Error(), "-clear-every") {
		t.Errorf("the clear's cause is %v, want the job's own (%v)", cleared.Cause, errClearEvery)
	}
	if r.failed != 1 || r.byKind[interruptedByFlag] != 1 || r.unexplained() != 0 {
		t.Errorf("failed %d, by kind %v, %d unexplained: want 1 interrupted by -clear-every", r.failed, r.byKind, r.unexplained())
	}
}
