package mongotest_test

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// freePorts returns n ports that were free a moment ago: each was listened
// on, then let go.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close() // held until all are chosen, so that none repeats
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func TestWithPorts(t *testing.T) {
	ports := freePorts(t, 2)
	srv := start(t, mongotest.WithPorts(ports[0]))
	if want := "127.0.0.1:" + strconv.Itoa(ports[0]); srv.Addr() != want {
		t.Errorf("standalone: Addr %q, want %q", srv.Addr(), want)
	}

	// Member 1 has no port given: it takes a free one.
	rs, err := mongotest.StartReplicaSet("rs0", 2, mongotest.WithPorts(ports[1]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	m := rs.Members()
	if want := "127.0.0.1:" + strconv.Itoa(ports[1]); m[0].Addr() != want {
		t.Errorf("member 0: Addr %q, want %q", m[0].Addr(), want)
	}
	if m[1].Addr() == m[0].Addr() || strings.HasSuffix(m[1].Addr(), ":0") {
		t.Errorf("member 1: Addr %q, want a port of its own", m[1].Addr())
	}
	// Stop and Restart keep the port.
	if err := rs.Stop(0); err != nil {
		t.Fatal(err)
	}
	if err := rs.Restart(0); err != nil {
		t.Fatal(err)
	}
	if want := "127.0.0.1:" + strconv.Itoa(ports[1]); rs.Members()[0].Addr() != want {
		t.Errorf("member 0 restarted: Addr %q, want %q", rs.Members()[0].Addr(), want)
	}

	// A port taken is an error of Start.
	if _, err := mongotest.Start(mongotest.WithPorts(ports[0])); err == nil {
		t.Error("Start on a port in use: no error")
	}
	if _, err := mongotest.Start(mongotest.WithPorts(70000)); err == nil {
		t.Error("WithPorts(70000): no error")
	}
}

func TestConfigureFailPoint(t *testing.T) {
	srv := start(t)
	// The error 91 marks the server Unknown until the driver's next
	// heartbeat: a short one keeps the test short.
	client := connect(t, srv.URI()+"?heartbeatFrequencyMS=500")
	coll := client.Database("db").Collection("c")
	c := ctx(t)

	cmd, err := bson.Marshal(bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: bson.D{{Key: "times", Value: 1}}},
		{Key: "data", Value: bson.D{
			{Key: "failCommands", Value: bson.A{"insert"}},
			{Key: "errorCode", Value: 91},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := srv.ConfigureFailPoint(cmd); err != nil || n != 0 {
		t.Fatalf("ConfigureFailPoint: count %d, error %v; want 0, nil", n, err)
	}
	_, err = coll.InsertOne(c, bson.D{{Key: "x", Value: 1}})
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 91 {
		t.Fatalf("insert with the fail point set: %v, want code 91", err)
	}
	if _, err := coll.InsertOne(c, bson.D{{Key: "x", Value: 2}}); err != nil {
		t.Fatalf("insert after the fail point's one time: %v", err)
	}

	// mode "off" turns an alwaysOn fail point off, and the count is the
	// times it fired before.
	on, _ := bson.Marshal(bson.D{
		{Key: "configureFailPoint", Value: "failCommand"},
		{Key: "mode", Value: "alwaysOn"},
		{Key: "data", Value: bson.D{{Key: "failCommands", Value: bson.A{"find"}}, {Key: "errorCode", Value: 2}}},
	})
	if _, err := srv.ConfigureFailPoint(on); err != nil {
		t.Fatal(err)
	}
	off, _ := bson.Marshal(bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: "off"}})
	if n, err := srv.ConfigureFailPoint(off); err != nil || n != 1 {
		t.Fatalf("ConfigureFailPoint off: count %d, error %v; want 1, nil", n, err)
	}
	if err := coll.FindOne(c, bson.D{}).Err(); err != nil {
		t.Fatalf("find after the fail point is off: %v", err)
	}

	// A bad document is refused as the command refuses it.
	bad, _ := bson.Marshal(bson.D{{Key: "configureFailPoint", Value: "noSuchFailPoint"}, {Key: "mode", Value: "off"}})
	if _, err := srv.ConfigureFailPoint(bad); err == nil || !strings.Contains(err.Error(), "noSuchFailPoint") {
		t.Errorf("ConfigureFailPoint of an unknown fail point: %v", err)
	}
}
