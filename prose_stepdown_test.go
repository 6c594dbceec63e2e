package mongopool_test

import (
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/wire"
)

// The prose tests of the specifications' "Connections survive primary step
// down" (testdata/spec/connections-survive-step-down/README.md), against the
// in-process replica set: a step-down, and a "not writable primary" error,
// keep the pool; "shutting down" and "interrupted at shutdown" clear it.

func stepDownClient(t *testing.T) (*mongotest.ReplicaSet, *mongopool.Client, *e2eEventLog) {
	t.Helper()
	rs := startReplicaSet(t, 3)
	log := newE2EEventLog()
	c := newClient(t, rs.URI()+"&retryWrites=false&heartbeatFrequencyMS=500",
		mongopool.WithPoolOptions(pool.WithEventHandler(log.handler)))
	log.attach(c)
	insert := bson.D{{Key: "insert", Value: "step-down"}, {Key: "documents", Value: bson.A{bson.D{{Key: "test", Value: 1}}}}}
	if _, err := c.Write(ctx(t), "step-down", insert); err != nil {
		t.Fatal(err)
	}
	return rs, c, log
}

func poolClears(log *e2eEventLog) int {
	return len(log.filter(func(e pool.Event) bool { return e.Type == pool.PoolCleared }))
}

func TestStepDownGetMoreIteration(t *testing.T) {
	rs, c, log := stepDownClient(t)
	ctx := ctx(t)
	docs := bson.A{}
	for i := range 5 {
		docs = append(docs, bson.D{{Key: "_id", Value: i}})
	}
	if _, err := c.Write(ctx, "step-down", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: docs}}); err != nil {
		t.Fatal(err)
	}
	cleared := poolClears(log)
	err := c.Do(ctx, func(conn *connection.Conn) error {
		cmd := func(d bson.D) (bson.Raw, error) {
			raw, err := bson.Marshal(append(d, bson.E{Key: "$db", Value: "step-down"}))
			if err != nil {
				return nil, err
			}
			return conn.RoundTrip(ctx, raw)
		}
		first, err := cmd(bson.D{{Key: "find", Value: "c"}, {Key: "batchSize", Value: 2}})
		if err != nil {
			return err
		}
		id, ok := first.Lookup("cursor", "id").Int64OK()
		if !ok || id == 0 {
			t.Fatalf("find returned no open cursor: %v", first)
		}
		if err := rs.StepDown(ctx); err != nil {
			return err
		}
		if _, err := cmd(bson.D{{Key: "getMore", Value: id}, {Key: "collection", Value: "c"}}); err != nil {
			t.Errorf("getMore after the step-down: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := poolClears(log); n != cleared {
		t.Errorf("%d PoolCleared events after the step-down", n-cleared)
	}
}

func TestStepDownNotPrimaryKeepsPool(t *testing.T) {
	testStepDownError(t, 10107, false)
}

func TestStepDownShutdownInProgressClearsPool(t *testing.T) {
	testStepDownError(t, 91, true)
}

func TestStepDownInterruptedAtShutdownClearsPool(t *testing.T) {
	testStepDownError(t, 11600, true)
}

func testStepDownError(t *testing.T, code int32, clears bool) {
	rs, c, log := stepDownClient(t)
	ctx := ctx(t)
	cleared := poolClears(log)
	if err := rs.Primary().SetFailPoint(mongotest.FailPoint{Commands: []string{"insert"}, Times: 1, ErrorCode: code}); err != nil {
		t.Fatal(err)
	}
	insert := bson.D{{Key: "insert", Value: "step-down"}, {Key: "documents", Value: bson.A{bson.D{{Key: "test", Value: 1}}}}}
	_, err := c.Write(ctx, "step-down", insert)
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("the insert: %v, want the error of code %d", err, code)
	}
	if n := poolClears(log) - cleared; clears && n != 1 || !clears && n != 0 {
		t.Errorf("%d PoolCleared events after error %d; want a clear: %v", n, code, clears)
	}
	if _, err := c.Write(ctx, "step-down", insert); err != nil {
		t.Fatalf("the next insert: %v", err)
	}
	if !clears && poolClears(log) != cleared {
		t.Error("the pool was cleared")
	}
}
