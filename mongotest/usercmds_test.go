package mongotest_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/internal/testpki"
	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// createUserCmd is {createUser: name, pwd, roles} on db, with more fields.
func createUserCmd(db, name, pwd string, roles bson.A, more ...bson.E) bson.D {
	fields := []bson.E{{Key: "createUser", Value: name}}
	if pwd != "" {
		fields = append(fields, bson.E{Key: "pwd", Value: pwd})
	}
	return cmd(db, append(append(fields, bson.E{Key: "roles", Value: roles}), more...)...)
}

// canAuth reports whether the official driver authenticates to srv as
// user of source with password and the mechanism (negotiated if empty).
func canAuth(t *testing.T, srv *mongotest.Server, source, user, password, mech string) bool {
	t.Helper()
	cred := options.Credential{AuthSource: source, Username: user, Password: password, AuthMechanism: mech}
	client := connectWith(t, options.Client().ApplyURI(srv.URI()).SetAuth(cred).SetServerSelectionTimeout(testTimeout))
	return client.Ping(ctx(t), nil) == nil
}

// Users made with createUser authenticate the official driver: their
// SCRAM credentials are derived as mongod derives them
// (https://www.mongodb.com/docs/manual/core/security-scram/): SCRAM-SHA-1
// from the MD5 digest of "user:mongo:password" (or the digest the client
// gave, with digestPassword: false), SCRAM-SHA-256 from the SASLprepped
// password, both by default.
func TestCreateUserAuthenticates(t *testing.T) {
	// The first user, created on a server that has none, needs no
	// authentication.
	srv := start(t)
	r := dialRaw(t, srv)
	checkOK(t, r.run(createUserCmd("admin", "alice", "secret", bson.A{"root"})))
	client := connectWith(t, options.Client().ApplyURI(srv.URI()).SetAuth(options.Credential{Username: "alice", Password: "secret"}))
	for _, c := range []bson.D{
		createUserCmd("test", "sha1", "pw", bson.A{"readWrite"}, bson.E{Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}),
		// U+2168 (ROMAN NUMERAL NINE) is "IX" once SASLprepped, as the
		// auth specification's SASLprep prose test has it.
		createUserCmd("admin", "nine", "\u2168", bson.A{"read"}),
		createUserCmd("admin", "bob", md5Hex("bob:mongo:pw"), bson.A{},
			bson.E{Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}, bson.E{Key: "digestPassword", Value: false}),
	} {
		db := c[len(c)-1].Value.(string)
		if err := client.Database(db).RunCommand(ctx(t), c[:len(c)-1]).Err(); err != nil {
			t.Fatalf("%v: %v", c, err)
		}
	}

	for _, tc := range []struct {
		source, user, password, mech string
		ok                           bool
	}{
		{"admin", "alice", "secret", "SCRAM-SHA-1", true},
		{"admin", "alice", "secret", "SCRAM-SHA-256", true},
		{"admin", "alice", "secret", "", true},
		{"admin", "alice", "wrong", "", false},
		{"test", "sha1", "pw", "SCRAM-SHA-1", true},
		{"test", "sha1", "pw", "", true}, // negotiated from saslSupportedMechs
		{"test", "sha1", "pw", "SCRAM-SHA-256", false},
		{"admin", "nine", "IX", "SCRAM-SHA-256", true},
		{"admin", "nine", "IX", "SCRAM-SHA-1", false},
		{"admin", "nine", "\u2168", "SCRAM-SHA-1", true},
		{"admin", "bob", "pw", "SCRAM-SHA-1", true},
	} {
		if got := canAuth(t, srv, tc.source, tc.user, tc.password, tc.mech); got != tc.ok {
			t.Errorf("%s@%s with %q and %q: authenticated %v, want %v", tc.user, tc.source, tc.password, tc.mech, got, tc.ok)
		}
	}
	// Once a user exists, createUser needs an authenticated connection.
	checkError(t, dialRaw(t, srv).run(createUserCmd("admin", "eve", "x", bson.A{})), 13, "Unauthorized")
}

// createUser's refusals, as mongod's CmdCreateUser
// (user_management_commands.cpp) and its IDL make them.
func TestCreateUserRefuses(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	for _, tc := range []struct {
		name string
		cmd  bson.D
		code int32
		msg  string
	}{
		{"no roles", cmd("admin", bson.E{Key: "createUser", Value: "u"}, bson.E{Key: "pwd", Value: "p"}), 40414,
			"BSON field 'createUser.roles' is missing but a required field"},
		{"no password", createUserCmd("admin", "u", "", bson.A{}), 2,
			"Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db"},
		{"a password on $external", createUserCmd("$external", "u", "p", bson.A{}), 2,
			"Cannot set the password for users defined on the '$external' database"},
		{"the local database", createUserCmd("local", "u", "p", bson.A{}), 2, "Cannot create users in the local database"},
		{"an empty name", createUserCmd("admin", "", "p", bson.A{}), 2, "User document needs 'user' field to be non-empty"},
		{"a NUL in the name", createUserCmd("admin", "a\x00b", "p", bson.A{}), 2, "Username cannot contain NULL characters"},
		{"a role that does not exist", createUserCmd("admin", "u", "p", bson.A{"nosuch"}), 31, "Could not find role: nosuch@admin"},
		{"a cluster role elsewhere than on admin", createUserCmd("test", "u", "p", bson.A{"clusterAdmin"}), 31,
			"Could not find role: clusterAdmin@test"},
		{"a role of another database", createUserCmd("test", "u", "p", bson.A{bson.D{{Key: "role", Value: "root"}, {Key: "db", Value: "x"}}}), 31,
			"Could not find role: root@x"},
		{"no mechanisms", createUserCmd("admin", "u", "p", bson.A{}, bson.E{Key: "mechanisms", Value: bson.A{}}), 2,
			"mechanisms field must not be empty"},
		{"an unknown mechanism", createUserCmd("admin", "u", "p", bson.A{}, bson.E{Key: "mechanisms", Value: bson.A{"MD5"}}), 2,
			"Unknown auth mechanism 'MD5'"},
		{"a digested password for SCRAM-SHA-256", createUserCmd("admin", "u", "p", bson.A{}, bson.E{Key: "digestPassword", Value: false}), 2,
			"Use of SCRAM-SHA-256 requires undigested passwords"},
		{"an unknown field", createUserCmd("admin", "u", "p", bson.A{}, bson.E{Key: "pasword", Value: "p"}), 40415,
			"BSON field 'createUser.pasword' is an unknown field."},
		{"a name not a string", cmd("admin", bson.E{Key: "createUser", Value: 1}, bson.E{Key: "pwd", Value: "p"}, bson.E{Key: "roles", Value: bson.A{}}), 14, ""},
		{"a role not a string or document", createUserCmd("admin", "u", "p", bson.A{1}), 14, ""},
	} {
		name := map[int32]string{2: "BadValue", 13: "Unauthorized", 14: "TypeMismatch", 31: "RoleNotFound", 40414: "Location40414", 40415: "IDLUnknownField"}[tc.code]
		if msg := checkError(t, r.run(tc.cmd), tc.code, name); tc.msg != "" && msg != tc.msg {
			t.Errorf("%s: errmsg %q, want %q", tc.name, msg, tc.msg)
		}
	}
	// Nothing was created: the server still takes unauthenticated commands.
	checkOK(t, r.run(cmd("test", bson.E{Key: "count", Value: "c"})))

	// A second user of the same name and database: 51003, which mongod
	// does not name (user_management_commands.cpp, insertPrivilegeDocument).
	_, run := adminClient(t)
	for i, want := range []int32{0, 51003} {
		_, err := run("admin", bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: "p"},
			{Key: "roles", Value: bson.A{"readWriteAnyDatabase", bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "x"}}}}})
		var ce mongo.CommandError
		switch {
		case want == 0 && err != nil:
			t.Fatalf("createUser %d: %v", i, err)
		case want != 0 && (!errors.As(err, &ce) || ce.Code != want || ce.Name != "Location51003" || ce.Message != `User "u@admin" already exists`):
			t.Errorf("createUser %d: %v, want 51003", i, err)
		}
	}
}

// userInfo is a user of usersInfo's reply.
type userInfo struct {
	ID         string         `bson:"_id"`
	UserID     bson.Binary    `bson:"userId"`
	User       string         `bson:"user"`
	DB         string         `bson:"db"`
	Roles      []bson.M       `bson:"roles"`
	Mechanisms []string       `bson:"mechanisms"`
	CustomData bson.M         `bson:"customData"`
	Creds      map[string]any `bson:"credentials"`
}

// adminClient starts a server with the user root (password pw, on admin)
// and returns it and a function that runs a command on a database with
// the official driver, authenticated as root.
func adminClient(t *testing.T, opts ...mongotest.Option) (*mongotest.Server, cmdRunner) {
	t.Helper()
	srv := start(t, opts...)
	if err := srv.AddUser("admin", "root", "pw"); err != nil {
		t.Fatal(err)
	}
	client := connectWith(t, options.Client().ApplyURI(srv.URI()).SetAuth(options.Credential{Username: "root", Password: "pw"}))
	return srv, func(db string, cmd bson.D) (bson.Raw, error) {
		return client.Database(db).RunCommand(ctx(t), cmd).Raw()
	}
}

// cmdRunner runs a command on a database.
type cmdRunner func(db string, cmd bson.D) (bson.Raw, error)

// users runs the usersInfo command cmd on db and returns its users.
func (run cmdRunner) users(t *testing.T, db string, cmd bson.D) []userInfo {
	t.Helper()
	reply, err := run(db, cmd)
	return usersOf(t, reply, err)
}

// usersOf decodes a usersInfo reply.
func usersOf(t *testing.T, reply bson.Raw, err error) []userInfo {
	t.Helper()
	if err != nil {
		t.Fatalf("usersInfo: %v", err)
	}
	var got struct {
		Users []userInfo `bson:"users"`
	}
	if err := bson.Unmarshal(reply, &got); err != nil {
		t.Fatal(err)
	}
	return got.Users
}

// names returns the _id ("db.user") of users, in order.
func names(users []userInfo) []string {
	out := []string{}
	for _, u := range users {
		out = append(out, u.ID)
	}
	return out
}

// usersInfo lists users as mongod's does (sorted by user then db, each
// {_id: "db.user", userId, user, db, customData, roles, mechanisms},
// credentials on request), for db.getUsers() and db.getUser() of mongosh
// (https://www.mongodb.com/docs/manual/reference/command/usersInfo/).
func TestUsersInfo(t *testing.T) {
	_, run := adminClient(t)
	for _, u := range []struct {
		db  string
		cmd bson.D
	}{
		{"admin", bson.D{{Key: "createUser", Value: "alice"}, {Key: "pwd", Value: "a"}, {Key: "roles", Value: bson.A{"root"}},
			{Key: "customData", Value: bson.D{{Key: "team", Value: "x"}}}}},
		{"test", bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "b"},
			{Key: "roles", Value: bson.A{"readWrite", bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "other"}}}}}},
		{"test", bson.D{{Key: "createUser", Value: "alice"}, {Key: "pwd", Value: "a"}, {Key: "roles", Value: bson.A{}},
			{Key: "mechanisms", Value: bson.A{"SCRAM-SHA-256", "SCRAM-SHA-1"}}}},
		{"test", bson.D{{Key: "createUser", Value: "carl"}, {Key: "pwd", Value: "c"}, {Key: "roles", Value: bson.A{}},
			{Key: "mechanisms", Value: bson.A{"SCRAM-SHA-256"}}}},
	} {
		if _, err := run(u.db, u.cmd); err != nil {
			t.Fatalf("%v: %v", u.cmd, err)
		}
	}
	users := run.users(t, "test", bson.D{{Key: "usersInfo", Value: 1}})
	if got := names(users); !slices.Equal(got, []string{"test.alice", "test.bob", "test.carl"}) {
		t.Fatalf("usersInfo: 1 on test: %v", got)
	}
	bob := users[1]
	if bob.User != "bob" || bob.DB != "test" || bob.UserID.Subtype != 4 || len(bob.UserID.Data) != 16 || bob.Creds != nil {
		t.Errorf("bob: %+v", bob)
	}
	if len(bob.Roles) != 2 || bob.Roles[0]["role"] != "readWrite" || bob.Roles[0]["db"] != "test" ||
		bob.Roles[1]["role"] != "read" || bob.Roles[1]["db"] != "other" {
		t.Errorf("bob's roles %v", bob.Roles)
	}
	// The credentials in mongod's order, whatever order createUser gave.
	if !slices.Equal(bob.Mechanisms, []string{"SCRAM-SHA-1", "SCRAM-SHA-256"}) || !slices.Equal(users[0].Mechanisms, bob.Mechanisms) ||
		!slices.Equal(users[2].Mechanisms, []string{"SCRAM-SHA-256"}) {
		t.Errorf("mechanisms %v %v %v", users[0].Mechanisms, bob.Mechanisms, users[2].Mechanisms)
	}

	// The field order of mongod's reply.
	reply, err := run("admin", bson.D{{Key: "usersInfo", Value: "alice"}})
	aliceDoc := reply.Lookup("users", "0").Document()
	var keys []string
	elems, _ := aliceDoc.Elements()
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	if err != nil || strings.Join(keys, ",") != "_id,userId,user,db,customData,roles,mechanisms" {
		t.Errorf("alice: %s (%v)", aliceDoc, err)
	}
	alice := usersOf(t, reply, err)[0]
	if alice.ID != "admin.alice" || alice.CustomData["team"] != "x" || len(alice.Roles) != 1 || alice.Roles[0]["role"] != "root" {
		t.Errorf("alice@admin: %+v", alice)
	}

	for _, tc := range []struct {
		name string
		db   string
		cmd  bson.D
		want []string
	}{
		{"a user of another database", "admin", bson.D{{Key: "usersInfo", Value: bson.D{{Key: "user", Value: "bob"}, {Key: "db", Value: "test"}}}}, []string{"test.bob"}},
		{"a list", "test", bson.D{{Key: "usersInfo", Value: bson.A{"carl", bson.D{{Key: "user", Value: "alice"}, {Key: "db", Value: "admin"}}, "nobody"}}},
			[]string{"admin.alice", "test.carl"}},
		{"all databases", "admin", bson.D{{Key: "usersInfo", Value: bson.D{{Key: "forAllDBs", Value: true}}}},
			[]string{"admin.alice", "test.alice", "test.bob", "test.carl", "admin.root"}},
		{"a filter", "test", bson.D{{Key: "usersInfo", Value: 1}, {Key: "filter", Value: bson.D{{Key: "roles.role", Value: "readWrite"}}}}, []string{"test.bob"}},
		{"a user that does not exist", "test", bson.D{{Key: "usersInfo", Value: "nobody"}}, []string{}},
	} {
		if got := names(run.users(t, tc.db, tc.cmd)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}

	// showCustomData: false hides it; showCredentials shows mongod's
	// credentials: iterationCount (10000 and 15000 by default), base64
	// salt, storedKey and serverKey.
	if u := run.users(t, "admin", bson.D{{Key: "usersInfo", Value: "alice"}, {Key: "showCustomData", Value: false}})[0]; u.CustomData != nil {
		t.Errorf("showCustomData: false: %+v", u)
	}
	reply, err = run("admin", bson.D{{Key: "usersInfo", Value: "alice"}, {Key: "showCredentials", Value: true}})
	if err != nil {
		t.Fatal(err)
	}
	for mech, iters := range map[string]int32{"SCRAM-SHA-1": 10000, "SCRAM-SHA-256": 15000} {
		cred := reply.Lookup("users", "0", "credentials", mech).Document()
		if n, _ := cred.Lookup("iterationCount").Int32OK(); n != iters {
			t.Errorf("%s credentials %s: iterationCount %d, want %d", mech, cred, n, iters)
		}
		for _, k := range []string{"salt", "storedKey", "serverKey"} {
			if v, ok := cred.Lookup(k).StringValueOK(); !ok || v == "" {
				t.Errorf("%s credentials %s: no %s", mech, cred, k)
			} else if _, err := base64.StdEncoding.DecodeString(v); err != nil {
				t.Errorf("%s credentials: %s is not base64: %v", mech, k, err)
			}
		}
	}
	// Privileges are not implemented: refused, not left out.
	if _, err := run("admin", bson.D{{Key: "usersInfo", Value: "alice"}, {Key: "showPrivileges", Value: true}}); err == nil {
		t.Error("showPrivileges: the test server has no privileges to show, and should refuse")
	}
}

// updateUser, dropUser and dropAllUsersFromDatabase change the users
// authentication goes by, with mongod's errors: 11 UserNotFound for a user
// that does not exist.
func TestUpdateAndDropUser(t *testing.T) {
	srv, run := adminClient(t)
	mustRun := func(db string, cmd bson.D) bson.Raw {
		t.Helper()
		reply, err := run(db, cmd)
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return reply
	}
	mustRun("test", bson.D{{Key: "createUser", Value: "bob"}, {Key: "pwd", Value: "old"}, {Key: "roles", Value: bson.A{"read"}}})
	mustRun("test", bson.D{{Key: "updateUser", Value: "bob"}, {Key: "pwd", Value: "new"}, {Key: "roles", Value: bson.A{"readWrite"}},
		{Key: "customData", Value: bson.D{{Key: "n", Value: 1}}}})
	if canAuth(t, srv, "test", "bob", "old", "") || !canAuth(t, srv, "test", "bob", "new", "SCRAM-SHA-1") {
		t.Error("after updateUser: the old password works, or the new one does not")
	}
	u := run.users(t, "test", bson.D{{Key: "usersInfo", Value: "bob"}})[0]
	if len(u.Roles) != 1 || u.Roles[0]["role"] != "readWrite" || u.CustomData["n"] != int32(1) {
		t.Errorf("bob after updateUser: %+v", u)
	}
	// mechanisms without pwd keeps only those credentials.
	mustRun("test", bson.D{{Key: "updateUser", Value: "bob"}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-256"}}})
	if canAuth(t, srv, "test", "bob", "new", "SCRAM-SHA-1") || !canAuth(t, srv, "test", "bob", "new", "SCRAM-SHA-256") {
		t.Error("after updateUser with mechanisms [SCRAM-SHA-256]: SCRAM-SHA-1 works, or SCRAM-SHA-256 does not")
	}
	for _, tc := range []struct {
		name string
		cmd  bson.D
		code int32
		msg  string
	}{
		{"nothing to update", bson.D{{Key: "updateUser", Value: "bob"}}, 2, "Must specify at least one field to update in updateUser"},
		{"a mechanism it has not", bson.D{{Key: "updateUser", Value: "bob"}, {Key: "mechanisms", Value: bson.A{"SCRAM-SHA-1"}}}, 2,
			"mechanisms field must be a subset of previously set mechanisms"},
		{"a user that does not exist", bson.D{{Key: "updateUser", Value: "nobody"}, {Key: "pwd", Value: "x"}}, 11, "User nobody@test not found"},
		{"dropUser of a user that does not exist", bson.D{{Key: "dropUser", Value: "nobody"}}, 11, "User 'nobody@test' not found"},
	} {
		_, err := run("test", tc.cmd)
		var ce mongo.CommandError
		if !errors.As(err, &ce) || ce.Code != tc.code || ce.Message != tc.msg {
			t.Errorf("%s: %v, want code %d %q", tc.name, err, tc.code, tc.msg)
		}
	}
	mustRun("test", bson.D{{Key: "dropUser", Value: "bob"}})
	if canAuth(t, srv, "test", "bob", "new", "") {
		t.Error("a dropped user authenticated")
	}
	for _, name := range []string{"a", "b"} {
		mustRun("x", bson.D{{Key: "createUser", Value: name}, {Key: "pwd", Value: "p"}, {Key: "roles", Value: bson.A{}}})
	}
	reply := mustRun("x", bson.D{{Key: "dropAllUsersFromDatabase", Value: 1}})
	if n, _ := reply.Lookup("n").AsInt64OK(); n != 2 {
		t.Errorf("dropAllUsersFromDatabase %s, want n: 2", reply)
	}
	if got := names(run.users(t, "admin", bson.D{{Key: "usersInfo", Value: bson.D{{Key: "forAllDBs", Value: true}}}})); !slices.Equal(got, []string{"admin.root"}) {
		t.Errorf("users left: %v", got)
	}
}

// createUser on $external, without a password, makes a user of the
// subject of a client certificate: MONGODB-X509 authenticates it, as
// mongod's (https://www.mongodb.com/docs/manual/tutorial/configure-x509-client-authentication/).
func TestCreateExternalUserIsX509(t *testing.T) {
	pki := testpki.New(t)
	srv := start(t, mongotest.WithTLS(pki.ServerTLS()))
	tlsURI := srv.URI() + "?tls=true&tlsCAFile=" + url.QueryEscape(pki.CAFile)
	plain := connect(t, tlsURI)
	c := ctx(t)
	if err := plain.Database("$external").RunCommand(c, bson.D{{Key: "createUser", Value: pki.ClientSubject},
		{Key: "roles", Value: bson.A{bson.D{{Key: "role", Value: "readWrite"}, {Key: "db", Value: "x"}}}}}).Err(); err != nil {
		t.Fatal(err)
	}
	client := connect(t, tlsURI+"&tlsCertificateKeyFile="+url.QueryEscape(pki.ClientFile)+"&authMechanism=MONGODB-X509")
	reply, err := client.Database("$external").RunCommand(c, bson.D{{Key: "usersInfo", Value: 1}}).Raw()
	users := usersOf(t, reply, err)
	if len(users) != 1 || users[0].User != pki.ClientSubject || !slices.Equal(users[0].Mechanisms, []string{"external"}) {
		t.Errorf("users of $external %s", reply)
	}
}

// Concurrent createUser of one user: exactly one succeeds, the others get
// 51003, and the user authenticates.
func TestCreateUserConcurrently(t *testing.T) {
	srv, run := adminClient(t)
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := run("test", bson.D{{Key: "createUser", Value: "u"}, {Key: "pwd", Value: fmt.Sprint("p", i)}, {Key: "roles", Value: bson.A{}}})
			errs <- err
		}()
	}
	ok := 0
	for range n {
		var ce mongo.CommandError
		switch err := <-errs; {
		case err == nil:
			ok++
		case !errors.As(err, &ce) || ce.Code != 51003:
			t.Errorf("createUser: %v, want success or 51003", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d createUser succeeded, want 1", ok)
	}
	authenticated := 0
	for i := range n {
		if canAuth(t, srv, "test", "u", fmt.Sprint("p", i), "") {
			authenticated++
		}
	}
	if authenticated != 1 {
		t.Errorf("%d passwords authenticate, want the one createUser took", authenticated)
	}
}
