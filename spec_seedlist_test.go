package mongopool_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/connstring"
	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/topology"
)

// seedlistDir holds the Initial DNS Seedlist Discovery specification's
// tests: a folder per kind of deployment, and the README that lists the DNS
// records they need.
var seedlistDir = filepath.Join("testdata", "spec", "initial-dns-seedlist-discovery")

// seedlistTimeout bounds each test file: its client's discovery and ping.
const seedlistTimeout = 10 * time.Second

// seedlistDeployments start, for each folder, the deployment its README's
// "Test Setup" asks for, on free ports of 127.0.0.1. Each returns the
// servers by the port the README gives them: the one their DNS names are
// reached on. tlsCfg is nil for a deployment without TLS.
var seedlistDeployments = map[string]func(t *testing.T, tlsCfg *tls.Config) map[int]string{
	// A three-member replica set named repl0, whose members are
	// localhost:27017, localhost:27018 and localhost:27019.
	"replica-set": func(t *testing.T, tlsCfg *tls.Config) map[int]string {
		opts := []mongotest.Option{mongotest.WithAdvertisedHosts("localhost:27017", "localhost:27018", "localhost:27019")}
		if tlsCfg != nil {
			opts = append(opts, mongotest.WithTLS(tlsCfg))
		}
		rs, err := mongotest.StartReplicaSet("repl0", 3, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		m := rs.Members()
		return map[int]string{27017: m[0].Addr(), 27018: m[1].Addr(), 27019: m[2].Addr()}
	},
	// A sharded cluster with mongoses on ports 27017 and 27018.
	"sharded": func(t *testing.T, tlsCfg *tls.Config) map[int]string {
		ports := map[int]string{}
		for _, port := range []int{27017, 27018} {
			ports[port] = startSeedlistServer(t, tlsCfg, mongotest.WithMongos()).Addr()
		}
		return ports
	},
	// A load balancer on port 8000 (HAProxy's, which test23 and test24
	// point to), in front of mongoses.
	"load-balanced": func(t *testing.T, tlsCfg *tls.Config) map[int]string {
		return map[int]string{8000: startSeedlistServer(t, tlsCfg, mongotest.WithLoadBalanced([12]byte{})).Addr()}
	},
}

func startSeedlistServer(t *testing.T, tlsCfg *tls.Config, opts ...mongotest.Option) *mongotest.Server {
	t.Helper()
	if tlsCfg != nil {
		opts = append(opts, mongotest.WithTLS(tlsCfg))
	}
	srv, err := mongotest.Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// seedlistTest is one test file. Unknown fields fail the decoding, so that
// an assertion the runner does not make cannot pass unnoticed.
type seedlistTest struct {
	URI           string         `json:"uri"`
	Seeds         []string       `json:"seeds"`
	NumSeeds      *int           `json:"numSeeds"`
	Hosts         []string       `json:"hosts"`
	NumHosts      *int           `json:"numHosts"`
	Options       map[string]any `json:"options"`
	ParsedOptions map[string]any `json:"parsed_options"`
	Error         bool           `json:"error"`
	Comment       string         `json:"comment"`
	Ping          *bool          `json:"ping"`
}

// TestSpecInitialDNSSeedlistDiscovery runs every test file of the
// specification against in-process deployments: a resolver that holds the
// README's DNS records, and a dialer that takes the records' host names to
// 127.0.0.1 as their A records do, and each port to the server the README
// puts there.
func TestSpecInitialDNSSeedlistDiscovery(t *testing.T) {
	dns := loadSeedlistDNS(t, filepath.Join(seedlistDir, "README.md"))
	dns.addMissingRecords()
	pki := testpki.New(t, append(dns.loopbackNames(), "127.0.0.1")...)
	entries, err := os.ReadDir(seedlistDir)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		deploy, ok := seedlistDeployments[e.Name()]
		if !ok {
			t.Errorf("folder %s: no deployment for it; add one to seedlistDeployments", e.Name())
			continue
		}
		paths, err := filepath.Glob(filepath.Join(seedlistDir, e.Name(), "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(e.Name(), func(t *testing.T) {
			for _, path := range paths {
				files++
				t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
					runSeedlistTest(t, path, dns, pki, deploy)
				})
			}
		})
	}
	if files == 0 {
		t.Fatal("no test file found")
	}
}

func runSeedlistTest(t *testing.T, path string, dns *seedlistDNS, pki *testpki.PKI, deploy func(*testing.T, *tls.Config) map[int]string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tc seedlistTest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), seedlistTimeout)
	defer cancel()

	if tc.Error {
		// Nothing is started: a client that wrongly accepted the URI
		// would find no server to connect to.
		c, err := mongopool.NewClient(tc.URI, mongopool.WithResolver(dns), mongopool.WithDialer(dns.dialer(nil)))
		if err == nil {
			c.Close()
			t.Fatalf("NewClient(%s) succeeded; want an error: %s", tc.URI, tc.Comment)
		}
		t.Logf("NewClient: %v", err)
		return
	}

	cs, err := connstring.ParseWithResolver(ctx, tc.URI, dns)
	if err != nil {
		t.Fatalf("ParseWithResolver(%s): %v", tc.URI, err)
	}
	checkSeedlistOptions(t, "options", tc.Options, func(name string) (any, bool) { return uriOption(cs, name) })
	checkSeedlistOptions(t, "parsed_options", tc.ParsedOptions, func(name string) (any, bool) { return parsedOption(cs, name) })

	// The deployment has TLS as the connection string asks: the files that
	// turn it off expect a deployment without it (as the specification's
	// own runs do, DRIVERS-1324).
	var serverTLS *tls.Config
	opts := []mongopool.ClientOption{mongopool.WithResolver(dns)}
	if cs.TLSEnabled() {
		serverTLS = pki.ServerTLS()
		opts = append(opts, mongopool.WithTLSConfig(&tls.Config{RootCAs: pki.CAPool}))
	}
	w := &seedlistWatch{changed: make(chan struct{}, 1)}
	opts = append(opts, mongopool.WithDialer(dns.dialer(deploy(t, serverTLS))), mongopool.WithTopologyEventHandler(w.handle))

	var c *mongopool.Client
	if tc.Ping == nil || *tc.Ping {
		c, err = mongopool.Connect(ctx, tc.URI, opts...)
	} else {
		c, err = mongopool.NewClient(tc.URI, opts...)
	}
	if err != nil {
		t.Fatalf("connecting to %s: %v", tc.URI, err)
	}
	defer c.Close()

	// The client delivers its events asynchronously: the initial
	// description is the watch's once they are flushed.
	if err := c.Flush(ctx); err != nil {
		t.Fatalf("the client did not deliver its events within %v: %v", seedlistTimeout, err)
	}
	seeds := w.initialSeeds()
	if tc.Seeds != nil && !slices.Equal(seeds, sorted(tc.Seeds)) {
		t.Errorf("initial seeds %v, want %v", seeds, sorted(tc.Seeds))
	}
	if tc.NumSeeds != nil && len(seeds) != *tc.NumSeeds {
		t.Errorf("%d initial seeds %v, want %d", len(seeds), seeds, *tc.NumSeeds)
	}
	if tc.Hosts == nil && tc.NumHosts == nil {
		return
	}
	want := sorted(tc.Hosts)
	last := w.await(ctx, func(d topology.Description) bool {
		hosts := addresses(d)
		return discovered(d) && (tc.Hosts == nil || slices.Equal(hosts, want)) && (tc.NumHosts == nil || len(hosts) == *tc.NumHosts)
	})
	if err := ctx.Err(); err != nil {
		t.Fatalf("discovery did not find hosts %v (numHosts %v) within %v; the topology is %s", want, tc.NumHosts, seedlistTimeout, last.Summary())
	}
}

// checkSeedlistOptions checks the options a test file expects against the
// parsed connection string.
func checkSeedlistOptions(t *testing.T, field string, want map[string]any, get func(string) (any, bool)) {
	t.Helper()
	for name, w := range want {
		got, ok := get(name)
		if !ok {
			t.Fatalf("%s: the runner does not know option %q", field, name)
		}
		if got != w {
			t.Errorf("%s: %s = %v (%T), want %v (%T)", field, name, got, got, w, w)
		}
	}
}

// uriOption returns the parsed value of the URI option name, as the test
// files' JSON has it (nil when the option is not set).
func uriOption(cs *connstring.ConnString, name string) (any, bool) {
	switch strings.ToLower(name) {
	case "ssl", "tls":
		return cs.TLSEnabled(), true
	case "loadbalanced":
		return boolOrNil(cs.LoadBalanced), true
	case "directconnection":
		return boolOrNil(cs.DirectConnection), true
	case "replicaset":
		return stringOrNil(cs.ReplicaSet), true
	case "authsource":
		return stringOrNil(cs.AuthSource), true
	case "srvservicename":
		return stringOrNil(cs.SRVServiceName), true
	case "srvmaxhosts":
		if cs.SRVMaxHosts == nil {
			return nil, true
		}
		return float64(*cs.SRVMaxHosts), true
	}
	return nil, false
}

// parsedOption returns the parsed value of another component of the
// connection string: its user information and its database.
func parsedOption(cs *connstring.ConnString, name string) (any, bool) {
	switch name {
	case "user":
		return cs.Username, true
	case "password":
		return cs.Password, true
	case "db", "auth_database", "defaultDatabase":
		return cs.Database, true
	}
	return nil, false
}

func boolOrNil(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func stringOrNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// addresses returns the addresses of d's servers, sorted.
func addresses(d topology.Description) []string {
	var out []string
	for _, sd := range d.Servers() {
		out = append(out, sd.Address)
	}
	return out
}

// discovered reports whether every server of d has been checked and found.
func discovered(d topology.Description) bool {
	for _, sd := range d.Servers() {
		if sd.Type == topology.ServerUnknown || sd.Type == topology.PossiblePrimary {
			return false
		}
	}
	return d.Len() > 0
}

// seedlistWatch follows a client's topology through its events: the first
// description (the initial seeds), and the latest.
type seedlistWatch struct {
	mu          sync.Mutex
	first, last topology.Description
	seen        bool
	changed     chan struct{}
}

func (w *seedlistWatch) handle(e topology.Event) {
	tdc, ok := e.(*topology.TopologyDescriptionChanged)
	if !ok {
		return
	}
	w.mu.Lock()
	if !w.seen {
		w.first, w.seen = tdc.New, true
	}
	w.last = tdc.New
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// initialSeeds returns the addresses of the client's initial description,
// sorted: its seed list.
func (w *seedlistWatch) initialSeeds() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return addresses(w.first)
}

// await waits until the latest description satisfies cond, or ctx ends, and
// returns it.
func (w *seedlistWatch) await(ctx context.Context, cond func(topology.Description) bool) topology.Description {
	for {
		w.mu.Lock()
		last := w.last
		w.mu.Unlock()
		if cond(last) {
			return last
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return last
		}
	}
}

// seedlistDNS is the DNS of the README: its A, SRV and TXT records, and
// nothing else. It is the tests' connstring.Resolver, and what their dialer
// resolves host names with.
type seedlistDNS struct {
	a   map[string]string     // name: IPv4 address
	srv map[string][]*net.SRV // "_service._proto.name": records
	txt map[string][]string   // name: records, each one's strings joined
}

// loadSeedlistDNS reads the records of the README's dns block, whose
// tables are headed by a line naming their last column: Address (A
// records), Target (SRV records: port and target) or Text (TXT records:
// quoted strings).
func loadSeedlistDNS(t *testing.T, path string) *seedlistDNS {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &seedlistDNS{a: map[string]string{}, srv: map[string][]*net.SRV{}, txt: map[string][]string{}}
	in, kind := false, ""
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "```dns":
			in = true
			continue
		case !in:
			continue
		case text == "```":
			in = false
			continue
		case text == "":
			continue
		}
		fields := strings.Fields(text)
		if fields[0] == "Record" {
			kind = fields[len(fields)-1]
			continue
		}
		if err := d.add(kind, fields, text); err != nil {
			t.Fatalf("%s:%d: %v: %s", path, line, err, text)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(d.a) == 0 || len(d.srv) == 0 || len(d.txt) == 0 {
		t.Fatalf("%s: found %d A, %d SRV and %d TXT names; want some of each", path, len(d.a), len(d.srv), len(d.txt))
	}
	return d
}

// add adds the record of a line of the table of kind: name, TTL, class,
// type, and the record's data.
func (d *seedlistDNS) add(kind string, fields []string, text string) error {
	if len(fields) < 5 || fields[2] != "IN" {
		return errors.New("not a record: name TTL IN type data")
	}
	name := dnsKey(fields[0])
	switch typ := fields[3]; {
	case kind == "Address" && typ == "A" && len(fields) == 5:
		d.a[name] = fields[4]
	case kind == "Target" && typ == "SRV" && len(fields) == 6:
		port, err := strconv.ParseUint(fields[4], 10, 16)
		if err != nil {
			return fmt.Errorf("SRV port: %w", err)
		}
		d.srv[name] = append(d.srv[name], &net.SRV{Target: fields[5], Port: uint16(port)})
	case kind == "Text" && typ == "TXT":
		// The strings of a record are quoted, and joined as the
		// specification requires (and as net.Resolver.LookupTXT does).
		data := text[strings.Index(text, "TXT")+len("TXT"):]
		var joined strings.Builder
		for data = strings.TrimSpace(data); data != ""; data = strings.TrimSpace(data) {
			s, err := strconv.QuotedPrefix(data)
			if err != nil {
				return fmt.Errorf("TXT data: %w", err)
			}
			u, _ := strconv.Unquote(s)
			joined.WriteString(u)
			data = data[len(s):]
		}
		d.txt[name] = append(d.txt[name], joined.String())
	default:
		return fmt.Errorf("a %s record in the table of %s", typ, kind)
	}
	return nil
}

// addMissingRecords adds the records the specification's DNS has and its
// README leaves out. The README lists one SRV record for test22, on port
// 27017, but its test (srv-service-name) expects the seeds of two, on ports
// 27017 and 27018, and the SRV polling tests replace "both records" of
// test22: the second one, on port 27018, is added while the README lists
// just the one.
func (d *seedlistDNS) addMissingRecords() {
	const test22 = "_customname._tcp.test22.test.build.10gen.cc"
	if recs := d.srv[test22]; len(recs) == 1 && recs[0].Port == 27017 {
		d.srv[test22] = append(recs, &net.SRV{Target: recs[0].Target, Port: 27018})
	}
}

// dnsKey is the key of a DNS name: lower-case, without its final dot.
func dnsKey(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// notFound is the error of a look-up of a name without such records.
func notFound(name string) error {
	return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

// LookupSRV looks up the SRV records of _service._proto.name, as
// net.Resolver does.
func (d *seedlistDNS) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	q := name
	if service != "" || proto != "" {
		q = "_" + service + "._" + proto + "." + name
	}
	recs, ok := d.srv[dnsKey(q)]
	if !ok {
		return "", nil, notFound(q)
	}
	out := make([]*net.SRV, len(recs))
	for i, r := range recs {
		c := *r
		out[i] = &c
	}
	return dnsKey(q) + ".", out, nil
}

// LookupTXT looks up the TXT records of name, as net.Resolver does.
func (d *seedlistDNS) LookupTXT(_ context.Context, name string) ([]string, error) {
	recs, ok := d.txt[dnsKey(name)]
	if !ok {
		return nil, notFound(name)
	}
	return slices.Clone(recs), nil
}

// loopbackNames returns the names that resolve to 127.0.0.1: the README's A
// records, and localhost.
func (d *seedlistDNS) loopbackNames() []string {
	names := []string{"localhost"}
	for name, ip := range d.a {
		if ip == "127.0.0.1" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// dialer returns a dialer that resolves the host of an address through the
// A records (and localhost), and connects to the server at its port, of
// ports (the deployment's servers by the port the README gives them).
// Nothing else is dialled: an unknown name or port fails as a refused
// connection would.
func (d *seedlistDNS) dialer(ports map[int]string) func(ctx context.Context, network, address string) (net.Conn, error) {
	loopback := map[string]bool{"127.0.0.1": true}
	for _, n := range d.loopbackNames() {
		loopback[n] = true
	}
	var nd net.Dialer
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, portStr, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		if !loopback[dnsKey(host)] {
			return nil, &net.OpError{Op: "dial", Net: network, Err: notFound(host)}
		}
		port, _ := strconv.Atoi(portStr)
		to, ok := ports[port]
		if !ok {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("no test server on port %d of %s", port, host)}
		}
		return nd.DialContext(ctx, network, to)
	}
}
