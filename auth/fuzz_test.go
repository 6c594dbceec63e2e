package auth

import (
	"context"
	"errors"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// scripted answers saslStart with start and every other command with cont.
type scripted struct{ start, cont []byte }

func (s scripted) RoundTrip(_ context.Context, cmd bson.Raw) (bson.Raw, error) {
	if cmd.Index(0).Key() == "saslStart" {
		return s.start, nil
	}
	return s.cont, nil
}

// FuzzServerReplies gives the SCRAM conversation arbitrary server replies:
// it must fail with an *Error, never panic or loop.
func FuzzServerReplies(f *testing.F) {
	f.Add([]byte(reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte("r=abc,s=c2FsdA==,i=4096")}}, {Key: "ok", Value: 1.0}})),
		[]byte(reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: true},
			{Key: "payload", Value: bson.Binary{Data: []byte("v=AAAA")}}, {Key: "ok", Value: 1.0}})))
	f.Add([]byte(authFailed()), []byte{})
	f.Add([]byte{5, 0, 0, 0, 0}, []byte{5, 0, 0, 0, 0})
	a, err := New(Credential{Username: "u", Password: "p", Mechanism: SCRAMSHA256})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, start, cont []byte) {
		conn := scripted{start, cont}
		err := a.Authenticate(context.Background(), conn, Hello{})
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v", err)
		}
		spec, err := a.Speculate()
		if err != nil {
			t.Fatal(err)
		}
		err = spec.Finish(context.Background(), conn, Hello{SpeculativeAuthenticate: start})
		if !errors.As(err, &ae) {
			t.Fatalf("speculative: err = %v", err)
		}
	})
}
