// Command mongopool-proxy runs the mongopool pooling proxy: MongoDB drivers
// of any language connect to it as to a mongos (or, on -listen-lb, to a load
// balancer, with loadBalanced=true), and share its few pooled connections
// per upstream server.
//
// Usage:
//
//	mongopool-proxy [-upstream URI] [-listen ADDR]... [-listen-lb ADDR]... [flags]
//
// Without -upstream it starts an in-process test replica set of three
// members (the repository's mongotest server) and proxies that: one command
// shows the proxy working. Once every listener accepts connections, it
// prints "upstream: URI", then "listening on ADDR" for each mongos listener
// and "listening on ADDR (load balancer)" for each load balancer one.
//
// SIGHUP reloads the -config, -users and TLS files: the limits, the users
// and the certificates change for what comes next; a bad file is refused,
// with the reason in the log, and the running configuration kept.
//
// SIGINT or SIGTERM drains it: the listeners close, idle clients are
// disconnected, the operations under way finish and their clients are
// disconnected once answered, within -shutdown-timeout; then the upstream
// connections close. It exits with 0 after a drain, 1 when it cannot start
// and 2 for bad flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal, should the drain hang, kills the process.
		<-ctx.Done()
		stop()
	}()
	// SIGHUP reloads the configuration files.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default: // one is pending already
			}
		}
	}()
	code := runWith(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, reload)
	stop()
	os.Exit(code)
}
