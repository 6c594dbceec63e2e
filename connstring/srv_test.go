package connstring

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

var _ Resolver = (*net.Resolver)(nil)

// fakeResolver answers from maps and counts its calls: no DNS ever.
type fakeResolver struct {
	srv    map[string][]*net.SRV // by "_service._proto.name"
	txt    map[string][]string   // by name
	srvErr error
	txtErr error

	mu    sync.Mutex
	calls []string
}

func (r *fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	key := "_" + service + "._" + proto + "." + name
	r.mu.Lock()
	r.calls = append(r.calls, "SRV "+key)
	r.mu.Unlock()
	if r.srvErr != nil {
		return "", nil, r.srvErr
	}
	recs, ok := r.srv[key]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: key, IsNotFound: true}
	}
	return key, recs, nil
}

func (r *fakeResolver) LookupTXT(_ context.Context, name string) ([]string, error) {
	r.mu.Lock()
	r.calls = append(r.calls, "TXT "+name)
	r.mu.Unlock()
	if r.txtErr != nil {
		return nil, r.txtErr
	}
	recs, ok := r.txt[name]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return recs, nil
}

func srvRecords(targets ...string) []*net.SRV {
	var recs []*net.SRV
	for i, t := range targets {
		recs = append(recs, &net.SRV{Target: t, Port: uint16(27017 + i)})
	}
	return recs
}

const srvName = "_mongodb._tcp.test1.test.build.10gen.cc"

func TestSRVSuccess(t *testing.T) {
	r := &fakeResolver{srv: map[string][]*net.SRV{
		srvName: srvRecords("localhost.test.build.10gen.cc.", "LOCALHOST2.test.build.10gen.cc"),
	}}
	cs, err := ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/db", r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"localhost.test.build.10gen.cc:27017", "localhost2.test.build.10gen.cc:27018"}
	if !reflect.DeepEqual(cs.Hosts, want) {
		t.Errorf("hosts = %q, want %q", cs.Hosts, want)
	}
	if cs.Scheme != SchemeMongoDBSRV || cs.SRVHost != "test1.test.build.10gen.cc" || cs.Database != "db" {
		t.Errorf("unexpected %+v", cs)
	}
	if !cs.TLSEnabled() || cs.TLS != nil {
		t.Errorf("TLS = %v, TLSEnabled = %v; want unset and enabled", cs.TLS, cs.TLSEnabled())
	}
	if len(cs.Warnings) != 0 {
		t.Errorf("warnings %q", cs.Warnings)
	}
	wantCalls := []string{"SRV " + srvName, "TXT test1.test.build.10gen.cc"}
	if !reflect.DeepEqual(r.calls, wantCalls) {
		t.Errorf("calls = %q, want %q", r.calls, wantCalls)
	}
	if got := cs.String(); got != "mongodb+srv://test1.test.build.10gen.cc/db" {
		t.Errorf("String() = %q", got)
	}

	// tls=false is honoured.
	cs, err = ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/?tls=false", r)
	if err != nil {
		t.Fatal(err)
	}
	if cs.TLSEnabled() {
		t.Error("tls=false: TLSEnabled = true")
	}
}

func TestSRVServiceName(t *testing.T) {
	r := &fakeResolver{srv: map[string][]*net.SRV{
		"_customname._tcp.test22.test.build.10gen.cc": srvRecords("localhost.test.build.10gen.cc"),
	}}
	cs, err := ParseWithResolver(context.Background(), "mongodb+srv://test22.test.build.10gen.cc/?srvServiceName=customname", r)
	if err != nil {
		t.Fatal(err)
	}
	if cs.SRVServiceName != "customname" || len(cs.Hosts) != 1 {
		t.Errorf("unexpected %+v", cs)
	}
}

func TestSRVTXTOptions(t *testing.T) {
	r := &fakeResolver{
		srv: map[string][]*net.SRV{srvName: srvRecords("a.test.build.10gen.cc", "b.test.build.10gen.cc")},
		txt: map[string][]string{"test1.test.build.10gen.cc": {"replicaSet=repl0&authSource=thisDB"}},
	}
	cs, err := ParseWithResolver(context.Background(), "mongodb+srv://u:p@test1.test.build.10gen.cc/", r)
	if err != nil {
		t.Fatal(err)
	}
	if cs.ReplicaSet != "repl0" || cs.AuthSource != "thisDB" || !cs.IsSet("replicaSet") || !cs.IsSet("authSource") {
		t.Errorf("TXT options not applied: %+v", cs)
	}
	if cs.ResolvedAuthSource() != "thisDB" {
		t.Errorf("ResolvedAuthSource = %q", cs.ResolvedAuthSource())
	}

	// The connection string's own options win.
	cs, err = ParseWithResolver(context.Background(),
		"mongodb+srv://u:p@test1.test.build.10gen.cc/?authSource=mine&replicaSet=bad%20value", r)
	if err != nil {
		t.Fatal(err)
	}
	if cs.AuthSource != "mine" || cs.ReplicaSet != "bad value" {
		t.Errorf("URI options did not win: %+v", cs)
	}

	// loadBalanced from TXT, validated after the look-up.
	r.srv[srvName] = srvRecords("a.test.build.10gen.cc")
	r.txt["test1.test.build.10gen.cc"] = []string{"loadBalanced=true"}
	cs, err = ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/", r)
	if err != nil {
		t.Fatal(err)
	}
	if !isTrue(cs.LoadBalanced) {
		t.Errorf("loadBalanced not applied: %+v", cs)
	}
	r.srv[srvName] = srvRecords("a.test.build.10gen.cc", "b.test.build.10gen.cc")
	if _, err := ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/", r); err == nil ||
		!strings.Contains(err.Error(), "loadBalanced=true is not allowed with more than one host") {
		t.Errorf("loadBalanced with two SRV records: %v", err)
	}
	r.txt["test1.test.build.10gen.cc"] = []string{"loadBalanced=true&replicaSet=rs"}
	r.srv[srvName] = srvRecords("a.test.build.10gen.cc")
	if _, err := ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/", r); err == nil ||
		!strings.Contains(err.Error(), "replicaSet") {
		t.Errorf("loadBalanced with a TXT replicaSet: %v", err)
	}

	// An invalid TXT value is a warning.
	r.txt["test1.test.build.10gen.cc"] = []string{"loadBalanced=maybe"}
	cs, err = ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/", r)
	if err != nil {
		t.Fatal(err)
	}
	if cs.LoadBalanced != nil || len(cs.Warnings) != 1 || !strings.Contains(cs.Warnings[0], "TXT record") {
		t.Errorf("LoadBalanced = %v, warnings %q", cs.LoadBalanced, cs.Warnings)
	}
}

func TestSRVErrors(t *testing.T) {
	const host = "test1.test.build.10gen.cc"
	lookupErr := errors.New("server misbehaving")
	tests := []struct {
		name string
		uri  string
		srv  []*net.SRV
		txt  []string
		r    *fakeResolver // overrides srv and txt
		msg  string
	}{
		{name: "mismatched domain", srv: srvRecords("localhost.test.build.10gen.cc", "evil.example.com"),
			msg: `SRV record "evil.example.com" of "` + srvName + `" is not in the domain of "` + host + `"`},
		{name: "parent domain only", srv: srvRecords("test.build.10gen.cc"), msg: "not in the domain"},
		{name: "suffix without a dot", srv: srvRecords("eviltest.build.10gen.cc"), msg: "not in the domain"},
		{name: "too many TXT records", srv: srvRecords("a.test.build.10gen.cc"),
			txt: []string{"replicaSet=a", "authSource=b"}, msg: "has 2 TXT records; at most one is allowed"},
		{name: "TXT option not allowed", srv: srvRecords("a.test.build.10gen.cc"),
			txt: []string{"replicaSet=a&ssl=false"}, msg: `TXT record of "` + host + `" has option "ssl"`},
		{name: "TXT not key=value", srv: srvRecords("a.test.build.10gen.cc"), txt: []string{"replicaSet"},
			msg: "not a list of key=value options"},
		{name: "TXT empty authSource", srv: srvRecords("a.test.build.10gen.cc"), txt: []string{"authSource="},
			msg: "empty authSource"},
		{name: "no SRV record", srv: []*net.SRV{}, msg: "returned no record"},
		{name: "SRV not found", r: &fakeResolver{}, msg: `SRV look-up of "` + srvName + `" failed`},
		{name: "SRV failure", r: &fakeResolver{srvErr: lookupErr}, msg: "server misbehaving"},
		{name: "TXT failure", r: &fakeResolver{srv: map[string][]*net.SRV{srvName: srvRecords("a.test.build.10gen.cc")},
			txtErr: lookupErr}, msg: `TXT look-up of "` + host + `" failed: server misbehaving`},
		{name: "port 0", srv: []*net.SRV{{Target: "a.test.build.10gen.cc", Port: 0}}, msg: "port 0"},
		{name: "srvMaxHosts with replicaSet", uri: "mongodb+srv://" + host + "/?srvMaxHosts=1&replicaSet=rs",
			srv: srvRecords("a.test.build.10gen.cc", "b.test.build.10gen.cc"), msg: "srvMaxHosts is not allowed with replicaSet"},
		{name: "srvMaxHosts with TXT replicaSet", uri: "mongodb+srv://" + host + "/?srvMaxHosts=1",
			srv: srvRecords("a.test.build.10gen.cc"), txt: []string{"replicaSet=rs"}, msg: "srvMaxHosts is not allowed with replicaSet"},
		{name: "srvMaxHosts with loadBalanced", uri: "mongodb+srv://" + host + "/?srvMaxHosts=1&loadBalanced=true",
			srv: srvRecords("a.test.build.10gen.cc"), msg: "loadBalanced=true is not allowed with a positive srvMaxHosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			if r == nil {
				r = &fakeResolver{srv: map[string][]*net.SRV{srvName: tt.srv}, txt: map[string][]string{}}
				if tt.txt != nil {
					r.txt[host] = tt.txt
				}
			}
			uri := tt.uri
			if uri == "" {
				uri = "mongodb+srv://" + host + "/"
			}
			cs, err := ParseWithResolver(context.Background(), uri, r)
			if err == nil {
				t.Fatalf("no error, got %+v", cs)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q, want %q", err, tt.msg)
			}
			if tt.r != nil && tt.r.srvErr != nil || tt.r != nil && tt.r.txtErr != nil {
				if !errors.Is(err, lookupErr) {
					t.Errorf("error %v does not wrap the resolver's error", err)
				}
			}
		})
	}
}

func TestSRVShortHostNames(t *testing.T) {
	tests := []struct {
		host, target string
		ok           bool
	}{
		{"localhost", "mongo.localhost", true},
		{"localhost", "localhost", false},
		{"localhost", "mongo.other", false},
		{"mongo.local", "a.mongo.local", true},
		{"mongo.local", "a.b.mongo.local", true},
		{"mongo.local", "a.local", false},
		{"mongo.local", "mongo.local", false},
		{"a.b.c", "x.b.c", true},
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "b.c", false},
	}
	for _, tt := range tests {
		r := &fakeResolver{srv: map[string][]*net.SRV{"_mongodb._tcp." + tt.host: srvRecords(tt.target)}}
		_, err := ParseWithResolver(context.Background(), "mongodb+srv://"+tt.host, r)
		if (err == nil) != tt.ok {
			t.Errorf("host %s, target %s: error %v, want ok=%v", tt.host, tt.target, err, tt.ok)
		}
	}
}

func TestSRVMaxHosts(t *testing.T) {
	targets := []string{"a.test.build.10gen.cc", "b.test.build.10gen.cc", "c.test.build.10gen.cc"}
	r := &fakeResolver{srv: map[string][]*net.SRV{srvName: srvRecords(targets...)}}
	all := []string{"a.test.build.10gen.cc:27017", "b.test.build.10gen.cc:27018", "c.test.build.10gen.cc:27019"}
	for _, tt := range []struct {
		max  string
		want int
	}{{"0", 3}, {"2", 2}, {"3", 3}, {"5", 3}, {"1", 1}} {
		seen := make(map[string]bool)
		for range 50 {
			cs, err := ParseWithResolver(context.Background(), "mongodb+srv://test1.test.build.10gen.cc/?srvMaxHosts="+tt.max, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs.Hosts) != tt.want {
				t.Fatalf("srvMaxHosts=%s: %d hosts %q, want %d", tt.max, len(cs.Hosts), cs.Hosts, tt.want)
			}
			for _, h := range cs.Hosts {
				if !slices.Contains(all, h) {
					t.Fatalf("srvMaxHosts=%s: host %q is not an SRV record", tt.max, h)
				}
				seen[h] = true
			}
			if len(cs.Hosts) == len(all) && !reflect.DeepEqual(cs.Hosts, all) {
				t.Errorf("srvMaxHosts=%s: hosts reordered: %q", tt.max, cs.Hosts)
			}
		}
		if tt.want < 3 && len(seen) < 2 {
			t.Errorf("srvMaxHosts=%s: always the same hosts %v over 50 parses; want a random pick", tt.max, seen)
		}
	}
}

// TestSRVNoLookUpOnEarlyErrors: what the connection string alone rules out
// fails before any DNS look-up.
func TestSRVNoLookUpOnEarlyErrors(t *testing.T) {
	for _, uri := range []string{
		"mongodb+srv://test1.test.build.10gen.cc/?directConnection=true",
		"mongodb+srv://test1.test.build.10gen.cc/?authMechanism=GSSAPI",
		"mongodb+srv://test1.test.build.10gen.cc/?tlsInsecure=true&tlsAllowInvalidCertificates=true",
		"mongodb+srv://test1.test.build.10gen.cc:27017/",
		"mongodb+srv://a.example.com,b.example.com/",
	} {
		r := &fakeResolver{}
		if _, err := ParseWithResolver(context.Background(), uri, r); err == nil {
			t.Errorf("%s: no error", uri)
		}
		if len(r.calls) != 0 {
			t.Errorf("%s: look-ups %q before the error", uri, r.calls)
		}
	}
}

func TestSRVContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := ctxResolver{}
	_, err := ParseWithResolver(ctx, "mongodb+srv://test1.test.build.10gen.cc/", r)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

type ctxResolver struct{}

func (ctxResolver) LookupSRV(ctx context.Context, _, _, _ string) (string, []*net.SRV, error) {
	<-ctx.Done()
	return "", nil, ctx.Err()
}
func (ctxResolver) LookupTXT(ctx context.Context, _ string) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
