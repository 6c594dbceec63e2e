package mongotest_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// userURI returns srv's URI with credentials and the query options.
func userURI(srv *mongotest.Server, user, password, query string) string {
	u := url.URL{Scheme: "mongodb", User: url.UserPassword(user, password), Host: srv.Addr(), Path: "/", RawQuery: query}
	return u.String()
}

// TestDriverAuth authenticates the official driver with each mechanism,
// explicit and negotiated, and checks on the server which conversation
// actually ran.
func TestDriverAuth(t *testing.T) {
	for _, tc := range []struct {
		name      string
		db, user  string
		mechs     []string // the user's mechanisms
		query     string   // URI options
		wantMech  string
		saslStart bool // a saslStart (not only a speculative one) is expected
	}{
		{"SCRAM-SHA-1 explicit", "admin", "alice", nil, "authMechanism=SCRAM-SHA-1", mongotest.MechSCRAMSHA1, false},
		{"SCRAM-SHA-256 explicit", "admin", "alice", nil, "authMechanism=SCRAM-SHA-256", mongotest.MechSCRAMSHA256, false},
		{"negotiated SCRAM-SHA-256", "admin", "alice", nil, "", mongotest.MechSCRAMSHA256, false},
		// The speculative SCRAM-SHA-256 attempt fails quietly; the driver
		// then falls back to what saslSupportedMechs offers.
		{"negotiated SCRAM-SHA-1", "admin", "old", []string{mongotest.MechSCRAMSHA1}, "", mongotest.MechSCRAMSHA1, true},
		{"authSource", "app", "bob", nil, "authSource=app", mongotest.MechSCRAMSHA256, false},
		{"SASLprep password", "admin", "carol", nil, "authMechanism=SCRAM-SHA-256", mongotest.MechSCRAMSHA256, false},
		{"PLAIN", "$external", "ldap", []string{mongotest.MechPLAIN}, "authMechanism=PLAIN&authSource=$external", mongotest.MechPLAIN, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t)
			password := "pencil"
			if tc.user == "carol" {
				password = "I\u00ADX" // SASLprep maps the soft hyphen to nothing
			}
			if err := srv.AddUser(tc.db, tc.user, password, tc.mechs...); err != nil {
				t.Fatalf("AddUser: %v", err)
			}
			client := connect(t, userURI(srv, tc.user, password, tc.query))
			c := ctx(t)
			coll := client.Database("x").Collection("c")
			if _, err := coll.InsertOne(c, bson.D{{Key: "a", Value: 1}}); err != nil {
				t.Fatalf("InsertOne: %v", err)
			}
			if n, err := coll.EstimatedDocumentCount(c); err != nil || n != 1 {
				t.Fatalf("EstimatedDocumentCount = %d, %v", n, err)
			}
			st := srv.Stats()
			if st.Authentications[tc.wantMech] == 0 || len(st.Authentications) != 1 {
				t.Errorf("authentications = %v, want only %s", st.Authentications, tc.wantMech)
			}
			if len(st.AuthFailures) != 0 {
				t.Errorf("auth failures = %v", st.AuthFailures)
			}
			if got := st.Commands["saslStart"] > 0; got != tc.saslStart {
				t.Errorf("saslStart sent %d times; want a speculative conversation only: %v", st.Commands["saslStart"], !tc.saslStart)
			}
		})
	}
}

// TestDriverAuthFailures checks that a wrong password, an unknown user and
// a mechanism the user lacks fail the way MongoDB fails them, and that an
// unauthenticated client can ping but not read.
func TestDriverAuthFailures(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("admin", "alice", "pencil", mongotest.MechSCRAMSHA256); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, user, password, query, want string }{
		{"wrong password SCRAM-SHA-256", "alice", "crayon", "authMechanism=SCRAM-SHA-256", "(AuthenticationFailed) Authentication failed."},
		{"wrong password negotiated", "alice", "crayon", "", "(AuthenticationFailed) Authentication failed."},
		{"unknown user", "mallory", "pencil", "authMechanism=SCRAM-SHA-1", "(AuthenticationFailed) Authentication failed."},
		{"mechanism not allowed", "alice", "pencil", "authMechanism=SCRAM-SHA-1", "(MechanismUnavailable)"},
		{"PLAIN not allowed", "alice", "pencil", "authMechanism=PLAIN&authSource=admin", "(AuthenticationFailed) Authentication failed."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := connect(t, userURI(srv, tc.user, tc.password, tc.query))
			err := client.Ping(ctx(t), nil)
			if err == nil {
				t.Fatal("Ping succeeded")
			}
			if !strings.Contains(err.Error(), "auth error") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Ping error %q; want an auth error with %q", err, tc.want)
			}
		})
	}
	if st := srv.Stats(); len(st.Authentications) != 0 || len(st.AuthFailures) == 0 {
		t.Errorf("stats: authentications %v, failures %v", st.Authentications, st.AuthFailures)
	}

	client := connect(t, srv.URI())
	c := ctx(t)
	if err := client.Ping(c, nil); err != nil {
		t.Fatalf("unauthenticated Ping: %v", err)
	}
	err := client.Database("x").Collection("c").FindOne(c, bson.D{}).Err()
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(13) || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("unauthenticated find: %v; want Unauthorized (13)", err)
	}
}
