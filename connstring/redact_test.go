package connstring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// The secrets of these tests, and the pieces of them that must not show
// either.
const (
	testPassword = "S3cr3t-Pw0rd"
	testKeyPass  = "K3yF1le-Pw0rd"
	testProxyPW  = "Pr0xy-Pw0rd"
	testToken    = "AwsT0ken-Secret"
)

var secretPieces = []string{"S3cr3t", "Pw0rd", "K3yF1le", "Pr0xy", "AwsT0ken"}

// leaks returns the secret pieces found in s.
func leaks(s string) []string {
	var found []string
	for _, p := range secretPieces {
		if strings.Contains(s, p) {
			found = append(found, p)
		}
	}
	return found
}

// renderings returns every way a ConnString may be shown.
func renderings(cs *ConnString) map[string]string {
	out := map[string]string{
		"String()":   cs.String(),
		"Redacted()": cs.Redacted(),
		"GoString()": cs.GoString(),
		"%v":         fmt.Sprintf("%v", cs),
		"%+v":        fmt.Sprintf("%+v", cs),
		"%#v":        fmt.Sprintf("%#v", cs),
		"%s":         fmt.Sprintf("%s", cs),
		"%q":         fmt.Sprintf("%q", cs),
		"%d":         fmt.Sprintf("%d", cs),
		"%x":         fmt.Sprintf("%x", cs),
		"value %v":   fmt.Sprintf("%v", *cs),
		"value %+v":  fmt.Sprintf("%+v", *cs),
		"value %#v":  fmt.Sprintf("%#v", *cs),
		"Sprint":     fmt.Sprint(cs, *cs),
		"Sprintln":   fmt.Sprintln(cs, *cs),
		"nested %+v": fmt.Sprintf("%+v", struct {
			A ConnString
			B *ConnString
			C []*ConnString
		}{*cs, cs, []*ConnString{cs}}),
		"nested %#v": fmt.Sprintf("%#v", struct{ A ConnString }{*cs}),
		"warnings":   strings.Join(cs.Warnings, "\n"),
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("msg", "cs", cs, "value", *cs)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("msg", "cs", cs, "value", *cs)
	out["slog text"] = text.String()
	out["slog json"] = js.String()
	if data, err := json.Marshal(cs); err == nil {
		out["json"] = string(data)
	}
	return out
}

func checkNoLeak(t *testing.T, uri string, cs *ConnString, err error) {
	t.Helper()
	if err != nil {
		if l := leaks(err.Error()); l != nil {
			t.Errorf("%s: error %q shows %q", uri, err, l)
		}
		if l := leaks(fmt.Sprintf("%+v %#v", err, err)); l != nil {
			t.Errorf("%s: error formatted with %%+v/%%#v shows %q", uri, l)
		}
		return
	}
	for how, s := range renderings(cs) {
		if l := leaks(s); l != nil {
			t.Errorf("%s: %s = %q shows %q", uri, how, s, l)
		}
	}
}

// redaction is a connection string and what Redacted must make of it.
type redaction struct{ uri, redacted string }

// checkRedactions parses each connection string and checks that Redacted
// returns what is expected and, with leakCheck, that no rendering shows a
// secret or a piece of one.
func checkRedactions(t *testing.T, leakCheck bool, tests []redaction) {
	t.Helper()
	for _, tt := range tests {
		cs, err := specParse(tt.uri)
		if err != nil {
			t.Errorf("%s: %v", tt.uri, err)
			continue
		}
		if got := cs.Redacted(); got != tt.redacted {
			t.Errorf("Redacted() = %q, want %q", got, tt.redacted)
		}
		if leakCheck {
			checkNoLeak(t, tt.uri, cs, nil)
		}
	}
}

// TestRedactionSuccess: a parsed connection string never shows its secrets,
// and shows "xxxxx" where they were.
func TestRedactionSuccess(t *testing.T) {
	checkRedactions(t, true, []redaction{
		{"mongodb://alice:" + testPassword + "@h/db?w=1",
			"mongodb://alice:xxxxx@h/db?w=1"},
		{"mongodb://alice:S3cr3t%2FPw0rd%40x@h",
			"mongodb://alice:xxxxx@h"},
		{"mongodb://alice:@h", "mongodb://alice:xxxxx@h"},
		{"mongodb://h/?tls=true&tlsCertificateKeyFilePassword=" + testKeyPass + "&proxyHost=p&proxyUsername=u&proxyPassword=" + testProxyPW + "&appname=a",
			"mongodb://h/?tls=true&tlsCertificateKeyFilePassword=xxxxx&proxyHost=p&proxyUsername=u&proxyPassword=xxxxx&appname=a"},
		// Invalid and repeated secret options warn without the value.
		{"mongodb://h/?tlsCertificateKeyFilePassword=" + testKeyPass + "&tlsCertificateKeyFilePassword=Pw0rd2",
			"mongodb://h/?tlsCertificateKeyFilePassword=xxxxx&tlsCertificateKeyFilePassword=xxxxx"},
		// A password that was not percent-encoded, landing in the options:
		// warnings quote nothing, and the dumps show no field.
		{"mongodb://alice:12345?S3cr3t=Pw0rd@h", "mongodb://alice:xxxxx@h"},
		{"mongodb://alice:12345?appname=S3cr3tPw0rd@h", "mongodb://alice:xxxxx@h"},
	})
	// The secret pieces are in a non-secret option on purpose: checkNoLeak,
	// which looks for pieces of the password too, does not apply, and the
	// exact Redacted shows the password itself is gone.
	checkRedactions(t, false, []redaction{
		{"mongodb://alice:" + testPassword + "@h/?replicaSet=my@rs&maxPoolSize=S3cr3t",
			"mongodb://alice:xxxxx@h/?replicaSet=my@rs&maxPoolSize=S3cr3t"},
	})

	// AWS_SESSION_TOKEN (specification-level parse: Parse refuses MONGODB-AWS).
	uri := "mongodb://ak:" + testPassword + "@h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:" + testToken
	cs, err := specParse(uri)
	if err != nil {
		t.Fatal(err)
	}
	checkNoLeak(t, uri, cs, nil)
	if got, want := cs.Redacted(), "mongodb://ak:xxxxx@h/?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx"; got != want {
		t.Errorf("Redacted() = %q, want %q", got, want)
	}
	// An invalid one warns without its value.
	uri = "mongodb://ak:" + testPassword + "@h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:" + testToken + ",bad"
	cs, err = specParse(uri)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Warnings) == 0 {
		t.Errorf("%s: no warning", uri)
	}
	checkNoLeak(t, uri, cs, nil)
}

// TestRedactionErrors: every error path, with a password in the connection
// string, shows neither the password nor a piece of it.
func TestRedactionErrors(t *testing.T) {
	const ui = "alice:" + testPassword + "@"
	uris := []string{
		// Hosts.
		"mongodb://" + ui + "h:0", "mongodb://" + ui + "h:x", "mongodb://" + ui + "h::1", "mongodb://" + ui,
		"mongodb://" + ui + "h,", "mongodb://" + ui + "[::1", "mongodb://" + ui + "[zz]", "mongodb://" + ui + "[::1]x",
		"mongodb://" + ui + "a%2Fb", "mongodb://" + ui + "h%zz", "mongodb://" + ui + "h%20x",
		// Database.
		"mongodb://" + ui + "h/a$b", "mongodb://" + ui + "h/a%zz", "mongodb://" + ui + "h/a@b",
		// Options.
		"mongodb://" + ui + "h/?w", "mongodb://" + ui + "h/?=1", "mongodb://" + ui + "h/?a%zz=1",
		"mongodb://" + ui + "h/?w=%zz", "mongodb://" + ui + "h/?authSource=",
		"mongodb://" + ui + "h/?authMechanism=FOO", "mongodb://" + ui + "h/?appname=" + strings.Repeat("x", 200),
		"mongodb://" + ui + "h/?proxyPort=1", "mongodb://" + ui + "h/?proxyHost=p&proxyPassword=" + testProxyPW,
		"mongodb://" + ui + "h/?proxyHost=p&proxyUsername=u&proxyPassword=" + testProxyPW + "&proxyPassword=" + testProxyPW,
		"mongodb://" + ui + "h/?tlsInsecure=true&tlsAllowInvalidHostnames=true", "mongodb://" + ui + "h/?tls=true&ssl=false",
		"mongodb://" + ui + "a,b/?directConnection=true", "mongodb://" + ui + "a,b/?loadBalanced=true",
		"mongodb://" + ui + "a/?loadBalanced=true&replicaSet=r", "mongodb://" + ui + "h/?srvMaxHosts=1",
		"mongodb://" + ui + "h/?w=0&journal=true", "mongodb://" + ui + "h/?minPoolSize=9&maxPoolSize=1",
		"mongodb://" + ui + "h/?readPreferenceTags=a:b", "mongodb://" + ui + "h/?maxStalenessSeconds=100",
		// Credentials.
		"mongodb://" + ui + "h/?authMechanism=MONGODB-X509", "mongodb://" + ui + "h/?authMechanismProperties=A:b",
		"mongodb://" + ui + "h/?authMechanism=GSSAPI&authSource=" + testPassword,
		"mongodb://" + ui + "h/?authMechanism=MONGODB-OIDC", "mongodb://:" + testPassword + "@h",
		// Mechanisms mongopool does not support (Parse).
		"mongodb://" + ui + "h/?authMechanism=GSSAPI", "mongodb://" + ui + "h/?authMechanism=MONGODB-AWS",
		// User information that is not percent-encoded.
		"mongodb://alice:S3cr3t:Pw0rd@h", "mongodb://alice:S3cr3t@Pw0rd@h", "mongodb://alice:S3cr3t%zzPw0rd@h",
		"mongodb://alice:S3cr3t Pw0rd@h", "mongodb://alice:S3cr3t/Pw0rd@h", "mongodb://alice:S3cr3t?Pw0rd@h",
		"mongodb://alice:S3cr3t?Pw0rd=1@h", "mongodb://alice:12345/S3cr3tPw0rd@h", "mongodb://alice:S3cr3t#Pw0rd@h",
		"mongodb://alice:S3cr3t/Pw0rd@h/?w=1", "mongodb://alice:1/S3cr3t?Pw0rd@h", "mongodb://alice:S3cr3t,Pw0rd@h",
		"mongodb://alice:12345?maxPoolSize=S3cr3t@h&tls=x", "mongodb://alice:12345?w=Pw0rd&S3cr3t@h",
		// Schemes.
		"mongo://" + ui + "h", "alice:" + testPassword + "@h", "mongodb:/" + ui + "h", "x://alice:S3cr3t/Pw0rd@h",
		"mongodb+srv://" + ui + "a.b.c:1", "mongodb+srv://" + ui + "a.b.c,d.b.c",
		"mongodb+srv://" + ui + "a.b.c/?directConnection=true",
	}
	for _, uri := range uris {
		cs, err := ParseWithResolver(context.Background(), uri, noDNS{})
		if err == nil && cs.srvHost {
			t.Errorf("%s: no error", uri)
		}
		checkNoLeak(t, uri, cs, err)
		cs, err = specParse(uri)
		checkNoLeak(t, uri, cs, err)
	}

	// SRV errors.
	srvTests := []*fakeResolver{
		{srvErr: errors.New("lookup failed")},
		{srv: map[string][]*net.SRV{"_mongodb._tcp.a.b.c": srvRecords("evil.example.com")}},
		{srv: map[string][]*net.SRV{"_mongodb._tcp.a.b.c": srvRecords("x.b.c")}, txt: map[string][]string{"a.b.c": {"tls=true"}}},
		{srv: map[string][]*net.SRV{"_mongodb._tcp.a.b.c": srvRecords("x.b.c")}, txt: map[string][]string{"a.b.c": {"a=1", "b=2"}}},
		{srv: map[string][]*net.SRV{"_mongodb._tcp.a.b.c": srvRecords("x.b.c", "y.b.c")}, txt: map[string][]string{"a.b.c": {"loadBalanced=true"}}},
	}
	// An SRV host that holds the password: the resolver's error, which names
	// it, is left out.
	uri := "mongodb+srv://u:" + testPassword + ".b.c@" + testPassword + ".b.c/"
	cs, err := ParseWithResolver(context.Background(), uri, &fakeResolver{srvErr: &net.DNSError{Err: "timeout", Name: testPassword}})
	if err == nil {
		t.Errorf("%s: no error", uri)
	}
	checkNoLeak(t, uri, cs, err)

	for i, r := range srvTests {
		uri := "mongodb+srv://" + ui + "a.b.c/"
		cs, err := ParseWithResolver(context.Background(), uri, r)
		if err == nil {
			t.Errorf("SRV test %d: no error", i)
		}
		checkNoLeak(t, uri, cs, err)
	}
}

// TestRedactionMisplacedSecrets: a value that may be a secret put where the
// parser does not expect one is never shown either: the value of an unknown
// (or misspelled) option, and authMechanismProperties with a property other
// than the known public ones. Values known not to be secret still show.
func TestRedactionMisplacedSecrets(t *testing.T) {
	checkRedactions(t, true, []redaction{
		{"mongodb://h/?password=" + testPassword, "mongodb://h/?password=xxxxx"},
		{"mongodb://alice@h/?pasword=" + testPassword + "&appname=app",
			"mongodb://alice@h/?pasword=xxxxx&appname=app"},
		{"mongodb://h/?tls=true&tlsCertificateKeyFilePasword=" + testKeyPass + "&proxyHost=p&proxyPasswd=" + testProxyPW,
			"mongodb://h/?tls=true&tlsCertificateKeyFilePasword=xxxxx&proxyHost=p&proxyPasswd=xxxxx"},
		{"mongodb://h/?tlsCertificateKeyFilePassword=" + testKeyPass + "&tlsCertificateKeyFilePassword=" + testKeyPass + "2",
			"mongodb://h/?tlsCertificateKeyFilePassword=xxxxx&tlsCertificateKeyFilePassword=xxxxx"},
		// An unknown option without a value, and one whose value is empty.
		{"mongodb://h/?pw=&w=1", "mongodb://h/?pw=&w=1"},
		// A misspelled AWS_SESSION_TOKEN, invalid (so ignored with a
		// warning) or valid.
		{"mongodb://ak:" + testPassword + "@h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESION_TOKEN:" + testToken + ",bad",
			"mongodb://ak:xxxxx@h/?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx"},
		{"mongodb://ak:" + testPassword + "@h/?authMechanism=MONGODB-AWS&authMechanismProperties=" + testToken,
			"mongodb://ak:xxxxx@h/?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx"},
		{"mongodb://ak:" + testPassword + "@h/?authMechanism=MONGODB-AWS&authMechanismProperties=aws_session_token:" + testToken,
			"mongodb://ak:xxxxx@h/?authMechanism=MONGODB-AWS&authMechanismProperties=xxxxx"},
		// Public properties show.
		{"mongodb://u@h/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:other,CANONICALIZE_HOST_NAME:true",
			"mongodb://u@h/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:other,CANONICALIZE_HOST_NAME:true"},
	})
	// A misspelled token name that makes the parse fail names the property,
	// not its value.
	for _, uri := range []string{
		"mongodb://ak:" + testPassword + "@h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESION_TOKEN:" + testToken,
		"mongodb://h/?authMechanismProperties=AWS_SESSION_TOKEN:" + testToken,
	} {
		cs, err := specParse(uri)
		if err == nil {
			t.Errorf("%s: no error", uri)
		}
		checkNoLeak(t, uri, cs, err)
	}
}
