package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/proxy"
)

// listFlag is a flag that may be given several times.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// flags are the command's flags.
type flags struct {
	upstream        string
	listen, lb      listFlag
	maxPoolSize     int
	cfg             proxy.Config
	compressors     string
	shutdownTimeout time.Duration
	logLevel        string
	admin           string
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	o := &flags{}
	fs := flag.NewFlagSet("mongopool-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.upstream, "upstream", "", "the `URI` of the deployment to proxy (mongodb:// or mongodb+srv://, with its options: maxPoolSize, tls, compressors, credentials...); none: an in-process test replica set")
	fs.Var(&o.listen, "listen", "an `address` to serve clients on as a mongos (repeatable; default 127.0.0.1:27018 when no listener is given)")
	fs.Var(&o.lb, "listen-lb", "an `address` to serve clients on as a load balancer, for loadBalanced=true clients (repeatable)")
	fs.IntVar(&o.maxPoolSize, "max-pool-size", 0, "the most upstream connections per server (default: the URI's maxPoolSize, else 100)")
	fs.IntVar(&o.cfg.MaxClientConns, "max-clients", 10000, "the most client connections at once")
	fs.IntVar(&o.cfg.MaxQueued, "max-queued", 10000, "the most operations waiting for an upstream connection at once; beyond, an overload error that drivers back off on")
	fs.DurationVar(&o.cfg.QueueTimeout, "queue-timeout", 10*time.Second, "the longest an operation waits for an upstream server and connection")
	fs.DurationVar(&o.cfg.ElectionHold, "election-hold", 15*time.Second, "how long a retryable operation is held and retried through a primary change (negative: never)")
	fs.IntVar(&o.cfg.MaxLongPolls, "max-long-polls", 16, "the most awaitData getMores (change streams, tailable cursors) in flight at once")
	fs.DurationVar(&o.cfg.CursorTimeout, "cursor-timeout", 10*time.Minute, "how long an unused cursor stays mapped")
	fs.StringVar(&o.compressors, "compressors", "snappy,zstd,zlib", "the compressors offered to clients, comma-separated (empty: none)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a drain waits for the operations under way")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:9218", "the `address` of the admin HTTP listener: /metrics (Prometheus) and /dashboard/; empty: none. Keep it on loopback or a private network: it has no authentication")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: give the upstream with -upstream", fs.Args())
	}
	if len(o.listen) == 0 && len(o.lb) == 0 {
		o.listen = listFlag{"127.0.0.1:27018"}
	}
	if o.maxPoolSize < 0 {
		return nil, fmt.Errorf("-max-pool-size %d is negative", o.maxPoolSize)
	}
	o.cfg.Compressors = []string{}
	for _, c := range strings.Split(o.compressors, ",") {
		if c = strings.TrimSpace(c); c != "" {
			o.cfg.Compressors = append(o.cfg.Compressors, c)
		}
	}
	return o, nil
}

// run runs the proxy until ctx ends, and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "mongopool-proxy:", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		fmt.Fprintln(stderr, "mongopool-proxy: -log-level:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o.cfg.Logger = log
	if err := serve(ctx, o, log, stdout); err != nil {
		fmt.Fprintln(stderr, "mongopool-proxy:", err)
		return 1
	}
	return 0
}

// serve starts the upstream client, the proxy and its listeners, and runs
// them until ctx ends; then it drains.
func serve(ctx context.Context, o *flags, log *slog.Logger, stdout io.Writer) error {
	uri := o.upstream
	if uri == "" {
		rs, err := mongotest.StartReplicaSet("rs0", 3)
		if err != nil {
			return fmt.Errorf("starting the test replica set: %w", err)
		}
		defer rs.Close()
		uri = rs.URI()
		log.Info("no -upstream: proxying an in-process test replica set", "uri", uri)
	}
	var copts []mongopool.ClientOption
	if o.maxPoolSize > 0 {
		copts = append(copts, mongopool.WithPoolOptions(pool.WithMaxPoolSize(o.maxPoolSize)))
	}
	copts = append(copts, mongopool.WithLogger(log))
	client, err := mongopool.NewClient(uri, copts...)
	if err != nil {
		return fmt.Errorf("-upstream: %w", err)
	}
	defer client.Close()
	p, err := proxy.New(client, o.cfg)
	if err != nil {
		return err
	}
	type listener struct {
		ln      net.Listener
		persona proxy.Persona
	}
	var lns []listener
	closeAll := func() {
		for _, l := range lns {
			l.ln.Close()
		}
	}
	for _, group := range []struct {
		addrs   []string
		persona proxy.Persona
	}{{o.listen, proxy.Mongos}, {o.lb, proxy.LoadBalancer}} {
		for _, addr := range group.addrs {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				closeAll()
				return fmt.Errorf("listening: %w", err)
			}
			lns = append(lns, listener{ln, group.persona})
		}
	}
	var admin *adminServer
	if o.admin != "" {
		ln, err := net.Listen("tcp", o.admin)
		if err != nil {
			closeAll()
			return fmt.Errorf("the admin listener: %w", err)
		}
		if admin, err = startAdmin(ln, client, p, log); err != nil {
			ln.Close()
			closeAll()
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			admin.close(ctx)
		}()
	}
	fmt.Fprintf(stdout, "upstream: %s\n", redactURI(uri))
	if admin != nil {
		fmt.Fprintf(stdout, "admin on http://%s/ (/metrics, /dashboard/)\n", admin.ln.Addr())
	}
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() { errc <- p.Serve(l.ln, l.persona) }()
		if l.persona == proxy.LoadBalancer {
			fmt.Fprintf(stdout, "listening on %s (load balancer)\n", l.ln.Addr())
		} else {
			fmt.Fprintf(stdout, "listening on %s\n", l.ln.Addr())
		}
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		log.Error("a listener failed; draining", "error", serveErr)
	}
	log.Info("draining", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		log.Warn("the drain did not finish in time", "error", err)
	}
	st := p.Stats()
	log.Info("stopped", "operations", st.Operations, "local", st.Local, "accepted", st.AcceptedConns, "overloaded", st.Overloaded, "held", st.Held)
	if serveErr != nil && !errors.Is(serveErr, proxy.ErrClosed) {
		return serveErr
	}
	return nil
}

// redactURI hides the password of a connection string.
func redactURI(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@")
	if at < 0 {
		return uri
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return uri
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
