package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connection"
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
	upstreamAs      listFlag // name=URI
	listen, lb      listFlag
	maxPoolSize     int
	cfg             proxy.Config
	compressors     string
	shutdownTimeout time.Duration
	logLevel        string
	admin           string
	usersFile       string
	configFile      string
	tlsCerts        listFlag
	tlsKeys         listFlag
	tlsCA           string
	tlsClientCerts  string
	reusePort       bool
	cpuProfile      string
	busyPoll        time.Duration
	unixMode        os.FileMode
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	o := &flags{unixMode: 0o777}
	fs := flag.NewFlagSet("mongopool-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mongopool-proxy [flags]\n       mongopool-proxy user [-db DB] [-upstream NAME] [-mechanisms LIST] NAME < password\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.upstream, "upstream", "", "the `URI` of the deployment to proxy (mongodb:// or mongodb+srv://, with its options: maxPoolSize, tls, compressors, the proxy's credentials...); none: an in-process test replica set")
	fs.Var(&o.upstreamAs, "upstream-as", "`NAME=URI`: another upstream credential of the same deployment, with pools of its own and -upstream's monitors, that users of the users file name (repeatable)")
	fs.Var(&o.listen, "listen", "an `address` to serve clients on as a mongos, host:port or a Unix socket's path (absolute, or ending in .sock; clients connect to mongodb://%2Fpath%2Fto%2Fit.sock/) (repeatable; default 127.0.0.1:27018 when no listener is given)")
	fs.Func("unix-socket-mode", "the file `mode` of Unix socket listeners, in octal (default 0777: every local user may connect, as to a loopback port; 0770 keeps to the owner and group)", func(s string) error {
		m, err := strconv.ParseUint(s, 8, 32)
		if err != nil || m > 0o777 {
			return fmt.Errorf("%q is not a file mode in octal, such as 0770", s)
		}
		o.unixMode = os.FileMode(m)
		return nil
	})
	fs.Var(&o.lb, "listen-lb", "an `address` to serve clients on as a load balancer, for loadBalanced=true clients (repeatable)")
	fs.IntVar(&o.maxPoolSize, "max-pool-size", 0, "the most upstream connections per server and credential (default: the URI's maxPoolSize, else 100)")
	fs.IntVar(&o.cfg.MaxClientConns, "max-clients", 10000, "the most client connections at once")
	fs.IntVar(&o.cfg.MaxQueued, "max-queued", 10000, "the most operations waiting for an upstream connection at once; beyond, an overload error that drivers back off on")
	fs.DurationVar(&o.cfg.QueueTimeout, "queue-timeout", 10*time.Second, "the longest an operation waits for an upstream server and connection")
	fs.DurationVar(&o.cfg.ElectionHold, "election-hold", 15*time.Second, "how long a retryable operation is held and retried through a primary change (negative: never)")
	fs.IntVar(&o.cfg.MaxLongPolls, "max-long-polls", 16, "the most awaitData getMores (change streams, tailable cursors) in flight at once")
	fs.IntVar(&o.cfg.MaxPinned, "max-pinned", 50, "behind a load balancer (a loadBalanced=true upstream), the most upstream connections held at once for open cursors and transactions; keep it below -max-pool-size")
	fs.DurationVar(&o.cfg.CursorTimeout, "cursor-timeout", 10*time.Minute, "how long an unused cursor stays mapped (and, behind a load balancer, holds its connection)")
	fs.IntVar(&o.cfg.MaxAuthFailures, "max-auth-failures", 20, "the most failed authentications per user, client address and minute")
	fs.StringVar(&o.compressors, "compressors", "snappy,zstd,zlib", "the compressors offered to clients, comma-separated (empty: none)")
	fs.DurationVar(&o.busyPoll, "busy-poll", 50*time.Microsecond, "how long the proxy polls a socket for a prompt request or reply before it sleeps, while at most one upstream reply is awaited: lower latency at low load for idle CPU time (0: never; at most 1ms)")
	fs.DurationVar(&o.cfg.SlowOperation, "slow-op", time.Second, "log the relayed operations that take this long or longer, at most 10 a second (0: none)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a drain waits for the operations under way")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.admin, "admin", "127.0.0.1:9218", "the `address` of the admin HTTP listener: /metrics (Prometheus), /dashboard/, /status (proxyStatus as JSON), /healthz and /readyz (for orchestrators and load balancers), POST /pause, /resume and /reconnect; empty: none. Keep it on loopback or a private network: it has no authentication")
	fs.StringVar(&o.usersFile, "users", "", "the users `file` (JSON; entries from the user subcommand): clients must authenticate as one of them; reloaded on SIGHUP")
	fs.StringVar(&o.configFile, "config", "", "a `file` of limits in JSON (maxClients, maxQueued, queueTimeout, electionHold, maxLongPolls, maxPinned, maxAuthFailures, maxPoolSize, busyPoll, slowOp) over the flags', and upstream credentials (upstreams: {NAME: URI}, as -upstream-as); reloaded on SIGHUP")
	fs.Var(&o.tlsCerts, "tls-cert", "a PEM certificate `file` for the clients' TLS (repeatable, each with its -tls-key: the client's server name picks one); reloaded on SIGHUP")
	fs.Var(&o.tlsKeys, "tls-key", "the PEM key `file` of the -tls-cert of the same rank")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "a PEM `file` of the CAs that sign client certificates (for MONGODB-X509); reloaded on SIGHUP")
	fs.StringVar(&o.tlsClientCerts, "tls-client-certs", "", "none, verify-if-given or require (default: verify-if-given with -tls-ca, none without)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to `file` (for go tool pprof)")
	fs.BoolVar(&o.reusePort, "reuse-port", false, "listen with SO_REUSEPORT, so that a new process can take the port over while this one drains (a rolling restart)")
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
	if o.busyPoll < 0 || o.busyPoll > connection.MaxBusyPoll {
		return nil, fmt.Errorf("-busy-poll %v is out of [0, %v]: give 0 to turn polling off", o.busyPoll, connection.MaxBusyPoll)
	}
	switch {
	case o.cfg.SlowOperation < 0:
		return nil, fmt.Errorf("-slow-op %v is negative: give 0 to log no slow operation", o.cfg.SlowOperation)
	case o.cfg.SlowOperation == 0:
		o.cfg.SlowOperation = -1 // the proxy's "none"
	}
	if len(o.tlsCerts) != len(o.tlsKeys) {
		return nil, fmt.Errorf("%d -tls-cert for %d -tls-key: give them in pairs", len(o.tlsCerts), len(o.tlsKeys))
	}
	switch o.tlsClientCerts {
	case "", "none", "verify-if-given", "require":
	default:
		return nil, fmt.Errorf("-tls-client-certs %q: use none, verify-if-given or require", o.tlsClientCerts)
	}
	if (o.tlsCA != "" || o.tlsClientCerts != "") && len(o.tlsCerts) == 0 {
		return nil, errors.New("-tls-ca and -tls-client-certs need -tls-cert and -tls-key")
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
	return runWith(ctx, args, strings.NewReader(""), stdout, stderr, nil)
}

// runWith is run with the standard input (for the user subcommand) and a
// channel of reload requests (SIGHUP).
func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, reload <-chan struct{}) int {
	if len(args) > 0 && args[0] == "user" {
		return runUser(args[1:], stdin, stdout, stderr)
	}
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
	// One for the process: its clients' upstream connections and its
	// client connections poll by turns. It is made even without a budget,
	// which a reload of -config may give.
	o.cfg.BusyPoller = connection.NewBusyPoller(o.busyPoll)
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "mongopool-proxy: -cpuprofile:", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if err := serve(ctx, o, log, stdout, reload); err != nil {
		fmt.Fprintln(stderr, "mongopool-proxy:", err)
		return 1
	}
	return 0
}

// reloadable is what a reload reads again: the limits, the users, the TLS
// files. Built whole before anything changes, so that a bad file leaves
// the running configuration as it is.
type reloadable struct {
	cfg         proxy.Config
	maxPoolSize int
	busyPoll    time.Duration
	users       *proxy.Users
	tls         *tls.Config
	upstreams   map[string]string // the config file's, NAME to URI
}

// load reads the configuration files.
func (o *flags) load() (*reloadable, error) {
	r := &reloadable{cfg: o.cfg, maxPoolSize: o.maxPoolSize, busyPoll: o.busyPoll}
	r.cfg.Users, r.cfg.Upstreams = nil, nil
	if o.configFile != "" {
		if err := applyConfigFile(o.configFile, r); err != nil {
			return nil, err
		}
	}
	if o.usersFile != "" {
		data, err := os.ReadFile(o.usersFile)
		if err != nil {
			return nil, fmt.Errorf("-users: %w", err)
		}
		if r.users, err = proxy.ParseUsers(data); err != nil {
			return nil, fmt.Errorf("-users %s: %w", o.usersFile, err)
		}
	}
	if len(o.tlsCerts) > 0 {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		for i := range o.tlsCerts {
			cert, err := tls.LoadX509KeyPair(o.tlsCerts[i], o.tlsKeys[i])
			if err != nil {
				return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", o.tlsCerts[i], o.tlsKeys[i], err)
			}
			cfg.Certificates = append(cfg.Certificates, cert)
		}
		mode := o.tlsClientCerts
		if mode == "" && o.tlsCA != "" {
			mode = "verify-if-given"
		}
		if o.tlsCA != "" {
			pem, err := os.ReadFile(o.tlsCA)
			if err != nil {
				return nil, fmt.Errorf("-tls-ca: %w", err)
			}
			cfg.ClientCAs = x509.NewCertPool()
			if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("-tls-ca %s: no PEM certificate in it", o.tlsCA)
			}
		}
		switch mode {
		case "verify-if-given":
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		case "require":
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
		if cfg.ClientAuth != tls.NoClientCert && cfg.ClientCAs == nil {
			return nil, errors.New("-tls-client-certs: verifying client certificates needs -tls-ca")
		}
		r.tls = cfg
	}
	return r, nil
}

// configFile is the JSON of -config: limits over the flags'.
type configFile struct {
	MaxClients      *int    `json:"maxClients"`
	MaxQueued       *int    `json:"maxQueued"`
	QueueTimeout    *string `json:"queueTimeout"`
	ElectionHold    *string `json:"electionHold"`
	MaxLongPolls    *int    `json:"maxLongPolls"`
	MaxPinned       *int    `json:"maxPinned"`
	MaxAuthFailures *int    `json:"maxAuthFailures"`
	MaxPoolSize     *int    `json:"maxPoolSize"`
	BusyPoll        *string `json:"busyPoll"`
	SlowOp          *string `json:"slowOp"`
	// Upstreams are upstream credentials, NAME to URI, as -upstream-as
	// gives them, but reloaded: a reload adds, replaces and removes them.
	Upstreams map[string]string `json:"upstreams"`
}

func applyConfigFile(path string, r *reloadable) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-config: %w", err)
	}
	var f configFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("-config %s: %w", path, err)
	}
	dur := func(name string, s *string, dst *time.Duration) error {
		if s == nil {
			return nil
		}
		d, err := time.ParseDuration(*s)
		if err != nil {
			return fmt.Errorf("-config %s: %s: %w", path, name, err)
		}
		*dst = d
		return nil
	}
	set := func(v *int, dst *int) {
		if v != nil {
			*dst = *v
		}
	}
	set(f.MaxClients, &r.cfg.MaxClientConns)
	set(f.MaxQueued, &r.cfg.MaxQueued)
	set(f.MaxLongPolls, &r.cfg.MaxLongPolls)
	set(f.MaxPinned, &r.cfg.MaxPinned)
	set(f.MaxAuthFailures, &r.cfg.MaxAuthFailures)
	set(f.MaxPoolSize, &r.maxPoolSize)
	for name, uri := range f.Upstreams {
		if name == "" || uri == "" {
			return fmt.Errorf("-config %s: upstreams: give each a name and a URI", path)
		}
	}
	r.upstreams = f.Upstreams
	if err := dur("queueTimeout", f.QueueTimeout, &r.cfg.QueueTimeout); err != nil {
		return err
	}
	if err := dur("electionHold", f.ElectionHold, &r.cfg.ElectionHold); err != nil {
		return err
	}
	if err := dur("busyPoll", f.BusyPoll, &r.busyPoll); err != nil {
		return err
	}
	if f.SlowOp != nil {
		if err := dur("slowOp", f.SlowOp, &r.cfg.SlowOperation); err != nil {
			return err
		}
		switch {
		case r.cfg.SlowOperation < 0:
			return fmt.Errorf("-config %s: slowOp %v is negative: give \"0s\" to log no slow operation", path, r.cfg.SlowOperation)
		case r.cfg.SlowOperation == 0:
			r.cfg.SlowOperation = -1
		}
	}
	if r.busyPoll < 0 || r.busyPoll > connection.MaxBusyPoll {
		return fmt.Errorf("-config %s: busyPoll %v is out of [0, %v]", path, r.busyPoll, connection.MaxBusyPoll)
	}
	if r.maxPoolSize < 0 {
		return fmt.Errorf("-config %s: maxPoolSize %d is negative", path, r.maxPoolSize)
	}
	return nil
}

// serve starts the upstream clients, the proxy and its listeners, and runs
// them until ctx ends, reloading the configuration files at each reload;
// then it drains.
func serve(ctx context.Context, o *flags, log *slog.Logger, stdout io.Writer, reload <-chan struct{}) error {
	conf, err := o.load()
	if err != nil {
		return err
	}
	conf.cfg.BusyPoller.SetBudget(conf.busyPoll) // -config's, if it has one
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
	// The admin listener's dashboard comes first: the upstream clients'
	// pools give it their events.
	var admin *adminServer
	if o.admin != "" {
		if admin, err = newAdmin(); err != nil {
			return err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			admin.close(ctx)
		}()
	}
	newClient := func(what, name, uri string, maxPoolSize int, more ...mongopool.ClientOption) (*mongopool.Client, error) {
		popts := admin.eventHandler(name)
		if maxPoolSize > 0 {
			popts = append(popts, pool.WithMaxPoolSize(maxPoolSize))
		}
		c, err := mongopool.NewClient(uri, append([]mongopool.ClientOption{mongopool.WithLogger(log), mongopool.WithPoolOptions(popts...),
			mongopool.WithBusyPoller(o.cfg.BusyPoller)}, more...)...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return c, nil
	}
	client, err := newClient("-upstream", "", uri, conf.maxPoolSize)
	if err != nil {
		return err
	}
	defer client.Close()
	// The credentials' pools share the -upstream client's topology: one
	// monitor per server, however many credentials.
	ups := &upstreams{fixed: map[string]*mongopool.Client{},
		make: func(what, name, uri string, maxPoolSize int) (*mongopool.Client, error) {
			return newClient(what, name, uri, maxPoolSize, mongopool.WithSharedTopology(client))
		}}
	for _, spec := range o.upstreamAs {
		name, u, ok := strings.Cut(spec, "=")
		if !ok || name == "" || u == "" {
			return fmt.Errorf("-upstream-as %q: want NAME=URI", spec)
		}
		if _, dup := ups.fixed[name]; dup {
			return fmt.Errorf("-upstream-as: %q is given twice", name)
		}
		c, err := ups.make("-upstream-as "+name, name, u, conf.maxPoolSize)
		if err != nil {
			return err
		}
		defer c.Close()
		ups.fixed[name] = c
	}
	loaded, err := ups.plan(conf.upstreams, conf.maxPoolSize)
	if err != nil {
		return err
	}
	ups.commit(loaded, o.shutdownTimeout)
	defer ups.close()
	cfg := conf.cfg
	cfg.Users = conf.users
	cfg.Upstreams = ups.all(loaded)
	if admin != nil {
		admin.setUpstream("", client)
		for name, c := range cfg.Upstreams {
			admin.setUpstream(name, c)
		}
	}
	p, err := proxy.New(client, cfg)
	if err != nil {
		return err
	}
	var tlsConf atomic.Pointer[tls.Config]
	tlsConf.Store(conf.tls)

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
			var ln net.Listener
			var err error
			if isUnixSocket(addr) {
				ln, err = listenUnix(addr, o.unixMode, o.reusePort)
			} else {
				ln, err = listen(ctx, addr, o.reusePort)
			}
			if err != nil {
				closeAll()
				return fmt.Errorf("listening: %w", err)
			}
			if conf.tls != nil {
				// Each handshake takes the TLS configuration of the
				// moment: a reload changes it for the next clients.
				ln = tls.NewListener(ln, &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
					return tlsConf.Load(), nil
				}})
			}
			lns = append(lns, listener{ln, group.persona})
		}
	}
	if admin != nil {
		// With -reuse-port, the admin listener shares its port too: the
		// new process of a rolling restart takes the old one's flags.
		ln, err := listen(ctx, o.admin, o.reusePort)
		if err != nil {
			closeAll()
			return fmt.Errorf("the admin listener: %w", err)
		}
		if err := admin.serve(ln, p, log); err != nil {
			ln.Close()
			closeAll()
			return err
		}
	}
	fmt.Fprintf(stdout, "upstream: %s\n", redactURI(uri))
	if admin != nil {
		fmt.Fprintf(stdout, "admin on http://%s/ (/metrics, /dashboard/, /healthz, /readyz)\n", admin.ln.Addr())
	}
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() { errc <- p.Serve(l.ln, l.persona) }()
		suffix := ""
		if l.persona == proxy.LoadBalancer {
			suffix = " (load balancer)"
		}
		if conf.tls != nil {
			suffix += " (TLS)"
		}
		fmt.Fprintf(stdout, "listening on %s%s\n", l.ln.Addr(), suffix)
	}
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case serveErr = <-errc:
			log.Error("a listener failed; draining", "error", serveErr)
			break loop
		case <-reload:
			if err := applyReload(o, p, client, ups, admin, &tlsConf); err != nil {
				log.Error("reload refused; the running configuration is kept", "error", err)
				fmt.Fprintf(stdout, "reload refused: %v\n", err)
			} else {
				log.Info("reloaded the configuration")
				fmt.Fprintln(stdout, "reloaded")
			}
		}
	}
	if admin != nil {
		admin.draining.Store(true)
	}
	log.Info("draining", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := p.Shutdown(sctx); err != nil {
		log.Warn("the drain did not finish in time", "error", err)
	}
	st := p.Stats()
	log.Info("stopped", "operations", st.Operations, "local", st.Local, "accepted", st.AcceptedConns, "overloaded", st.Overloaded, "held", st.Held, "busyPolls", st.BusyPolls, "busyPollHits", st.BusyPollHits)
	if serveErr != nil && !errors.Is(serveErr, proxy.ErrClosed) {
		return serveErr
	}
	return nil
}

// applyReload reads the configuration files again and applies them: all
// of them, or, when one is bad, none. The config file's upstream
// credentials that are new or changed get clients first; those it no longer
// names are shut down once the users no longer reach them.
func applyReload(o *flags, p *proxy.Proxy, client *mongopool.Client, ups *upstreams, admin *adminServer, tlsConf *atomic.Pointer[tls.Config]) error {
	conf, err := o.load()
	if err != nil {
		return err
	}
	if (conf.tls == nil) != (tlsConf.Load() == nil) {
		return errors.New("TLS cannot be turned on or off by a reload: restart the proxy")
	}
	if (conf.users == nil) != (o.usersFile == "") {
		return errors.New("the users file is gone")
	}
	ch, err := ups.plan(conf.upstreams, conf.maxPoolSize)
	if err != nil {
		return err
	}
	if err := p.Reconfigure(conf.cfg); err != nil {
		ch.abort()
		return err
	}
	next := ups.all(ch)
	if err := p.SetUpstreams(next, conf.users); err != nil {
		ch.abort()
		return err
	}
	ups.commit(ch, o.shutdownTimeout)
	if admin != nil {
		for name := range ch.retired {
			admin.setUpstream(name, nil)
		}
		for name, c := range next {
			admin.setUpstream(name, c)
		}
	}
	conf.cfg.BusyPoller.SetBudget(conf.busyPoll)
	if conf.maxPoolSize > 0 {
		for _, c := range append(ups.clients(), client) {
			if err := c.Reconfigure(pool.WithMaxPoolSize(conf.maxPoolSize)); err != nil {
				return fmt.Errorf("maxPoolSize: %w", err)
			}
		}
	}
	if conf.tls != nil {
		tlsConf.Store(conf.tls)
	}
	return nil
}

// runUser derives a users file entry from a password read from stdin, and
// prints it.
func runUser(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mongopool-proxy user", flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "admin", "the user's authentication database")
	upstream := fs.String("upstream", "", "the upstream credential (an -upstream-as NAME, or one of the config file's upstreams) whose pools serve the user; empty: -upstream's")
	mechs := fs.String("mechanisms", "SCRAM-SHA-256", "the mechanisms, comma-separated: SCRAM-SHA-256, SCRAM-SHA-1")
	admin := fs.Bool("admin", false, "the user may pause and resume the proxy's upstreams (proxyPause, proxyResume)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: mongopool-proxy user [-db DB] [-upstream NAME] [-mechanisms LIST] [-admin] NAME < password")
		fmt.Fprintln(stderr, "Reads the password from the first line of the standard input and prints the users file entry, with the SCRAM keys and never the password.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	data, err := io.ReadAll(io.LimitReader(stdin, 1<<16))
	if err != nil {
		fmt.Fprintln(stderr, "mongopool-proxy user: reading the password:", err)
		return 1
	}
	password, _, _ := strings.Cut(string(data), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		fmt.Fprintln(stderr, "mongopool-proxy user: no password on the standard input")
		return 2
	}
	u, err := proxy.DeriveUser(fs.Arg(0), *db, password, *upstream, strings.Split(*mechs, ",")...)
	if err != nil {
		fmt.Fprintln(stderr, "mongopool-proxy user:", err)
		return 2
	}
	u.Admin = *admin
	out, _ := json.MarshalIndent(u, "", "  ")
	fmt.Fprintf(stdout, "%s\n", out)
	return 0
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
