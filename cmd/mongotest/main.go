// Command mongotest runs the in-process MongoDB server of the mongotest
// package, a standalone, a replica set (-replset N) or a sharded cluster
// (-mongos N -shards K, with -shard-members M), as a process of its own, so
// that the test suites of any language (Node.js, Python, ...) can use it as
// Go tests do: start it, read its connection string, drive the replica set,
// or the cluster's shards and mongoses, through a small HTTP control
// endpoint (step-downs, stopped and partitioned members, lag, fail points),
// and stop it.
//
// Usage:
//
//	go run ./cmd/mongotest [flags]
//
// Every server listens on 127.0.0.1 only. Once everything is up (the
// servers, the users, the control endpoint and the files asked for), the
// command prints the connection string as the first line of its standard
// output, then "tls-dir: DIR" when -tls generated the certificates, and
// "control: URL", and writes the connection string alone, without a newline,
// to the -uri-file, atomically (a temporary file renamed), so that a test
// that waits for the file never reads half of it. -info-file writes the
// same in JSON, with the control endpoint's URL. Both files are removed at
// the start, so that a stale one is never taken for the new one, and at the
// end.
//
// The control endpoint (see control.go) answers on 127.0.0.1 in JSON:
//
//	GET  /status                     the members, and which is primary
//	GET  /stats[?member=i]           what the servers saw (commands, compression, ...)
//	POST /stepdown[?next=i|none]     step the primary down, and elect another member
//	POST /elect?member=i             elect member i
//	POST /stop?member=i              stop member i, as a killed mongod
//	POST /restart?member=i           start it again on its port
//	POST /partition?member=i         member i answers nothing until /heal
//	POST /heal?member=i
//	POST /lag?member=i&ms=N          member i reports a lastWrite N ms behind
//	POST /failpoint[?member=i]       body: a configureFailPoint command in JSON
//	POST /shutdown                   stop the command, as SIGTERM does
//
// On a sharded cluster, the replica set's controls, /stats and /failpoint
// address shard k with ?shard=k, which they need (/stats without
// parameters reports every server); /status reports the mongoses and the
// shards; and the mongoses have controls of their own:
//
//	GET  /shardof?db=NAME            the shard that holds database NAME
//	POST /mongos/stop?member=i       stop mongos i, as a killed mongos
//	POST /mongos/restart?member=i    start it again on its port
//	POST /mongos/failpoint?member=i  body: a configureFailPoint command in JSON
//	GET  /mongos/stats[?member=i]    what the mongoses saw
//
// The connection string of a sharded cluster lists its mongoses.
//
// It stops, closing the servers and exiting with 0, on SIGINT, SIGTERM,
// POST /shutdown, or, with -exit-on-eof, when its standard input ends: a
// parent process that starts it with a pipe as its standard input takes it
// along when it dies, whatever way it dies. It exits with 2 for bad flags
// and 1 when the servers cannot start.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal starts the stop; a second one, should the stop
		// hang, kills the process as it would have without the first.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command with args until ctx ends (a signal), stdin ends
// (with -exit-on-eof) or the control endpoint is asked to stop, and returns
// the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mongotest: %v\n", err)
		fmt.Fprintln(stderr, "Run 'mongotest -h' for the flags.")
		return 2
	}
	d, err := startDeployment(o)
	if err != nil {
		fmt.Fprintf(stderr, "mongotest: %v\n", err)
		return 1
	}
	code := d.serve(ctx, stdin, stdout, stderr)
	if err := d.close(); err != nil {
		fmt.Fprintf(stderr, "mongotest: stopping: %v\n", err)
		code = 1
	}
	if code == 0 {
		fmt.Fprintln(stderr, "mongotest: stopped")
	}
	return code
}
