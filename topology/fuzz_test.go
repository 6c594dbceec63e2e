package topology

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// FuzzNewServerDescription feeds arbitrary bytes to newServerDescription,
// then applies the description to a replica set and reads an error from the
// same bytes. Nothing may panic; a description is Unknown exactly when it
// has an error, and what it keeps stays within the bounds.
func FuzzNewServerDescription(f *testing.F) {
	oid := bson.NewObjectID()
	for _, d := range []bson.D{
		{{Key: "ok", Value: 1}, {Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs"},
			{Key: "hosts", Value: bson.A{"A:1", "b:1"}}, {Key: "passives", Value: bson.A{"c:1"}}, {Key: "me", Value: "a:1"},
			{Key: "electionId", Value: oid}, {Key: "setVersion", Value: 2}, {Key: "maxWireVersion", Value: 21},
			{Key: "tags", Value: bson.D{{Key: "dc", Value: "x"}}},
			{Key: "topologyVersion", Value: bson.D{{Key: "processId", Value: oid}, {Key: "counter", Value: int64(3)}}},
			{Key: "lastWrite", Value: bson.D{{Key: "lastWriteDate", Value: bson.DateTime(5)}, {Key: "opTime", Value: bson.D{{Key: "t", Value: 1}}}}}},
		{{Key: "ok", Value: 0}, {Key: "code", Value: 91}, {Key: "errmsg", Value: "shutting down"}},
		{{Key: "ok", Value: 1}, {Key: "writeConcernError", Value: bson.D{{Key: "code", Value: 189}}}, {Key: "errorLabels", Value: bson.A{"SystemOverloadedError"}}},
		{{Key: "ok", Value: 1}, {Key: "secondary", Value: true}, {Key: "setName", Value: "rs"}, {Key: "primary", Value: "b:1"}, {Key: "hosts", Value: bson.A{"a:1", 3}}},
	} {
		raw, err := bson.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(raw))
	}
	f.Add([]byte{})
	f.Add([]byte{5, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newServerDescription("a:1", bson.Raw(data), time.Millisecond, testNow)
		if (s.Type == ServerUnknown) != (s.Error != nil) {
			t.Fatalf("type %s with error %v", s.Type, s.Error)
		}
		if s.Error != nil {
			var ce *wire.CommandError
			if !errors.Is(s.Error, ErrInvalidReply) && !errors.As(s.Error, &ce) {
				t.Fatalf("error %v is neither ErrInvalidReply nor a *CommandError", s.Error)
			}
		}
		if n := len(s.Hosts) + len(s.Passives) + len(s.Arbiters); n > maxMembers || len(s.Tags) > maxTags ||
			len(s.SetName) > maxNameLen || len(s.Me) > maxAddressLen || len(s.Primary) > maxAddressLen {
			t.Fatalf("kept beyond the bounds: %+v", s)
		}
		for _, a := range s.members() {
			upper := strings.IndexFunc(a, func(r rune) bool { return 'A' <= r && r <= 'Z' }) >= 0
			if upper && !strings.Contains(a, "%") && !strings.HasSuffix(a, ".sock") {
				t.Fatalf("address %q not lower-cased", a)
			}
		}
		d, err := newDescription(Settings{Seeds: []string{"a:1", "b:1"}})
		if err != nil {
			t.Fatal(err)
		}
		u := d.apply(s)
		if u.Applied && u.Description.Len() > maxMembers+2 {
			t.Fatalf("%d servers", u.Description.Len())
		}
		_ = u.events(bson.ObjectID{})
		if e, ok := replyError("a:1", bson.Raw(data)); ok {
			dec := u.Description.decideAppError(0, e)
			if dec.MarkUnknown {
				u.Description.apply(dec.Server)
			}
		}
	})
}
