package mongotest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// newNetwork returns a Network that the test closes when it ends.
func newNetwork(t *testing.T) *mongotest.Network {
	t.Helper()
	n := mongotest.NewNetwork()
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Network.Close: %v", err)
		}
	})
	return n
}

// replicaSetOn starts a replica set "rs0" of members on n.
func replicaSetOn(t *testing.T, n *mongotest.Network, members int, opts ...mongotest.Option) *mongotest.ReplicaSet {
	t.Helper()
	rs, err := mongotest.StartReplicaSet("rs0", members, append([]mongotest.Option{mongotest.WithNetwork(n)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// dialRawOn opens a connection to address on n, closed when the test ends.
func dialRawOn(t *testing.T, n *mongotest.Network, address string) *rawConn {
	t.Helper()
	nc, err := n.DialContext(t.Context(), "tcp", address)
	if err != nil {
		t.Fatalf("dial %s: %v", address, err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// readWithin reads one message, waiting up to d for it.
func (r *rawConn) readWithin(d time.Duration) []byte {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(d))
	b, err := wire.ReadMessage(r.nc, 0)
	if err != nil {
		r.t.Fatalf("reading a reply: %v", err)
	}
	return b
}

// replyWithin reads the reply to the request id, waiting up to d for it.
func (r *rawConn) replyWithin(id int32, d time.Duration) (*wire.Msg, bson.Raw) {
	r.t.Helper()
	h, m, err := wire.DecodeReply(r.readWithin(d), 0)
	if err != nil {
		r.t.Fatalf("decoding: %v", err)
	}
	if h.ResponseTo != id {
		r.t.Fatalf("responseTo %d, want %d", h.ResponseTo, id)
	}
	return m, m.Body
}

// silentFor checks that nothing comes on r for d.
func (r *rawConn) silentFor(d time.Duration) {
	r.t.Helper()
	r.nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, err := r.nc.Read(b[:])
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		r.t.Fatalf("read %d bytes, %v; want nothing for %v", n, err, d)
	}
}

func TestNetworkStandalone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		srv, err := mongotest.Start(mongotest.WithNetwork(n))
		if err != nil {
			t.Fatal(err)
		}
		if srv.Addr() != "127.0.0.1:27017" || srv.URI() != "mongodb://127.0.0.1:27017/" {
			t.Errorf("Addr %q URI %q, want the first port of the network", srv.Addr(), srv.URI())
		}
		r := dialRawOn(t, n, srv.Addr())
		hello := r.run(cmd("admin", bson.E{Key: "hello", Value: 1}))
		checkOK(t, hello)
		if w, _ := hello.Lookup("isWritablePrimary").BooleanOK(); !w {
			t.Errorf("hello %s", hello)
		}
		checkOK(t, r.run(pingCmd))
		if a := r.nc.RemoteAddr().String(); a != srv.Addr() {
			t.Errorf("RemoteAddr %q, want %q", a, srv.Addr())
		}
		if st := srv.Stats(); st.Commands["ping"] != 1 || st.ConnectionsOpen != 1 {
			t.Errorf("stats %+v", st)
		}
		// A second server takes the next port.
		srv2, err := mongotest.Start(mongotest.WithNetwork(n), mongotest.WithMongos())
		if err != nil {
			t.Fatal(err)
		}
		if srv2.Addr() != "127.0.0.1:27018" {
			t.Errorf("second server at %q", srv2.Addr())
		}
		checkOK(t, dialRawOn(t, n, srv2.Addr()).run(pingCmd))
		// The server's Close closes its connections: the client reads EOF.
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		r.expectClosed()
		if _, err := n.DialContext(t.Context(), "tcp", srv.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial to a closed server: %v, want ECONNREFUSED", err)
		}
	})
}

func TestNetworkAwaitableHello(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 3)
		m := rs.Members()
		want := "mongodb://127.0.0.1:27017,127.0.0.1:27018,127.0.0.1:27019/?replicaSet=rs0"
		if rs.URI() != want {
			t.Errorf("URI %q, want %q", rs.URI(), want)
		}
		r := dialRawOn(t, n, m[0].Addr())
		h := decodeHello(t, r.run(helloCmd()))
		if h.Me != m[0].Addr() || len(h.Hosts) != 3 || h.Hosts[2] != m[2].Addr() {
			t.Errorf("hello %+v", h)
		}
		tv := *h.TopologyVersion

		// Nothing changes: the hello returns after maxAwaitTimeMS, exactly.
		start := time.Now()
		id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 10000))}, nil)
		_, reply := r.replyWithin(id, time.Minute)
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("the awaitable hello returned after %v, want 10s", d)
		}
		if got := decodeHello(t, reply); *got.TopologyVersion != tv {
			t.Errorf("topologyVersion %+v, want %+v", got.TopologyVersion, tv)
		}

		// A step-down ends the wait at once.
		id = r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 10000))}, nil)
		synctest.Wait() // the hello waits
		if st := m[0].Stats(); st.HellosAwaiting != 1 {
			t.Fatalf("HellosAwaiting %d, want 1", st.HellosAwaiting)
		}
		time.Sleep(3 * time.Second)
		start = time.Now()
		if err := rs.StepDown(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, reply = r.replyWithin(id, time.Minute)
		if d := time.Since(start); d != 0 {
			t.Errorf("the awaitable hello returned %v after StepDown, want at once", d)
		}
		if got := decodeHello(t, reply); got.TopologyVersion.Counter != tv.Counter+1 || *got.IsWritablePrimary {
			t.Errorf("hello after StepDown %+v", got)
		}
	})
}

func TestNetworkExhaustHello(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 2)
		r := dialRawOn(t, n, rs.Members()[1].Addr())
		tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
		start := time.Now()
		r.sendMsg(&wire.Msg{Flags: wire.ExhaustAllowed, Body: marshal(t, awaitableHello(tv, 10000))}, nil)
		// A reply every maxAwaitTimeMS, each with moreToCome, then one at
		// once when the member changes.
		for i := 1; i <= 3; i++ {
			_, m, err := wire.DecodeReply(r.readWithin(time.Minute), 0)
			if err != nil {
				t.Fatal(err)
			}
			if m.Flags&wire.MoreToCome == 0 {
				t.Errorf("reply %d without moreToCome", i)
			}
			if d := time.Since(start); d != time.Duration(i)*10*time.Second {
				t.Errorf("reply %d after %v, want %v", i, d, time.Duration(i)*10*time.Second)
			}
		}
		time.Sleep(4 * time.Second)
		mark := time.Now()
		if err := rs.SetLag(1, time.Minute); err != nil {
			t.Fatal(err)
		}
		_, m, err := wire.DecodeReply(r.readWithin(time.Minute), 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(mark); d != 0 {
			t.Errorf("the change came %v after SetLag, want at once", d)
		}
		if got := decodeHello(t, m.Body); got.TopologyVersion.Counter != tv.Counter+1 {
			t.Errorf("counter %d after SetLag, want %d", got.TopologyVersion.Counter, tv.Counter+1)
		}
	})
}

func TestNetworkDialRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		for _, addr := range []string{"127.0.0.1:27017", "db.example:27017", "127.0.0.1:0"} {
			nc, err := n.DialContext(t.Context(), "tcp", addr)
			if err == nil {
				nc.Close()
				t.Fatalf("dial %s succeeded with nobody listening", addr)
			}
			var op *net.OpError
			if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || op.Op != "dial" {
				t.Errorf("dial %s: %v (%T), want a *net.OpError wrapping ECONNREFUSED", addr, err, err)
			}
		}
		if _, err := n.DialContext(t.Context(), "unix", "/tmp/mongodb-27017.sock"); err == nil {
			t.Error("dial unix succeeded")
		}
		if _, err := n.DialContext(t.Context(), "tcp", "no-port"); err == nil {
			t.Error("dial without a port succeeded")
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		ln, err := n.Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := n.DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.Canceled) {
			t.Errorf("dial with a canceled context: %v", err)
		}
		if _, err := n.Listen(ln.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("listening twice on %s: %v, want EADDRINUSE", ln.Addr(), err)
		}
		// Host names are matched without regard to case.
		named, err := n.Listen("DB.example:27017")
		if err != nil {
			t.Fatal(err)
		}
		nc, err := n.DialContext(t.Context(), "tcp", "db.EXAMPLE:27017")
		if err != nil {
			t.Fatalf("dial to a named address: %v", err)
		}
		nc.Close()
		named.Close()
		if _, err := n.DialContext(t.Context(), "tcp", "db.example:27017"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial after the listener's Close: %v", err)
		}
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := n.DialContext(t.Context(), "tcp", ln.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial after the network's Close: %v, want ECONNREFUSED", err)
		}
		if _, err := n.Listen("127.0.0.1:0"); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Listen after the network's Close: %v, want net.ErrClosed", err)
		}
	})
}

func TestNetworkStopRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 3)
		m := rs.Members()
		before := decodeHello(t, dialRawOn(t, n, m[1].Addr()).run(helloCmd()))
		r1 := dialRawOn(t, n, m[1].Addr())
		checkOK(t, r1.run(pingCmd))
		if err := rs.Stop(1); err != nil {
			t.Fatal(err)
		}
		r1.expectClosed()
		if _, err := n.DialContext(t.Context(), "tcp", m[1].Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial to a stopped member: %v, want ECONNREFUSED", err)
		}
		if err := rs.Restart(1); err != nil {
			t.Fatal(err)
		}
		after := decodeHello(t, dialRawOn(t, n, m[1].Addr()).run(helloCmd()))
		if after.TopologyVersion.ProcessID == before.TopologyVersion.ProcessID || after.TopologyVersion.Counter != 0 {
			t.Errorf("topologyVersion %+v after Restart, was %+v", after.TopologyVersion, before.TopologyVersion)
		}
		if !after.Secondary || after.Primary != m[0].Addr() || after.Me != m[1].Addr() {
			t.Errorf("member 1 after Restart: %+v", after)
		}
		// Restart fails while someone else holds the address.
		if err := rs.Stop(0); err != nil {
			t.Fatal(err)
		}
		ln, err := n.Listen(m[0].Addr())
		if err != nil {
			t.Fatalf("taking the address of the stopped member: %v", err)
		}
		if err := rs.Restart(0); err == nil {
			t.Error("Restart on a taken address succeeded")
		}
		ln.Close()
		if err := rs.Restart(0); err != nil {
			t.Fatal(err)
		}
		if err := rs.Elect(0); err != nil {
			t.Fatal(err)
		}
		checkOK(t, dialRawOn(t, n, m[0].Addr()).run(insertCmd(1)))
	})
}

func TestNetworkPartitionHeal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 3)
		m := rs.Members()
		old := dialRawOn(t, n, m[0].Addr())
		checkOK(t, old.run(pingCmd))
		if err := rs.Partition(0); err != nil {
			t.Fatal(err)
		}
		pingID := old.sendMsg(&wire.Msg{Body: marshal(t, pingCmd)}, nil)
		fresh := dialRawOn(t, n, m[0].Addr()) // accepted, never answered
		helloID := fresh.sendMsg(&wire.Msg{Body: marshal(t, helloCmd())}, nil)
		old.silentFor(30 * time.Second)
		fresh.silentFor(time.Second)
		if err := rs.Elect(1); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := rs.Heal(0); err != nil {
			t.Fatal(err)
		}
		_, reply := old.replyWithin(pingID, time.Minute)
		checkOK(t, reply)
		_, reply = fresh.replyWithin(helloID, time.Minute)
		if got := decodeHello(t, reply); *got.IsWritablePrimary || got.Primary != m[1].Addr() {
			t.Errorf("the old primary after Heal: %+v", got)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the replies came %v after Heal, want at once", d)
		}
	})
}

func TestNetworkFailPointsAndFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		srv, err := mongotest.Start(mongotest.WithNetwork(n), mongotest.WithReplicaSet("rs0"))
		if err != nil {
			t.Fatal(err)
		}
		r := dialRawOn(t, n, srv.Addr())
		if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, Times: 1, BlockTime: 2 * time.Second}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		checkOK(t, r.run(pingCmd))
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("the blocked ping took %v, want 2s", d)
		}
		if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, Times: 1, CloseConnection: true}); err != nil {
			t.Fatal(err)
		}
		r.sendMsg(&wire.Msg{Body: marshal(t, pingCmd)}, nil)
		r.expectClosed()

		// A reset reaches the client as ECONNRESET, after what was sent.
		if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultResetMidReply, Commands: []string{"ping"}, Times: 1}); err != nil {
			t.Fatal(err)
		}
		r = dialRawOn(t, n, srv.Addr())
		r.sendMsg(&wire.Msg{Body: marshal(t, pingCmd)}, nil)
		got, err := io.ReadAll(r.nc)
		if !errors.Is(err, syscall.ECONNRESET) || len(got) == 0 {
			t.Errorf("read %d bytes then %v, want part of a reply then ECONNRESET", len(got), err)
		}
		// A delayed reply, on the bubble's clock.
		if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultDelay, Delay: time.Hour, Commands: []string{"ping"}, Times: 1}); err != nil {
			t.Fatal(err)
		}
		r = dialRawOn(t, n, srv.Addr())
		start = time.Now()
		id := r.sendMsg(&wire.Msg{Body: marshal(t, pingCmd)}, nil)
		_, reply := r.replyWithin(id, 2*time.Hour)
		checkOK(t, reply)
		if d := time.Since(start); d != time.Hour {
			t.Errorf("the delayed reply took %v, want 1h", d)
		}
		// Paused accepting: the dial succeeds, and nothing answers until
		// accepting resumes.
		srv.PauseAccepting()
		r = dialRawOn(t, n, srv.Addr())
		id = r.sendMsg(&wire.Msg{Body: marshal(t, pingCmd)}, nil)
		r.silentFor(time.Minute)
		srv.ResumeAccepting()
		_, reply = r.replyWithin(id, time.Minute)
		checkOK(t, reply)
	})
}

// Closing the network alone ends everything: servers, members stopped or
// partitioned, waiting hellos, blocked fail points, connections held in a
// backlog or by a silent fault, and the clients' ends. The bubble's end
// checks that no goroutine is left.
func TestNetworkCloseEndsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := mongotest.NewNetwork()
		rs := replicaSetOn(t, n, 3)
		m := rs.Members()
		srv, err := mongotest.Start(mongotest.WithNetwork(n))
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		dial := func(addr string) net.Conn {
			nc, err := n.DialContext(t.Context(), "tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, nc)
			return nc
		}
		send := func(nc net.Conn, d bson.D) {
			b, err := wire.AppendMsg(nil, wire.NextRequestID(), 0, &wire.Msg{Body: marshal(t, d)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := nc.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		r := &rawConn{t: t, nc: dial(m[0].Addr())}
		tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
		send(r.nc, awaitableHello(tv, 600000))
		if err := srv.SetFailPoint(mongotest.FailPoint{Commands: []string{"ping"}, BlockTime: time.Hour}); err != nil {
			t.Fatal(err)
		}
		send(dial(srv.Addr()), pingCmd)
		if err := rs.Partition(1); err != nil {
			t.Fatal(err)
		}
		send(dial(m[1].Addr()), pingCmd)
		if err := rs.Stop(2); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.InjectFault(mongotest.Fault{Kind: mongotest.FaultSilentAccept, Times: 1}); err != nil {
			t.Fatal(err)
		}
		send(dial(srv.Addr()), pingCmd)
		srv.PauseAccepting()
		dial(srv.Addr())
		ln, err := n.Listen("raw.example:1")
		if err != nil {
			t.Fatal(err)
		}
		waiting := dial(ln.Addr().String())
		blocked := make(chan error, 1)
		go func() { // a client's reader, blocked until the network closes
			_, err := waiting.Read(make([]byte, 1))
			blocked <- err
		}()
		synctest.Wait()
		if err := n.Close(); err != nil {
			t.Fatalf("Network.Close: %v", err)
		}
		if err := <-blocked; !errors.Is(err, net.ErrClosed) {
			t.Errorf("a blocked read ended with %v, want net.ErrClosed", err)
		}
		for _, nc := range conns {
			if _, err := nc.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
				t.Errorf("read after Network.Close: %v, want net.ErrClosed", err)
			}
		}
		// The servers are closed: their Close and the set's controls say so.
		if err := srv.Close(); err != nil {
			t.Errorf("Server.Close after Network.Close: %v", err)
		}
		if err := rs.Close(); err != nil {
			t.Errorf("ReplicaSet.Close after Network.Close: %v", err)
		}
		if err := rs.Restart(2); err == nil {
			t.Error("Restart after Network.Close succeeded")
		}
		if _, err := mongotest.Start(mongotest.WithNetwork(n)); err == nil {
			t.Error("Start on a closed network succeeded")
		}
	})
}

// WithAdvertisedHosts on a Network makes the members listen where they say
// they are.
func TestNetworkAdvertisedHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		hosts := []string{"Mongo-A.example:27017", "mongo-b.example:27017"}
		rs := replicaSetOn(t, n, 2, mongotest.WithAdvertisedHosts(hosts...))
		if want := "mongodb://Mongo-A.example:27017,mongo-b.example:27017/?replicaSet=rs0"; rs.URI() != want {
			t.Errorf("URI %q, want %q", rs.URI(), want)
		}
		h := decodeHello(t, dialRawOn(t, n, "mongo-a.example:27017").run(helloCmd()))
		if h.Me != hosts[0] || h.Primary != hosts[0] || len(h.Hosts) != 2 || h.Hosts[1] != hosts[1] {
			t.Errorf("hello %+v", h)
		}
		if a := rs.Members()[1].Addr(); a != "mongo-b.example:27017" {
			t.Errorf("member 1 listens on %q", a)
		}
		checkOK(t, dialRawOn(t, n, hosts[1]).run(pingCmd))
	})
}

// The connections behave as sockets do: deadlines on the bubble's clock,
// buffers that let both ends write before they read, and the errors of a
// closed connection.
func TestNetworkConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		ln, err := n.Listen(":0")
		if err != nil {
			t.Fatal(err)
		}
		if ln.Addr().String() != "127.0.0.1:27017" {
			t.Errorf("listening on %s", ln.Addr())
		}
		client, err := n.DialContext(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if client.LocalAddr().String() != server.RemoteAddr().String() || server.LocalAddr().String() != ln.Addr().String() {
			t.Errorf("addresses: client %v->%v, server %v->%v", client.LocalAddr(), client.RemoteAddr(), server.LocalAddr(), server.RemoteAddr())
		}

		// Both ends write 256 KiB before reading, which net.Pipe would
		// deadlock on.
		big := bytes.Repeat([]byte("x"), 256<<10)
		for _, c := range []net.Conn{client, server} {
			if _, err := c.Write(big); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []net.Conn{client, server} {
			if got, err := io.ReadAll(io.LimitReader(c, int64(len(big)))); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("read %d bytes, %v", len(got), err)
			}
		}

		// A read deadline, on the bubble's clock.
		start := time.Now()
		client.SetReadDeadline(start.Add(3 * time.Second))
		_, err = client.Read(make([]byte, 1))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read past the deadline: %v, want a timeout", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("the read timed out after %v, want 3s", d)
		}
		client.SetReadDeadline(time.Time{})

		// A write waits once the peer has a buffer's worth to read, until
		// its deadline.
		server.SetWriteDeadline(time.Now().Add(time.Second))
		written, err := server.Write(make([]byte, 2<<20))
		if !errors.As(err, &ne) || !ne.Timeout() || written != 1<<20 {
			t.Errorf("a write into a full buffer: %d bytes, %v; want 1 MiB then a timeout", written, err)
		}
		server.SetWriteDeadline(time.Time{})
		if got, err := io.ReadFull(client, make([]byte, written)); err != nil || got != written {
			t.Fatalf("read %d, %v", got, err)
		}

		// Concurrent writes on one end do not interleave, even beyond a
		// buffer's worth.
		for _, b := range []byte("ab") {
			go func() {
				_, err := server.Write(bytes.Repeat([]byte{b}, 3<<19))
				if err != nil {
					t.Errorf("write: %v", err)
				}
			}()
		}
		var got []byte
		for len(got) < 3<<20 {
			synctest.Wait() // both writers wait for room
			chunk := make([]byte, 64<<10)
			k, err := client.Read(chunk)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, chunk[:k]...)
		}
		if bytes.Count(got[:3<<19], got[:1]) != 3<<19 || got[0] == got[3<<19] {
			t.Fatalf("two concurrent writes interleaved")
		}

		// A deadline moved into the past wakes a waiting reader.
		done := make(chan error)
		go func() {
			_, err := server.Read(make([]byte, 1))
			done <- err
		}()
		synctest.Wait()
		server.SetReadDeadline(time.Unix(1, 0))
		if err := <-done; !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("read after the deadline moved: %v, want a timeout", err)
		}
		server.SetReadDeadline(time.Time{})

		// Close wakes a waiting reader with net.ErrClosed; the peer reads
		// what is left, then io.EOF, and its writes fail.
		go func() {
			_, err := io.ReadFull(server, make([]byte, 3))
			done <- err
		}()
		synctest.Wait()
		client.Write([]byte("bye"))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := server.Read(make([]byte, 1))
			done <- err
		}()
		synctest.Wait()
		server.Write([]byte("last"))
		server.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Errorf("a read waiting when its end closed: %v, want net.ErrClosed", err)
		}
		if got, err := io.ReadAll(client); string(got) != "last" || err != nil {
			t.Errorf("the peer read %q, %v; want what was left, then EOF", got, err)
		}
		if _, err := client.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("write to a closed peer: %v, want EPIPE", err)
		}
		if err := server.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}

		// A writer waiting on a full buffer wakes when the peer closes.
		c1, err := n.DialContext(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s1, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := c1.Write(make([]byte, 2<<20))
			done <- err
		}()
		synctest.Wait()
		s1.Close()
		if err := <-done; !errors.Is(err, syscall.EPIPE) {
			t.Errorf("a write waiting when the peer closed: %v, want EPIPE", err)
		}
		c1.Close()

		// Accept waits for a dial; Close wakes it, and resets the
		// connections of the backlog.
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Close()
			}
			done <- err
		}()
		synctest.Wait()
		c2, err := n.DialContext(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Accept: %v", err)
		}
		if _, err := c2.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("read after the server closed: %v, want io.EOF", err)
		}
		c3, err := n.DialContext(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
		if _, err := c3.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("read on a connection of a closed backlog: %v, want ECONNRESET", err)
		}
	})
}

// A Network works with real time too, outside testing/synctest.
func TestNetworkRealTime(t *testing.T) {
	n := mongotest.NewNetwork()
	rs := replicaSetOn(t, n, 2)
	r := dialRawOn(t, n, rs.Members()[0].Addr())
	checkOK(t, r.run(pingCmd))
	tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
	start := time.Now()
	if got := decodeHello(t, r.run(awaitableHello(tv, 50))); *got.TopologyVersion != tv {
		t.Errorf("topologyVersion %+v, want %+v", got.TopologyVersion, tv)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("the awaitable hello returned after %v, before maxAwaitTimeMS", d)
	}
	id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 600000))}, nil)
	waitAwaiting(t, rs.Members()[0], 1)
	if err := rs.StepDown(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, reply := r.replyWithin(id, testTimeout)
	if got := decodeHello(t, reply); got.TopologyVersion.Counter != tv.Counter+1 {
		t.Errorf("hello after StepDown: %+v", got)
	}
	r.silentFor(20 * time.Millisecond)
	closeAndCheck(t, n)
}

// A driver, with its monitors and their awaitable hellos, runs on the
// bubble's clock through the Network: a write that waits for an election
// 25 seconds away takes 25 seconds of that clock, and no time at all.
func TestNetworkDriverOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 3)
		client, err := mongo.Connect(options.Client().ApplyURI(rs.URI()).SetDialer(n))
		if err != nil {
			t.Fatal(err)
		}
		coll := client.Database("x").Collection("c")
		if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := rs.StepDown(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		elected := make(chan error, 1)
		go func() {
			time.Sleep(25 * time.Second)
			elected <- rs.Elect(2)
		}()
		if _, err := coll.InsertOne(t.Context(), bson.D{{Key: "_id", Value: 2}}); err != nil {
			t.Fatalf("insert across the election: %v", err)
		}
		if d := time.Since(start); d < 25*time.Second || d > 26*time.Second {
			t.Errorf("the insert took %v, want the 25s to the election", d)
		}
		if err := <-elected; err != nil {
			t.Fatal(err)
		}
		if got := rs.Members()[2].Stats().Commands["insert"]; got != 1 {
			t.Errorf("member 2 ran %d inserts, want 1", got)
		}
		if err := client.Disconnect(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TLS runs over a Network's connections, on the bubble's clock (make the
// certificates in the bubble: its clock says 2000-01-01).
func TestNetworkTLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pki := testpki.New(t)
		n := newNetwork(t)
		rs := replicaSetOn(t, n, 1, mongotest.WithTLS(pki.ServerTLS()))
		nc, err := n.DialContext(t.Context(), "tcp", rs.Members()[0].Addr())
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(nc, &tls.Config{RootCAs: pki.CAPool, ServerName: "127.0.0.1"})
		t.Cleanup(func() { tc.Close() })
		if err := tc.HandshakeContext(t.Context()); err != nil {
			t.Fatalf("TLS handshake: %v", err)
		}
		r := &rawConn{t: t, nc: tc}
		tv := *decodeHello(t, r.run(helloCmd())).TopologyVersion
		start := time.Now()
		id := r.sendMsg(&wire.Msg{Body: marshal(t, awaitableHello(tv, 10000))}, nil)
		_, reply := r.replyWithin(id, time.Minute)
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("the awaitable hello returned after %v, want 10s", d)
		}
		decodeHello(t, reply)
		checkOK(t, r.run(pingCmd))
	})
}
