package main

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func reusePortOrSkip(t *testing.T) {
	t.Helper()
	switch runtime.GOOS {
	case "linux", "darwin", "freebsd", "netbsd", "openbsd", "dragonfly":
	default:
		t.Skipf("-reuse-port needs SO_REUSEPORT, which %s does not have", runtime.GOOS)
	}
}

// TestReusePortTwoProcesses runs two proxies on one port with -reuse-port,
// as a rolling restart does (the new one started while the old one still
// serves): both start, and clients of the port are served.
func TestReusePortTwoProcesses(t *testing.T) {
	reusePortOrSkip(t)
	old, _, _ := startCommand(t, "-reuse-port", "-listen", "127.0.0.1:0")
	// The new one on the same port (its admin listener on another).
	newer, _, _ := startCommand(t, "-reuse-port", "-listen", old[0])
	if newer[0] != old[0] {
		t.Fatalf("the new process listens on %s, want %s", newer[0], old[0])
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 4 {
		c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + old[0] + "/"))
		if err != nil {
			t.Fatal(err)
		}
		err = c.Database("reuse").Collection("port").FindOne(ctx, bson.D{}).Err()
		c.Disconnect(ctx)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			t.Fatalf("client %d: %v", i, err)
		}
	}
}

// TestReusePortSameAdminAddress starts the new process of a rolling restart
// with the flags of the old one, admin listener included (-admin, whose
// default is 127.0.0.1:9218): it must start.
func TestReusePortSameAdminAddress(t *testing.T) {
	reusePortOrSkip(t)
	old, _, admin := startCommand(t, "-reuse-port", "-listen", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		done <- run(ctx, []string{"-reuse-port", "-listen", old[0], "-admin", admin}, io.Discard, &stderr)
	}()
	select {
	case code := <-done:
		cancel()
		t.Fatalf("the new process exited with %d: %s", code, stderr.String())
	case <-time.After(3 * time.Second):
		// Still serving: it started.
		cancel()
		<-done
	}
}
