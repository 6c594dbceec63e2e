package mongotest_test

import (
	"slices"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// dbEntry is a database of listDatabases's reply.
type dbEntry struct {
	Name       string `bson:"name"`
	SizeOnDisk *int64 `bson:"sizeOnDisk"`
	Empty      *bool  `bson:"empty"`
}

// listDatabases runs listDatabases with more fields on a new connection to
// srv.
func listDatabases(t *testing.T, srv *mongotest.Server, more ...bson.E) ([]dbEntry, bson.Raw) {
	t.Helper()
	reply := dialRaw(t, srv).run(adminCmd("listDatabases", 1, more...))
	checkOK(t, reply)
	var got struct {
		Databases []dbEntry `bson:"databases"`
	}
	if err := bson.Unmarshal(reply, &got); err != nil {
		t.Fatal(err)
	}
	return got.Databases, reply
}

func dbNames(dbs []dbEntry) []string {
	out := []string{}
	for _, d := range dbs {
		out = append(out, d.Name)
	}
	return out
}

// A mongod has the admin, config and local databases from its start, and
// listDatabases lists them, not empty, as mongosh's show dbs prints them
// on a fresh mongod 7.0 (admin 40 KiB, config 12 KiB, local 40 KiB), with
// the user's databases, sorted by name
// (https://www.mongodb.com/docs/manual/reference/command/listDatabases/).
func TestListDatabasesHasTheSystemDatabases(t *testing.T) {
	srv := start(t)
	dbs, reply := listDatabases(t, srv)
	want := map[string]int64{"admin": 40 << 10, "config": 12 << 10, "local": 40 << 10}
	if !slices.Equal(dbNames(dbs), []string{"admin", "config", "local"}) {
		t.Fatalf("a fresh server lists %s", reply)
	}
	var total int64
	for _, d := range dbs {
		if d.SizeOnDisk == nil || *d.SizeOnDisk != want[d.Name] || d.Empty == nil || *d.Empty {
			t.Errorf("database %s: %s", d.Name, reply)
		}
		total += *d.SizeOnDisk
	}
	if got, _ := reply.Lookup("totalSize").AsInt64OK(); got != total || reply.Lookup("totalSizeMb").Type == 0 {
		t.Errorf("totalSize %d, want %d; reply %s", got, total, reply)
	}

	// A user's database, and data in admin: sorted, admin larger.
	r := dialRaw(t, srv)
	checkOK(t, r.run(cmd("test", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}})))
	checkOK(t, r.run(cmd("admin", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}})))
	dbs, reply = listDatabases(t, srv)
	if !slices.Equal(dbNames(dbs), []string{"admin", "config", "local", "test"}) || *dbs[0].SizeOnDisk <= want["admin"] {
		t.Errorf("listDatabases %s", reply)
	}

	filter := func(e bson.E) []bson.E { return []bson.E{{Key: "filter", Value: bson.D{e}}} }
	for _, tc := range []struct {
		name string
		more []bson.E
		want []string
	}{
		{"nameOnly", []bson.E{{Key: "nameOnly", Value: true}}, []string{"admin", "config", "local", "test"}},
		{"a filter on the name", filter(bson.E{Key: "name", Value: bson.D{{Key: "$in", Value: bson.A{"local", "test"}}}}),
			[]string{"local", "test"}},
		{"a filter on the size", filter(bson.E{Key: "sizeOnDisk", Value: bson.D{{Key: "$lt", Value: 20 << 10}}}),
			[]string{"config", "test"}},
		// A filter on what nameOnly leaves out matches nothing.
		{"nameOnly and a filter on empty", []bson.E{{Key: "nameOnly", Value: true}, {Key: "filter", Value: bson.D{{Key: "empty", Value: false}}}}, []string{}},
		// Every user may do anything: all the databases are authorized.
		{"authorizedDatabases", []bson.E{{Key: "authorizedDatabases", Value: true}}, []string{"admin", "config", "local", "test"}},
		{"authorizedDatabases false", []bson.E{{Key: "authorizedDatabases", Value: false}}, []string{"admin", "config", "local", "test"}},
	} {
		dbs, reply := listDatabases(t, srv, tc.more...)
		if !slices.Equal(dbNames(dbs), tc.want) {
			t.Errorf("%s: %s, want %v", tc.name, reply, tc.want)
		}
		if tc.name == "nameOnly" && (dbs[0].SizeOnDisk != nil || reply.Lookup("totalSize").Type != 0) {
			t.Errorf("nameOnly: %s, want names only", reply)
		}
	}
	checkError(t, r.run(adminCmd("listDatabases", 1, bson.E{Key: "authorizedDatabases", Value: "yes"})), 14, "TypeMismatch")
	checkError(t, r.run(adminCmd("listDatabases", 1, bson.E{Key: "nameonly", Value: true})), 40415, "IDLUnknownField")

	// The members of a replica set have them too.
	rs := startRS(t, 2)
	if dbs, reply := listDatabases(t, rs.Members()[1], bson.E{Key: "$readPreference", Value: bson.D{{Key: "mode", Value: "secondary"}}}); !slices.Equal(dbNames(dbs), []string{"admin", "config", "local"}) {
		t.Errorf("a secondary lists %s", reply)
	}
}
