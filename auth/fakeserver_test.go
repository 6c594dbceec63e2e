package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/xdg-go/scram"
	"github.com/xdg-go/stringprep"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// user is a user as the fake server stores it.
type user struct {
	db, name, password string
	mechs              []string // SCRAM mechanisms the user has credentials for
}

// fakeServer plays the server side of the authentication commands, using
// xdg-go/scram's server with credentials derived as mongod derives them.
type fakeServer struct {
	t     *testing.T
	users []user
	// legacy: ignore skipEmptyExchange (servers before 4.4).
	legacy bool
	// iters is the SCRAM iteration count (default 4096).
	iters int
	// x509User is the certificate subject; "" rejects X509.
	x509User string
	// nonce, when set, is the server's part of every SCRAM nonce (random
	// otherwise).
	nonce string
	// hook, when set, may answer a command in place of the server.
	hook func(name string, cmd bson.Raw) (bson.Raw, error, bool)

	mu     sync.Mutex
	cmds   []bson.Raw
	convs  map[int32]*serverConv
	nextID int32
}

type serverConv struct {
	conv      *scram.ServerConversation
	skipEmpty bool
	done      bool
}

func (s *fakeServer) commands() []bson.Raw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bson.Raw(nil), s.cmds...)
}

func (s *fakeServer) names() []string {
	var out []string
	for _, c := range s.commands() {
		out = append(out, c.Index(0).Key())
	}
	return out
}

func reply(d bson.D) bson.Raw {
	b, err := bson.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

func authFailed() bson.Raw {
	return reply(bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: "Authentication failed."},
		{Key: "code", Value: int32(18)},
		{Key: "codeName", Value: "AuthenticationFailed"},
	})
}

func (s *fakeServer) RoundTrip(ctx context.Context, cmd bson.Raw) (bson.Raw, error) {
	if err := cmd.Validate(); err != nil {
		s.t.Errorf("client sent invalid BSON: %v", err)
		return nil, err
	}
	name := cmd.Index(0).Key()
	s.mu.Lock()
	s.cmds = append(s.cmds, cmd)
	s.mu.Unlock()
	if _, ok := cmd.Lookup("$db").StringValueOK(); !ok {
		s.t.Errorf("%s has no $db: %s", name, cmd)
	}
	if s.hook != nil {
		if r, err, ok := s.hook(name, cmd); ok {
			return r, err
		}
	}
	db := cmd.Lookup("$db").StringValue()
	switch name {
	case "saslStart":
		mech := cmd.Lookup("mechanism").StringValue()
		skip, _ := cmd.Lookup("options", "skipEmptyExchange").BooleanOK()
		return s.saslStart(db, mech, payload(cmd), skip && !s.legacy)
	case "saslContinue":
		id, _ := cmd.Lookup("conversationId").Int32OK()
		return s.saslContinue(id, payload(cmd))
	case "authenticate":
		if s.x509User == "" || db != "$external" {
			return authFailed(), nil
		}
		if u, ok := cmd.Lookup("user").StringValueOK(); ok && u != s.x509User {
			return authFailed(), nil
		}
		return reply(bson.D{{Key: "dbname", Value: "$external"}, {Key: "user", Value: s.x509User}, {Key: "ok", Value: 1.0}}), nil
	}
	return reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "no such command: " + name}, {Key: "code", Value: int32(59)}}), nil
}

func payload(cmd bson.Raw) []byte {
	_, data, _ := cmd.Lookup("payload").BinaryOK()
	return data
}

// speculate answers a speculativeAuthenticate document as hello would, or
// returns nil when the server declines.
func (s *fakeServer) speculate(doc bson.Raw) bson.Raw {
	db, _ := doc.Lookup("db").StringValueOK()
	var r bson.Raw
	switch doc.Index(0).Key() {
	case "saslStart":
		mech := doc.Lookup("mechanism").StringValue()
		skip, _ := doc.Lookup("options", "skipEmptyExchange").BooleanOK()
		r, _ = s.saslStart(db, mech, payload(doc), skip && !s.legacy)
	case "authenticate":
		var err error
		full := append(bson.D{}, bson.E{Key: "authenticate", Value: int32(1)})
		full = append(full, bson.E{Key: "mechanism", Value: doc.Lookup("mechanism").StringValue()})
		if u, ok := doc.Lookup("user").StringValueOK(); ok {
			full = append(full, bson.E{Key: "user", Value: u})
		}
		full = append(full, bson.E{Key: "$db", Value: "$external"})
		r, err = s.RoundTrip(context.Background(), reply(full))
		if err != nil {
			return nil
		}
	default:
		return nil
	}
	if wire.CheckReply(r) != nil {
		return nil // the server leaves out a failed speculative answer
	}
	// The speculative reply has no ok field.
	elems, _ := r.Elements()
	var d bson.D
	for _, e := range elems {
		if e.Key() != "ok" {
			d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	return reply(d)
}

func (s *fakeServer) lookup(db, mech string) scram.CredentialLookup {
	iters := s.iters
	if iters == 0 {
		iters = 4096
	}
	return func(name string) (scram.StoredCredentials, error) {
		for _, u := range s.users {
			if u.db != db || u.name != name {
				continue
			}
			for _, m := range u.mechs {
				if m != mech {
					continue
				}
				kf := scram.KeyFactors{Salt: "salt-of-" + u.name, Iters: iters}
				var c *scram.Client
				if mech == SCRAMSHA1 {
					c, _ = scram.SHA1.NewClientUnprepped(u.name, mongoPasswordDigest(u.name, u.password), "")
				} else {
					p, err := stringprep.SASLprep.Prepare(u.password)
					if err != nil {
						return scram.StoredCredentials{}, err
					}
					c, _ = scram.SHA256.NewClientUnprepped(u.name, p, "")
				}
				return c.GetStoredCredentials(kf), nil
			}
		}
		return scram.StoredCredentials{}, errors.New("no such user")
	}
}

func (s *fakeServer) saslStart(db, mech string, p []byte, skipEmpty bool) (bson.Raw, error) {
	var srv *scram.Server
	var err error
	switch mech {
	case SCRAMSHA1:
		srv, err = scram.SHA1.NewServer(s.lookup(db, mech))
	case SCRAMSHA256:
		srv, err = scram.SHA256.NewServer(s.lookup(db, mech))
	case PLAIN:
		// "\x00user\x00password"
		for _, u := range s.users {
			if db == "$external" && string(p) == "\x00"+u.name+"\x00"+u.password {
				return reply(bson.D{{Key: "conversationId", Value: int32(1)}, {Key: "done", Value: true},
					{Key: "payload", Value: bson.Binary{Data: []byte{}}}, {Key: "ok", Value: 1.0}}), nil
			}
		}
		return authFailed(), nil
	default:
		return reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: "Received authentication for mechanism " + mech + " which is not enabled"},
			{Key: "code", Value: int32(334)}, {Key: "codeName", Value: "MechanismUnavailable"}}), nil
	}
	if err != nil {
		return nil, err
	}
	if s.nonce != "" {
		srv = srv.WithNonceGenerator(func() string { return s.nonce })
	}
	conv := srv.NewConversation()
	out, err := conv.Step(string(p))
	if err != nil {
		return authFailed(), nil
	}
	s.mu.Lock()
	s.nextID++
	id := s.nextID
	if s.convs == nil {
		s.convs = map[int32]*serverConv{}
	}
	s.convs[id] = &serverConv{conv: conv, skipEmpty: skipEmpty}
	s.mu.Unlock()
	return reply(bson.D{{Key: "conversationId", Value: id}, {Key: "done", Value: false},
		{Key: "payload", Value: bson.Binary{Data: []byte(out)}}, {Key: "ok", Value: 1.0}}), nil
}

func (s *fakeServer) saslContinue(id int32, p []byte) (bson.Raw, error) {
	s.mu.Lock()
	sc := s.convs[id]
	s.mu.Unlock()
	if sc == nil {
		return reply(bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: fmt.Sprintf("No SASL session state found for conversation %d", id)},
			{Key: "code", Value: int32(17)}}), nil
	}
	if sc.conv.Done() {
		// The empty exchange of servers that do not skip it.
		if len(p) != 0 || sc.done {
			return authFailed(), nil
		}
		sc.done = true
		return reply(bson.D{{Key: "conversationId", Value: id}, {Key: "done", Value: true},
			{Key: "payload", Value: bson.Binary{Data: []byte{}}}, {Key: "ok", Value: 1.0}}), nil
	}
	out, err := sc.conv.Step(string(p))
	if err != nil || !sc.conv.Valid() {
		return authFailed(), nil
	}
	sc.done = sc.skipEmpty
	return reply(bson.D{{Key: "conversationId", Value: id}, {Key: "done", Value: sc.skipEmpty},
		{Key: "payload", Value: bson.Binary{Data: []byte(out)}}, {Key: "ok", Value: 1.0}}), nil
}
