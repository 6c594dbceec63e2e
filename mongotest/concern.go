package mongotest

import (
	"math"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements read and write concerns as mongod checks them,
// before a command runs, and as a replica set answers a write concern once
// the write is applied (writeConcernError). Each rule names the mongod
// source it follows, so that a reader can check it:
//
//   - the writeConcern document is parsed as WriteConcernOptions::parse and
//     the WriteConcernIdl parser do (src/mongo/db/write_concern_options.cpp,
//     write_concern_options.idl, write_concern_idl.cpp): FailedToParse for a
//     bad w, TypeMismatch for a j or fsync that is no boolean or number,
//     IDLUnknownField for an unknown field;
//   - a standalone refuses w > 1 and w modes other than "majority"
//     (validateWriteConcern, src/mongo/db/write_concern.cpp), BadValue,
//     before the write;
//   - a replica set applies the write and then reports a w it cannot
//     satisfy as a writeConcernError: UnsatisfiableWriteConcern (100) for
//     more members than bear data, UnknownReplWriteConcern (79) for a mode
//     its configuration lacks (ReplSetConfig::checkIfWriteConcernCanBeSatisfied
//     and findCustomWriteMode); replication being instantaneous here, any
//     other w is satisfied once enough members run and are not
//     partitioned, which it waits for up to wtimeout (WriteConcernFailed)
//     or maxTimeMS;
//   - the readConcern document is parsed as ReadConcernArgs::parse does
//     (src/mongo/db/repl/read_concern_args.cpp), and its level checked as
//     waitForReadConcernImpl does (src/mongo/db/read_concern_mongod.cpp):
//     linearizable and snapshot need a replica set member, linearizable
//     the primary, afterClusterTime replication.
//
// Commands of a multi-document transaction are left to the transaction's
// own rules, but for the write concern of commitTransaction and
// abortTransaction.

// writeConcern is a command's write concern, as mongod parses it.
type writeConcern struct {
	// given is set when the command has a non-empty writeConcern.
	given bool
	// w is the w given: a number (wNum) or a mode (wMode, "majority" or
	// a name); hasW is unset when the document has no w, which means 1.
	hasW  bool
	wNum  int64
	wMode string
	wTags bool // w is a document of tags
	// j and fsync, when given (hasJ, hasFsync), as booleans.
	j, hasJ, fsync, hasFsync bool
	wtimeout                 int64
	provenance               string
}

// writeConcernCommands are the commands of a transaction whose write
// concern mongod checks: the others of a transaction take none.
var transactionWriteConcernCommands = map[string]bool{"commitTransaction": true, "abortTransaction": true}

// readConcernCommands are the commands that take every read concern
// level; the others take "local" only, as mongod's default
// Command::supportsReadConcern.
var readConcernCommands = map[string]bool{"find": true, "aggregate": true, "count": true, "distinct": true}

// provenances are the values of a read or write concern's provenance
// (ReadWriteConcernProvenanceSource, read_write_concern_provenance_base.idl).
var provenances = []string{"clientSupplied", "implicitDefault", "customDefault", "getLastErrorDefaults", "internalWriteDefault"}

// checkConcerns checks the read and write concerns of req, which may run
// with h, as mongod does before the command runs.
func (s *Server) checkConcerns(req *request, h handler) error {
	inTxn := req.session.inTransaction()
	if !inTxn {
		if err := s.checkReadConcern(req); err != nil {
			return err
		}
	}
	v, err := req.body.LookupErr("writeConcern")
	if err != nil || inTxn && !transactionWriteConcernCommands[req.name] {
		return nil
	}
	// aggregate takes a write concern for its $out and $merge stages,
	// which this package refuses; the write concern of the others is
	// checked all the same.
	if !h.writeConcern && req.name != "aggregate" {
		return errorf(codeInvalidOptions, "Command does not support writeConcern")
	}
	wc, err := parseWriteConcern(v)
	if err != nil {
		return err
	}
	if s.role == roleStandalone {
		// validateWriteConcern: a standalone has no member to wait for.
		switch {
		case wc.wNum > 1:
			return errorf(codeBadValue, "cannot use 'w' > 1 when a host is not replicated")
		case wc.wMode != "" && wc.wMode != "majority":
			return errorf(codeBadValue, "cannot use non-majority 'w' mode %s when a host is not a member of a replica set", wc.wMode)
		}
	}
	if wc.wTags {
		return errorf(codeBadValue, "mongotest does not implement write concerns with w as a document of tags")
	}
	return nil
}

// parseWriteConcern parses the writeConcern field v of a command.
func parseWriteConcern(v bson.RawValue) (writeConcern, error) {
	var wc writeConcern
	doc, ok := v.DocumentOK()
	if !ok {
		// bsonExtractTypedField, from WriteConcernOptions::extractWCFromCommand.
		return wc, errorf(codeTypeMismatch, "\"writeConcern\" had the wrong type. Expected object, found %s", typeName(v.Type))
	}
	elems, err := doc.Elements()
	if err != nil {
		return wc, errorf(codeBadValue, "invalid writeConcern: %v", err)
	}
	if len(elems) == 0 {
		return wc, nil // the server's default write concern
	}
	wc.given = true
	seen := map[string]bool{}
	for _, e := range elems {
		k, ev := e.Key(), e.Value()
		if seen[k] {
			return wc, errorf(codeIDLDuplicateField, "BSON field 'writeConcern.%s' is a duplicate field", k)
		}
		seen[k] = true
		switch k {
		case "w":
			if err := wc.parseW(ev); err != nil {
				return wc, err
			}
		case "j", "fsync":
			b, err := safeBool("writeConcern."+k, ev)
			if err != nil {
				return wc, err
			}
			if k == "j" {
				wc.j, wc.hasJ = b, true
			} else {
				wc.fsync, wc.hasFsync = b, true
			}
		case "wtimeout":
			// parseWTimeoutFromBSON: a value of another type counts as 0.
			if isNumber(ev) {
				n := truncInt(floatOf(ev))
				if i, ok := intOf(ev); ok {
					n = i
				}
				if n > math.MaxInt32 {
					return wc, errorf(codeFailedToParse, "wtimeout must be a 32-bit integer")
				}
				wc.wtimeout = n
			}
		case "provenance":
			p, err := parseProvenance("writeConcern", ev)
			if err != nil {
				return wc, err
			}
			wc.provenance = p
		case "wElectionId", "wOpTime", "getLastError":
			// Accepted and ignored, for backwards compatibility.
		default:
			return wc, errorf(codeIDLUnknownField, "BSON field 'writeConcern.%s' is an unknown field.", k)
		}
	}
	if wc.j && wc.fsync {
		return wc, errorf(codeFailedToParse, "fsync and j options cannot be used together")
	}
	return wc, nil
}

// parseW parses w as deserializeWriteConcernW does.
func (wc *writeConcern) parseW(v bson.RawValue) error {
	switch {
	case isNumber(v):
		if isNaN(v) {
			return errorf(codeFailedToParse, "w cannot be NaN")
		}
		n, ok := intOf(v)
		if !ok {
			n = truncInt(floatOf(v))
		}
		if n < 0 || n > maxMembers {
			return errorf(codeFailedToParse, "w has to be a non-negative number and not greater than %d; found: %d", maxMembers, n)
		}
		wc.wNum, wc.hasW = n, true
	case v.Type == bson.TypeString:
		mode := v.StringValue()
		if strings.ContainsRune(mode, 0) {
			return errorf(codeFailedToParse, "w has illegal embedded NUL byte, w: %s", mode)
		}
		wc.wMode, wc.hasW = mode, true
	case v.Type == bson.TypeEmbeddedDocument:
		if len(v.Document()) <= 5 {
			return errorf(codeFailedToParse, "tagged write concern requires tags")
		}
		wc.wTags, wc.hasW = true, true
	case v.Type == bson.TypeNull || v.Type == bson.TypeUndefined:
		// As if there were no w.
	default:
		return errorf(codeFailedToParse, "w has to be a number, string, or object; found: %s", typeName(v.Type))
	}
	return nil
}

// safeBool reads v as the IDL type safeBool: a boolean, or a number's
// truth.
func safeBool(field string, v bson.RawValue) (bool, error) {
	if v.Type != bson.TypeBoolean && !isNumber(v) {
		return false, errorf(codeTypeMismatch, "BSON field '%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'", field, typeName(v.Type))
	}
	return truthy(v), nil
}

// parseProvenance reads the provenance of a read or write concern.
func parseProvenance(where string, v bson.RawValue) (string, error) {
	p, ok := v.StringValueOK()
	if !ok {
		return "", errorf(codeTypeMismatch, "BSON field '%s.provenance' is the wrong type '%s', expected type 'string'", where, typeName(v.Type))
	}
	for _, q := range provenances {
		if p == q {
			return p, nil
		}
	}
	return "", errorf(codeBadValue, "Enumeration value '%s' for field '%s.provenance' is not a valid value.", p, where)
}

// writeConcernOutcome returns the reply d of the write req, which
// succeeded on a replica set's primary, once its write concern is
// satisfied, or with the writeConcernError mongod gives when it cannot be:
// the write stays applied. Replication being instantaneous, the members
// that run have the write at once; the wait is for those that do not.
func (s *Server) writeConcernOutcome(req *request, d bson.D) bson.D {
	v, err := req.body.LookupErr("writeConcern")
	if err != nil || s.rs == nil || !s.isPrimary() || req.session.inTransaction() && !transactionWriteConcernCommands[req.name] {
		return d
	}
	wc, err := parseWriteConcern(v) // checkConcerns found it right
	if err != nil || !wc.given || (wc.wMode == "" && wc.wNum <= 1) {
		return d
	}
	switch {
	case wc.wMode == "majority":
		return s.awaitMembers(req, d, wc, s.rs.writeMajority())
	case wc.wMode != "":
		return s.writeConcernError(req, d, wc, codeUnknownReplWriteConcern, "No write concern mode named '"+wc.wMode+"' found in replica set configuration", false)
	case int(wc.wNum) > s.rs.dataBearing():
		return s.writeConcernError(req, d, wc, codeUnsatisfiableWriteConcern, "Not enough data-bearing nodes", false)
	}
	return s.awaitMembers(req, d, wc, int(wc.wNum))
}

// writeConcernError adds to the reply d of req the writeConcernError code
// with errmsg msg, and in its errInfo the write concern wc (and wtimeout:
// true when it timed out), as mongod's appendCommandWCStatus does.
func (s *Server) writeConcernError(req *request, d bson.D, wc writeConcern, code int32, msg string, timedOut bool) bson.D {
	var info bson.D
	if timedOut {
		info = append(info, bson.E{Key: "wtimeout", Value: true})
	}
	info = append(info, bson.E{Key: "writeConcern", Value: wc.used()})
	wce := bson.D{
		{Key: "code", Value: code},
		{Key: "codeName", Value: codeName(code)},
		{Key: "errmsg", Value: msg},
		{Key: "errInfo", Value: info},
	}
	return s.appendWriteConcernError(req, d, mustMarshal(wce), nil, false)
}

// ackPoll is how often a write concern that waits for members looks at
// them again: nothing announces a member's return to it.
const ackPoll = 5 * time.Millisecond

// awaitMembers waits, as mongod's awaitReplication, until need members
// that bear data have the write: those that run and are not partitioned
// (replication being instantaneous, they have it at once). It gives up
// with a writeConcernError when wtimeout passes (WriteConcernFailed), when
// maxTimeMS does (MaxTimeMSExpired), when the member steps down
// (PrimarySteppedDown) or when the server closes (InterruptedAtShutdown);
// the write stays applied.
func (s *Server) awaitMembers(req *request, d bson.D, wc writeConcern, need int) bson.D {
	if need <= 1 || s.rs.acknowledged(s.self) >= need {
		return d
	}
	var wtimeout, maxTime <-chan time.Time
	if wc.wtimeout > 0 {
		t := time.NewTimer(time.Duration(wc.wtimeout) * time.Millisecond)
		defer t.Stop()
		wtimeout = t.C
	}
	if v, err := req.body.LookupErr("maxTimeMS"); err == nil && isNumber(v) && floatOf(v) > 0 {
		t := time.NewTimer(time.Duration(floatOf(v) * float64(time.Millisecond)))
		defer t.Stop()
		maxTime = t.C
	}
	tick := time.NewTicker(ackPoll)
	defer tick.Stop()
	for s.rs.acknowledged(s.self) < need {
		select {
		case <-tick.C:
		case <-wtimeout:
			return s.writeConcernError(req, d, wc, codeWriteConcernFailed, "waiting for replication timed out", true)
		case <-maxTime:
			return s.writeConcernError(req, d, wc, codeMaxTimeMSExpired, "operation exceeded time limit", false)
		case <-req.interrupt:
			return s.writeConcernError(req, d, wc, codePrimarySteppedDown, "Primary stepped down while waiting for replication", false)
		case <-s.done:
			return s.writeConcernError(req, d, wc, codeInterruptedAtShutdown, "interrupted at shutdown", false)
		}
	}
	return d
}

// acknowledged returns the number of members that bear data and have a
// write of member i: i itself, and the others that run and are not
// partitioned, unless i is partitioned.
func (rs *ReplicaSet) acknowledged(i int) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.members[i].partitioned != nil {
		return 1
	}
	n := 0
	for j, m := range rs.members {
		if j == i || !m.conf.Arbiter && !m.stopped && m.partitioned == nil {
			n++
		}
	}
	return n
}

// writeMajority returns the members w: "majority" waits for: a majority
// of the voting members (every member votes here, arbiters too), but no
// more than the voting members that bear data, as mongod's
// ReplSetConfig computes its write majority.
func (rs *ReplicaSet) writeMajority() int {
	return min(len(rs.members)/2+1, rs.dataBearing())
}

// used is the write concern as mongod reports it in a writeConcernError's
// errInfo (WriteConcernOptions::toBSON): w, j or fsync, wtimeout,
// provenance.
func (wc writeConcern) used() bson.D {
	var d bson.D
	switch {
	case wc.wMode != "":
		d = append(d, bson.E{Key: "w", Value: wc.wMode})
	case !wc.hasW:
		d = append(d, bson.E{Key: "w", Value: int32(1)})
	case wc.wNum <= math.MaxInt32:
		d = append(d, bson.E{Key: "w", Value: int32(wc.wNum)})
	}
	switch {
	case wc.j:
		d = append(d, bson.E{Key: "j", Value: true})
	case wc.fsync:
		d = append(d, bson.E{Key: "fsync", Value: true})
	case wc.hasJ:
		d = append(d, bson.E{Key: "j", Value: false})
	}
	provenance := wc.provenance
	if provenance == "" {
		provenance = "clientSupplied"
	}
	return append(d, bson.E{Key: "wtimeout", Value: int32(wc.wtimeout)}, bson.E{Key: "provenance", Value: provenance})
}

// appendWriteConcernError adds the writeConcernError wce to the reply d of
// req, with errorLabels (labels if hasLabels, else those mongod computes
// for its code) and, for a state change code, the member's
// topologyVersion: the shape of mongod's reply, and of the failCommand
// fail point's.
func (s *Server) appendWriteConcernError(req *request, d bson.D, wce bson.Raw, labels []string, hasLabels bool) bson.D {
	d = append(d, bson.E{Key: "writeConcernError", Value: wce})
	code, _ := fpInt(wce.Lookup("code"), "code")
	if !hasLabels {
		labels = s.errorLabels(req, 0, int32(code))
	}
	if len(labels) > 0 {
		d = append(d, bson.E{Key: "errorLabels", Value: labels})
	}
	return append(d, s.stateChangeFields(int32(code))...)
}

// dataBearing returns the number of members that bear data: all but the
// arbiters.
func (rs *ReplicaSet) dataBearing() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, m := range rs.members {
		if !m.conf.Arbiter {
			n++
		}
	}
	return n
}

// checkReadConcern parses the readConcern of req as ReadConcernArgs::parse
// does, and checks that the command and the server take its level.
func (s *Server) checkReadConcern(req *request) error {
	v, err := req.body.LookupErr("readConcern")
	if err != nil {
		return nil
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return errorf(codeFailedToParse, "readConcern field should be an object")
	}
	elems, err := doc.Elements()
	if err != nil {
		return errorf(codeBadValue, "invalid readConcern: %v", err)
	}
	var level string
	var afterClusterTime, atClusterTime, afterOpTime bool
	var atNull, afterNull bool
	for _, e := range elems {
		ev := e.Value()
		switch k := e.Key(); k {
		case "level":
			l, ok := ev.StringValueOK()
			if !ok {
				return errorf(codeTypeMismatch, "\"level\" had the wrong type. Expected string, found %s", typeName(ev.Type))
			}
			switch l {
			case "local", "majority", "linearizable", "available", "snapshot":
			default:
				return errorf(codeFailedToParse, "readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'")
			}
			level = l
		case "afterClusterTime", "atClusterTime":
			t, i, ok := ev.TimestampOK()
			if !ok {
				return errorf(codeTypeMismatch, "\"%s\" had the wrong type. Expected timestamp, found %s", k, typeName(ev.Type))
			}
			if k == "afterClusterTime" {
				afterClusterTime, afterNull = true, t == 0 && i == 0
			} else {
				atClusterTime, atNull = true, t == 0
			}
		case "afterOpTime":
			if _, ok := ev.DocumentOK(); !ok {
				return errorf(codeTypeMismatch, "\"afterOpTime\" had the wrong type. Expected object, found %s", typeName(ev.Type))
			}
			afterOpTime = true
		case "provenance":
			if _, err := parseProvenance("readConcern", ev); err != nil {
				return err
			}
		default:
			return errorf(codeInvalidOptions, "Unrecognized option in readConcern: %s", k)
		}
	}
	switch {
	case afterClusterTime && afterOpTime:
		return errorf(codeInvalidOptions, "Can not specify both afterClusterTime and afterOpTime")
	case afterClusterTime && atClusterTime:
		return errorf(codeInvalidOptions, "Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency")
	case afterClusterTime && level != "" && level != "majority" && level != "local" && level != "snapshot":
		return errorf(codeInvalidOptions, "afterClusterTime field can be set only if level is equal to majority, local, or snapshot")
	case afterOpTime && level == "snapshot":
		return errorf(codeInvalidOptions, "afterOpTime field cannot be set if level is equal to snapshot")
	case atClusterTime && level != "snapshot":
		return errorf(codeInvalidOptions, "atClusterTime field can be set only if level is equal to snapshot")
	case atClusterTime && atNull:
		return errorf(codeInvalidOptions, "atClusterTime cannot be a null timestamp")
	case afterClusterTime && afterNull:
		return errorf(codeInvalidOptions, "afterClusterTime cannot be a null timestamp")
	}

	// The command's support of the level (Command::supportsReadConcern):
	// the reads take every level but count snapshot; the other commands
	// local only.
	unsupported := ""
	switch {
	case req.name == "count" && level == "snapshot":
		unsupported = "read concern snapshot not supported"
	case !readConcernCommands[req.name] && level != "" && level != "local":
		unsupported = "read concern not supported"
	}
	if unsupported != "" {
		rc := bson.D{{Key: "level", Value: level}, {Key: "provenance", Value: "clientSupplied"}}
		return errorf(codeInvalidOptions, "Command %s does not support %s :: caused by :: %s",
			req.name, formatDoc(mustMarshal(bson.D{{Key: "readConcern", Value: rc}})), unsupported)
	}

	// waitForReadConcernImpl.
	switch {
	case level == "linearizable" && s.role == roleStandalone:
		return errorf(codeNotAReplicaSet, "node needs to be a replica set member to use read concern")
	case level == "linearizable" && s.rs != nil && !s.isPrimary():
		return errorf(codeNotWritablePrimary, "cannot satisfy linearizable read concern on non-primary node")
	case level == "snapshot" && s.role == roleStandalone:
		return errorf(codeNotAReplicaSet, "node needs to be a replica set member to use readConcern: snapshot")
	case level == "snapshot":
		// A snapshot read answers at a point in time (atClusterTime),
		// which this package does not keep.
		return errorf(codeBadValue, "mongotest does not implement readConcern level snapshot outside transactions")
	case (afterClusterTime || atClusterTime) && s.role == roleStandalone:
		name := "afterClusterTime"
		if atClusterTime {
			name = "atClusterTime"
		}
		return errorf(codeIllegalOperation, "Cannot specify %s readConcern without replication enabled", name)
	}
	return nil
}

// isPrimary reports whether the replica set member s is primary now.
func (s *Server) isPrimary() bool {
	s.rs.mu.Lock()
	defer s.rs.mu.Unlock()
	return s.rs.members[s.self].role == rolePrimary
}

// The error codes of read and write concerns.
const (
	codeWriteConcernFailed        = 64
	codeUnknownReplWriteConcern   = 79
	codeUnsatisfiableWriteConcern = 100
	codeNotAReplicaSet            = 123
	codeIDLDuplicateField         = 40413
)

func init() {
	codeNames[codeUnknownReplWriteConcern] = "UnknownReplWriteConcern"
	codeNames[codeUnsatisfiableWriteConcern] = "UnsatisfiableWriteConcern"
	codeNames[codeNotAReplicaSet] = "NotAReplicaSet"
}
