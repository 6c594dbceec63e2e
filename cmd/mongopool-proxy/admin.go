package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.mongodb.org/mongo-driver/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/dashboard"
	prommetrics "github.com/mongopool/mongopool/metrics/prometheus"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/proxy"
	"github.com/mongopool/mongopool/topology"
)

// adminServer is the admin HTTP listener: /metrics for Prometheus (the
// proxy's metrics, its upstream pools' and the process's) and the
// dashboard of the upstream pools at /dashboard/.
type adminServer struct {
	srv   *http.Server
	dash  *dashboard.Dashboard
	pools *prommetrics.Collector
	ln    net.Listener
	done  chan struct{}
	// draining is set once the proxy drains: /readyz then says so, for
	// the load balancer or orchestrator to send new clients elsewhere.
	draining atomic.Bool

	mu sync.Mutex // protects following fields
	// upstreams are the clients whose pools the dashboard and the metrics
	// show, by upstream name: a reload replaces them.
	upstreams map[string]*atomic.Pointer[mongopool.Client]
}

// newAdmin makes the admin endpoints' dashboard and collector, before the
// upstream clients, whose pools give the dashboard their events (see
// eventHandler).
func newAdmin() (*adminServer, error) {
	dash, err := dashboard.New()
	if err != nil {
		return nil, err
	}
	return &adminServer{dash: dash, pools: prommetrics.NewCollector(), done: make(chan struct{}),
		upstreams: map[string]*atomic.Pointer[mongopool.Client]{}}, nil
}

// sourceName is the name of an upstream's pools on the dashboard and in
// the metrics: "upstream" for -upstream's, "upstream-NAME" for an
// -upstream-as NAME.
func sourceName(upstream string) string {
	if upstream == "" {
		return "upstream"
	}
	return "upstream-" + upstream
}

// eventHandler is the pool option that gives the dashboard the events of
// an upstream's pools; none without an admin listener.
func (a *adminServer) eventHandler(upstream string) []pool.Option {
	if a == nil {
		return nil
	}
	return []pool.Option{pool.WithEventHandler(a.dash.EventHandler(sourceName(upstream)))}
}

// setUpstream shows the pools of c, the client of the upstream credential
// named upstream, on the dashboard and in the metrics, in place of its
// client before, if any; a nil c shows none (a reload removed it).
func (a *adminServer) setUpstream(upstream string, c *mongopool.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur, ok := a.upstreams[upstream]; ok {
		cur.Store(c)
		return
	}
	cur := new(atomic.Pointer[mongopool.Client])
	cur.Store(c)
	a.upstreams[upstream] = cur
	pools := func() []*pool.Pool {
		if c := cur.Load(); c != nil {
			return c.Pools()
		}
		return nil
	}
	// The names are the proxy's own, each added once: neither can refuse.
	a.pools.AddSource(sourceName(upstream), pools)
	a.dash.AddSource(sourceName(upstream), pools)
}

// serve serves the admin endpoints on ln.
func (a *adminServer) serve(ln net.Listener, p *proxy.Proxy, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{a.pools, prommetrics.NewProxyCollector(p),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector()} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("admin: registering the metrics: %w", err)
		}
	}
	dash := a.dash
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dash))
	// Pause and resume an upstream ("upstream" names an -upstream-as; none:
	// -upstream's): POST /pause?upstream=NAME&timeout=30s, POST /resume.
	mux.HandleFunc("POST /pause", func(w http.ResponseWriter, r *http.Request) {
		timeout, err := time.ParseDuration(r.URL.Query().Get("timeout"))
		if err != nil {
			http.Error(w, "pause: give timeout, a duration after which the proxy resumes by itself (timeout=30s)", http.StatusBadRequest)
			return
		}
		if err := p.Pause(r.URL.Query().Get("upstream"), timeout); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "paused")
	})
	// The proxyStatus command's reply, as JSON (relaxed Extended JSON):
	// GET /status, with each client: GET /status?clients=true.
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var doc bson.D
		err := bson.Unmarshal(p.Status(r.URL.Query().Get("clients") == "true"), &doc)
		var js []byte
		if err == nil {
			js, err = bson.MarshalExtJSONIndent(doc, false, false, "", "  ")
		}
		if err != nil {
			http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(js, '\n'))
	})
	// Reconnect: POST /reconnect?upstream=NAME replaces the upstream's
	// connections with new ones (see proxy.Proxy.Reconnect).
	mux.HandleFunc("POST /reconnect", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Reconnect(r.URL.Query().Get("upstream")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "reconnecting")
	})
	mux.HandleFunc("POST /resume", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Resume(r.URL.Query().Get("upstream")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "resumed")
	})
	// Liveness: the process answers. Readiness: it takes new clients
	// (see notReady).
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := a.notReady(p); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dashboard/", http.StatusFound)
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	a.ln = ln
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the admin listener failed", "error", err)
		}
	}()
	return nil
}

// notReady says why the proxy should get no new clients now, or "": it
// drains, or its upstream has no server that holds data (all unreachable,
// or out of the proxy's wire versions). An election, a deployment
// without a primary for a while, keeps it ready: the proxy holds the
// writes through it (-election-hold), as its clients would.
func (a *adminServer) notReady(p *proxy.Proxy) string {
	if a.draining.Load() {
		return "draining: the proxy is stopping; connect new clients to another one"
	}
	d := p.Upstream("").Topology().Description()
	if d.CompatibilityError != nil {
		return "the upstream is out of the proxy's wire versions: " + d.CompatibilityError.Error()
	}
	for _, s := range d.Servers() {
		switch s.Type {
		case topology.Standalone, topology.Mongos, topology.RSPrimary, topology.RSSecondary, topology.LoadBalancer:
			return ""
		}
	}
	return "no upstream server that holds data is reachable: " + d.Summary()
}

// close stops the admin listener, if it serves, within ctx.
func (a *adminServer) close(ctx context.Context) {
	if a.srv != nil {
		a.srv.Shutdown(ctx)
		<-a.done
	}
	a.dash.Close()
}
