package mongopool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/auth"
	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
	"github.com/mongopool/mongopool/wire"
)

func server(t *testing.T, opts ...mongotest.Option) *mongotest.Server {
	t.Helper()
	s, err := mongotest.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// aliceServer is server with the user alice, of password password, on admin.
func aliceServer(t *testing.T, password string, opts ...mongotest.Option) *mongotest.Server {
	t.Helper()
	s := server(t, opts...)
	if err := s.AddUser("admin", "alice", password); err != nil {
		t.Fatal(err)
	}
	return s
}

// ctx returns a context for one wait of the test, ending after hangLimit.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), hangLimit)
	t.Cleanup(cancel)
	return c
}

func open(t *testing.T, uri string, opts ...pool.Option) *mongopool.Pool {
	t.Helper()
	p, err := mongopool.Open(ctx(t), uri, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

var ping = bson.D{{Key: "ping", Value: 1}}

// pingCmd is ping with its $db, as a connection's RoundTrip takes it.
var pingCmd = func() bson.Raw {
	b, err := bson.Marshal(bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		panic(err)
	}
	return b
}()

// Open, then a command: the three lines a user needs.
func TestOpenAndRunCommand(t *testing.T) {
	s := server(t)
	p := open(t, s.URI()+"?maxPoolSize=3&minPoolSize=1&appName=opentest")
	reply, err := p.RunCommand(ctx(t), "admin", ping)
	if err != nil || reply.Lookup("ok").Double() != 1 {
		t.Fatalf("ping: %v %v", reply, err)
	}
	st := p.Stats()
	if st.MaxPoolSize != 3 || st.MinPoolSize != 1 {
		t.Fatalf("stats %+v: want the URI's pool options", st)
	}
	// A server error is a CommandError, and leaves the connection usable.
	_, err = p.RunCommand(ctx(t), "admin", bson.D{{Key: "noSuchCommand", Value: 1}})
	var ce *wire.CommandError
	if !errors.As(err, &ce) || ce.Code != 59 {
		t.Fatalf("unknown command: %v", err)
	}
	if st := p.Stats(); st.ClosedError != 0 {
		t.Fatalf("a server error closed the connection: %+v", st)
	}
}

func TestOpenAuthenticates(t *testing.T) {
	for _, mech := range []string{"", auth.SCRAMSHA1, auth.SCRAMSHA256, auth.PLAIN} {
		t.Run("mechanism="+mech, func(t *testing.T) {
			s := server(t)
			if err := s.AddUser("admin", "alice", "pässword", mongotest.MechSCRAMSHA1, mongotest.MechSCRAMSHA256); err != nil {
				t.Fatal(err)
			}
			if err := s.AddUser("$external", "bob", "secret", mongotest.MechPLAIN); err != nil {
				t.Fatal(err)
			}
			uri := "mongodb://alice:p%C3%A4ssword@" + s.Addr() + "/"
			switch mech {
			case auth.PLAIN:
				uri = "mongodb://bob:secret@" + s.Addr() + "/?authMechanism=PLAIN"
			case "":
			default:
				uri += "?authMechanism=" + mech
			}
			p := open(t, uri)
			if _, err := p.RunCommand(ctx(t), "db", bson.D{{Key: "find", Value: "c"}}); err != nil {
				t.Fatalf("find after authenticating: %v", err)
			}
			if n := sum(s.Stats().Authentications); n < 1 {
				t.Fatalf("server saw no authentication: %+v", s.Stats())
			}
		})
	}
}

// A failed authentication is an auth error, never labelled as overload, and
// the password appears nowhere in it.
func TestOpenWrongPassword(t *testing.T) {
	s := aliceServer(t, "right-password")
	_, err := mongopool.Open(ctx(t), "mongodb://alice:Wr0ngPa55@"+s.Addr()+"/")
	var ae *auth.Error
	var ce *pool.ConnectionError
	if !errors.As(err, &ae) || !errors.As(err, &ce) || !ce.DuringAuth {
		t.Fatalf("wrong password: %v", err)
	}
	if pool.HasErrorLabel(err, pool.LabelSystemOverloaded) || pool.HasErrorLabel(err, pool.LabelRetryable) {
		t.Fatalf("an auth failure got backpressure labels: %v", err)
	}
	if strings.Contains(err.Error(), "Wr0ngPa55") {
		t.Fatalf("the password leaked into the error: %v", err)
	}
}

func TestOpenNegotiatesCompression(t *testing.T) {
	for _, c := range []string{"snappy", "zlib", "zstd"} {
		t.Run(c, func(t *testing.T) {
			s := server(t)
			p := open(t, s.URI()+"?compressors="+c+"&zlibCompressionLevel=6")
			if _, err := p.RunCommand(ctx(t), "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{{Key: "x", Value: strings.Repeat("z", 1000)}}}}}); err != nil {
				t.Fatal(err)
			}
			err := p.Do(ctx(t), func(conn *connection.Conn) error {
				if got := conn.Description().Compressor; got != c {
					return fmt.Errorf("negotiated %q, want %q", got, c)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.CompressedReceived[c] == 0 || st.CompressedSent[c] == 0 {
				t.Fatalf("no %s traffic: %+v", c, st)
			}
		})
	}
}

// Load-balanced mode: each connection carries the service's serviceId, and a
// clear of that service closes its connections without pausing the pool.
func TestOpenLoadBalanced(t *testing.T) {
	sid := bson.NewObjectID()
	s := server(t, mongotest.WithLoadBalanced(sid))
	var mu sync.Mutex
	var cleared []pool.Event
	p := open(t, s.URI()+"?loadBalanced=true", pool.WithEventHandler(func(e pool.Event) {
		if e.Type == pool.PoolCleared {
			mu.Lock()
			cleared = append(cleared, e)
			mu.Unlock()
		}
	}))
	c, err := p.Pool().CheckOut(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.ServiceID() != pool.ServiceID(sid) {
		t.Fatalf("connection's serviceId %v, want %v", c.ServiceID(), sid)
	}
	if err := p.Pool().Clear(pool.ClearOptions{ServiceID: c.ServiceID()}); err != nil {
		t.Fatal(err)
	}
	p.Pool().CheckIn(c)
	if _, err := p.RunCommand(ctx(t), "admin", ping); err != nil {
		t.Fatalf("the load-balanced pool stopped serving after a clear: %v", err)
	}
	st := p.Stats()
	mu.Lock()
	defer mu.Unlock()
	if len(cleared) != 1 || cleared[0].ServiceID != pool.ServiceID(sid) || st.ClosedStale != 1 || st.State != "ready" {
		t.Fatalf("events %+v, stats %+v", cleared, st)
	}

	// A load-balanced client against a server that is not.
	plain := server(t)
	if _, err := mongopool.Open(ctx(t), plain.URI()+"?loadBalanced=true"); err == nil {
		t.Fatal("loadBalanced=true against a non-load-balanced server succeeded")
	}
}

// Open against nothing waits for the server until serverSelectionTimeoutMS,
// then fails with a selection error that says why the server could not be
// used, and that errors.Is finds the cause in: the monitor's refused
// connection, a hang-up during its hello. (The backpressure labels of the
// pool's own establishment errors: TestBackpressureLabelsEndToEnd.)
func TestOpenAgainstNothing(t *testing.T) {
	_, err := mongopool.Open(ctx(t), refusedURI(t)+"?connectTimeoutMS=2000&serverSelectionTimeoutMS=300")
	var se *topology.SelectionError
	if !errors.As(err, &se) || se.Timeout != 300*time.Millisecond || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("connection refused: %v, want a selection error after 300ms that unwraps to ECONNREFUSED", err)
	}

	addr := rawListener(t, func(c net.Conn) {
		io.ReadFull(c, make([]byte, 16)) // the hello's header, then hang up
		c.Close()
	})
	_, err = mongopool.Open(ctx(t), "mongodb://"+addr+"/?serverSelectionTimeoutMS=300")
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "hello") {
		t.Fatalf("hang-up during hello: %v, want a selection error that names the hello", err)
	}
}

func TestOpenRejects(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"mongodb://127.0.0.1:1,127.0.0.1:2/", "one endpoint"},
		{"mongodb://u:pw@127.0.0.1:1/?authMechanism=GSSAPI", "GSSAPI"},
		{"mongodb://127.0.0.1:1/?minPoolSize=5&maxPoolSize=2", "minPoolSize"},
		{"http://127.0.0.1:1/", "scheme"},
	} {
		_, err := mongopool.Open(ctx(t), tc.uri)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q): %v, want an error about %s", tc.uri, err, tc.want)
		}
	}
}

// Invalid option values are warnings, as the URI specification says: the
// pool keeps the default and tells.
func TestOpenWarnings(t *testing.T) {
	s := server(t)
	p := open(t, s.URI()+"?maxConnecting=0&noSuchOption=1")
	if st := p.Stats(); st.MaxConnecting != pool.DefaultMaxConnecting {
		t.Fatalf("maxConnecting %d, want the default", st.MaxConnecting)
	}
	w := strings.Join(p.Warnings(), "\n")
	if !strings.Contains(w, "maxConnecting") || !strings.Contains(w, "noSuchOption") {
		t.Fatalf("warnings %q", w)
	}
	// Every valid serverMonitoringMode is honoured: none warns.
	for _, mode := range []string{"stream", "poll", "auto"} {
		if p := open(t, s.URI()+"?serverMonitoringMode="+mode); len(p.Warnings()) != 0 {
			t.Errorf("serverMonitoringMode=%s: warnings %q", mode, p.Warnings())
		}
	}
}

// The warnings are logged, at level Warn, through the pool's logger when the
// pool is built: a misconfigured pool does not go unnoticed. The URI in the
// record is redacted, and a secret given as an unknown option is not shown.
func TestWarningsLogged(t *testing.T) {
	s := server(t)
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := sdamNew(t, "mongodb://alice:hunter2@"+s.Addr()+"/?maxPoolSize=-1&pasword=hunter3", nil, pool.WithLogger(l))
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != len(p.Warnings()) || n != 2 {
		t.Fatalf("%d warnings logged for %d warnings (%q):\n%s", n, len(p.Warnings()), p.Warnings(), out)
	}
	for _, want := range []string{"maxPoolSize", "pasword"} {
		if !strings.Contains(out, want) {
			t.Errorf("no warning about %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter") {
		t.Errorf("a secret in the log:\n%s", out)
	}
}

// Many goroutines run commands through a small pool of real connections.
func TestOpenConcurrent(t *testing.T) {
	s := server(t)
	p := open(t, s.URI()+"?maxPoolSize=4&compressors=snappy")
	c := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				doc := bson.D{{Key: "w", Value: w}, {Key: "i", Value: i}}
				if _, err := p.RunCommand(c, "db", bson.D{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{doc}}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	reply, err := p.RunCommand(ctx(t), "db", bson.D{{Key: "count", Value: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 640 {
		t.Fatalf("count %v, want 640", reply)
	}
	// The server accepted the pool's connections and the monitor's: one,
	// or two when it streams (its round trip times have their own).
	if st := p.Stats(); st.Total > 4 || int64(s.Stats().ConnectionsAccepted) > st.Created+2 {
		t.Fatalf("pool %+v, server accepted %d", st, s.Stats().ConnectionsAccepted)
	}
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}
