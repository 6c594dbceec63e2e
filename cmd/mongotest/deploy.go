package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mongopool/mongopool/mongotest"
)

// deployment is what the command runs: the servers, the control endpoint,
// and the files it wrote.
type deployment struct {
	o       *settings
	rs      *mongotest.ReplicaSet     // the replica set of -replset, or nil
	sc      *mongotest.ShardedCluster // the sharded cluster of -mongos, or nil
	servers []*mongotest.Server       // the standalone, the members in order, or the mongoses
	tls     *tlsSetup                 // nil without TLS
	uri     string

	ctl      *controller
	ctlLn    net.Listener
	ctlURL   string
	httpSrv  *http.Server
	httpDone chan error // the control server's end: Serve's error
}

// info is the JSON of -info-file.
type info struct {
	URI      string   `json:"uri"`
	Control  string   `json:"control"`
	Topology string   `json:"topology"` // "standalone", "replicaSet" or "sharded"
	SetName  string   `json:"setName,omitempty"`
	Hosts    []string `json:"hosts"` // the servers of the connection string
	// Mongoses and Shards describe a sharded cluster: the mongoses'
	// addresses (Hosts too), and each shard's name and members.
	Mongoses    []string    `json:"mongoses,omitempty"`
	Shards      []shardInfo `json:"shards,omitempty"`
	PID         int         `json:"pid"`
	TLS         *tlsInfo    `json:"tls,omitempty"`
	Users       []string    `json:"users,omitempty"` // names, in the admin database
	Compressors []string    `json:"compressors"`     // those the server accepts
}

// shardInfo is a shard of -info-file.
type shardInfo struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
}

// tlsInfo are the TLS files of -info-file.
type tlsInfo struct {
	Dir        string `json:"dir,omitempty"`
	CAFile     string `json:"caFile,omitempty"`
	ClientFile string `json:"certificateKeyFile,omitempty"`
}

// startDeployment starts what o asks for: the servers, their users, the
// control endpoint (listening, not serving yet). It removes the files it
// will write, so that none from an earlier run is read meanwhile.
func startDeployment(o *settings) (_ *deployment, err error) {
	for _, f := range []string{o.uriFile, o.infoFile} {
		if f == "" {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing the file of an earlier run: %w", err)
		}
		if dir := filepath.Dir(f); !isDir(dir) {
			return nil, fmt.Errorf("%s: no such directory for the file %s", dir, f)
		}
	}

	d := &deployment{o: o}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	var opts []mongotest.Option
	if o.port > 0 {
		// A sharded cluster takes the mongoses' ports first, then each
		// shard's members', as the servers() count them.
		ports := make([]int, o.servers())
		for i := range ports {
			ports[i] = o.port + i
		}
		opts = append(opts, mongotest.WithPorts(ports...))
	}
	if o.tls {
		if d.tls, err = setupTLS(o); err != nil {
			return nil, err
		}
		opts = append(opts, mongotest.WithTLS(d.tls.config))
	}
	if o.setCompressors {
		opts = append(opts, mongotest.WithCompressors(o.compressors...))
	}
	if o.version != "" {
		opts = append(opts, mongotest.WithVersion(o.version))
	}

	switch {
	case o.mongoses > 0:
		opts = append(opts, mongotest.WithShardMembers(o.shardMembers))
		d.sc, err = mongotest.StartShardedCluster(o.mongoses, o.shards, opts...)
		if err != nil {
			return nil, fmt.Errorf("starting the sharded cluster: %s", plain(err))
		}
		d.servers = d.sc.Mongoses()
	case o.members > 0:
		d.rs, err = mongotest.StartReplicaSet(o.setName, o.members, opts...)
		if err != nil {
			return nil, fmt.Errorf("starting the replica set: %s", plain(err))
		}
		d.servers = d.rs.Members()
	default:
		srv, err := mongotest.Start(opts...)
		if err != nil {
			return nil, fmt.Errorf("starting the server: %s", plain(err))
		}
		d.servers = []*mongotest.Server{srv}
	}
	// The members share their users, and so do a cluster's servers:
	// adding them to the first adds them to all.
	for _, u := range o.users {
		if err := d.servers[0].AddUser("admin", u.name, u.password); err != nil {
			return nil, fmt.Errorf("-user %s: %s", u.name, plain(err))
		}
	}
	d.uri = d.buildURI()

	d.ctlLn, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.controlPort)))
	if err != nil {
		return nil, fmt.Errorf("-control-port: %w", err)
	}
	d.ctlURL = "http://" + d.ctlLn.Addr().String()
	return d, nil
}

// topology is a kind of deployment: the controls apply to some only.
type topology uint8

const (
	standalone topology = 1 << iota
	replicaSet
	sharded
)

// String is the topology as /status and -info-file name it.
func (t topology) String() string {
	switch t {
	case replicaSet:
		return "replicaSet"
	case sharded:
		return "sharded"
	}
	return "standalone"
}

// phrase is the topology in a sentence: "a replica set".
func (t topology) phrase() string {
	switch t {
	case replicaSet:
		return "a replica set"
	case sharded:
		return "a sharded cluster"
	}
	return "a standalone"
}

func (d *deployment) topology() topology {
	switch {
	case d.sc != nil:
		return sharded
	case d.rs != nil:
		return replicaSet
	}
	return standalone
}

// sets returns the replica sets the controls address: the deployment's,
// or the cluster's shards (shard k is sets()[k]); none for a standalone.
func (d *deployment) sets() []*mongotest.ReplicaSet {
	switch {
	case d.sc != nil:
		return d.sc.Shards()
	case d.rs != nil:
		return []*mongotest.ReplicaSet{d.rs}
	}
	return nil
}

// hosts returns the servers' addresses, in order: those of the connection
// string (a cluster's mongoses).
func (d *deployment) hosts() []string { return addrs(d.servers) }

// addrs returns the addresses of servers.
func addrs(servers []*mongotest.Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr()
	}
	return out
}

// buildURI returns the connection string: every server, the set's name,
// the first user's credentials, and what TLS needs.
func (d *deployment) buildURI() string {
	var b strings.Builder
	b.WriteString("mongodb://")
	if len(d.o.users) > 0 {
		u := d.o.users[0]
		b.WriteString(escapeURI(u.name, false) + ":" + escapeURI(u.password, false) + "@")
	}
	b.WriteString(strings.Join(d.hosts(), ","))
	b.WriteString("/")
	var params []string
	if d.rs != nil {
		params = append(params, "replicaSet="+escapeURI(d.rs.Name(), false))
	}
	if len(d.o.users) > 0 {
		params = append(params, "authSource=admin")
	}
	if d.tls != nil {
		params = append(params, "tls=true")
		if d.tls.caFile != "" {
			params = append(params, "tlsCAFile="+escapeURI(d.tls.caFile, true))
		}
	}
	if len(params) > 0 {
		b.WriteString("?" + strings.Join(params, "&"))
	}
	return b.String()
}

// escapeURI percent-encodes s for a connection string's user, password or
// option value: every byte but the unreserved characters of RFC 3986, and
// '/' if path (a file's path in an option reads better with it, and
// drivers take it there, though not in a password).
func escapeURI(s string, path bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/' && path:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// serve announces the deployment (files, then standard output), serves the
// control endpoint, and returns the exit code when it is time to stop:
// ctx ends, stdin ends (with -exit-on-eof), POST /shutdown, or the control
// endpoint fails.
func (d *deployment) serve(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	shutdown := make(chan string, 1)
	stop := func(why string) {
		select {
		case shutdown <- why:
		default: // a stop is on its way already
		}
	}
	d.ctl = newController(d, func() { stop("POST /shutdown") }, stderr)
	d.httpSrv = &http.Server{
		Handler:           d.ctl,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A step-down waits for the writes it interrupts: up to
		// stepDownTimeout, and the reply then.
		WriteTimeout:   stepDownTimeout + 10*time.Second,
		IdleTimeout:    time.Minute,
		MaxHeaderBytes: maxBody,
	}
	d.httpDone = make(chan error, 1)
	go func() { d.httpDone <- d.httpSrv.Serve(d.ctlLn) }()

	if err := d.writeFiles(); err != nil {
		fmt.Fprintf(stderr, "mongotest: %v\n", err)
		return 1
	}
	lines := d.uri + "\n"
	if d.tls != nil && d.tls.dir != "" {
		lines += "tls-dir: " + d.tls.dir + "\n"
	}
	lines += "control: " + d.ctlURL + "\n"
	if _, err := io.WriteString(stdout, lines); err != nil {
		// A parent that reads no output is no reason to stop: the files
		// say the same.
		fmt.Fprintf(stderr, "mongotest: writing to standard output: %v\n", err)
	}
	kind := "a standalone"
	switch {
	case d.sc != nil:
		kind = fmt.Sprintf("a sharded cluster of %d mongoses and %d shards of %d members: mongoses", len(d.servers), d.o.shards, d.o.shardMembers)
	case d.rs != nil:
		kind = fmt.Sprintf("replica set %s of %d members", d.rs.Name(), len(d.servers))
	}
	fmt.Fprintf(stderr, "mongotest: %s on %s; control endpoint %s; stop with Ctrl-C or SIGTERM\n",
		kind, strings.Join(d.hosts(), ", "), d.ctlURL)

	if d.o.exitOnEOF {
		go func() {
			// Whatever the parent writes is of no use: only the end
			// matters, an EOF or an error alike.
			io.Copy(io.Discard, stdin)
			stop("the end of standard input")
		}()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "mongotest: stopping on a signal")
	case why := <-shutdown:
		fmt.Fprintf(stderr, "mongotest: stopping on %s\n", why)
	case err := <-d.httpDone:
		d.httpDone <- err // for close
		fmt.Fprintf(stderr, "mongotest: the control endpoint failed: %v\n", err)
		return 1
	}
	return 0
}

// writeFiles writes -info-file, then -uri-file: the URI file comes last, as
// the sign that everything is up.
func (d *deployment) writeFiles() error {
	if d.o.infoFile != "" {
		in := info{
			URI:         d.uri,
			Control:     d.ctlURL,
			Hosts:       d.hosts(),
			PID:         os.Getpid(),
			Compressors: d.o.compressors,
		}
		if !d.o.setCompressors {
			in.Compressors = []string{"snappy", "zlib", "zstd"} // mongotest's default
		}
		in.Topology = d.topology().String()
		if d.rs != nil {
			in.SetName = d.rs.Name()
		}
		if d.sc != nil {
			in.Mongoses = d.hosts()
			for _, rs := range d.sc.Shards() {
				in.Shards = append(in.Shards, shardInfo{Name: rs.Name(), Hosts: addrs(rs.Members())})
			}
		}
		for _, u := range d.o.users {
			in.Users = append(in.Users, u.name)
		}
		if d.tls != nil {
			in.TLS = &tlsInfo{Dir: d.tls.dir, CAFile: d.tls.caFile, ClientFile: d.tls.clientFile}
		}
		data, err := json.MarshalIndent(in, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFileAtomic(d.o.infoFile, append(data, '\n')); err != nil {
			return fmt.Errorf("-info-file: %w", err)
		}
	}
	if d.o.uriFile != "" {
		if err := writeFileAtomic(d.o.uriFile, []byte(d.uri)); err != nil {
			return fmt.Errorf("-uri-file: %w", err)
		}
	}
	return nil
}

// close stops everything that runs and removes the files: the control
// endpoint first, so that no control runs on servers that close, then the
// servers.
func (d *deployment) close() error {
	var errs []error
	for _, f := range []string{d.o.uriFile, d.o.infoFile} {
		if f == "" {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if d.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := d.httpSrv.Shutdown(ctx); err != nil {
			d.httpSrv.Close() // a control that hangs is cut off
		}
		cancel()
		if err := <-d.httpDone; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("control endpoint: %w", err))
		}
	} else if d.ctlLn != nil {
		d.ctlLn.Close()
	}
	switch {
	case d.sc != nil:
		if err := d.sc.Close(); err != nil {
			errs = append(errs, err)
		}
	case d.rs != nil:
		if err := d.rs.Close(); err != nil {
			errs = append(errs, err)
		}
	case len(d.servers) == 1:
		if err := d.servers[0].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := d.tls.remove(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// writeFileAtomic writes data to path through a temporary file of the same
// directory renamed to path, so that a reader sees either no file or the
// whole of it. The file is readable by its owner only: it may hold a
// password or a private key.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// plain is the message of err, an error of the mongotest package, without
// the package's name, which the command's messages start with already.
func plain(err error) string {
	return strings.TrimPrefix(err.Error(), "mongotest: ")
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
