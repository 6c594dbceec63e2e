package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool"
)

// Codes of the authentication errors, mongod's.
const (
	codeUnauthorized         = 13
	codeProtocolError        = 17
	codeMechanismUnavailable = 334
	authFailedMessage        = "Authentication failed."
	defaultMaxAuthFailures   = 20
	authFailureWindow        = time.Minute
	maxAuthFailureAddresses  = 100000
	conversationID           = 1
)

// authError is an authentication error a client gets.
type authError struct {
	code int32
	msg  string
}

func authFailed() *authError { return &authError{codeAuthenticationFailed, authFailedMessage} }

// saslConv is a SASL conversation in progress on a client connection (one
// at most, as with mongod).
type saslConv struct {
	mech      string
	db        string
	conv      *scram.ServerConversation
	users     *Users // where user was found
	user      *User
	skipEmpty bool
}

// SetUsers replaces the users the proxy authenticates (a reload of the
// users file): connections already authenticated keep their identity. It
// refuses users that name an upstream the proxy does not have. nil turns
// authentication off, which only a proxy made without users may do.
func (p *Proxy) SetUsers(us *Users) error {
	p.cfgMu.Lock()
	defer p.cfgMu.Unlock()
	return p.setUsersLocked(us, p.conf().Upstreams)
}

// setUsersLocked makes us the users, served by the upstream clients ups,
// once it checked that they name none that ups lacks; p.cfgMu is held.
func (p *Proxy) setUsersLocked(us *Users, ups map[string]*mongopool.Client) error {
	if us == nil {
		if p.users.Load() != nil {
			return errors.New("proxy: authentication cannot be turned off while the proxy runs")
		}
		return nil
	}
	for _, name := range us.upstreams() {
		if name != "" && ups[name] == nil {
			return fmt.Errorf("proxy: a user names the upstream %q, which the proxy does not have (Config.Upstreams)", name)
		}
	}
	if p.users.Load() == nil && p.nextConnID.Load() > 0 {
		return errors.New("proxy: authentication cannot be turned on while the proxy runs: give Config.Users to New")
	}
	p.users.Store(us.bound(ups))
	return nil
}

// SetUpstreams replaces the upstream credentials' clients (Config.Upstreams)
// and the users together, so that no user ever names an upstream the proxy
// lacks: for a reload that adds, replaces or removes upstream credentials.
// us follows SetUsers' rules, and must name only upstreams of ups; on an
// error nothing changes. A client that ups no longer holds is the caller's
// to shut down (Client.Shutdown lets the operations under way end), and
// its pause, if any, ends. A connection authenticated before to such a
// client that sends an operation once it is shut down is closed without an
// answer: its driver retries the operation on a new connection,
// authenticated anew, which the new upstreams serve.
func (p *Proxy) SetUpstreams(ups map[string]*mongopool.Client, us *Users) error {
	if err := checkUpstreams(ups); err != nil {
		return err
	}
	ups = maps.Clone(ups)
	p.cfgMu.Lock()
	defer p.cfgMu.Unlock()
	if us == nil {
		us = p.users.Load()
	}
	if err := p.setUsersLocked(us, ups); err != nil {
		return err
	}
	next := *p.conf()
	old := next.Upstreams
	next.Upstreams = ups
	p.cfg.Store(&next)
	kept := map[*mongopool.Client]bool{}
	for _, c := range ups {
		kept[c] = true
	}
	for name, c := range old {
		if !kept[c] {
			p.endPause(name, c)
		}
	}
	return nil
}

// checkUpstreams checks that each upstream has a name and a client.
func checkUpstreams(ups map[string]*mongopool.Client) error {
	for name, c := range ups {
		if name == "" || c == nil {
			return fmt.Errorf("proxy: Config.Upstreams needs a name and a client for each upstream")
		}
	}
	return nil
}

// Upstream returns the client of the upstream credential name (see
// Config.Upstreams): the proxy's own client for "", nil for a name it does
// not have.
func (p *Proxy) Upstream(name string) *mongopool.Client { return p.upstream(name) }

func (p *Proxy) upstream(name string) *mongopool.Client {
	if name == "" {
		return p.client
	}
	return p.conf().Upstreams[name]
}

// upstream returns the client that serves the upstream name for the users
// of us: the proxy's own for "".
func (us *Users) upstream(p *Proxy, name string) *mongopool.Client {
	if name == "" {
		return p.client
	}
	return us.ups[name]
}

// authRequired reports whether the proxy authenticates its clients.
func (p *Proxy) authRequired() bool { return p.users.Load() != nil }

// preAuthCommands are the commands a client may run before it
// authenticates, as with mongod.
var preAuthCommands = map[string]bool{
	"hello": true, "isMaster": true, "ismaster": true, "ping": true, "saslStart": true, "saslContinue": true,
	"authenticate": true, "logout": true, "buildInfo": true, "buildinfo": true, "getnonce": true,
	"endSessions": true,
}

// authenticatedAs makes u, found in us, the connection's user: its
// operations go to the pools of u's upstream as us has it.
func (cc *clientConn) authenticatedAs(us *Users, u *User, mech string) {
	cc.user = u
	cc.identity = u.DB + "." + u.Name
	cc.up = us.upstream(cc.p, u.Upstream)
	cc.p.log.Info("proxy: client authenticated", "conn", cc.id, "remote", cc.nc.RemoteAddr().String(), "user", u.Name, "db", u.DB, "mechanism", mech)
}

// authFailure counts a failed authentication of the user db.name from the
// client's address, and logs it, without anything secret.
func (cc *clientConn) authFailure(mech, db, name string, e *authError) {
	cc.p.authFails.fail(cc.failKey(db, name))
	cc.p.stats.authFailures.Add(1)
	cc.p.log.Warn("proxy: authentication failed", "conn", cc.id, "remote", cc.nc.RemoteAddr().String(), "mechanism", mech, "db", db, "user", name, "error", e.msg)
}

// host is the client's address without its port.
func (cc *clientConn) host() string {
	addr := cc.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// failKey is what failed authentications are counted by: the client's
// address and the user it claims. A guess at one user's password from an
// address is slowed down without locking the other users out of that
// address, which in a sidecar layout every application on the host shares.
func (cc *clientConn) failKey(db, name string) string {
	return cc.host() + "\x00" + db + "\x00" + name
}

// rateLimited returns the error for a user of a client address past its
// failures.
func (cc *clientConn) rateLimited(db, name string) *authError {
	if cc.p.authFails.allowed(cc.failKey(db, name), cc.p.conf().MaxAuthFailures) {
		return nil
	}
	return &authError{codeAuthenticationFailed, fmt.Sprintf("proxy: too many failed authentications of %q from %s: retry in a minute", name, cc.host())}
}

// scramUser returns the user name a SCRAM client-first message claims
// ("n,,n=USER,r=NONCE"), "" when it has none.
func scramUser(payload []byte) string {
	fields := strings.SplitN(string(payload), ",", 4)
	if len(fields) < 3 {
		return ""
	}
	name, _ := strings.CutPrefix(fields[2], "n=")
	return name
}

// saslStart starts a SASL conversation on db: a saslStart command, or a
// hello's speculativeAuthenticate document.
func (cc *clientConn) saslStart(db string, cmd bson.Raw) (bson.Raw, *authError) {
	cc.sasl = nil
	mech, ok := cmd.Lookup("mechanism").StringValueOK()
	if !ok {
		return nil, &authError{codeFailedToParse, "saslStart: mechanism must be a string"}
	}
	var hash scram.HashGeneratorFcn
	switch mech {
	case MechSCRAMSHA256:
		hash = scram.SHA256
	case MechSCRAMSHA1:
		hash = scram.SHA1
	default:
		e := &authError{codeMechanismUnavailable, fmt.Sprintf("Received authentication for mechanism %s which is not enabled", mech)}
		cc.authFailure(mech, db, "", e)
		return nil, e
	}
	payload, err := saslPayload(cmd)
	if err != nil {
		return nil, &authError{codeFailedToParse, err.Error()}
	}
	if e := cc.rateLimited(db, scramUser(payload)); e != nil {
		return nil, e
	}
	users := cc.p.users.Load()
	sc := &saslConv{mech: mech, db: db, users: users}
	sc.skipEmpty, _ = cmd.Lookup("options", "skipEmptyExchange").BooleanOK()
	var lookupErr *authError
	var name string
	srv, err := hash.NewServer(func(n string) (scram.StoredCredentials, error) {
		name = n
		u := users.lookup(db, n)
		if u == nil {
			lookupErr = authFailed()
			return scram.StoredCredentials{}, errors.New("unknown user")
		}
		keys := u.SCRAMSHA256
		if mech == MechSCRAMSHA1 {
			keys = u.SCRAMSHA1
		}
		if keys == nil {
			lookupErr = &authError{codeMechanismUnavailable, fmt.Sprintf("Unable to use %s based authentication for user without any %s credentials registered", mech, mech)}
			return scram.StoredCredentials{}, errors.New("no credentials")
		}
		sc.user = u
		return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(keys.Salt), Iters: keys.Iterations},
			StoredKey: keys.StoredKey, ServerKey: keys.ServerKey}, nil
	})
	if err != nil {
		return nil, &authError{codeAuthenticationFailed, "proxy: " + err.Error()}
	}
	sc.conv = srv.NewConversation()
	out, err := sc.conv.Step(string(payload))
	if err != nil {
		e := lookupErr
		if e == nil {
			e = authFailed()
		}
		cc.authFailure(mech, db, name, e)
		return nil, e
	}
	cc.sasl = sc
	return saslReply(false, []byte(out)), nil
}

// saslContinue goes on with the connection's conversation.
func (cc *clientConn) saslContinue(cmd bson.Raw) (bson.Raw, *authError) {
	sc := cc.sasl
	id, ok := cmd.Lookup("conversationId").AsInt64OK()
	if sc == nil || !ok || id != conversationID {
		return nil, &authError{codeProtocolError, "No SASL session state found"}
	}
	payload, err := saslPayload(cmd)
	if err != nil {
		return nil, &authError{codeFailedToParse, err.Error()}
	}
	fail := func() (bson.Raw, *authError) {
		cc.sasl = nil
		e := authFailed()
		name := ""
		if sc.user != nil {
			name = sc.user.Name
		}
		cc.authFailure(sc.mech, sc.db, name, e)
		return nil, e
	}
	if sc.conv.Done() {
		// The empty step that ends a conversation without
		// skipEmptyExchange, after the server's final message.
		cc.sasl = nil
		if len(payload) != 0 || !sc.conv.Valid() || sc.user == nil {
			return fail()
		}
		cc.authenticatedAs(sc.users, sc.user, sc.mech)
		return saslReply(true, nil), nil
	}
	out, err := sc.conv.Step(string(payload))
	if err != nil || !sc.conv.Valid() || sc.user == nil {
		return fail()
	}
	if !sc.skipEmpty {
		return saslReply(false, []byte(out)), nil
	}
	cc.sasl = nil
	cc.authenticatedAs(sc.users, sc.user, sc.mech)
	return saslReply(true, []byte(out)), nil
}

// authenticateX509 authenticates the client by its verified certificate:
// {authenticate: 1, mechanism: "MONGODB-X509", user?} on $external.
func (cc *clientConn) authenticateX509(db string, cmd bson.Raw) (bson.Raw, *authError) {
	mech, _ := cmd.Lookup("mechanism").StringValueOK()
	if mech != MechX509 {
		return nil, &authError{codeMechanismUnavailable, fmt.Sprintf("Unsupported mechanism %q for the authenticate command", mech)}
	}
	if db != "$external" {
		return nil, &authError{codeAuthenticationFailed, "X.509 authentication must always use the $external database."}
	}
	tc, ok := cc.nc.(*tls.Conn)
	if !ok || len(tc.ConnectionState().VerifiedChains) == 0 {
		e := &authError{codeAuthenticationFailed, "No verified subject name available from client"}
		cc.authFailure(mech, db, "", e)
		return nil, e
	}
	subject := tc.ConnectionState().VerifiedChains[0][0].Subject.String()
	if e := cc.rateLimited(db, subject); e != nil {
		return nil, e
	}
	if name, ok := cmd.Lookup("user").StringValueOK(); ok && name != subject {
		e := &authError{codeAuthenticationFailed, "There is no x.509 client certificate matching the user."}
		cc.authFailure(mech, db, name, e)
		return nil, e
	}
	users := cc.p.users.Load()
	u := users.lookup("$external", subject)
	if u == nil || !u.X509 {
		e := &authError{codeAuthenticationFailed, fmt.Sprintf("Could not find user %q for db \"$external\"", subject)}
		cc.authFailure(mech, db, subject, e)
		return nil, e
	}
	cc.authenticatedAs(users, u, mech)
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendStringElement(doc, "dbname", "$external")
	doc = bsoncore.AppendStringElement(doc, "user", subject)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc, nil
}

// speculate answers a hello's speculativeAuthenticate: the reply's
// document, or nil when the attempt fails (the client then authenticates
// normally, as with mongod).
func (cc *clientConn) speculate(doc bson.Raw) bson.Raw {
	elem, err := doc.IndexErr(0)
	if err != nil {
		return nil
	}
	var out bson.Raw
	var e *authError
	switch elem.Key() {
	case "saslStart":
		db, ok := doc.Lookup("db").StringValueOK()
		if !ok {
			return nil
		}
		out, e = cc.saslStart(db, doc)
	case "authenticate":
		db, _ := doc.Lookup("db").StringValueOK()
		if db == "" {
			db = "$external"
		}
		out, e = cc.authenticateX509(db, doc)
	}
	if e != nil {
		return nil
	}
	return out
}

// authCommand serves saslStart, saslContinue and authenticate.
func (cc *clientConn) authCommand(ex exchangeOf, req *request) bool {
	var out bson.Raw
	var e *authError
	switch req.name {
	case "saslStart":
		out, e = cc.saslStart(string(req.db), req.body)
	case "saslContinue":
		out, e = cc.saslContinue(req.body)
	case "authenticate":
		out, e = cc.authenticateX509(string(req.db), req.body)
	}
	if e != nil {
		return cc.reply(ex, errorReply(cc.dbuf, e.code, e.msg))
	}
	return cc.reply(ex, withOK(out))
}

// withOK appends ok: 1 to doc.
func withOK(doc bson.Raw) bson.Raw {
	out := make([]byte, 0, len(doc)+16)
	out = append(out, doc[:len(doc)-1]...)
	out = bsoncore.AppendDoubleElement(out, "ok", 1)
	out = append(out, 0)
	bsoncore.UpdateLength(out, 0, int32(len(out)))
	return out
}

// saslPayload returns a SASL command's payload, binary (as drivers send
// it) or a string.
func saslPayload(cmd bson.Raw) ([]byte, error) {
	v := cmd.Lookup("payload")
	if _, data, ok := v.BinaryOK(); ok {
		return data, nil
	}
	if s, ok := v.StringValueOK(); ok {
		return []byte(s), nil
	}
	return nil, errors.New("SASL payload must be BinData or a string")
}

// saslReply is the reply of a SASL step (without ok).
func saslReply(done bool, payload []byte) bson.Raw {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendInt32Element(doc, "conversationId", conversationID)
	doc = bsoncore.AppendBooleanElement(doc, "done", done)
	doc = bsoncore.AppendBinaryElement(doc, "payload", 0, payload)
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}

// failTable counts failed authentications per client address and user, over two
// one-minute windows (the cursor table's generations), bounded in size.
type failTable struct {
	mu     sync.Mutex // protects following fields
	cur    map[string]int
	old    map[string]int
	turned time.Time
}

func newFailTable() *failTable { return &failTable{cur: map[string]int{}, turned: time.Now()} }

func (t *failTable) turnLocked() {
	now := time.Now()
	switch {
	case now.Sub(t.turned) >= 2*authFailureWindow:
		t.cur, t.old, t.turned = map[string]int{}, nil, now
	case now.Sub(t.turned) >= authFailureWindow:
		t.old, t.cur, t.turned = t.cur, map[string]int{}, now
	}
}

// allowed reports whether host may try again: fewer than max failures in
// the current and the last window.
func (t *failTable) allowed(host string, max int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.turnLocked()
	return t.cur[host]+t.old[host] < max
}

func (t *failTable) fail(host string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.turnLocked()
	if len(t.cur) >= maxAuthFailureAddresses {
		// A flood from many addresses: start over rather than grow.
		t.cur = map[string]int{}
	}
	t.cur[host]++
}
