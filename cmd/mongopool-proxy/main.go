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
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
