package prommetrics_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	prommetrics "github.com/mongopool/mongopool/metrics/prometheus"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/proxy"
	"github.com/mongopool/mongopool/wire"
)

// A proxy's metrics, and those of its client's pools through AddSource:
// lint-clean, and counting what a client did.
func TestProxyCollector(t *testing.T) {
	rs, err := mongotest.StartReplicaSet("rs0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	client, err := mongopool.NewClient(rs.URI())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p, err := proxy.New(client, proxy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln, proxy.Mongos)
	defer p.Close()

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	for _, cmd := range []bson.D{
		{{Key: "hello", Value: 1}, {Key: "client", Value: bson.D{{Key: "application", Value: bson.D{{Key: "name", Value: "billing"}}}}}, {Key: "$db", Value: "admin"}},
		{{Key: "insert", Value: "c"}, {Key: "documents", Value: bson.A{bson.D{}}}, {Key: "$db", Value: "db"}},
		{{Key: "noSuchCommand", Value: 1}, {Key: "$db", Value: "db"}},
	} {
		body, _ := bson.Marshal(cmd)
		msg, _ := wire.AppendMsg(nil, wire.NextRequestID(), 0, &wire.Msg{Body: body})
		if _, err := nc.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := wire.ReadMessage(nc, 0); err != nil {
			t.Fatal(err)
		}
	}

	pc := prommetrics.NewProxyCollector(p)
	if problems, err := testutil.CollectAndLint(pc); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	want := `
# HELP mongopool_proxy_app_operations_total Commands relayed to a server, by application name.
# TYPE mongopool_proxy_app_operations_total counter
mongopool_proxy_app_operations_total{app=""} 0
mongopool_proxy_app_operations_total{app="billing"} 2
# HELP mongopool_proxy_app_errors_total Replies with ok: 0 (the proxy's or a server's), by application name.
# TYPE mongopool_proxy_app_errors_total counter
mongopool_proxy_app_errors_total{app=""} 0
mongopool_proxy_app_errors_total{app="billing"} 1
`
	if err := testutil.CollectAndCompare(pc, strings.NewReader(want), "mongopool_proxy_app_operations_total", "mongopool_proxy_app_errors_total"); err != nil {
		t.Fatal(err)
	}
	pinned := `
# HELP mongopool_proxy_pinned_connections Upstream connections held now for the open cursors and transactions of a load-balanced upstream (their getMores and commands must follow them); at -max-pinned, more are refused.
# TYPE mongopool_proxy_pinned_connections gauge
mongopool_proxy_pinned_connections 0
`
	if err := testutil.CollectAndCompare(pc, strings.NewReader(pinned), "mongopool_proxy_pinned_connections"); err != nil {
		t.Fatal(err)
	}
	// The application's operations' time: one sample each.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(pc)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	timed := false
	for _, f := range families {
		if f.GetName() != "mongopool_proxy_app_operation_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "billing" {
				timed = true
				if s := m.GetSummary(); s.GetSampleCount() != 2 || s.GetSampleSum() <= 0 {
					t.Errorf("billing's operation time: %d samples summing to %vs, want 2 and more than 0", s.GetSampleCount(), s.GetSampleSum())
				}
			}
		}
	}
	if !timed {
		t.Error("no mongopool_proxy_app_operation_duration_seconds for billing")
	}

	c := prommetrics.NewCollector()
	if err := c.AddSource("upstream", client.Pools); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSource("upstream", client.Pools); err == nil {
		t.Fatal("a second source of the same name was accepted")
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for len(client.Pools()) < 2 {
		if ctx.Err() != nil {
			t.Fatal("the client never made both pools")
		}
		time.Sleep(time.Millisecond)
	}
	if n := testutil.CollectAndCount(c, "mongopool_checkouts_total"); n != 2 {
		t.Fatalf("%d series of mongopool_checkouts_total, want one per server (2)", n)
	}
}
