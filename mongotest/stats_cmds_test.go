package mongotest_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestDBStatsAndConnectionStatus checks dbStats
// (https://www.mongodb.com/docs/manual/reference/command/dbStats/) and
// connectionStatus
// (https://www.mongodb.com/docs/manual/reference/command/connectionStatus/).
func TestDBStatsAndConnectionStatus(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("admin", "ann", "secret"); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, srv)
	status := r.run(cmd("admin", bson.E{Key: "connectionStatus", Value: 1}))
	checkOK(t, status)
	if users := arrayOf(t, status.Lookup("authInfo", "authenticatedUsers")); len(users) != 0 {
		t.Errorf("an unauthenticated connection's users: %v", users)
	}
	client := connect(t, "mongodb://ann:secret@"+srv.Addr()+"/")
	status, err := client.Database("admin").RunCommand(ctx(t), bson.D{{Key: "connectionStatus", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if u := arrayOf(t, status.Lookup("authInfo", "authenticatedUsers")); len(u) != 1 || u[0].Document().Lookup("user").StringValue() != "ann" {
		t.Errorf("connectionStatus after authenticating: %s", status)
	}
	checkError(t, r.run(cmd("admin", bson.E{Key: "connectionStatus", Value: 1}, bson.E{Key: "showPrivileges", Value: true})), 2, "BadValue")

	coll := client.Database("x").Collection("c")
	for i := range 2 {
		if _, err := coll.InsertOne(ctx(t), bson.D{{Key: "_id", Value: i}}); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := client.Database("x").RunCommand(ctx(t), bson.D{{Key: "dbStats", Value: 1}}).Raw()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Lookup("collections").Int32() != 1 || stats.Lookup("objects").Int32() != 2 || stats.Lookup("indexes").Int32() != 1 || stats.Lookup("db").StringValue() != "x" {
		t.Errorf("dbStats: %s", stats)
	}
	if err := client.Database("x").RunCommand(ctx(t), bson.D{{Key: "dbStats", Value: 1}, {Key: "scale", Value: 0}}).Err(); err == nil {
		t.Error("dbStats with scale 0 succeeded")
	}
}

// TestDroppedUserLosesAccess checks that a connection whose user is
// dropped may no longer run commands, as mongod's invalidated user cache
// makes it (https://www.mongodb.com/docs/manual/reference/command/dropUser/).
func TestDroppedUserLosesAccess(t *testing.T) {
	srv := start(t)
	if err := srv.AddUser("admin", "root", "secret"); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddUser("app", "bob", "pw"); err != nil {
		t.Fatal(err)
	}
	admin := connect(t, "mongodb://root:secret@"+srv.Addr()+"/")
	bob := connect(t, "mongodb://bob:pw@"+srv.Addr()+"/app")
	if _, err := bob.Database("app").Collection("c").InsertOne(ctx(t), bson.D{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Database("app").RunCommand(ctx(t), bson.D{{Key: "dropUser", Value: "bob"}}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := bob.Database("app").Collection("c").InsertOne(ctx(t), bson.D{})
	if err == nil {
		t.Fatal("a dropped user's connection still writes")
	}
}
