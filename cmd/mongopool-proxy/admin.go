package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/dashboard"
	prommetrics "github.com/mongopool/mongopool/metrics/prometheus"
	"github.com/mongopool/mongopool/proxy"
)

// adminServer is the admin HTTP listener: /metrics for Prometheus (the
// proxy's metrics, its upstream pools' and the process's) and the
// dashboard of the upstream pools at /dashboard/.
type adminServer struct {
	srv  *http.Server
	dash *dashboard.Dashboard
	ln   net.Listener
	done chan struct{}
}

// startAdmin serves the admin endpoints on ln.
func startAdmin(ln net.Listener, client *mongopool.Client, p *proxy.Proxy, log *slog.Logger) (*adminServer, error) {
	reg := prometheus.NewRegistry()
	pools := prommetrics.NewCollector()
	if err := pools.AddSource("upstream", client.Pools); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{pools, prommetrics.NewProxyCollector(p),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector()} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("admin: registering the metrics: %w", err)
		}
	}
	dash, err := dashboard.New()
	if err != nil {
		return nil, err
	}
	if err := dash.AddSource("upstream", client.Pools); err != nil {
		dash.Close()
		return nil, err
	}
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
	mux.HandleFunc("POST /resume", func(w http.ResponseWriter, r *http.Request) {
		if err := p.Resume(r.URL.Query().Get("upstream")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintln(w, "resumed")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dashboard/", http.StatusFound)
	})
	a := &adminServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		dash: dash,
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the admin listener failed", "error", err)
		}
	}()
	return a, nil
}

// close stops the admin listener within ctx.
func (a *adminServer) close(ctx context.Context) {
	a.srv.Shutdown(ctx)
	<-a.done
	a.dash.Close()
}
