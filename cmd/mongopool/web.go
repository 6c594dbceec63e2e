package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/mongopool/mongopool/dashboard"
	"github.com/mongopool/mongopool/pool"
)

// The names of the run's pools on the dashboard: the one pool, or the
// client's, each shown as client/host:port.
const (
	webPool   = "pool"
	webClient = "client"
)

// webLimit bounds the end of the dashboard's server, once the run is over.
const webLimit = time.Second

// web is the dashboard of -http: the run's pools, served while it runs.
type web struct {
	d    *dashboard.Dashboard
	srv  *http.Server
	addr string // the address it listens on, its port resolved
	done chan struct{}
}

// startWeb listens on addr and serves a dashboard there until close.
func startWeb(addr string) (*web, error) {
	d, err := dashboard.New()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("-http %s: %w", addr, err)
	}
	w := &web{d: d, addr: ln.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: d, ReadHeaderTimeout: 5 * time.Second}}
	go func() {
		defer close(w.done)
		// It returns http.ErrServerClosed at close; any other error (the
		// listener broke) ends the page, not the run.
		w.srv.Serve(ln)
	}()
	return w, nil
}

// url is the page's address.
func (w *web) url() string { return "http://" + w.addr + "/" }

// handler is the event handler of the pools shown under name.
func (w *web) handler(name string) pool.Option {
	return pool.WithEventHandler(w.d.EventHandler(name))
}

// close ends the page's streams, then the server.
func (w *web) close() {
	w.d.Close() // ends the /events streams, which never go idle by themselves
	ctx, cancel := context.WithTimeout(context.Background(), webLimit)
	defer cancel()
	if w.srv.Shutdown(ctx) != nil {
		w.srv.Close()
	}
	<-w.done
}
