package mongopool

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// The client backpressure specification's backoff: jitter × min(10s, base ×
// 2^attempt), the first retry being attempt 1, base the error's
// baseBackoffMS when positive, 100ms otherwise.
func TestOverloadBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		jitter  float64
		base    time.Duration
		want    time.Duration
	}{
		{1, 1, overloadBaseBackoff, 200 * time.Millisecond},
		{2, 1, overloadBaseBackoff, 400 * time.Millisecond},
		{2, 0.5, overloadBaseBackoff, 200 * time.Millisecond},
		{1, 0, overloadBaseBackoff, 0},
		{6, 1, overloadBaseBackoff, 6400 * time.Millisecond},
		{7, 1, overloadBaseBackoff, overloadMaxBackoff},
		{40, 1, overloadBaseBackoff, overloadMaxBackoff},
		{1, 1, 30 * time.Millisecond, 60 * time.Millisecond},
		{20, 1, time.Millisecond, overloadMaxBackoff},
	} {
		if got := backoff(tc.attempt, tc.jitter, tc.base); got != tc.want {
			t.Errorf("backoff(attempt %d, jitter %v, base %v) = %v, want %v", tc.attempt, tc.jitter, tc.base, got, tc.want)
		}
	}
	reply := func(fields ...bson.E) error {
		raw, err := bson.Marshal(append(bson.D{{Key: "ok", Value: 0}, {Key: "code", Value: 462}}, fields...))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Errorf("wrapped: %w", wire.CheckReply(raw))
	}
	for _, tc := range []struct {
		err  error
		want time.Duration
	}{
		{reply(bson.E{Key: "baseBackoffMS", Value: 250}), 250 * time.Millisecond},
		{reply(bson.E{Key: "baseBackoffMS", Value: int64(40)}), 40 * time.Millisecond},
		{reply(bson.E{Key: "baseBackoffMS", Value: 75.0}), 75 * time.Millisecond},
		{reply(bson.E{Key: "baseBackoffMS", Value: 0}), overloadBaseBackoff},
		{reply(bson.E{Key: "baseBackoffMS", Value: -5}), overloadBaseBackoff},
		{reply(bson.E{Key: "baseBackoffMS", Value: "soon"}), overloadBaseBackoff},
		{reply(bson.E{Key: "baseBackoffMS", Value: int64(1) << 60}), overloadMaxBackoff},
		{reply(), overloadBaseBackoff},
		{errors.New("not a reply"), overloadBaseBackoff},
	} {
		if got := baseBackoffOf(tc.err); got != tc.want {
			t.Errorf("baseBackoffOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// The writes that can be retryable writes, statement by statement.
func TestRetryableWriteCommand(t *testing.T) {
	stmt := func(kv ...bson.E) bson.D { return append(bson.D{}, kv...) }
	for _, tc := range []struct {
		cmd  bson.D
		want bool
	}{
		{bson.D{{Key: "insert", Value: "c"}}, true},
		{bson.D{{Key: "findAndModify", Value: "c"}}, true},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{stmt(), stmt(bson.E{Key: "multi", Value: false})}}}, true},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{stmt(), stmt(bson.E{Key: "multi", Value: true})}}}, false},
		{bson.D{{Key: "update", Value: "c"}, {Key: "updates", Value: bson.A{"not a statement"}}}, false},
		{bson.D{{Key: "update", Value: "c"}}, false},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{stmt(bson.E{Key: "limit", Value: 1}), stmt(bson.E{Key: "limit", Value: 1.0})}}}, true},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{stmt(bson.E{Key: "limit", Value: 1}), stmt(bson.E{Key: "limit", Value: 0})}}}, false},
		{bson.D{{Key: "delete", Value: "c"}, {Key: "deletes", Value: bson.A{stmt()}}}, false},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}}, false},
		{bson.D{{Key: "insert", Value: "c"}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}, true},
		{bson.D{{Key: "aggregate", Value: "c"}}, false},
		{bson.D{{Key: "Insert", Value: "c"}}, false},
		{bson.D{}, false},
	} {
		raw, err := bson.Marshal(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if got := retryableWriteCommand(raw); got != tc.want {
			t.Errorf("retryableWriteCommand(%v) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}
