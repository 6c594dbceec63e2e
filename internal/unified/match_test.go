package unified

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ej parses an extended JSON value, wrapped in a document to allow scalars.
func ej(t *testing.T, s string) bson.RawValue {
	t.Helper()
	var d bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"v": `+s+`}`), false, &d); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return d.Lookup("v")
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		exp, act string
		root     bool
		want     string // "" for a match, else a substring of the error
	}{
		// Root-level documents may have extra keys, nested ones may not.
		{`{"x": 1}`, `{"x": 1, "y": 1}`, true, ""},
		{`{"x": 1}`, `{"x": 1, "y": 1}`, false, `unexpected key "y"`},
		{`{"x": {"y": 1}}`, `{"x": {"y": 1, "z": 1}}`, true, `unexpected key "z"`},
		{`{"x": 1, "y": 1}`, `{"x": 1}`, true, "y: missing"},
		{`{"x": 1, "y": 2}`, `{"y": 2, "x": 1}`, false, ""},
		// Flexible numbers.
		{`{"x": 1}`, `{"x": 1.0}`, true, ""},
		{`{"x": 1}`, `{"x": {"$numberLong": "1"}}`, true, ""},
		{`{"x": 1}`, `{"x": 1.5}`, true, "x: got"},
		{`{"x": "1"}`, `{"x": 1}`, true, "want string"},
		{`{"x": {"$numberDecimal": "1"}}`, `{"x": 1}`, true, "want decimal"},
		// Arrays: same length, elements nested (not root).
		{`[1, 2]`, `[1, 2]`, false, ""},
		{`[1, 2, 3]`, `[1, 2, 3, 4]`, false, "4 elements"},
		{`[{"x": 1}]`, `[{"x": 1, "y": 1}]`, false, `unexpected key "y"`},
		// $$exists.
		{`{"x": {"$$exists": true}}`, `{"x": null}`, true, ""},
		{`{"x": {"$$exists": true}}`, `{}`, true, "want it to exist"},
		{`{"x": {"$$exists": false}}`, `{}`, false, ""},
		{`{"x": {"$$exists": false}}`, `{"x": 1}`, true, "want it absent"},
		// $$type.
		{`{"x": {"$$type": "string"}}`, `{"x": "a"}`, true, ""},
		{`{"x": {"$$type": ["int", "long"]}}`, `{"x": {"$numberLong": "5"}}`, true, ""},
		{`{"x": {"$$type": ["int", "long"]}}`, `{"x": 5.5}`, true, "want type"},
		{`{"x": {"$$type": "number"}}`, `{"x": 5.5}`, true, ""},
		{`{"x": {"$$type": "string"}}`, `{}`, true, "missing"},
		{`{"x": {"$$type": "array"}}`, `{"x": [1, "a"]}`, true, ""},
		{`{"x": {"$$type": "strng"}}`, `{"x": "a"}`, true, `unknown type name "strng"`},
		// $$unsetOrMatches.
		{`{"x": {"$$unsetOrMatches": 2}}`, `{}`, false, ""},
		{`{"x": {"$$unsetOrMatches": 2}}`, `{"x": 2}`, false, ""},
		{`{"x": {"$$unsetOrMatches": 2}}`, `{"x": 3}`, false, "x: got 3"},
		{`{"$$unsetOrMatches": {"a": 1}}`, `{"a": 1, "b": 2}`, true, ""},
		{`{"$$unsetOrMatches": {"a": 1}}`, `{"a": 1, "b": 2}`, false, `unexpected key "b"`},
		// $$lte.
		{`{"x": {"$$lte": 5}}`, `{"x": 5.0}`, true, ""},
		{`{"x": {"$$lte": 5}}`, `{"x": 5.1}`, true, "want <= 5"},
		// $$matchAsDocument and $$matchAsRoot.
		{`{"x": {"$$matchAsDocument": {"a": 1}}}`, `{"x": "{\"a\": 1}"}`, true, ""},
		{`{"x": {"$$matchAsDocument": {"a": 1}}}`, `{"x": "{\"a\": 1, \"b\": 2}"}`, true, `unexpected key "b"`},
		{`{"x": {"$$matchAsDocument": {"$$matchAsRoot": {"a": 1}}}}`, `{"x": "{\"a\": 1, \"b\": 2}"}`, true, ""},
		{`{"x": {"$$matchAsRoot": {"a": 1}}}`, `{"x": {"a": 1, "b": 2}}`, false, ""},
		// $$matchesHexBytes.
		{`{"x": {"$$matchesHexBytes": "6162"}}`, `{"x": "ab"}`, true, ""},
		{`{"x": {"$$matchesHexBytes": "6163"}}`, `{"x": "ab"}`, true, "got bytes"},
		{`{"x": {"$$matchesHexBytes": "6"}}`, `{"x": "ab"}`, true, "malformed hex"},
		// Operators the runner cannot evaluate are errors.
		{`{"x": {"$$sessionLsid": "session0"}}`, `{"x": 1}`, true, `no entities to find the session "session0" in`},
		{`{"x": {"$$nope": 1}}`, `{"x": 1}`, true, "unknown special operator $$nope"},
		// A document with two keys, one starting with $$, is no operator.
		{`{"x": {"$$exists": true, "y": 1}}`, `{"x": {"$$exists": true, "y": 1}}`, true, ""},
	} {
		err := Match(ej(t, tc.exp), ej(t, tc.act), tc.root)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Match(%s, %s, root=%v): %v, want a match", tc.exp, tc.act, tc.root, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Match(%s, %s, root=%v): %v, want an error with %q", tc.exp, tc.act, tc.root, err, tc.want)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want Version
		bad  bool
	}{
		{"4", Version{4, 0, 0}, false},
		{"4.0", Version{4, 0, 0}, false},
		{"4.0.10", Version{4, 0, 10}, false},
		{"", Version{}, true},
		{"4.x", Version{}, true},
		{"1.2.3.4", Version{}, true},
		{"-1", Version{}, true},
		{"4..1", Version{}, true},
	} {
		got, err := ParseVersion(tc.s)
		if (err != nil) != tc.bad || !tc.bad && got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v", tc.s, got, err)
		}
	}
	if (Version{4, 0, 10}).Compare(Version{4, 0, 9}) != 1 || (Version{3, 6, 0}).Compare(Version{4, 0, 10}) != -1 || (Version{4, 2, 0}).Compare(Version{4, 2, 0}) != 0 {
		t.Error("Compare does not compare numerically")
	}
}

func TestSatisfied(t *testing.T) {
	s := &Server{Version: Version{7, 0, 0}, Topology: "single", Auth: true, AuthMechanisms: []string{"SCRAM-SHA-256"}}
	for _, tc := range []struct {
		reqs string
		met  bool
		err  string
	}{
		{`[{"minServerVersion": "4.0"}]`, true, ""},
		{`[{"minServerVersion": "7.0.1"}]`, false, ""},
		{`[{"maxServerVersion": "6.99"}]`, false, ""},
		{`[{"maxServerVersion": "7.0"}]`, true, ""},
		{`[{"topologies": ["single", "replicaset"]}]`, true, ""},
		{`[{"topologies": ["sharded", "sharded-replicaset", "load-balanced"]}]`, false, ""},
		{`[{"auth": true, "minServerVersion": "4.0"}]`, true, ""},
		{`[{"auth": false}]`, false, ""},
		{`[{"auth": false}, {"topologies": ["single"]}]`, true, ""}, // any of them
		{`[{"serverless": "forbid"}]`, true, ""},
		{`[{"serverless": "allow"}]`, true, ""},
		{`[{"serverless": "require"}]`, false, ""},
		{`[{"authMechanism": "scram-sha-256"}]`, true, ""},
		{`[{"authMechanism": "MONGODB-AWS"}]`, false, ""},
		{`[{"csfle": false}]`, true, ""},
		{`[{"csfle": true}]`, false, ""},
		{`[{"csfle": {"minLibmongocryptVersion": "1.0"}}]`, false, ""},
		// What cannot be evaluated is an error, even next to a met one.
		{`[]`, false, "empty"},
		{`[{"topologies": ["single"], "noSuchField": 1}]`, false, `unknown field "noSuchField"`},
		{`[{"minServerVersion": "four"}]`, false, "malformed version"},
		{`[{"minServerVersion": 4}]`, false, "want a string"},
		{`[{"topologies": ["mesh"]}]`, false, `unknown topology "mesh"`},
		{`[{"serverless": "sometimes"}]`, false, "serverless"},
		{`[{"serverParameters": {"x": 1}}]`, false, "cannot ask"},
	} {
		v := ej(t, tc.reqs)
		vals, _ := v.Array().Values()
		met, why, err := s.Satisfied(t.Context(), "reqs", vals)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.reqs, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.reqs, err)
		case tc.err == "" && met != tc.met:
			t.Errorf("%s: met %v (%s), want %v", tc.reqs, met, why, tc.met)
		case tc.err == "" && !met && why == "":
			t.Errorf("%s: not met, and no reason given", tc.reqs)
		}
	}
}

func TestSchemaVersion(t *testing.T) {
	for _, v := range []string{"1.0", "1.13", SchemaVersion} {
		if err := checkSchemaVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"1.29", "2.0", "0.9", "x"} {
		if err := checkSchemaVersion(v); err == nil {
			t.Errorf("%s accepted", v)
		}
	}
}

func TestClientOptions(t *testing.T) {
	opts := func(s string) bson.Raw { return ej(t, s).Document() }
	q, skips, err := clientOptions(opts(`{"retryReads": false, "appname": "my app", "heartbeatFrequencyMS": 10000,
		"authMechanismProperties": {"A": "b:c"}, "readPreferenceTags": ["dc:ny,rack:1", ""]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "retryReads=false&appname=my%20app&heartbeatFrequencyMS=10000&authMechanismProperties=A:b%3Ac&readPreferenceTags=dc:ny,rack:1&readPreferenceTags=:"
	if got := strings.Join(q, "&"); got != want || skips != nil {
		t.Fatalf("clientOptions = %q, %v; want %q, no skip", got, skips, want)
	}
	if _, _, err := clientOptions(opts(`{"retryWrites": "sometimes"}`)); err == nil {
		t.Fatal("retryWrites=sometimes accepted")
	}
	q, skips, err = clientOptions(opts(`{"waitQueueSize": 10, "maxPoolSize": 1, "WAITQUEUEMULTIPLE": 2, "w": "majority"}`))
	if err != nil || strings.Join(q, "&") != "maxPoolSize=1&w=majority" || len(skips) != 2 ||
		!strings.Contains(skips[0], "uriOptions.waitQueueSize") || !strings.Contains(skips[1], "uriOptions.WAITQUEUEMULTIPLE") {
		t.Fatalf("clientOptions with options to skip = %q, %q, %v", q, skips, err)
	}
	q, skips, err = clientOptions(opts(`{"serverMonitoringMode": "stream", "serverSelectionTimeoutMS": 10, "directConnection": true, "replicaSet": "rs"}`))
	if err != nil || strings.Join(q, "&") != "serverMonitoringMode=stream&serverSelectionTimeoutMS=10&directConnection=true&replicaSet=rs" || skips != nil {
		t.Fatalf("the options of the topology: %q, %q, %v", q, skips, err)
	}
	for in, msg := range map[string]string{
		`{"tlsDisableOCSPEndpointCheck": true}`:        "do not apply",
		`{"appname": {"$$placeholder": 1}}`:            "no value to put in its place",
		`{"retryReads": "maybe"}`:                      "not a boolean",
		`{"retryWrites": "maybe"}`:                     "not a boolean",
		`{"maxPoolSize": [1]}`:                         "not a value",
		`{"authMechanismProperties": {"A": {"b": 1}}}`: "not a value",
		`{"readPreferenceTags": [1]}`:                  "want a string",
	} {
		if _, _, err := clientOptions(opts(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("clientOptions(%s): %v, want an error with %q", in, err, msg)
		}
	}
}

// The deployment's URI has the runner's credentials (unless its servers
// need none), its hosts and options; a client's options replace the
// deployment's of the same name, and directConnection keeps the first
// host, without replicaSet.
func TestDeploymentURI(t *testing.T) {
	d := &deployment{auth: true, hosts: []string{"127.0.0.1:1", "127.0.0.1:2"}, options: []string{"replicaSet=rs", "loadBalanced=true"}}
	creds := "mongodb://" + escape(runnerUser) + ":" + escape(runnerPassword) + "@"
	for _, c := range []struct {
		opts []string
		want string
	}{
		{nil, creds + "127.0.0.1:1,127.0.0.1:2/?replicaSet=rs&loadBalanced=true"},
		{[]string{"appname=x", "LOADBALANCED=false"}, creds + "127.0.0.1:1,127.0.0.1:2/?replicaSet=rs&appname=x&LOADBALANCED=false"},
		{[]string{"directConnection=true"}, creds + "127.0.0.1:1/?loadBalanced=true&directConnection=true"},
	} {
		if got := d.uri(c.opts); got != c.want {
			t.Errorf("uri(%q) = %q, want %q", c.opts, got, c.want)
		}
	}
	if got := (&deployment{auth: true, hosts: []string{"h:1"}}).uri(nil); got != creds+"h:1/" {
		t.Errorf("uri without options = %q", got)
	}
	if got := (&deployment{hosts: []string{"h:1"}}).uri(nil); got != "mongodb://h:1/" {
		t.Errorf("uri without authentication = %q", got)
	}
}
