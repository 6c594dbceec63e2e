package mongopool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
)

// connectClient connects a client to uri, closed when the test ends.
func connectClient(t *testing.T, uri string) *mongopool.Client {
	t.Helper()
	c, err := mongopool.Connect(ctx(t), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Shutdown turns new operations away, waits for the one under way, then
// closes the client.
func TestClientShutdownWaits(t *testing.T) {
	s := server(t)
	c := connectClient(t, s.URI())
	inside, release := make(chan struct{}), make(chan struct{})
	opErr := make(chan error, 1)
	go func() {
		opErr <- c.Do(context.Background(), func(*connection.Conn) error {
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	done := make(chan error, 1)
	go func() { done <- c.Shutdown(context.Background()) }()
	// New operations are refused once Shutdown has begun.
	deadline := time.Now().Add(hangLimit)
	for {
		_, err := c.RunCommand(ctx(t), "admin", ping)
		if errors.Is(err, topology.ErrClosed) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("a new operation during Shutdown: %v, want topology.ErrClosed", err)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned with an operation under way: %v", err)
	default:
	}
	close(release)
	if err := <-opErr; err != nil {
		t.Errorf("the operation under way: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx(t).Done():
		t.Fatal("Shutdown did not return after the last operation")
	}
	if n := len(c.Pools()); n != 0 {
		t.Errorf("%d pools left open", n)
	}
}

// When its context ends first, Shutdown closes the connections under the
// operations, which fail instead of waiting for the server, and its error
// counts the operations that were under way.
func TestClientShutdownInterrupts(t *testing.T) {
	const ops = 5
	s := server(t)
	c := connectClient(t, s.URI()+"?retryReads=false")
	if err := s.SetFailPoint(mongotest.FailPoint{Commands: []string{"find"}, BlockTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	opErr := make(chan error, ops)
	for range ops {
		go func() {
			_, err := c.Read(context.Background(), "db", bson.D{{Key: "find", Value: "c"}})
			opErr <- err
		}()
	}
	waitFor(t, func() string { return "the finds to reach the server" }, func() bool { return s.Stats().Commands["find"] == ops })
	sctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.Shutdown(sctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
	if want := fmt.Sprintf("%d operations were still under way", ops); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Shutdown: %v, want it to say %q", err, want)
	}
	for range ops {
		select {
		case err := <-opErr:
			if err == nil {
				t.Error("an interrupted find succeeded")
			}
		case <-ctx(t).Done():
			t.Fatal("a find was not interrupted")
		}
	}
}
