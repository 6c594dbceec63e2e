package mongotest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements MongoDB's failCommand fail point, which test runners
// set with
//
//	{configureFailPoint: "failCommand", mode: ..., data: {...}}
//
// on the admin database, as mongod started with enableTestCommands accepts
// it, and the Go API that sets it without a client (Server.SetFailPoint).
//
// As in mongod, the fail point is checked at two places of a command's run:
// before the command runs (for blockConnection, closeConnection and
// errorCode), and after a command that takes a write concern succeeded (for
// writeConcernError). Each place counts as one entry of the fail point when
// it fires, for the mode ({times: n} ends after n entries) and for the count
// configureFailPoint reports. The data is checked when the fail point is set,
// so that a typo is an error rather than a fail point that never fires.

// FailPoint is a failCommand fail point, the Go form of
//
//	{configureFailPoint: "failCommand", mode, data: {failCommands, appName,
//	 closeConnection, errorCode, errorLabels, blockConnection, blockTimeMS,
//	 writeConcernError}}
//
// See Server.SetFailPoint. It must name commands and do something: block,
// close the connection, fail with an error code, or add a write concern
// error.
type FailPoint struct {
	// Commands are the names of the commands it applies to (failCommands),
	// as the client sends them: "hello" and "isMaster" are distinct
	// commands, "isMaster" and "ismaster" the same one.
	Commands []string
	// AppName, if not empty, limits it to the connections whose handshake
	// gave this application name (client.application.name).
	AppName string

	// Times, if positive, makes it fire on the first Times commands it
	// applies to, and then turn itself off (mode {times: n}). Skip, if
	// positive, lets the first Skip commands pass and then fires on every
	// one (mode {skip: n}). With neither, it fires on every command
	// (mode "alwaysOn"). Setting both is an error.
	Times int
	Skip  int

	// BlockTime, if positive, delays the command by that long (rounded up
	// to whole milliseconds; blockConnection and blockTimeMS) before the
	// rest applies: the command runs, or fails as the fields below say.
	BlockTime time.Duration
	// CloseConnection closes the connection instead of replying: the client
	// sees a network error.
	CloseConnection bool
	// ErrorCode, if not 0, fails the command with this code and the errmsg
	// "Failing command via 'failCommand' failpoint".
	ErrorCode int32
	// ErrorLabels are the errorLabels of the reply that ErrorCode or
	// WriteConcernError make. Nil lets the server add the labels mongod
	// would (RetryableWriteError on a retryable write to a replica set
	// member, for a retriable code); a non-nil slice, even an empty one,
	// replaces them, as in mongod.
	ErrorLabels []string
	// WriteConcernError, if not nil, lets a command that takes a write
	// concern (insert, update, delete, findAndModify, ...) run, and adds this
	// document to its reply as writeConcernError, such as
	// {code: 64, codeName: "WriteConcernFailed", errmsg: "waiting for
	// replication timed out"}. It must hold an integer code.
	WriteConcernError bson.D
}

// SetFailPoint sets the failCommand fail point to fp, replacing the one set
// before, exactly as the configureFailPoint command does. It returns the
// error the command would give for a bad fp.
func (s *Server) SetFailPoint(fp FailPoint) error {
	cmd, err := fp.command()
	if err == nil {
		_, err = s.failPoints.configure(cmd)
	}
	if err != nil {
		return fmt.Errorf("mongotest: SetFailPoint: %w", err)
	}
	return nil
}

// ClearFailPoints turns the failCommand fail point off, as
// {configureFailPoint: "failCommand", mode: "off"} does.
func (s *Server) ClearFailPoints() {
	s.failPoints.set(nil)
}

// WaitForFailPoint waits until the failCommand fail point has fired
// timesEntered times in total since Start (Stats.FailCommandFired), as the
// command {waitForFailPoint: "failCommand", timesEntered, maxTimeMS} does.
// The fail point fires before it blocks a command, so this is how a test
// knows that a command is blocked. It returns early with an error when ctx
// ends or the server closes.
func (s *Server) WaitForFailPoint(ctx context.Context, timesEntered int64) error {
	if err := s.failPoints.wait(ctx, s.done, timesEntered); err != nil {
		return fmt.Errorf("mongotest: WaitForFailPoint(%d): %w", timesEntered, err)
	}
	return nil
}

// command builds the configureFailPoint command that sets fp.
func (fp FailPoint) command() (bson.Raw, error) {
	var mode any = "alwaysOn"
	switch {
	case fp.Times != 0 && fp.Skip != 0:
		return nil, errors.New("FailPoint sets both Times and Skip; a fail point has one mode")
	case fp.Times != 0:
		mode = bson.D{{Key: "times", Value: int64(fp.Times)}}
	case fp.Skip != 0:
		mode = bson.D{{Key: "skip", Value: int64(fp.Skip)}}
	}
	if fp.BlockTime < 0 {
		return nil, fmt.Errorf("FailPoint.BlockTime is negative (%v)", fp.BlockTime)
	}
	commands := fp.Commands
	if commands == nil {
		commands = []string{} // an empty array rather than null, for the error
	}
	data := bson.D{{Key: "failCommands", Value: commands}}
	if fp.AppName != "" {
		data = append(data, bson.E{Key: "appName", Value: fp.AppName})
	}
	if fp.BlockTime > 0 {
		ms := (fp.BlockTime + time.Millisecond - 1) / time.Millisecond
		data = append(data,
			bson.E{Key: "blockConnection", Value: true},
			bson.E{Key: "blockTimeMS", Value: int64(ms)})
	}
	if fp.CloseConnection {
		data = append(data, bson.E{Key: "closeConnection", Value: true})
	}
	if fp.ErrorCode != 0 {
		data = append(data, bson.E{Key: "errorCode", Value: fp.ErrorCode})
	}
	if fp.ErrorLabels != nil {
		data = append(data, bson.E{Key: "errorLabels", Value: fp.ErrorLabels})
	}
	if fp.WriteConcernError != nil {
		data = append(data, bson.E{Key: "writeConcernError", Value: fp.WriteConcernError})
	}
	b, err := bson.Marshal(bson.D{
		{Key: "configureFailPoint", Value: failCommandName},
		{Key: "mode", Value: mode},
		{Key: "data", Value: data},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the fail point: %w", err)
	}
	return b, nil
}

// failCommandName is the one fail point the server has.
const failCommandName = "failCommand"

// failPointMode is when a set fail point fires.
type failPointMode int

const (
	modeAlwaysOn failPointMode = iota // on every match
	modeTimes                         // on the first n matches, then off
	modeSkip                          // on every match after the first n
	modeRandom                        // on a match with a probability
)

// failCommand is a parsed failCommand fail point. It does not change once
// set: the state of its mode lives in failPoints.
type failCommand struct {
	mode        failPointMode
	n           int64   // times or skip
	probability float64 // modeRandom's activationProbability

	commands     []string // failCommands, as failPointAlias names them
	appName      string
	hasAppName   bool
	namespace    string
	hasNamespace bool

	block      time.Duration
	blocks     bool // blockConnection
	closeConn  bool
	errorCode  int32    // 0: none
	labels     []string // errorLabels
	hasLabels  bool     // errorLabels given (even empty): they replace the server's
	wce        bson.Raw // writeConcernError, nil if none
	hasActions bool     // blocks, closes or fails before the command runs
}

// failPoints is the server's fail point state. Its zero value has the fail
// point off.
type failPoints struct {
	mu  sync.Mutex
	cur *failCommand // nil when off
	// left is what remains of cur's mode: the matches to fire on (times) or
	// to let pass (skip).
	left int64
	// entered counts the times the fail point fired since Start, whatever
	// the configuration: the count configureFailPoint reports.
	entered int64
	// fired, when not nil, is closed at the next firing, to wake the
	// waiters of waitForFailPoint.
	fired chan struct{}
	// helloSet, when not nil, is closed when a fail point on hello (or
	// isMaster) is set, to end the waits of awaitable hellos (see
	// awaitChange).
	helloSet chan struct{}
}

// helloChanged returns a channel closed when a fail point on hello or
// isMaster is next set.
func (f *failPoints) helloChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.helloSet == nil {
		f.helloSet = make(chan struct{})
	}
	return f.helloSet
}

// configure runs the configureFailPoint command cmd and returns the count
// of its reply.
func (f *failPoints) configure(cmd bson.Raw) (int64, error) {
	if err := checkFailPointName(cmd, "configureFailPoint"); err != nil {
		return 0, err
	}
	fc, err := parseFailCommand(cmd)
	if err != nil {
		return 0, err
	}
	return f.set(fc), nil
}

// checkFailPointName checks the fail point that cmd, a configureFailPoint or
// waitForFailPoint command, names in its first field: failCommand, the only
// one the server has.
func checkFailPointName(cmd bson.Raw, command string) error {
	v := cmd.Lookup(command)
	name, ok := v.StringValueOK()
	if !ok {
		return errorf(codeTypeMismatch, "%s must be the name of a fail point (a string), not %s", command, v.Type)
	}
	if name != failCommandName {
		return errorf(codeBadValue, "%s not found: the only fail point of mongotest is %s", name, failCommandName)
	}
	return nil
}

// set replaces the fail point with fc (nil: off) and returns the count.
func (f *failPoints) set(fc *failCommand) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = fc
	if fc != nil {
		f.left = fc.n
		if f.helloSet != nil && fc.appliesToHello() {
			close(f.helloSet)
			f.helloSet = nil
		}
	}
	return f.entered
}

// appliesToHello reports whether fc fails hello or isMaster commands.
func (fc *failCommand) appliesToHello() bool {
	for _, c := range fc.commands {
		switch strings.ToLower(c) {
		case "hello", "ismaster":
			return true
		}
	}
	return false
}

// parseFailCommand parses the mode and data of a configureFailPoint
// command, as mongod does, and checks the data, which mongod does not do:
// a nil failCommand is the mode "off".
func parseFailCommand(cmd bson.Raw) (*failCommand, error) {
	fc := &failCommand{}
	modeVal, err := cmd.LookupErr("mode")
	if err != nil {
		return nil, errorf(codeIllegalOperation, "When setting a failpoint, you must supply a 'mode'")
	}
	switch modeVal.Type {
	case bson.TypeString:
		switch m := modeVal.StringValue(); m {
		case "off":
			return nil, nil
		case "alwaysOn":
			fc.mode = modeAlwaysOn
		default:
			return nil, errorf(codeBadValue, "unknown mode: %s (want \"off\", \"alwaysOn\", {times: n}, {skip: n} or {activationProbability: p})", m)
		}
	case bson.TypeEmbeddedDocument:
		// mongod looks for the keys in this order and ignores the others.
		m := modeVal.Document()
		if v, err := m.LookupErr("times"); err == nil {
			fc.mode = modeTimes
			if fc.n, err = modeCount(v, "times"); err != nil {
				return nil, err
			}
			if fc.n == 0 {
				// mongod would fire once; make the intent explicit.
				return nil, errorf(codeBadValue, "'times' option to 'mode' must be positive: use mode \"off\" for a fail point that never fires")
			}
		} else if v, err := m.LookupErr("skip"); err == nil {
			fc.mode = modeSkip
			if fc.n, err = modeCount(v, "skip"); err != nil {
				return nil, err
			}
		} else if v, err := m.LookupErr("activationProbability"); err == nil {
			fc.mode = modeRandom
			p, ok := v.AsFloat64OK()
			if !ok {
				return nil, errorf(codeTypeMismatch, "the 'activationProbability' option to 'mode' must be a double between 0 and 1, not %s", v.Type)
			}
			if !(p >= 0 && p <= 1) {
				return nil, errorf(codeBadValue, "activationProbability must be between 0.0 and 1.0; found %v", p)
			}
			fc.probability = p
		} else {
			return nil, errorf(codeBadValue, "mode must be one of \"off\", \"alwaysOn\", {activationProbability: p}, {times: n} or {skip: n}; got %s", m)
		}
	default:
		return nil, errorf(codeTypeMismatch, "'mode' must be a string or an object, not %s", modeVal.Type)
	}

	dataVal, err := cmd.LookupErr("data")
	if err != nil {
		return nil, errorf(codeBadValue, "data is missing: the failCommand fail point needs data.failCommands and what to do")
	}
	data, ok := dataVal.DocumentOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "the 'data' field must be an object, not %s", dataVal.Type)
	}
	if err := fc.parseData(data); err != nil {
		return nil, err
	}
	return fc, nil
}

// modeCount reads the times or skip of a mode: an integer from 0 to
// MaxInt32, as mongod takes.
func modeCount(v bson.RawValue, key string) (int64, error) {
	n, err := fpInt(v, "mode."+key)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errorf(codeBadValue, "'%s' option to 'mode' must be positive, got %d", key, n)
	}
	if n > math.MaxInt32 {
		return 0, errorf(codeBadValue, "'%s' option to 'mode' must be <= %d, got %d", key, math.MaxInt32, n)
	}
	return n, nil
}

// failCommandFields are the fields of data the server knows.
var failCommandFields = []string{"failCommands", "appName", "namespace", "closeConnection", "errorCode",
	"errorLabels", "blockConnection", "blockTimeMS", "writeConcernError", "failInternalCommands"}

// parseData reads the data of a failCommand fail point into fc.
func (fc *failCommand) parseData(data bson.Raw) error {
	elems, err := data.Elements()
	if err != nil {
		return errorf(codeBadValue, "data: %v", err)
	}
	var (
		hasCommands, hasBlockTime bool
		blockMS                   int64
	)
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		field := "data." + key
		var err error
		switch key {
		case "failCommands":
			hasCommands = true
			var names []string
			if names, err = fpStrings(v, field); err == nil && len(names) == 0 {
				err = errorf(codeBadValue, "%s is empty: the fail point would never fire", field)
			}
			for _, n := range names {
				fc.commands = append(fc.commands, failPointAlias(n))
			}
		case "appName":
			fc.appName, err = fpString(v, field)
			fc.hasAppName = true
		case "namespace":
			fc.namespace, err = fpString(v, field)
			fc.hasNamespace = true
		case "closeConnection":
			fc.closeConn, err = fpBool(v, field)
		case "blockConnection":
			fc.blocks, err = fpBool(v, field)
		case "blockTimeMS":
			hasBlockTime = true
			if blockMS, err = fpInt(v, field); err == nil && (blockMS < 0 || blockMS > math.MaxInt32) {
				err = errorf(codeInvalidOptions, "%s must be from 0 to %d, got %d", field, math.MaxInt32, blockMS)
			}
		case "errorCode":
			var code int64
			if code, err = fpInt(v, field); err == nil && (code <= 0 || code > math.MaxInt32) {
				err = errorf(codeBadValue, "%s must be a positive error code, got %d", field, code)
			}
			fc.errorCode = int32(code)
		case "errorLabels":
			fc.labels, err = fpStrings(v, field)
			fc.hasLabels = true
		case "writeConcernError":
			doc, ok := v.DocumentOK()
			if !ok {
				err = errorf(codeTypeMismatch, "%s must be an object, not %s", field, v.Type)
			} else if _, cerr := fpInt(doc.Lookup("code"), field+".code"); cerr != nil {
				err = cerr
			}
			fc.wce = doc
		case "failInternalCommands":
			// mongotest runs no internal commands: nothing to fail.
			_, err = fpBool(v, field)
		default:
			err = errorf(codeBadValue, "%s is not supported by the failCommand fail point of mongotest (known: %s)",
				field, strings.Join(failCommandFields, ", "))
		}
		if err != nil {
			return err
		}
	}
	if !hasCommands {
		return errorf(codeBadValue, "data.failCommands is missing: the fail point would never fire")
	}
	if fc.blocks {
		if !hasBlockTime {
			return errorf(codeInvalidOptions, "Must specify 'blockTimeMS' when 'blockConnection' is true (data.blockTimeMS is missing)")
		}
		fc.block = time.Duration(blockMS) * time.Millisecond
	}
	fc.hasActions = fc.blocks || fc.closeConn || fc.errorCode != 0
	if !fc.hasActions && fc.wce == nil {
		return errorf(codeBadValue, "data sets none of blockConnection, closeConnection, errorCode and writeConcernError: the fail point would do nothing")
	}
	return nil
}

// failPointAlias returns the name a command is registered under in mongod
// for an alias of it: the fail point matches a command by any of its
// names.
func failPointAlias(name string) string {
	switch name {
	case "ismaster":
		return "isMaster"
	case "buildinfo":
		return "buildInfo"
	}
	return name
}

// failPointSite is where a command's run checks the fail point.
type failPointSite int

const (
	// beforeRun: blockConnection, closeConnection, errorCode.
	beforeRun failPointSite = iota
	// afterWrite: writeConcernError, after a command that takes a write
	// concern succeeded.
	afterWrite
)

// fire checks the fail point for req at site: when it matches and its mode
// says so, it fires (counted) and fire returns it; else nil. The match and
// the mode's count change under one lock, so that concurrent commands
// never fire it more often than the mode allows.
func (f *failPoints) fire(req *request, site failPointSite, st *stats) *failCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	fc := f.cur
	if fc == nil || !fc.applies(req, site) {
		return nil
	}
	switch fc.mode {
	case modeTimes:
		f.left--
		if f.left <= 0 {
			f.cur = nil
		}
	case modeSkip:
		if f.left > 0 {
			f.left--
			return nil
		}
	case modeRandom:
		if rand.Float64() >= fc.probability {
			return nil
		}
	}
	f.entered++
	if f.fired != nil {
		close(f.fired)
		f.fired = nil
	}
	st.update(func(s *Stats) { s.FailCommandFired++ })
	return fc
}

// applies reports whether fc applies to req at site.
func (fc *failCommand) applies(req *request, site failPointSite) bool {
	switch site {
	case beforeRun:
		if !fc.hasActions {
			return false
		}
	case afterWrite:
		if fc.wce == nil || !handlers[req.name].writeConcern {
			return false
		}
	}
	if req.name == "configureFailPoint" { // never failed, even if listed
		return false
	}
	if !slices.Contains(fc.commands, failPointAlias(req.name)) {
		return false
	}
	if fc.hasAppName && req.conn.appName != fc.appName {
		return false
	}
	if fc.hasNamespace && namespaceOf(req) != fc.namespace {
		return false
	}
	return true
}

// namespaceOf returns the namespace of a command as mongod computes it for
// the fail point: "db.collection" when the command's value is a
// collection name, else "db".
func namespaceOf(req *request) string {
	if coll, ok := req.body.Lookup(req.name).StringValueOK(); ok && coll != "" {
		return req.db + "." + coll
	}
	return req.db
}

// errCloseConnection tells the connection to close without replying.
var errCloseConnection = errors.New("mongotest: the failCommand fail point closes the connection")

// failCommandError is the failure a fail point's errorCode makes.
type failCommandError struct {
	code      int32
	labels    []string
	hasLabels bool // the fail point's labels replace the server's
}

func (e *failCommandError) Error() string {
	return fmt.Sprintf("Failing command via 'failCommand' failpoint (%s, code %d)", codeName(e.code), e.code)
}

// reply encodes the error reply, as mongod's, with labels and tail (see
// errorReply): the errmsg is always the same.
func (e *failCommandError) reply(labels []string, tail ...bson.E) bson.Raw {
	return errorReply(&cmdError{code: e.code, msg: "Failing command via 'failCommand' failpoint"}, labels, tail...)
}

// failBeforeRun applies the fail point to req before it runs: it blocks, then
// returns errCloseConnection, a *failCommandError, or nil for the command
// to run.
func (s *Server) failBeforeRun(req *request) error {
	fc := s.failPoints.fire(req, beforeRun, &s.stats)
	if fc == nil {
		return nil
	}
	if fc.blocks {
		t := time.NewTimer(fc.block)
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.conn.life.done:
			return errCloseConnection // the server is closing
		case <-req.interrupt:
			// A step-down kills the writes in progress, as mongod's does.
			return errInterrupted()
		}
	}
	if fc.closeConn {
		return errCloseConnection
	}
	if fc.errorCode != 0 {
		return &failCommandError{code: fc.errorCode, labels: fc.labels, hasLabels: fc.hasLabels}
	}
	return nil
}

// failAfterWrite applies the fail point to the reply d of req, which
// succeeded: it may add a writeConcernError, and errorLabels: the fail
// point's, or those mongod computes for the writeConcernError's code.
// Without one, the write concern's own outcome follows (see
// writeConcernOutcome): as in mongod, the fail point's writeConcernError
// stands in for the wait for the write concern.
func (s *Server) failAfterWrite(req *request, d bson.D) bson.D {
	fc := s.failPoints.fire(req, afterWrite, &s.stats)
	if fc == nil {
		return s.writeConcernOutcome(req, d)
	}
	return s.appendWriteConcernError(req, d, fc.wce, fc.labels, fc.hasLabels)
}

// sleepUnlessClosed waits d, or less if done (the end of the server's
// life) closes: it reports whether it waited all of d.
func sleepUnlessClosed(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// errServerClosing ends a wait when the server closes.
var errServerClosing = errors.New("the server is closing")

// wait waits until the fail point has fired n times in total, ctx ends, or
// done (the server's, or its life's) closes.
func (f *failPoints) wait(ctx context.Context, done <-chan struct{}, n int64) error {
	for {
		f.mu.Lock()
		if f.entered >= n {
			f.mu.Unlock()
			return nil
		}
		if f.fired == nil {
			f.fired = make(chan struct{})
		}
		fired := f.fired
		f.mu.Unlock()
		select {
		case <-fired:
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errServerClosing
		}
	}
}

// configureFailPoint runs
// {configureFailPoint: name, mode, data} on admin; the reply's count is the
// times the fail point fired before.
func (s *Server) configureFailPoint(req *request) (bson.D, error) {
	if req.db != "admin" {
		return nil, errorf(codeUnauthorized, "configureFailPoint may only be run against the admin database.")
	}
	n, err := s.failPoints.configure(req.body)
	if err != nil {
		return nil, err
	}
	return bson.D{{Key: "count", Value: countValue(n)}}, nil
}

// countValue encodes n as mongod's appendNumber does: an int32 when it
// fits.
func countValue(n int64) any {
	if n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// waitForFailPoint runs {waitForFailPoint: "failCommand", timesEntered,
// maxTimeMS} on admin: it returns once the fail point has fired
// timesEntered times in total, or fails with MaxTimeMSExpired.
func (s *Server) waitForFailPoint(req *request) (bson.D, error) {
	if req.db != "admin" {
		return nil, errorf(codeUnauthorized, "waitForFailPoint may only be run against the admin database.")
	}
	if err := checkFailPointName(req.body, "waitForFailPoint"); err != nil {
		return nil, err
	}
	tv, err := req.body.LookupErr("timesEntered")
	if err != nil {
		return nil, errorf(codeBadValue, "BSON field 'waitForFailPoint.timesEntered' is missing but a required field")
	}
	n, err := fpInt(tv, "timesEntered")
	if err != nil {
		return nil, err
	}
	mv, err := req.body.LookupErr("maxTimeMS")
	if err != nil {
		return nil, errorf(codeBadValue, "waitForFailPoint needs maxTimeMS, so that it cannot wait forever")
	}
	ms, err := fpInt(mv, "maxTimeMS")
	if err != nil {
		return nil, err
	}
	if ms <= 0 || ms > math.MaxInt32 {
		return nil, errorf(codeBadValue, "maxTimeMS must be from 1 to %d, got %d", math.MaxInt32, ms)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
	defer cancel()
	switch err := s.failPoints.wait(ctx, req.conn.life.done, n); {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, errorf(codeMaxTimeMSExpired, "operation exceeded time limit: the fail point fired fewer than %d times", n)
	case err != nil:
		return nil, errorf(codeInterruptedAtShutdown, "interrupted at shutdown")
	}
	return bson.D{}, nil
}

// The value helpers below name the field in their errors.

// fpInt reads an integer: int32, int64, or a double without a fraction
// (JSON test files give doubles).
func fpInt(v bson.RawValue, field string) (int64, error) {
	switch v.Type {
	case bson.TypeInt32, bson.TypeInt64:
		return v.AsInt64(), nil
	case bson.TypeDouble:
		f := v.Double()
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), nil
		}
		return 0, errorf(codeBadValue, "%s must be an integer, got %v", field, f)
	case 0:
		return 0, errorf(codeBadValue, "%s is missing", field)
	}
	return 0, errorf(codeTypeMismatch, "%s must be an integer, not %s", field, v.Type)
}

// fpBool reads a bool, or a number as MongoDB takes one.
func fpBool(v bson.RawValue, field string) (bool, error) {
	if b, ok := boolValue(v); ok {
		return b, nil
	}
	return false, errorf(codeTypeMismatch, "%s must be a boolean, not %s", field, v.Type)
}

// fpString reads a string.
func fpString(v bson.RawValue, field string) (string, error) {
	s, ok := v.StringValueOK()
	if !ok {
		return "", errorf(codeTypeMismatch, "%s must be a string, not %s", field, v.Type)
	}
	return s, nil
}

// fpStrings reads an array of strings.
func fpStrings(v bson.RawValue, field string) ([]string, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "%s must be an array of strings, not %s", field, v.Type)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, errorf(codeBadValue, "%s: %v", field, err)
	}
	out := make([]string, 0, len(vals))
	for i, e := range vals {
		s, ok := e.StringValueOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "%s.%d must be a string, not %s", field, i, e.Type)
		}
		out = append(out, s)
	}
	return out, nil
}

// The error codes the fail point commands reply with, beyond errors.go's.
const (
	codeIllegalOperation      = 20
	codeMaxTimeMSExpired      = 50
	codeInvalidOptions        = 72
	codeInterruptedAtShutdown = 11600
)

// failCommandCodeNames are MongoDB's names of the codes above and of the
// codes tests commonly make failCommand reply with, so that a reply's
// codeName is the one mongod gives rather than "Location<code>".
var failCommandCodeNames = map[int32]string{
	6:                         "HostUnreachable",
	7:                         "HostNotFound",
	8:                         "UnknownError",
	9:                         "FailedToParse",
	codeIllegalOperation:      "IllegalOperation",
	24:                        "LockTimeout",
	codeMaxTimeMSExpired:      "MaxTimeMSExpired",
	64:                        "WriteConcernFailed",
	codeInvalidOptions:        "InvalidOptions",
	89:                        "NetworkTimeout",
	91:                        "ShutdownInProgress",
	100:                       "UnsatisfiableWriteConcern",
	112:                       "WriteConflict",
	133:                       "FailedToSatisfyReadPreference",
	189:                       "PrimarySteppedDown",
	234:                       "RetryChangeStream",
	251:                       "NoSuchTransaction",
	262:                       "ExceededTimeLimit",
	462:                       "IngressRequestRateLimitExceeded",
	9001:                      "SocketException",
	10107:                     "NotWritablePrimary",
	codeInterruptedAtShutdown: "InterruptedAtShutdown",
	11602:                     "InterruptedDueToReplStateChange",
	13435:                     "NotPrimaryNoSecondaryOk",
	13436:                     "NotPrimaryOrSecondary",
}

func init() {
	for code, name := range failCommandCodeNames {
		if _, ok := codeNames[code]; !ok {
			codeNames[code] = name
		}
	}
}
