package mongotest_test

import (
	"context"
	"net"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// serverGoroutines returns the stacks of the goroutines running code of the
// mongotest package (not its tests, which are mongotest_test).
func serverGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "mongopool/mongotest.") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseLeavesNoGoroutine closes servers with connections in every
// state a connection goroutine can block in (reading a header, reading a
// body, in a TLS handshake, writing to a client that does not read, idle
// between commands) and checks that Close returns and that no goroutine of
// the package is left.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	pki := testpki.New(t)
	for _, tlsOn := range []bool{false, true} {
		name := "tcp"
		var opts []mongotest.Option
		query := ""
		if tlsOn {
			name = "tls"
			opts = append(opts, mongotest.WithTLS(pki.ServerTLS()))
			query = "?tls=true&tlsCAFile=" + url.QueryEscape(pki.CAFile)
		}
		t.Run(name, func(t *testing.T) {
			srv := start(t, opts...)
			client := connect(t, srv.URI()+query)
			c := ctx(t)
			coll := client.Database("x").Collection("c")
			big := strings.Repeat("x", 1<<20)
			for i := range 3 {
				if _, err := coll.InsertOne(c, bson.D{{Key: "i", Value: i}, {Key: "big", Value: big}}); err != nil {
					t.Fatalf("InsertOne: %v", err)
				}
			}
			cur, err := coll.Find(c, bson.D{}, options.Find().SetBatchSize(1)) // an open server cursor
			if err != nil {
				t.Fatalf("Find: %v", err)
			}
			defer func() { // the server is gone by then: do not wait for it
				c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				cur.Close(c)
			}()

			if !tlsOn {
				// Blocked reading a header, reading a body, and writing
				// replies nobody reads.
				dialRaw(t, srv).send([]byte{0x40, 0, 0})
				partial := msg(t, 1, &wire.Msg{Body: marshal(t, cmd("admin", bson.E{Key: "ping", Value: 1}))})
				dialRaw(t, srv).send(partial[:20])
				flood := dialRaw(t, srv)
				find := msg(t, 2, &wire.Msg{Body: marshal(t, cmd("x", bson.E{Key: "find", Value: "c"}))})
				for range 30 {
					flood.send(find)
				}
			} else {
				// Blocked in the TLS handshake: a TCP client that says nothing.
				nc, err := net.Dial("tcp", srv.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
			}

			// Wait for the connections to be served, and check that the
			// goroutines are visible to the check below.
			deadline := time.Now().Add(5 * time.Second)
			wantOpen := int64(2 + 1) // the driver's monitor and pool connections, and the silent one
			if !tlsOn {
				wantOpen = 2 + 3
			}
			for srv.Stats().ConnectionsOpen < wantOpen && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := len(serverGoroutines()); n < int(wantOpen) {
				t.Fatalf("only %d goroutines of mongotest before Close; the check cannot see them", n)
			}

			done := make(chan error, 1)
			go func() { done <- srv.Close() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Close: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("Close did not return; goroutines:\n%s", strings.Join(serverGoroutines(), "\n\n"))
			}
			var left []string
			for range 100 { // goroutines may take a moment to vanish from the stacks
				if left = serverGoroutines(); len(left) == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Fatalf("%d goroutines of mongotest left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
			}
			if st := srv.Stats(); st.ConnectionsOpen != 0 {
				t.Errorf("ConnectionsOpen = %d after Close", st.ConnectionsOpen)
			}
			if err := srv.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if nc, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
				nc.Close()
				t.Errorf("the server still accepts connections after Close")
			}
		})
	}
}
