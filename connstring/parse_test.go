package connstring

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, uri string) *ConnString {
	t.Helper()
	cs, err := Parse(uri)
	if err != nil {
		t.Fatalf("Parse(%q): %v", uri, err)
	}
	return cs
}

func ptr[T any](v T) *T { return &v }

func TestParseTypedOptions(t *testing.T) {
	uri := "mongodb://alice:pw@Example.COM:27018,[::1],%2Ftmp%2FMongo.sock/db1" +
		"?appname=app&maxPoolSize=50&minPoolSize=5&maxConnecting=3&maxIdleTimeMS=60000" +
		"&waitQueueTimeoutMS=2000&timeoutMS=0&connectTimeoutMS=5000&socketTimeoutMS=0" +
		"&serverSelectionTimeoutMS=15000&heartbeatFrequencyMS=500&localThresholdMS=20" +
		"&tls=true&tlsCAFile=%2Fca.pem&tlsCertificateKeyFile=cert.pem&tlsAllowInvalidHostnames=false" +
		"&compressors=zstd,snappy,zlib&zlibCompressionLevel=-1&replicaSet=rs0&serverMonitoringMode=poll" +
		"&readPreference=secondary&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=&maxStalenessSeconds=120" +
		"&readConcernLevel=majority&w=majority&journal=true&wTimeoutMS=1500&retryReads=false&retryWrites=true" +
		"&maxAdaptiveRetries=4&enableOverloadRetargeting=true&serverSelectionTryOnce=false" +
		"&authSource=admin&authMechanism=scram-sha-256&directConnection=false"
	cs := mustParse(t, uri)
	if len(cs.Warnings) > 0 {
		t.Fatalf("warnings: %q", cs.Warnings)
	}
	want := &ConnString{
		Scheme:                    SchemeMongoDB,
		Hosts:                     []string{"example.com:27018", "[::1]:27017", "/tmp/Mongo.sock"},
		Username:                  "alice",
		Password:                  "pw",
		PasswordSet:               true,
		AuthConfigured:            true,
		Database:                  "db1",
		AuthMechanism:             MechSCRAMSHA256,
		AuthSource:                "admin",
		AppName:                   "app",
		MaxPoolSize:               ptr(50),
		MinPoolSize:               ptr(5),
		MaxConnecting:             ptr(3),
		MaxIdleTime:               ptr(time.Minute),
		WaitQueueTimeout:          ptr(2 * time.Second),
		Timeout:                   ptr(time.Duration(0)),
		ConnectTimeout:            ptr(5 * time.Second),
		SocketTimeout:             ptr(time.Duration(0)),
		ServerSelectionTimeout:    ptr(15 * time.Second),
		HeartbeatFrequency:        ptr(500 * time.Millisecond),
		LocalThreshold:            ptr(20 * time.Millisecond),
		TLS:                       ptr(true),
		TLSCAFile:                 "/ca.pem",
		TLSCertificateKeyFile:     "cert.pem",
		TLSAllowInvalidHostnames:  ptr(false),
		Compressors:               []string{"zstd", "snappy", "zlib"},
		ZlibCompressionLevel:      ptr(-1),
		DirectConnection:          ptr(false),
		ReplicaSet:                "rs0",
		ServerMonitoringMode:      "poll",
		ServerSelectionTryOnce:    ptr(false),
		ReadPreference:            "secondary",
		ReadPreferenceTags:        []TagSet{{{"dc", "ny"}, {"rack", "1"}}, {}},
		MaxStalenessSeconds:       ptr(120),
		ReadConcernLevel:          "majority",
		W:                         &WOption{Tag: "majority"},
		Journal:                   ptr(true),
		WTimeout:                  ptr(1500 * time.Millisecond),
		RetryReads:                ptr(false),
		RetryWrites:               ptr(true),
		MaxAdaptiveRetries:        ptr(4),
		EnableOverloadRetargeting: ptr(true),
	}
	got := *cs
	got.raw, got.redact, got.set, got.hasUserInfo = "", nil, nil, false
	got.Warnings = nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("got  %+v\nwant %+v", got, *want)
	}
	for _, o := range []string{"maxpoolsize", "MaxPoolSize", "tls", "ssl", "readPreferenceTags", "authMechanism"} {
		if !cs.IsSet(o) {
			t.Errorf("IsSet(%q) = false", o)
		}
	}
	for _, o := range []string{"proxyHost", "tlsInsecure", "nosuchoption"} {
		if cs.IsSet(o) {
			t.Errorf("IsSet(%q) = true", o)
		}
	}
	if got := cs.ResolvedAuthSource(); got != "admin" {
		t.Errorf("ResolvedAuthSource = %q", got)
	}
}

func TestParseUnsetOptions(t *testing.T) {
	cs := mustParse(t, "mongodb://localhost")
	if cs.MaxPoolSize != nil || cs.TLS != nil || cs.Compressors != nil || cs.AuthConfigured ||
		cs.AppName != "" || len(cs.SetOptions()) != 0 || cs.TLSEnabled() {
		t.Errorf("unexpected options: %+v", cs)
	}
	if cs.Hosts[0] != "localhost:27017" {
		t.Errorf("hosts = %q", cs.Hosts)
	}
	cs = mustParse(t, "mongodb://localhost/?maxPoolSize=0&w=0&MINPOOLSIZE=0")
	if cs.MaxPoolSize == nil || *cs.MaxPoolSize != 0 || cs.W == nil || cs.W.N != 0 || cs.W.Tag != "" {
		t.Errorf("zero values not kept: %+v", cs)
	}
	if got := cs.SetOptions(); !reflect.DeepEqual(got, []string{"maxPoolSize", "minPoolSize", "w"}) {
		t.Errorf("SetOptions = %q", got)
	}
}

func TestParseWarnings(t *testing.T) {
	tests := []struct {
		uri     string
		warning string // a substring of one warning
		check   func(*ConnString) bool
	}{
		{"mongodb://h/?maxPoolSize=5&maxPoolSize=abc", "maxPoolSize is given more than once",
			func(c *ConnString) bool { return *c.MaxPoolSize == 5 }},
		{"mongodb://h/?maxPoolSize=5&maxPoolSize=7", "more than once",
			func(c *ConnString) bool { return *c.MaxPoolSize == 7 }},
		{"mongodb://h/?maxPoolSize=abc", `invalid value "abc" for option maxPoolSize`,
			func(c *ConnString) bool { return c.MaxPoolSize == nil && !c.IsSet("maxPoolSize") }},
		{"mongodb://h/?maxPoolSize=99999999999", "maxPoolSize",
			func(c *ConnString) bool { return c.MaxPoolSize == nil }},
		// A negative size is invalid, not "no limit" (that is 0): the
		// option is ignored with a warning, and the pool keeps its default.
		{"mongodb://h/?maxPoolSize=-1", `invalid value "-1" for option maxPoolSize ignored: must be a non-negative integer`,
			func(c *ConnString) bool { return c.MaxPoolSize == nil && !c.IsSet("maxPoolSize") }},
		{"mongodb://h/?maxPoolSize=-2147483648", "maxPoolSize ignored: must be a non-negative integer",
			func(c *ConnString) bool { return c.MaxPoolSize == nil && !c.IsSet("maxPoolSize") }},
		{"mongodb://h/?minPoolSize=-1", `invalid value "-1" for option minPoolSize ignored: must be a non-negative integer`,
			func(c *ConnString) bool { return c.MinPoolSize == nil && !c.IsSet("minPoolSize") }},
		{"mongodb://h/?journal=1", `must be "true" or "false"`,
			func(c *ConnString) bool { return c.Journal == nil }},
		{"mongodb://h/?appname=", "appname has an empty value",
			func(c *ConnString) bool { return c.AppName == "" && !c.IsSet("appname") }},
		{"mongodb://h/?connectMS=5", `unknown option "connectMS"`, nil},
		{"mongodb://h/?wtimeout=5", "wtimeout is deprecated",
			func(c *ConnString) bool { return *c.WTimeout == 5*time.Millisecond && c.IsSet("wTimeoutMS") }},
		{"mongodb://u@h/?authMechanism=GSSAPI&gssapiServiceName=svc", "gssapiServiceName is deprecated",
			func(c *ConnString) bool { return c.AuthMechanismProperties["SERVICE_NAME"] == "svc" }},
		{"mongodb://u@h/?authMechanism=GSSAPI&gssapiServiceName=svc&authMechanismProperties=SERVICE_NAME:x",
			"gssapiServiceName ignored", func(c *ConnString) bool { return c.AuthMechanismProperties["SERVICE_NAME"] == "x" }},
		{"mongodb://h/?compressors=zlib,lz4", `unknown compressor "lz4"`,
			func(c *ConnString) bool { return reflect.DeepEqual(c.Compressors, []string{"zlib"}) }},
		{"mongodb://h/?compressors=lz4", "no known compressor",
			func(c *ConnString) bool { return c.Compressors == nil }},
		{"mongodb://h/?heartbeatFrequencyMS=499", "at least 500", nil},
		{"mongodb://h/?serverSelectionTimeoutMS=0", "positive", nil},
		{"mongodb://h/?readPreference=Primary", "must be primary", nil},
		{"mongodb://h/?readPreference=nearest&readPreferenceTags=dc", "name:value", func(c *ConnString) bool {
			return c.ReadPreferenceTags == nil
		}},
		{"mongodb://h/?maxStalenessSeconds=30", "at least 90", nil},
		{"mongodb://h/?w=-1", "non-negative integer or a tag", nil},
		{"mongodb://h/?serverMonitoringMode=push", "stream", nil},
		{"mongodb+srv://h.example.com/?srvServiceName=-bad", "RFC 6335", nil},
		{"mongodb://h/?tls=true&tls=true", "tls is given more than once", nil},
	}
	for _, tt := range tests {
		cs, err := specParse(tt.uri)
		if err != nil && strings.HasPrefix(tt.uri, "mongodb+srv") && errors.Is(err, errNoDNS) {
			continue // the warning comes before the look-up; checked by the SRV tests
		}
		if err != nil {
			t.Errorf("%s: %v", tt.uri, err)
			continue
		}
		found := false
		for _, w := range cs.Warnings {
			found = found || strings.Contains(w, tt.warning)
		}
		if !found {
			t.Errorf("%s: warnings %q, want one with %q", tt.uri, cs.Warnings, tt.warning)
		}
		if tt.check != nil && !tt.check(cs) {
			t.Errorf("%s: unexpected result %+v", tt.uri, cs)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		uri    string
		msg    string // a substring of the error
		option string // Error.Option
	}{
		{"mongodb://h/?authSource=", "authSource must not be empty", "authSource"},
		{"mongodb://h/?authMechanism=FOO", `unknown authMechanism "FOO"`, "authMechanism"},
		{"mongodb://h/?appname=" + strings.Repeat("a", 129), "128", "appname"},
		{"mongodb://h/?proxyPort=1080", "proxyPort requires proxyHost", "proxyPort"},
		{"mongodb://h/?proxyHost=p&proxyUsername=u", "proxyUsername and proxyPassword", "proxyUsername"},
		{"mongodb://h/?proxyHost=p&proxyHost=q", "proxyHost is given more than once", "proxyHost"},
		{"mongodb://h/?w=0&journal=true", "journal=true is not allowed with w=0", "journal"},
		{"mongodb://h/?minPoolSize=10&maxPoolSize=5", "minPoolSize 10 is greater than maxPoolSize 5", "minPoolSize"},
		{"mongodb://h/?readPreferenceTags=dc:ny", "readPreferenceTags are not allowed", "readPreferenceTags"},
		{"mongodb://h/?readPreference=primary&maxStalenessSeconds=120", "maxStalenessSeconds is not allowed", "maxStalenessSeconds"},
		{"mongodb://h/?srvMaxHosts=2", "srvMaxHosts requires the mongodb+srv scheme", "srvMaxHosts"},
		{"mongodb://h/?srvServiceName=svc", "srvServiceName requires the mongodb+srv scheme", "srvServiceName"},
		{"mongodb://h/?authMechanismProperties=SERVICE_NAME:x", "authMechanismProperties requires authMechanism", "authMechanismProperties"},
		{"mongodb://h/?maxPoolSize=1%ZZ", "value of option maxPoolSize has an invalid percent-encoding", "maxPoolSize"},
		{"mongodb://h/?=1", "empty name", ""},
		{"mongodb://h/d%24b", `database name "d$b" has the character '$'`, ""},
		{"mongodb://h/a%2Fb", "database name", ""},
		{"mongodb://h,/", "empty host", ""},
		{"mongodb://[::1/", "no closing bracket", ""},
		{"mongodb://[zz]/", "not a valid IPv6 literal", ""},
		{"mongodb://[::1]x/", "characters after its IP literal", ""},
		{"mongodb://rel%2Fmongodb.socket/", "must end in .sock", ""},
		{"mongodb://ho%20st/", "not allowed in a host name", ""},
		{"mongodb://localhost:/", "invalid port", ""},
		{"mongodb+srv://[::1]/", "not an IP literal", ""},
		{"mongodb+srv://127.0.0.1/", "not the IP address", ""},
		{"mongodb+srv://a%2Fb.sock/", "not a Unix domain socket", ""},
		{"mongodb+srv://h.example.com/?directConnection=true", "directConnection=true is not allowed with mongodb+srv", "directConnection"},
		{"mongodb://u x@h", "the character ' '", ""},
		{"mongodb://u:p{q@h", "the character '{'", ""},
		{"https://h", `not "https"`, ""},
		{"localhost:27017", "no scheme separator", ""},
		// Credentials.
		{"mongodb://@h", "user name is empty", ""},
		{"mongodb://:pw@h", "user name is empty", ""},
		{"mongodb://h/?authMechanism=SCRAM-SHA-1", "needs a user name", ""},
		{"mongodb://h/?authMechanism=PLAIN", "needs a user name", ""},
		{"mongodb://u:p@h/?authMechanism=MONGODB-X509", "does not take a password", ""},
		{"mongodb://h/?authMechanism=MONGODB-X509&authSource=admin", `requires authSource "$external"`, "authSource"},
		{"mongodb://u:p@h/?authMechanism=SCRAM-SHA-1&authMechanismProperties=A:b", "takes no authMechanismProperties", "authMechanismProperties"},
		{"mongodb://h/?authMechanism=GSSAPI", "needs a user name", ""},
		{"mongodb://u@h/?authMechanism=GSSAPI&authSource=admin", "$external", "authSource"},
		{"mongodb://u@h/?authMechanism=GSSAPI&authMechanismProperties=CANONICALIZE_HOST_NAME:maybe", "CANONICALIZE_HOST_NAME", "authMechanismProperties"},
		{"mongodb://u@h/?authMechanism=GSSAPI&authMechanismProperties=FOO:bar", `"FOO" does not apply to GSSAPI`, "authMechanismProperties"},
		{"mongodb://u@h/?authMechanism=MONGODB-AWS", "needs a password", ""},
		{"mongodb://u:p@h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test", "does not take a password", ""},
		{"mongodb://u@h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test", "does not take a user name", ""},
		{"mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:nope", "ENVIRONMENT must be", "authMechanismProperties"},
		{"mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:azure", "requires TOKEN_RESOURCE", "authMechanismProperties"},
		{"mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test,TOKEN_RESOURCE:x", "TOKEN_RESOURCE requires", "authMechanismProperties"},
	}
	for _, tt := range tests {
		_, err := specParse(tt.uri)
		if err == nil {
			t.Errorf("%s: no error, want %q", tt.uri, tt.msg)
			continue
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: error %q, want %q", tt.uri, err, tt.msg)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %T is not an *Error", tt.uri, err)
		} else if e.Option != tt.option {
			t.Errorf("%s: Error.Option = %q, want %q", tt.uri, e.Option, tt.option)
		}
		if !strings.HasPrefix(err.Error(), "connstring: ") {
			t.Errorf("%s: error %q lacks the package prefix", tt.uri, err)
		}
	}
}

func TestParseHosts(t *testing.T) {
	tests := []struct {
		uri   string
		hosts []string
	}{
		{"mongodb://LocalHost", []string{"localhost:27017"}},
		{"mongodb://a,b:1,[FE80::1%25Eth0]:2", []string{"a:27017", "b:1", "[fe80::1%Eth0]:2"}},
		{"mongodb://h%2Dx:27017", []string{"h-x:27017"}},
		{"mongodb://b%C3%BCcher.example.com", []string{"bücher.example.com:27017"}},
		{"mongodb://%2Ftmp%2FA.sock,rel%2Fb.sock/db", []string{"/tmp/A.sock", "rel/b.sock"}},
		{"mongodb://h:00027", []string{"h:27"}},
	}
	for _, tt := range tests {
		cs := mustParse(t, tt.uri)
		if !reflect.DeepEqual(cs.Hosts, tt.hosts) {
			t.Errorf("%s: hosts %q, want %q", tt.uri, cs.Hosts, tt.hosts)
		}
	}
}

func TestTLSEnabled(t *testing.T) {
	tests := []struct {
		uri  string
		want bool
	}{
		{"mongodb://h", false},
		{"mongodb://h/?tls=true", true},
		{"mongodb://h/?ssl=true", true},
		{"mongodb://h/?tls=false&tlsCAFile=ca.pem", false},
		{"mongodb://h/?tlsCAFile=ca.pem", true},
		{"mongodb://h/?tlsInsecure=false", true},
		{"mongodb://h/?tlsCertificateKeyFilePassword=x", true},
		{"mongodb://h/?tls=invalid", false},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.uri).TLSEnabled(); got != tt.want {
			t.Errorf("%s: TLSEnabled = %v, want %v", tt.uri, got, tt.want)
		}
	}
}

func TestResolvedAuthSource(t *testing.T) {
	tests := []struct {
		uri  string
		want string
	}{
		{"mongodb://h/db", ""},
		{"mongodb://h/db?authSource=x", ""},
		{"mongodb://u:p@h", "admin"},
		{"mongodb://u:p@h/db", "db"},
		{"mongodb://u:p@h/db?authSource=other", "other"},
		{"mongodb://u:p@h/?authMechanism=SCRAM-SHA-1", "admin"},
		{"mongodb://u:p@h/?authMechanism=PLAIN", "$external"},
		{"mongodb://u:p@h/db?authMechanism=PLAIN", "db"},
		{"mongodb://h/db?authMechanism=MONGODB-X509", "$external"},
		{"mongodb://u@h/db?authMechanism=GSSAPI", "$external"},
		{"mongodb://h/db?authMechanism=MONGODB-AWS", "$external"},
	}
	for _, tt := range tests {
		cs, err := specParse(tt.uri)
		if err != nil {
			t.Fatalf("%s: %v", tt.uri, err)
		}
		if got := cs.ResolvedAuthSource(); got != tt.want {
			t.Errorf("%s: ResolvedAuthSource = %q, want %q", tt.uri, got, tt.want)
		}
	}
}

// TestUnsupportedMechanisms: the specification-level parse accepts every
// mechanism of the specification, Parse refuses those mongopool does not
// implement, naming them.
func TestUnsupportedMechanisms(t *testing.T) {
	for _, uri := range []string{
		"mongodb://user%40EXAMPLE.COM:secret@localhost/?authMechanism=GSSAPI",
		"mongodb://localhost/?authMechanism=MONGODB-AWS",
		"mongodb://ak:sk@localhost/?authMechanism=mongodb-aws",
		"mongodb://localhost/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test",
	} {
		if _, err := specParse(uri); err != nil {
			t.Errorf("specParse(%q): %v", uri, err)
		}
		cs, err := Parse(uri)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want an error", uri, cs)
			continue
		}
		if !errors.Is(err, ErrUnsupportedAuthMechanism) {
			t.Errorf("Parse(%q): %v does not wrap ErrUnsupportedAuthMechanism", uri, err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Option != "authMechanism" {
			t.Errorf("Parse(%q): %#v, want an *Error of option authMechanism", uri, err)
		}
		mech, _ := canonicalMechanism(uri[strings.Index(uri, "authMechanism=")+len("authMechanism=") : strings.IndexAny(uri+"&", "&")])
		if !strings.Contains(err.Error(), mech) || !strings.Contains(err.Error(), "not supported by mongopool") {
			t.Errorf("Parse(%q): error %q does not name %s as unsupported", uri, err, mech)
		}
	}
	for _, uri := range []string{
		"mongodb://u:p@localhost/?authMechanism=SCRAM-SHA-1",
		"mongodb://u:p@localhost/?authMechanism=SCRAM-SHA-256",
		"mongodb://u:p@localhost/?authMechanism=PLAIN",
		"mongodb://localhost/?authMechanism=MONGODB-X509",
		"mongodb://u:p@localhost",
	} {
		if _, err := Parse(uri); err != nil {
			t.Errorf("Parse(%q): %v", uri, err)
		}
	}
}
