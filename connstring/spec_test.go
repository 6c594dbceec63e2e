package connstring

// The runner of the specification tests of the Connection String and URI
// Options specifications: every JSON file of the two folders below runs (a
// file dropped in needs no code change). Each case goes through the
// specification-level parse (parse with supportedOnly false), which accepts
// every authentication mechanism of the specification; the check that Parse
// adds for mongopool's unsupported mechanisms has its own tests.
//
// A case is only ever skipped for a property of its own: when its URI or its
// expected options use an option listed in unsupportedSpecOptions, with the
// reason printed. No case is skipped by name.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var specDirs = []string{
	"../testdata/spec/connection-string",
	"../testdata/spec/uri-options",
}

// unsupportedSpecOptions lists, by lower-cased name, the options that
// mongopool deliberately does not implement, with the reason. A case that
// uses one is skipped with that reason. It is empty: every option of the
// current test files is implemented.
var unsupportedSpecOptions = map[string]string{}

type specFile struct {
	Tests []specCase `json:"tests"`
}

type specCase struct {
	Description string         `json:"description"`
	URI         string         `json:"uri"`
	Valid       bool           `json:"valid"`
	Warning     *bool          `json:"warning"`
	Hosts       []specHost     `json:"hosts"`
	Auth        *specAuth      `json:"auth"`
	Options     map[string]any `json:"options"`
}

type specHost struct {
	Type string `json:"type"`
	Host string `json:"host"`
	Port *int   `json:"port"`
}

type specAuth struct {
	Username *string `json:"username"`
	Password *string `json:"password"`
	DB       *string `json:"db"`
}

// noDNS is the resolver of the specification tests: they never use DNS.
type noDNS struct{}

var errNoDNS = errors.New("the specification tests use no DNS")

func (noDNS) LookupSRV(context.Context, string, string, string) (string, []*net.SRV, error) {
	return "", nil, errNoDNS
}
func (noDNS) LookupTXT(context.Context, string) ([]string, error) { return nil, errNoDNS }

// specParse is the specification-level parse.
func specParse(uri string) (*ConnString, error) {
	return parse(context.Background(), uri, noDNS{}, false)
}

func TestSpec(t *testing.T) {
	for _, dir := range specDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no specification test file in %s", dir)
		}
		var passed, skipped, failed int
		t.Run(filepath.Base(dir), func(t *testing.T) {
			for _, file := range files {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				var f specFile
				if err := json.Unmarshal(data, &f); err != nil {
					t.Fatalf("%s: %v", file, err)
				}
				t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
					for _, tc := range f.Tests {
						t.Run(tc.Description, func(t *testing.T) {
							if reason := unsupportedReason(tc); reason != "" {
								skipped++
								t.Skip(reason)
							}
							runSpecCase(t, tc)
							if t.Failed() {
								failed++
							} else {
								passed++
							}
						})
					}
				})
			}
		})
		t.Logf("%s: %d passed, %d skipped, %d failed", filepath.Base(dir), passed, skipped, failed)
	}
}

// unsupportedReason returns why the case is skipped, or "".
func unsupportedReason(tc specCase) string {
	names := make([]string, 0, len(tc.Options))
	for k := range tc.Options {
		names = append(names, k)
	}
	if _, query, ok := strings.Cut(tc.URI, "?"); ok {
		for _, pair := range strings.Split(query, "&") {
			k, _, _ := strings.Cut(pair, "=")
			names = append(names, k)
		}
	}
	for _, n := range names {
		if reason, ok := unsupportedSpecOptions[strings.ToLower(n)]; ok {
			return fmt.Sprintf("option %s is not supported by mongopool: %s", n, reason)
		}
	}
	return ""
}

func runSpecCase(t *testing.T, tc specCase) {
	t.Helper()
	cs, err := specParse(tc.URI)
	if !tc.Valid {
		if err == nil {
			t.Fatalf("parse(%q) succeeded, want an error (warnings: %q)", tc.URI, cs.Warnings)
		}
		return
	}
	if err != nil {
		t.Fatalf("parse(%q): %v", tc.URI, err)
	}
	if tc.Warning != nil {
		if *tc.Warning && len(cs.Warnings) == 0 {
			t.Errorf("parse(%q): no warning, want at least one", tc.URI)
		}
		if !*tc.Warning && len(cs.Warnings) > 0 {
			t.Errorf("parse(%q): warnings %q, want none", tc.URI, cs.Warnings)
		}
	}
	if tc.Hosts != nil {
		checkSpecHosts(t, cs, tc.Hosts)
	}
	if tc.Auth != nil {
		checkSpecAuth(t, cs, tc.Auth)
	}
	for key, want := range tc.Options {
		got, ok := specOption(cs, key)
		if !ok {
			t.Errorf("option %s: not set, want %v", key, want)
			continue
		}
		if !jsonEqual(got, want) {
			t.Errorf("option %s = %#v, want %#v", key, got, want)
		}
	}
}

func checkSpecHosts(t *testing.T, cs *ConnString, want []specHost) {
	t.Helper()
	if len(cs.Hosts) != len(want) {
		t.Errorf("hosts = %q, want %d hosts", cs.Hosts, len(want))
		return
	}
	for i, w := range want {
		typ, host, port := classifyHost(cs.Hosts[i])
		wantPort := DefaultPort
		if typ == "unix" {
			wantPort = 0
		}
		if w.Port != nil {
			wantPort = *w.Port
		}
		if typ != w.Type || host != w.Host || port != wantPort {
			t.Errorf("host %d = %q (%s %q port %d), want %s %q port %d", i, cs.Hosts[i], typ, host, port, w.Type, w.Host, wantPort)
		}
	}
}

// classifyHost splits one of Hosts into the type, host and port of the
// specification tests.
func classifyHost(h string) (typ, host string, port int) {
	if strings.Contains(h, "/") {
		return "unix", h, 0
	}
	if strings.HasPrefix(h, "[") {
		end := strings.Index(h, "]")
		port, _ = strconv.Atoi(h[end+2:])
		return "ip_literal", h[1:end], port
	}
	i := strings.LastIndex(h, ":")
	host = h[:i]
	port, _ = strconv.Atoi(h[i+1:])
	if ip := net.ParseIP(host); ip != nil && ip.To4() != nil {
		return "ipv4", host, port
	}
	return "hostname", host, port
}

func checkSpecAuth(t *testing.T, cs *ConnString, want *specAuth) {
	t.Helper()
	wantUser := ""
	if want.Username != nil {
		wantUser = *want.Username
	}
	if cs.Username != wantUser {
		t.Errorf("username = %q, want %q", cs.Username, wantUser)
	}
	switch {
	case want.Password == nil && cs.PasswordSet:
		t.Errorf("a password is set, want none")
	case want.Password != nil && !cs.PasswordSet:
		t.Errorf("no password is set, want one")
	case want.Password != nil && cs.Password != *want.Password:
		// Not printed: the test checks the password, not its leak.
		t.Errorf("password differs from the expected one")
	}
	wantDB := ""
	if want.DB != nil {
		wantDB = *want.DB
	}
	if cs.Database != wantDB {
		t.Errorf("db = %q, want %q", cs.Database, wantDB)
	}
}

// specOption returns the typed value of an option, in the types of the
// specification tests' JSON (milliseconds for durations), and whether it is
// set.
func specOption(c *ConnString, key string) (any, bool) {
	ms := func(d *time.Duration) (any, bool) {
		if d == nil {
			return nil, false
		}
		return d.Milliseconds(), true
	}
	integer := func(i *int) (any, bool) {
		if i == nil {
			return nil, false
		}
		return *i, true
	}
	boolean := func(b *bool) (any, bool) {
		if b == nil {
			return nil, false
		}
		return *b, true
	}
	str := func(s string) (any, bool) { return s, s != "" }
	switch strings.ToLower(key) {
	case "appname":
		return str(c.AppName)
	case "authmechanism":
		return str(c.AuthMechanism)
	case "authsource":
		return str(c.AuthSource)
	case "authmechanismproperties":
		return c.AuthMechanismProperties, c.AuthMechanismProperties != nil
	case "compressors":
		return c.Compressors, c.Compressors != nil
	case "zlibcompressionlevel":
		return integer(c.ZlibCompressionLevel)
	case "connecttimeoutms":
		return ms(c.ConnectTimeout)
	case "sockettimeoutms":
		return ms(c.SocketTimeout)
	case "serverselectiontimeoutms":
		return ms(c.ServerSelectionTimeout)
	case "heartbeatfrequencyms":
		return ms(c.HeartbeatFrequency)
	case "localthresholdms":
		return ms(c.LocalThreshold)
	case "timeoutms":
		return ms(c.Timeout)
	case "maxidletimems":
		return ms(c.MaxIdleTime)
	case "waitqueuetimeoutms":
		return ms(c.WaitQueueTimeout)
	case "wtimeoutms":
		return ms(c.WTimeout)
	case "maxpoolsize":
		return integer(c.MaxPoolSize)
	case "minpoolsize":
		return integer(c.MinPoolSize)
	case "maxconnecting":
		return integer(c.MaxConnecting)
	case "tls", "ssl":
		return boolean(c.TLS)
	case "tlscafile":
		return str(c.TLSCAFile)
	case "tlscertificatekeyfile":
		return str(c.TLSCertificateKeyFile)
	case "tlscertificatekeyfilepassword":
		return str(c.TLSCertificateKeyFilePassword)
	case "tlsallowinvalidcertificates":
		return boolean(c.TLSAllowInvalidCertificates)
	case "tlsallowinvalidhostnames":
		return boolean(c.TLSAllowInvalidHostnames)
	case "tlsinsecure":
		return boolean(c.TLSInsecure)
	case "tlsdisableocspendpointcheck":
		return boolean(c.TLSDisableOCSPEndpointCheck)
	case "tlsdisablecertificaterevocationcheck":
		return boolean(c.TLSDisableCertificateRevocationCheck)
	case "directconnection":
		return boolean(c.DirectConnection)
	case "loadbalanced":
		return boolean(c.LoadBalanced)
	case "replicaset":
		return str(c.ReplicaSet)
	case "servermonitoringmode":
		return str(c.ServerMonitoringMode)
	case "serverselectiontryonce":
		return boolean(c.ServerSelectionTryOnce)
	case "srvmaxhosts":
		return integer(c.SRVMaxHosts)
	case "srvservicename":
		return str(c.SRVServiceName)
	case "readpreference":
		return str(c.ReadPreference)
	case "readpreferencetags":
		if c.ReadPreferenceTags == nil {
			return nil, false
		}
		sets := make([]map[string]string, 0, len(c.ReadPreferenceTags))
		for _, set := range c.ReadPreferenceTags {
			m := make(map[string]string, len(set))
			for _, tag := range set {
				m[tag.Name] = tag.Value
			}
			sets = append(sets, m)
		}
		return sets, true
	case "maxstalenessseconds":
		return integer(c.MaxStalenessSeconds)
	case "readconcernlevel":
		return str(c.ReadConcernLevel)
	case "w":
		if c.W == nil {
			return nil, false
		}
		if c.W.Tag != "" {
			return c.W.Tag, true
		}
		return c.W.N, true
	case "journal":
		return boolean(c.Journal)
	case "retryreads":
		return boolean(c.RetryReads)
	case "retrywrites":
		return boolean(c.RetryWrites)
	case "maxadaptiveretries":
		return integer(c.MaxAdaptiveRetries)
	case "enableoverloadretargeting":
		return boolean(c.EnableOverloadRetargeting)
	case "proxyhost":
		return str(c.ProxyHost)
	case "proxyport":
		return integer(c.ProxyPort)
	case "proxyusername":
		return str(c.ProxyUsername)
	case "proxypassword":
		return str(c.ProxyPassword)
	}
	return nil, false
}

// jsonEqual compares a typed value with a value decoded from JSON, through
// a JSON round trip.
func jsonEqual(got, want any) bool {
	data, err := json.Marshal(got)
	if err != nil {
		return false
	}
	var g any
	if err := json.Unmarshal(data, &g); err != nil {
		return false
	}
	return reflect.DeepEqual(g, want)
}
