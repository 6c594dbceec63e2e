package mongotest_test

import (
	"crypto/tls"
	"testing"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// saslReply is the reply of saslStart and saslContinue.
type saslReply struct {
	ConversationID int32   `bson:"conversationId"`
	Done           bool    `bson:"done"`
	Payload        []byte  `bson:"payload"`
	OK             float64 `bson:"ok"`
}

func decodeSASL(t *testing.T, reply bson.Raw) saslReply {
	t.Helper()
	var s saslReply
	if err := bson.Unmarshal(reply, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// saslStartDoc is a saslStart for mech with payload.
func saslStartDoc(mech string, payload []byte, skipEmpty bool) []bson.E {
	d := []bson.E{{Key: "saslStart", Value: 1}, {Key: "mechanism", Value: mech}, {Key: "payload", Value: bson.Binary{Data: payload}}}
	if skipEmpty {
		d = append(d, bson.E{Key: "options", Value: bson.D{{Key: "skipEmptyExchange", Value: true}}})
	}
	return d
}

// saslContinueDoc is a saslContinue with payload.
func saslContinueDoc(id int32, payload []byte) []bson.E {
	return []bson.E{{Key: "saslContinue", Value: 1}, {Key: "conversationId", Value: id}, {Key: "payload", Value: bson.Binary{Data: payload}}}
}

// TestSCRAMConversation runs SCRAM conversations by hand, with and without
// skipEmptyExchange, and checks that authentication gates the commands.
func TestSCRAMConversation(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("admin", "user", "pencil"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mech      string
		hash      scram.HashGeneratorFcn
		password  string
		skipEmpty bool
	}{
		{"SCRAM-SHA-1", scram.SHA1, mongoDigest("user", "pencil"), false},
		{"SCRAM-SHA-1", scram.SHA1, mongoDigest("user", "pencil"), true},
		{"SCRAM-SHA-256", scram.SHA256, "pencil", false},
		{"SCRAM-SHA-256", scram.SHA256, "pencil", true},
	} {
		r := dialRaw(t, srv)
		find := cmd("x", bson.E{Key: "find", Value: "c"})
		checkError(t, r.run(find), 13, "Unauthorized")
		checkOK(t, r.run(cmd("admin", bson.E{Key: "ping", Value: 1})))
		checkOK(t, r.run(cmd("admin", bson.E{Key: "buildInfo", Value: 1})))
		checkError(t, r.run(cmd("admin", bson.E{Key: "nope", Value: 1})), 59, "CommandNotFound")

		client, err := tc.hash.NewClientUnprepped("user", tc.password, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := client.NewConversation()
		first, _ := conv.Step("")
		s := decodeSASL(t, r.run(cmd("admin", saslStartDoc(tc.mech, []byte(first), tc.skipEmpty)...)))
		if s.OK != 1 || s.Done || s.ConversationID == 0 {
			t.Fatalf("%s saslStart: %+v", tc.mech, s)
		}
		final, err := conv.Step(string(s.Payload))
		if err != nil {
			t.Fatalf("%s client final: %v", tc.mech, err)
		}
		s = decodeSASL(t, r.run(cmd("admin", saslContinueDoc(s.ConversationID, []byte(final))...)))
		if s.OK != 1 || s.Done != tc.skipEmpty {
			t.Fatalf("%s saslContinue (skipEmptyExchange %v): %+v", tc.mech, tc.skipEmpty, s)
		}
		if _, err := conv.Step(string(s.Payload)); err != nil || !conv.Valid() {
			t.Fatalf("%s: the server's signature does not verify: %v", tc.mech, err)
		}
		if !tc.skipEmpty {
			checkError(t, r.run(find), 13, "Unauthorized") // not yet
			s = decodeSASL(t, r.run(cmd("admin", saslContinueDoc(s.ConversationID, nil)...)))
			if s.OK != 1 || !s.Done || len(s.Payload) != 0 {
				t.Fatalf("%s empty exchange: %+v", tc.mech, s)
			}
		}
		checkOK(t, r.run(find))
	}
	if st := srv.Stats(); st.Authentications["SCRAM-SHA-1"] != 2 || st.Authentications["SCRAM-SHA-256"] != 2 {
		t.Errorf("authentications %v", st.Authentications)
	}
}

// mongoDigest is the SCRAM-SHA-1 password of MongoDB, computed
// independently of the server: hex(md5(user:mongo:password)).
func mongoDigest(user, password string) string {
	return md5Hex(user + ":mongo:" + password)
}

// TestSpeculativeSCRAM checks the shape of a speculative SCRAM reply in
// hello (saslStart's reply without ok) and finishes the conversation.
func TestSpeculativeSCRAM(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("app", "user", "pencil"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, srv)
	client, _ := scram.SHA256.NewClient("user", "pencil", "")
	conv := client.NewConversation()
	first, _ := conv.Step("")
	spec := append(saslStartDoc("SCRAM-SHA-256", []byte(first), true), bson.E{Key: "db", Value: "app"})
	reply := r.run(cmd("admin", bson.E{Key: "hello", Value: 1}, bson.E{Key: "speculativeAuthenticate", Value: bson.D(spec)}))
	checkOK(t, reply)
	doc, ok := reply.Lookup("speculativeAuthenticate").DocumentOK()
	if !ok {
		t.Fatalf("hello %s has no speculativeAuthenticate", reply)
	}
	if _, err := doc.LookupErr("ok"); err == nil {
		t.Errorf("speculativeAuthenticate %s has an ok field", doc)
	}
	s := decodeSASL(t, doc)
	if s.Done || s.ConversationID == 0 || len(s.Payload) == 0 {
		t.Fatalf("speculativeAuthenticate %+v", s)
	}
	final, err := conv.Step(string(s.Payload))
	if err != nil {
		t.Fatal(err)
	}
	s = decodeSASL(t, r.run(cmd("app", saslContinueDoc(s.ConversationID, []byte(final))...)))
	if s.OK != 1 || !s.Done {
		t.Fatalf("saslContinue: %+v", s)
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "find", Value: "c"})))

	// A speculative attempt for an unknown user is left out, not an error.
	r2 := dialRaw(t, srv)
	spec[len(spec)-1].Value = "admin"
	reply = r2.run(cmd("admin", bson.E{Key: "hello", Value: 1}, bson.E{Key: "speculativeAuthenticate", Value: bson.D(spec)}))
	checkOK(t, reply)
	if _, err := reply.LookupErr("speculativeAuthenticate"); err == nil {
		t.Errorf("hello %s answers a speculative attempt for an unknown user", reply)
	}
}

// TestPLAIN checks both forms of the PLAIN payload, with and without the
// authorization identity, and a wrong password.
func TestPLAIN(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("$external", "user", "pencil", mongotest.MechPLAIN); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		payload string
		ok      bool
	}{
		{"\x00user\x00pencil", true},
		{"user\x00user\x00pencil", true},
		{"\x00user\x00crayon", false},
		{"other\x00user\x00pencil", false},
		{"user\x00pencil", false},
	} {
		r := dialRaw(t, srv)
		reply := r.run(cmd("$external", saslStartDoc("PLAIN", []byte(tc.payload), false)...))
		if !tc.ok {
			checkError(t, reply, 18, "AuthenticationFailed")
			continue
		}
		if s := decodeSASL(t, reply); s.OK != 1 || !s.Done {
			t.Errorf("PLAIN %q: %s", tc.payload, reply)
		}
		checkOK(t, r.run(cmd("x", bson.E{Key: "count", Value: "c"})))
	}
}

// TestX509Authenticate runs the authenticate command over TLS with a
// client certificate.
func TestX509Authenticate(t *testing.T) {
	pki := testpki.New(t)
	srv := start(t, mongotest.WithTLS(pki.ServerTLS()))
	srv.AddX509User(pki.ClientSubject)
	cert, err := tls.LoadX509KeyPair(pki.ClientFile, pki.ClientFile)
	if err != nil {
		t.Fatal(err)
	}
	r := dialRawTLS(t, srv, &tls.Config{RootCAs: pki.CAPool, Certificates: []tls.Certificate{cert}})
	auth := []bson.E{{Key: "authenticate", Value: 1}, {Key: "mechanism", Value: "MONGODB-X509"}}
	checkError(t, r.run(cmd("admin", auth...)), 18, "AuthenticationFailed")
	checkError(t, r.run(cmd("$external", append(auth, bson.E{Key: "user", Value: "CN=someone else"})...)), 18, "AuthenticationFailed")
	reply := r.run(cmd("$external", append(auth, bson.E{Key: "user", Value: pki.ClientSubject})...))
	checkOK(t, reply)
	if u, _ := reply.Lookup("user").StringValueOK(); u != pki.ClientSubject {
		t.Errorf("authenticate: %s, want user %q", reply, pki.ClientSubject)
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "find", Value: "c"})))

	// Without a certificate: no subject to authenticate.
	r2 := dialRawTLS(t, srv, &tls.Config{RootCAs: pki.CAPool})
	checkError(t, r2.run(cmd("$external", auth...)), 18, "AuthenticationFailed")
	checkError(t, r2.run(cmd("x", bson.E{Key: "find", Value: "c"})), 13, "Unauthorized")
}
