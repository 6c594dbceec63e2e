package mongotest

import (
	"errors"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// request is one command as the server received it, with the connection it
// came on. Every command goes through Server.dispatch with one, which makes
// dispatch the place for anything that applies to all commands (failpoints,
// injected faults, delays).
type request struct {
	conn *conn
	name string   // the command name: the body's first key
	db   string   // $db, or the database of an OP_QUERY's namespace
	body bson.Raw // the command document (an OP_MSG body or OP_QUERY query)
	seqs []wire.Sequence
	// flags are the OP_MSG flag bits (0 for OP_QUERY).
	flags wire.Flag
	// legacy is set for a command that arrived as OP_QUERY.
	legacy bool
	// compressor is the wire.CompressorID the request was compressed with,
	// or noCompressor.
	compressor int
	// session holds the command's session fields, once checked.
	session sessionInfo
	// txn is the transaction the command runs in, if any: its handler
	// works on the transaction's view of the store (Server.storeOf).
	txn *transaction
	// op is the command as currentOp shows it and killOp kills it.
	op *activeOp
	// interrupt, for a write admitted on a primary, closes when the member
	// steps down: a write still waiting then fails, as mongod kills the
	// writes in progress at a step-down. Nil otherwise.
	interrupt <-chan struct{}
	// next is set by an exhaust hello (see Server.hello) that succeeded:
	// the command the server runs next on the connection without waiting
	// for a request, its reply sent with moreToCome.
	next bson.Raw
}

// handler is a command's implementation. It returns the reply's fields
// (without ok, which dispatch adds) or a *cmdError.
type handler struct {
	run func(s *Server, req *request) (bson.D, error)
	// public commands run on unauthenticated connections even when the
	// server has users.
	public bool
	// legacy commands may arrive as OP_QUERY: the hello commands.
	legacy bool
	// writeConcern commands take a write concern, so a failCommand fail
	// point may add a writeConcernError to their reply.
	writeConcern bool
	// noSession commands ignore the session fields: the handshake and
	// authentication, as in mongod.
	noSession bool
	// secondary says where, in a replica set, the command may run besides
	// the primary; the zero value, secondaryNever, is the writes'.
	secondary secondaryRule
	// since is the maxWireVersion of the MongoDB that introduced the
	// command: a server announcing an older one does not know it.
	since int32
}

// secondaryRule says which members of a replica set may run a command, as
// mongod's AllowedOnSecondary and maintenanceOk say it.
type secondaryRule int

const (
	// secondaryNever commands (the writes) run on the primary only;
	// elsewhere they fail with NotWritablePrimary.
	secondaryNever secondaryRule = iota
	// secondaryOptIn commands (the reads) run on a secondary when the
	// client opts in with a $readPreference other than primary; without,
	// they fail with NotPrimaryNoSecondaryOk.
	secondaryOptIn
	// secondaryCursor commands (getMore, killCursors) run on any member
	// that holds data: their cursor says where.
	secondaryCursor
	// secondaryAlways commands (the handshake, authentication,
	// diagnostics, fail points) run on any member, an arbiter included.
	secondaryAlways
)

// handlers are the commands the server knows, by their exact name: MongoDB
// command names are case-sensitive, with few aliases.
var handlers map[string]handler

func init() {
	hello := handler{run: (*Server).hello, public: true, legacy: true, noSession: true, secondary: secondaryAlways}
	handlers = map[string]handler{
		"hello":            hello,
		"isMaster":         hello,
		"ismaster":         hello,
		"saslStart":        {run: (*Server).saslStart, public: true, noSession: true, secondary: secondaryAlways},
		"saslContinue":     {run: (*Server).saslContinue, public: true, noSession: true, secondary: secondaryAlways},
		"authenticate":     {run: (*Server).authenticate, public: true, noSession: true, secondary: secondaryAlways},
		"ping":             {run: (*Server).ping, public: true, secondary: secondaryAlways},
		"buildInfo":        {run: (*Server).buildInfo, public: true, secondary: secondaryAlways},
		"buildinfo":        {run: (*Server).buildInfo, public: true, secondary: secondaryAlways},
		"endSessions":      {run: (*Server).endSessions, public: true, noSession: true, secondary: secondaryAlways},
		"killSessions":     {run: (*Server).endSessions, noSession: true, secondary: secondaryAlways},
		"refreshSessions":  {run: (*Server).refreshSessions, noSession: true, secondary: secondaryAlways},
		"serverStatus":     {run: (*Server).serverStatus, secondary: secondaryAlways},
		"currentOp":        {run: (*Server).currentOp, secondary: secondaryAlways},
		"killOp":           {run: (*Server).killOp, secondary: secondaryAlways},
		"dbStats":          {run: (*Server).dbStats, secondary: secondaryOptIn},
		"dbstats":          {run: (*Server).dbStats, secondary: secondaryOptIn},
		"connectionStatus": {run: (*Server).connectionStatus, public: true, secondary: secondaryAlways},
		"listDatabases":    {run: (*Server).listDatabases, secondary: secondaryOptIn},
		"listCollections":  {run: (*Server).listCollections, secondary: secondaryOptIn},
		"create":           {run: (*Server).create, writeConcern: true},
		"insert":           {run: (*Server).insert, writeConcern: true},
		"update":           {run: (*Server).update, writeConcern: true},
		"delete":           {run: (*Server).delete, writeConcern: true},
		"bulkWrite":        {run: (*Server).bulkWrite, writeConcern: true, since: wireVersion80},
		"findAndModify":    {run: (*Server).findAndModify, writeConcern: true},
		"findandmodify":    {run: (*Server).findAndModify, writeConcern: true},
		"find":             {run: (*Server).find, secondary: secondaryOptIn},
		"getMore":          {run: (*Server).getMore, secondary: secondaryCursor},
		"killCursors":      {run: (*Server).killCursors, secondary: secondaryCursor},
		"count":            {run: (*Server).count, secondary: secondaryOptIn},
		"distinct":         {run: (*Server).distinct, secondary: secondaryOptIn},
		"aggregate":        {run: (*Server).aggregate, secondary: secondaryOptIn},
		"createIndexes":    {run: (*Server).createIndexes, writeConcern: true},
		"listIndexes":      {run: (*Server).listIndexes, secondary: secondaryOptIn},
		"dropIndexes":      {run: (*Server).dropIndexes, writeConcern: true},
		"drop":             {run: (*Server).drop, writeConcern: true},
		"dropDatabase":     {run: (*Server).dropDatabase, writeConcern: true},

		// The replica set commands (replcmds.go) run on any member, as
		// mongod's ReplSetCommands.
		"replSetGetStatus": {run: (*Server).replSetGetStatus, secondary: secondaryAlways},
		"replSetGetConfig": {run: (*Server).replSetGetConfig, secondary: secondaryAlways},
		"replSetStepDown":  {run: (*Server).replSetStepDown, secondary: secondaryAlways},
		"replSetFreeze":    {run: (*Server).replSetFreeze, secondary: secondaryAlways},

		// The user management commands (usercmds.go).
		"createUser":               {run: (*Server).createUser, writeConcern: true},
		"updateUser":               {run: (*Server).updateUser, writeConcern: true},
		"dropUser":                 {run: (*Server).dropUser, writeConcern: true},
		"dropAllUsersFromDatabase": {run: (*Server).dropAllUsersFromDatabase, writeConcern: true},
		"usersInfo":                {run: (*Server).usersInfo, secondary: secondaryOptIn},

		// In a transaction, these run in runInTransaction; their handler
		// answers them outside one.
		"commitTransaction": {run: (*Server).transactionCommand, writeConcern: true},
		"abortTransaction":  {run: (*Server).transactionCommand, writeConcern: true},

		// mongod runs the fail point commands without authentication: only
		// a server started for tests (enableTestCommands) has them.
		"configureFailPoint": {run: (*Server).configureFailPoint, public: true, secondary: secondaryAlways},
		"waitForFailPoint":   {run: (*Server).waitForFailPoint, public: true, secondary: secondaryAlways},
	}
}

// dispatch runs one command and returns its reply document, which is
// {ok: 1, ...} or {ok: 0, errmsg, code, codeName}, or errCloseConnection
// when the connection must close without a reply (a fail point's
// closeConnection).
func (s *Server) dispatch(req *request) (bson.Raw, error) {
	s.stats.command(req.name)
	s.active.Add(1)
	defer s.active.Add(-1)
	if !handlers[req.name].legacy { // hello is not an operation currentOp shows
		req.op = s.ops.start(req)
		defer s.ops.end(req.op)
	}
	d, err := s.run(req)
	var fe *failCommandError
	var fwd *forwardedError
	switch {
	case errors.Is(err, errCloseConnection):
		return nil, err
	case errors.As(err, &fwd):
		return fwd.reply, nil // a shard's error, as the shard made it
	case errors.As(err, &fe):
		labels := fe.labels
		if !fe.hasLabels {
			labels = s.errorLabels(req, fe.code, 0)
		}
		return fe.reply(labels, append(s.stateChangeFields(fe.code), s.clusterTimeFields(req)...)...), nil
	case err != nil:
		ce := asCmdError(err)
		return errorReply(ce, s.errorLabels(req, ce.code, 0), append(s.stateChangeFields(ce.code), s.clusterTimeFields(req)...)...), nil
	}
	d = append(d, bson.E{Key: "ok", Value: 1.0})
	if !hasField(d, "$clusterTime") { // a shard's reply, through a mongos, has it
		d = append(d, s.clusterTimeFields(req)...)
	}
	reply, err := bson.Marshal(d)
	if err != nil {
		return errorReply(errorf(codeInternalError, "mongotest: encoding the reply: %v", err), nil), nil
	}
	return reply, nil
}

// maxRequestDepth bounds the nesting of documents and arrays in a command,
// as mongod bounds it.
const maxRequestDepth = 200

// run checks that the command may run, as MongoDB does (it exists, it came
// by an acceptable opcode, the connection may run it, its session fields
// are right), and runs it, with the failCommand fail point applied where
// mongod applies it: after those checks and before the command, and after
// a write (writeConcernError).
func (s *Server) run(req *request) (bson.D, error) {
	h, ok := handlers[req.name]
	if !ok || h.since > s.cfg.maxWireVersion {
		return nil, errorf(codeCommandNotFound, "no such command: '%s'", req.name)
	}
	if req.legacy && !h.legacy {
		return nil, errorf(codeUnsupportedOpQueryCommand,
			"Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", req.name)
	}
	if req.db == "" {
		return nil, errorf(codeMissingDB, "OP_MSG requests require a $db argument")
	}
	if err := checkNesting(req); err != nil {
		return nil, err
	}
	if !h.public && req.conn.user == nil && s.users.any() {
		return nil, errorf(codeUnauthorized, "Command %s requires authentication", req.name)
	}
	if !h.public && req.conn.user != nil && !s.users.exists(*req.conn.user) {
		// The user was dropped: mongod's user cache forgets it, and the
		// connection may no longer do anything.
		return nil, errorf(codeUnauthorized, "not authorized on %s to execute command { %s: ... }: the user %s@%s was dropped", req.db, req.name, req.conn.user.name, req.conn.user.db)
	}
	if h.legacy {
		// Like mongod, take the hello's client metadata before the fail
		// point looks at the connection's appName.
		req.conn.noteClientMetadata(req.body)
	}
	if !h.noSession {
		si, err := s.checkSession(req)
		if err != nil {
			return nil, err
		}
		req.session = si
	}
	if s.rs != nil {
		// As mongod, a member checks that it may run the command before
		// the fail point; a write admitted on the primary holds off a
		// step-down until it ends.
		release, err := s.admit(req, h)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	if err := s.failBeforeRun(req); err != nil {
		return nil, err
	}
	if err := checkSessionUse(req); err != nil {
		return nil, err
	}
	if err := s.checkConcerns(req, h); err != nil {
		return nil, err
	}
	if interrupted(req.interrupt) {
		return nil, errInterrupted()
	}
	var d bson.D
	var err error
	switch {
	case s.router != nil && routedCommands[req.name]:
		d, err = s.router.route(s, req)
	case req.session.inTransaction():
		d, err = s.runInTransaction(req, h)
	case req.session.retryableWrite():
		d, err = s.runRetryable(req, h)
	default:
		d, err = h.run(s, req)
	}
	if err == nil && s.rs != nil && h.secondary == secondaryNever && req.db != "local" {
		s.rs.noteWrite()
	}
	if err == nil && h.writeConcern {
		d = s.failAfterWrite(req, d)
	}
	return d, err
}

// checkNesting refuses a command that nests documents deeper than
// maxRequestDepth, before anything walks it.
func checkNesting(req *request) error {
	deep := depth(docValue(req.body), maxRequestDepth) > maxRequestDepth
	for _, seq := range req.seqs {
		for _, d := range seq.Documents {
			deep = deep || depth(docValue(d), maxRequestDepth-2) > maxRequestDepth-2
		}
	}
	if deep {
		return errorf(codeOverflow, "BSONObj exceeded maximum nested object depth: %d", maxRequestDepth)
	}
	return nil
}

// transactionCommand runs commitTransaction and abortTransaction, which
// only get here outside a transaction: there is none to commit or abort.
func (s *Server) transactionCommand(req *request) (bson.D, error) {
	return nil, errorf(codeInvalidOptions, "%s must be run within a transaction", req.name)
}
