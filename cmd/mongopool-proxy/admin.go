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
