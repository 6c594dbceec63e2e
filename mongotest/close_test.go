package mongotest_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

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
			wantOpen := int64(2 + 1) // the driver's monitor and pool connections, and the silent one
			if !tlsOn {
				wantOpen = 2 + 3
			}
			waitFor(t, "the connections to be served", func() bool { return srv.Stats().ConnectionsOpen >= wantOpen })
			if n := len(leakcheck.Running(serverGoroutines)); n < int(wantOpen) {
				t.Fatalf("only %d goroutines of mongotest before Close; the check cannot see them", n)
			}

			closeAndCheck(t, srv)
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
