package connstring

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
)

// maxMessage bounds the length of one error or warning in these tests: a
// message quotes at most maxQuoted bytes of a value, and a few of them.
const maxMessage = 600

// repeatTo repeats unit until the result is n bytes long at most.
func repeatTo(unit string, n int) string { return strings.Repeat(unit, n/len(unit)) }

// TestErrorsBounded: an error that quotes a long part of the connection
// string quotes its beginning only, and says how long it was; a connection
// string over the limit is refused at once.
func TestErrorsBounded(t *testing.T) {
	long := strings.Repeat("a", 60_000)
	tests := []struct {
		uri  string
		want string // a substring of the error
	}{
		{"mongodb://" + strings.Repeat("h", 1<<20), fmt.Sprintf("is %d bytes long; the limit is %d", 10+1<<20, maxURILength)},
		{"mongodb://h/?x=" + strings.Repeat("1", 1<<20), "the limit is"},
		{"mongodb://" + long + "^", "(60001 bytes)"},
		{"mongodb://" + long + ":1", "the limit is 253"},
		{"mongodb://h:" + long, "(60002 bytes)"},
		{"mongodb://[" + long + "]", "(60002 bytes)"},
		{"mongodb://h/" + long + "$", "(60001 bytes)"},
		{"mongodb://h/?authMechanism=" + long, "(60000 bytes)"},
		{"mongodb://h/?" + long, "(60000 bytes)"},
		{"mongodb://u@h/?authMechanism=GSSAPI&authSource=" + long, "(60000 bytes)"},
		{"mongodb://%2F" + long + ".sock", "the limit is 255"},
		{"mongodb://[fe80::1%25" + long + "]", "the limit is 253"},
		{"mongodb+srv://" + long + ".b.c", "the limit is 253"},
		{"mongodb+srv://" + strings.Repeat("a.", 30_000) + "b", "the limit is 253"},
	}
	for _, tt := range tests {
		_, err := specParse(tt.uri)
		if err == nil {
			t.Errorf("%.40s...: no error", tt.uri)
			continue
		}
		if msg := err.Error(); len(msg) > maxMessage || !strings.Contains(msg, tt.want) {
			t.Errorf("%.40s...: error of %d bytes %.300q, want at most %d bytes with %q", tt.uri, len(msg), msg, maxMessage, tt.want)
		}
	}
	// The TXT record of a mongodb+srv host is quoted the same way.
	r := &fakeResolver{srv: map[string][]*net.SRV{"_mongodb._tcp.a.b.c": srvRecords("x.b.c")},
		txt: map[string][]string{"a.b.c": {"replicaSet=" + long + "&x"}}}
	_, err := ParseWithResolver(context.Background(), "mongodb+srv://a.b.c/", r)
	if err == nil || len(err.Error()) > maxMessage || !strings.Contains(err.Error(), "(60013 bytes)") {
		t.Errorf("TXT record error %.300q", err)
	}
}

// TestWarningsBounded: identical warnings are given once, with their count;
// at most maxWarnings distinct ones are kept, then one tells how many more
// there were; each quotes a bounded part of its value.
func TestWarningsBounded(t *testing.T) {
	// 16,000 times the same unknown option: one warning.
	uri := "mongodb://h/?" + repeatTo("x=1&", 64_000)
	cs, err := specParse(uri)
	if err != nil {
		t.Fatal(err)
	}
	if want := `connstring: unknown option "x" ignored (16000 times)`; len(cs.Warnings) != 1 || cs.Warnings[0] != want {
		t.Errorf("warnings %q, want [%q]", cs.Warnings, want)
	}
	// The same with a known option given an invalid value, and repeated.
	cs, err = specParse("mongodb://h/?" + repeatTo("maxPoolSize=a&", 60_000))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cs.Warnings, "\n"); len(cs.Warnings) != 2 || !strings.Contains(got, "(4285 times)") ||
		!strings.Contains(got, "(4284 times)") {
		t.Errorf("warnings %q", cs.Warnings)
	}

	// 5,000 distinct unknown options: maxWarnings kept, and a summary.
	var b strings.Builder
	b.WriteString("mongodb://h/?")
	for i := range 5_000 {
		fmt.Fprintf(&b, "o%d=1&", i)
	}
	cs, err = specParse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Warnings) != maxWarnings+1 {
		t.Fatalf("%d warnings, want %d", len(cs.Warnings), maxWarnings+1)
	}
	if !strings.Contains(cs.Warnings[0], `"o0"`) || !strings.Contains(cs.Warnings[maxWarnings-1], fmt.Sprintf(`"o%d"`, maxWarnings-1)) {
		t.Errorf("the first warnings are not kept in order: %q", cs.Warnings)
	}
	if want := fmt.Sprintf("connstring: %d more warnings left out", 5_000-maxWarnings); !strings.HasPrefix(cs.Warnings[maxWarnings], want) {
		t.Errorf("last warning %q, want it to start with %q", cs.Warnings[maxWarnings], want)
	}

	// A secret option repeated still lets the other values show; more than
	// maxSecrets distinct secrets make every message withhold its values.
	cs, err = specParse("mongodb://h/?" + strings.Repeat("tlsCertificateKeyFilePassword=pw&", 2*maxSecrets) + "maxPoolSize=abc")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cs.Warnings, "\n"); !strings.Contains(got, `invalid value "abc"`) {
		t.Errorf("warnings %q, want the invalid value shown", cs.Warnings)
	}
	b.Reset()
	b.WriteString("mongodb://h/?")
	for i := range maxSecrets + 1 {
		fmt.Fprintf(&b, "tlsCertificateKeyFilePassword=pw%d&", i)
	}
	b.WriteString("maxPoolSize=abc")
	cs, err = specParse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cs.Warnings, "\n"); !strings.Contains(got, "invalid value <withheld>") {
		t.Errorf("warnings %q, want the invalid value withheld", cs.Warnings)
	}

	// A long unknown option name, long invalid values, a long compressor
	// name: each warning quotes the beginning and tells the length.
	long := strings.Repeat("b", 50_000)
	for _, uri := range []string{
		"mongodb://h/?" + long + "=1",
		"mongodb://h/?maxPoolSize=" + long,
		"mongodb://h/?compressors=zlib," + long,
		"mongodb://h/?readPreference=" + long,
	} {
		cs, err := specParse(uri)
		if err != nil {
			t.Fatalf("%.40s: %v", uri, err)
		}
		if len(cs.Warnings) != 1 || len(cs.Warnings[0]) > maxMessage || !strings.Contains(cs.Warnings[0], "(50000 bytes)") {
			t.Errorf("%.40s...: warnings %.300q", uri, cs.Warnings)
		}
	}
}

// hostileURIs are connection strings of the maximum length built to make a
// parser do more than linear work: many options, many secrets, many
// warnings, many hosts, long values.
func hostileURIs() map[string]string {
	n := maxURILength - 200
	var distinct strings.Builder
	distinct.WriteString("mongodb://h/?")
	for i := 0; distinct.Len() < n; i++ {
		fmt.Fprintf(&distinct, "o%d=1&", i)
	}
	var secrets strings.Builder
	secrets.WriteString("mongodb://u:pw@h/?")
	for i := 0; secrets.Len() < n; i++ {
		fmt.Fprintf(&secrets, "tlsCertificateKeyFilePassword=s%d&maxPoolSize=s%d&", i, i)
	}
	return map[string]string{
		"same unknown option":   "mongodb://h/?" + repeatTo("x=1&", n),
		"distinct options":      distinct.String(),
		"many secrets":          secrets.String(),
		"invalid values":        "mongodb://h/?" + repeatTo("maxPoolSize=abc&", n),
		"hosts":                 "mongodb://" + repeatTo("h:1,", n) + "h",
		"tags":                  "mongodb://h/?readPreference=nearest&readPreferenceTags=" + repeatTo("a:b,", n) + "a:b",
		"compressors":           "mongodb://h/?compressors=" + repeatTo("lz4,", n) + "zlib",
		"distinct compressors":  "mongodb://h/?compressors=" + strings.Replace(distinct.String()[13:], "&", ",", -1),
		"properties":            "mongodb://u@h/?authMechanism=GSSAPI&authMechanismProperties=" + repeatTo("SERVICE_NAME:a,", n) + "SERVICE_NAME:b",
		"percent-encoded":       "mongodb://" + repeatTo("%41", n) + ":1",
		"user information":      "mongodb://u:" + repeatTo("%41", n) + "@h",
		"suspect":               "mongodb://u:" + repeatTo("p/?", n) + "@h",
		"token":                 "mongodb://u:p@h/?authMechanism=MONGODB-AWS&" + repeatTo("authMechanismProperties=AWS_SESSION_TOKEN:t&", n),
		"empty values":          "mongodb://h/?" + repeatTo("appname=&", n),
		"ampersands":            "mongodb://h/?" + repeatTo("&", n),
		"long unknown name":     "mongodb://h/?" + repeatTo("y", n) + "=1",
		"long database":         "mongodb://h/" + repeatTo("d", n),
		"long host name":        "mongodb://" + repeatTo("h", n),
		"long socket":           "mongodb://%2F" + repeatTo("s", n) + ".sock",
		"repeated secret, warn": "mongodb://u:pw@h/?" + repeatTo("tlsCertificateKeyFilePassword=pw&maxPoolSize=pw&", n),
	}
}

// TestParseLinear: parsing a hostile connection string of the maximum
// length allocates at most a small multiple of its length, and the check
// of quoted values against the secrets scans at most a small multiple of
// it: the parse stays linear. (Memory and work counts, never time.)
func TestParseLinear(t *testing.T) {
	for name, uri := range hostileURIs() {
		if len(uri) > maxURILength {
			t.Fatalf("%s: %d bytes, over the limit", name, len(uri))
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p := new(parser)
		cs, err := p.run(context.Background(), uri, noDNS{}, false)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		if limit := uint64(128*len(uri) + 1<<20); allocated > limit {
			t.Errorf("%s: parsing %d bytes allocated %d bytes, more than %d", name, len(uri), allocated, limit)
		}
		if limit := 64 * len(uri); p.scanned > limit {
			t.Errorf("%s: the secret checks scanned %d bytes for a connection string of %d, more than %d", name, p.scanned, len(uri), limit)
		}
		var shown string
		if err != nil {
			shown = err.Error()
		} else {
			shown = strings.Join(cs.Warnings, "\n")
		}
		if len(shown) > (maxWarnings+1)*maxMessage {
			t.Errorf("%s: %d bytes of messages", name, len(shown))
		}
		t.Logf("%s: %d bytes, %d allocated, %d scanned, %d bytes of messages", name, len(uri), allocated, p.scanned, len(shown))
	}
	// Over the limit, nothing is parsed.
	uri := "mongodb://h/?" + repeatTo("x=1&", 16<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := specParse(uri)
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; err == nil || allocated > 64<<10 {
		t.Errorf("a connection string of %d bytes: %v, %d bytes allocated", len(uri), err, allocated)
	}
}
