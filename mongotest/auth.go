package mongotest

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"slices"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// saslConv is a SASL conversation in progress on a connection. As with
// mongod, a connection has at most one, and its conversationId is 1.
type saslConv struct {
	id        int32
	mech      string
	db        string
	conv      *scram.ServerConversation
	user      *userKey // who is authenticating, once known
	skipEmpty bool     // the client asked for options.skipEmptyExchange
}

// conversationID is the conversationId of every conversation.
const conversationID = 1

// saslStart begins a SASL conversation:
// {saslStart: 1, mechanism, payload, options: {skipEmptyExchange}}.
func (s *Server) saslStart(req *request) (bson.D, error) {
	return s.startSASL(req.conn, req.db, req.body, false)
}

// startSASL runs the first step of a SASL conversation on db for c. cmd is a
// saslStart command or the speculativeAuthenticate document of a hello.
func (s *Server) startSASL(c *conn, db string, cmd bson.Raw, speculative bool) (bson.D, error) {
	c.sasl = nil
	mech, ok := cmd.Lookup("mechanism").StringValueOK()
	if !ok {
		return nil, errorf(codeBadValue, "saslStart: mechanism must be a string")
	}
	payload, err := saslPayload(cmd)
	if err != nil {
		return nil, err
	}
	fail := func(e *cmdError) (bson.D, error) {
		if !speculative {
			s.stats.authenticated(mech, false)
		}
		return nil, e
	}
	switch mech {
	case MechPLAIN:
		name, ok := s.checkPlain(db, payload)
		if !ok {
			return fail(authFailed())
		}
		c.authenticated(userKey{db, name}, mech)
		return saslReply(true, nil), nil
	case MechSCRAMSHA1, MechSCRAMSHA256:
	default:
		return fail(errorf(codeMechanismUnavailable, "Received authentication for mechanism %s which is not enabled", mech))
	}

	sc := &saslConv{id: conversationID, mech: mech, db: db}
	sc.skipEmpty, _ = cmd.Lookup("options", "skipEmptyExchange").BooleanOK()
	var lookupErr *cmdError
	lookup := func(name string) (scram.StoredCredentials, error) {
		u := s.users.lookup(db, name)
		if u == nil {
			lookupErr = authFailed()
			return scram.StoredCredentials{}, errors.New("unknown user")
		}
		creds, ok := u.scram[mech]
		if !ok {
			lookupErr = errorf(codeMechanismUnavailable,
				"Unable to use %s based authentication for user without any %s credentials registered", mech, mech)
			return scram.StoredCredentials{}, errors.New("no credentials")
		}
		sc.user = &userKey{db, name}
		return creds, nil
	}
	hash := scram.SHA1
	if mech == MechSCRAMSHA256 {
		hash = scram.SHA256
	}
	srv, err := hash.NewServer(lookup)
	if err != nil {
		return fail(errorf(codeInternalError, "creating the SCRAM server: %v", err))
	}
	sc.conv = srv.NewConversation()
	out, err := sc.conv.Step(string(payload))
	if err != nil {
		if lookupErr != nil {
			return fail(lookupErr)
		}
		return fail(authFailed())
	}
	c.sasl = sc
	return saslReply(false, []byte(out)), nil
}

// saslContinue goes on with the conversation started by saslStart (or a
// speculative saslStart): {saslContinue: 1, conversationId, payload}.
func (s *Server) saslContinue(req *request) (bson.D, error) {
	c := req.conn
	sc := c.sasl
	id, ok := req.body.Lookup("conversationId").AsInt64OK()
	if sc == nil || !ok || id != int64(sc.id) {
		return nil, errorf(codeProtocolError, "No SASL session state found")
	}
	payload, err := saslPayload(req.body)
	if err != nil {
		return nil, err
	}
	fail := func() (bson.D, error) {
		c.sasl = nil
		s.stats.authenticated(sc.mech, false)
		return nil, authFailed()
	}
	if sc.conv.Done() {
		// The empty exchange that closes a conversation without
		// skipEmptyExchange, after the server's final message.
		c.sasl = nil
		if len(payload) != 0 || !sc.conv.Valid() {
			return fail()
		}
		c.authenticated(*sc.user, sc.mech)
		return saslReply(true, nil), nil
	}
	out, err := sc.conv.Step(string(payload))
	if err != nil || !sc.conv.Valid() || sc.user == nil {
		return fail()
	}
	if !sc.skipEmpty {
		return saslReply(false, []byte(out)), nil
	}
	c.sasl = nil
	c.authenticated(*sc.user, sc.mech)
	return saslReply(true, []byte(out)), nil
}

// checkPlain checks a PLAIN payload, "[authzid]\x00user\x00password",
// against the PLAIN users of db, and returns the user name.
func (s *Server) checkPlain(db string, payload []byte) (string, bool) {
	parts := bytes.Split(payload, []byte{0})
	if len(parts) != 3 {
		return "", false
	}
	authz, name, password := string(parts[0]), string(parts[1]), parts[2]
	if authz != "" && authz != name {
		return "", false
	}
	u := s.users.lookup(db, name)
	if u == nil || !slices.Contains(u.mechs, MechPLAIN) {
		return "", false
	}
	return name, subtle.ConstantTimeCompare(password, []byte(u.password)) == 1
}

// authenticate runs {authenticate: 1, mechanism: "MONGODB-X509", user?},
// which only the $external database accepts.
func (s *Server) authenticate(req *request) (bson.D, error) {
	if req.db != "$external" {
		return nil, errorf(codeAuthenticationFailed, "X.509 authentication must always use the $external database.")
	}
	d, err := s.authX509(req.conn, req.body)
	if err != nil {
		mech, _ := req.body.Lookup("mechanism").StringValueOK()
		s.stats.authenticated(mech, false)
	}
	return d, err
}

// authX509 authenticates c with its client certificate. cmd is an
// authenticate command or the speculativeAuthenticate document of a hello.
func (s *Server) authX509(c *conn, cmd bson.Raw) (bson.D, error) {
	mech, _ := cmd.Lookup("mechanism").StringValueOK()
	if mech != MechX509 {
		return nil, errorf(codeMechanismUnavailable, "Unsupported mechanism %q for the authenticate command", mech)
	}
	if c.peer == nil {
		return nil, errorf(codeAuthenticationFailed, "No verified subject name available from client")
	}
	subject := c.peer.Subject.String()
	if name, ok := cmd.Lookup("user").StringValueOK(); ok && name != subject {
		return nil, errorf(codeAuthenticationFailed, "There is no x.509 client certificate matching the user.")
	}
	if !s.users.hasX509(subject) {
		return nil, errorf(codeAuthenticationFailed, "Could not find user %q for db \"$external\"", subject)
	}
	c.authenticated(userKey{"$external", subject}, MechX509)
	return bson.D{{Key: "dbname", Value: "$external"}, {Key: "user", Value: subject}}, nil
}

// speculate answers the speculativeAuthenticate document of a hello: the
// reply's speculativeAuthenticate, or nil when the attempt fails, which the
// server does not report (the client then authenticates normally).
func (s *Server) speculate(c *conn, doc bson.Raw) bson.D {
	var (
		d   bson.D
		err error
	)
	switch commandName(doc) {
	case "saslStart":
		db, ok := doc.Lookup("db").StringValueOK()
		if !ok {
			return nil
		}
		d, err = s.startSASL(c, db, doc, true)
	case "authenticate":
		d, err = s.authX509(c, doc)
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	return d
}

// authenticated records that c authenticated as u with mech.
func (c *conn) authenticated(u userKey, mech string) {
	c.user = &u
	c.srv.stats.authenticated(mech, true)
}

// saslPayload returns a SASL command's payload, binary (as drivers send it)
// or a string.
func saslPayload(cmd bson.Raw) ([]byte, error) {
	v := cmd.Lookup("payload")
	if _, data, ok := v.BinaryOK(); ok {
		return data, nil
	}
	if str, ok := v.StringValueOK(); ok {
		return []byte(str), nil
	}
	return nil, errorf(codeBadValue, "SASL payload must be BinData or a string")
}

// saslReply is the reply of a SASL step.
func saslReply(done bool, payload []byte) bson.D {
	if payload == nil {
		payload = []byte{}
	}
	return bson.D{
		{Key: "conversationId", Value: int32(conversationID)},
		{Key: "done", Value: done},
		{Key: "payload", Value: bson.Binary{Data: payload}},
	}
}
