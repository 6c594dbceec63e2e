package topology

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mongopool/mongopool/wire"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/handshake"
)

// helloFields are the fields of a hello reply that parseReply reads.
var helloFields = map[string]bool{
	"ok": true, "errmsg": true, "code": true, "codeName": true,
	"isWritablePrimary": true, "ismaster": true, "secondary": true, "arbiterOnly": true,
	"hidden": true, "isreplicaset": true, "msg": true, "setName": true, "setVersion": true,
	"electionId": true, "primary": true, "me": true, "hosts": true, "passives": true,
	"arbiters": true, "tags": true, "minWireVersion": true, "maxWireVersion": true,
	"lastWrite": true, "logicalSessionTimeoutMinutes": true, "topologyVersion": true,
	"iscryptd": true, "serviceId": true, "helloOk": true,
}

// replyFields holds the first occurrence of each field of helloFields in a
// reply, as Lookup would find it, read in one pass.
type replyFields map[string]bson.RawValue

// readFields validates doc and returns the values of its fields named in
// want, reading the document once, however many fields it has.
func readFields(doc bson.Raw, want map[string]bool) (replyFields, error) {
	if err := doc.Validate(); err != nil {
		return nil, fmt.Errorf("malformed BSON: %v", err)
	}
	fields := replyFields{}
	for rest := []byte(doc[4 : len(doc)-1]); len(rest) > 0; {
		e, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return nil, fmt.Errorf("malformed BSON: truncated element")
		}
		rest = next
		if !want[string(e.KeyBytes())] {
			continue
		}
		key := string(e.KeyBytes())
		if _, dup := fields[key]; dup {
			continue
		}
		v := e.Value()
		fields[key] = bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
	}
	return fields, nil
}

// parseReply makes the description of the server at address from its hello
// reply; see newServerDescription for the rules and the bounds.
func parseReply(address string, reply bson.Raw) (ServerDescription, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("topology: hello reply from %s: %w: %s", address, ErrInvalidReply, fmt.Sprintf(format, args...))
	}
	if len(reply) > handshake.MaxReplySize {
		return ServerDescription{}, invalid("%d bytes, more than the %d a hello reply may have", len(reply), handshake.MaxReplySize)
	}
	f, err := readFields(reply, helloFields)
	if err != nil {
		return ServerDescription{}, invalid("%v", err)
	}
	p := fieldParser{fields: f}
	if ce, ok, err := commandErrorOf(f); err != nil {
		return ServerDescription{}, invalid("%v", err)
	} else if ok {
		return ServerDescription{}, fmt.Errorf("topology: hello to %s failed: %w", address, ce)
	}

	s := ServerDescription{Address: address}
	s.MinWireVersion = p.int32("minWireVersion")
	s.MaxWireVersion = p.int32("maxWireVersion")
	if p.err == nil && s.MinWireVersion > s.MaxWireVersion {
		p.fail("minWireVersion %d is greater than maxWireVersion %d", s.MinWireVersion, s.MaxWireVersion)
	}
	s.SetName = p.str("setName", maxNameLen)
	s.Me = normalizeAddress(p.str("me", maxAddressLen))
	s.Primary = normalizeAddress(p.str("primary", maxAddressLen))
	members := 0
	s.Hosts = p.addresses("hosts", &members)
	s.Passives = p.addresses("passives", &members)
	s.Arbiters = p.addresses("arbiters", &members)
	s.Tags = p.tags()
	s.ElectionID = p.objectID("electionId")
	s.SetVersion = p.int64("setVersion")
	s.LogicalSessionTimeoutMinutes = p.int64("logicalSessionTimeoutMinutes")
	s.TopologyVersion = p.topologyVersion()
	s.LastWriteDate, s.OpTime = p.lastWrite()
	s.IsCryptd = p.boolean("iscryptd")
	s.ServiceID = p.objectID("serviceId")
	s.HelloOK = p.boolean("helloOk")

	// isWritablePrimary first; the legacy ismaster only when it is absent.
	primary := p.boolean("ismaster")
	if _, ok := f["isWritablePrimary"]; ok {
		primary = p.boolean("isWritablePrimary")
	}
	secondary := p.boolean("secondary")
	arbiter := p.boolean("arbiterOnly")
	hidden := p.boolean("hidden")
	ghost := p.boolean("isreplicaset")
	// msg is informational: only its being "isdbgrid" counts.
	msg, _ := f["msg"].StringValueOK()
	if p.err != nil {
		return ServerDescription{}, invalid("%v", p.err)
	}

	switch {
	case ghost:
		s.Type = RSGhost
	case s.SetName != "":
		switch {
		case primary:
			s.Type = RSPrimary
		case hidden:
			s.Type = RSOther
		case secondary:
			s.Type = RSSecondary
		case arbiter:
			s.Type = RSArbiter
		default:
			s.Type = RSOther
		}
	case msg == "isdbgrid":
		s.Type = Mongos
	default:
		s.Type = Standalone
	}
	return s, nil
}

// commandErrorOf returns the error of a reply whose ok is not 1. A reply
// without ok, or with an ok that is not a number or a boolean, is an error.
func commandErrorOf(f replyFields) (*wire.CommandError, bool, error) {
	v, ok := f["ok"]
	if !ok {
		return nil, false, fmt.Errorf("no ok field")
	}
	var good bool
	switch v.Type {
	case bson.TypeDouble, bson.TypeInt32, bson.TypeInt64:
		n, _ := v.AsFloat64OK()
		good = n == 1
	case bson.TypeBoolean:
		good = v.Boolean()
	default:
		return nil, false, fmt.Errorf("ok is a %s, not a number or a boolean", v.Type)
	}
	if good {
		return nil, false, nil
	}
	ce := &wire.CommandError{}
	ce.Code, _ = boundedInt32(f["code"])
	ce.CodeName = boundedString(f["codeName"], maxNameLen)
	ce.Message = boundedString(f["errmsg"], maxErrmsgLen)
	return ce, true, nil
}

// maxErrmsgLen bounds the errmsg kept in a wire.CommandError. MongoDB's messages
// are a line or two; a longer one is cut.
const maxErrmsgLen = 4096

// boundedString returns v's string, cut to at most n bytes; "" if v is not
// a string.
func boundedString(v bson.RawValue, n int) string {
	s, ok := v.StringValueOK()
	if !ok {
		return ""
	}
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// boundedInt32 reads an integral number that fits in an int32.
func boundedInt32(v bson.RawValue) (int32, bool) {
	n, ok := asInt64(v)
	if !ok || n < math.MinInt32 || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// asInt64 reads an int32, an int64 or an integral double.
func asInt64(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		return int64(v.Int32()), true
	case bson.TypeInt64:
		return v.Int64(), true
	case bson.TypeDouble:
		f := v.Double()
		// float64(math.MaxInt64) rounds up to 2^63, so use <.
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// fieldParser reads fields of a validated reply, keeping the first error.
type fieldParser struct {
	fields replyFields
	err    error
}

func (p *fieldParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

// present returns the field, absent when missing or null.
func (p *fieldParser) present(key string) (bson.RawValue, bool) {
	v, ok := p.fields[key]
	if !ok || v.Type == bson.TypeNull {
		return bson.RawValue{}, false
	}
	return v, true
}

func (p *fieldParser) boolean(key string) bool {
	v, ok := p.present(key)
	if !ok {
		return false
	}
	b, isBool := v.BooleanOK()
	if !isBool {
		p.fail("%s is a %s, not a boolean", key, v.Type)
	}
	return b
}

// int32 reads a non-negative integer that fits in an int32.
func (p *fieldParser) int32(key string) int32 {
	v, ok := p.present(key)
	if !ok {
		return 0
	}
	n, isInt := asInt64(v)
	if !isInt || n < 0 || n > math.MaxInt32 {
		p.fail("%s is not an integer from 0 to %d", key, math.MaxInt32)
		return 0
	}
	return int32(n)
}

// int64 reads an integer; nil when absent or null.
func (p *fieldParser) int64(key string) *int64 {
	v, ok := p.present(key)
	if !ok {
		return nil
	}
	n, isInt := asInt64(v)
	if !isInt {
		p.fail("%s is a %s, not an integer", key, v.Type)
		return nil
	}
	return &n
}

// str reads a string of at most max bytes; "" when absent or null.
func (p *fieldParser) str(key string, max int) string {
	v, ok := p.present(key)
	if !ok {
		return ""
	}
	s, isStr := v.StringValueOK()
	switch {
	case !isStr:
		p.fail("%s is a %s, not a string", key, v.Type)
		return ""
	case len(s) > max:
		p.fail("%s of %d bytes is longer than the limit of %d", key, len(s), max)
		return ""
	}
	return s
}

func (p *fieldParser) objectID(key string) *bson.ObjectID {
	v, ok := p.present(key)
	if !ok {
		return nil
	}
	oid, isOID := v.ObjectIDOK()
	if !isOID {
		p.fail("%s is a %s, not an ObjectId", key, v.Type)
		return nil
	}
	return &oid
}

// addresses reads an array of addresses, lower-cased, sorted and without
// duplicates. *count is the number of entries of the member lists read so
// far: together they may have at most maxMembers.
func (p *fieldParser) addresses(key string, count *int) []string {
	v, ok := p.present(key)
	if !ok {
		return nil
	}
	arr, isArr := v.ArrayOK()
	if !isArr {
		p.fail("%s is a %s, not an array", key, v.Type)
		return nil
	}
	var out []string
	err := eachValue(bson.Raw(arr), func(i int, e bson.RawValue) error {
		*count++
		if *count > maxMembers {
			return fmt.Errorf("hosts, passives and arbiters have more than %d entries", maxMembers)
		}
		s, isStr := e.StringValueOK()
		switch {
		case !isStr:
			return fmt.Errorf("%s[%d] is a %s, not a string", key, i, e.Type)
		case len(s) > maxAddressLen:
			return fmt.Errorf("%s[%d] of %d bytes is longer than the limit of %d", key, i, len(s), maxAddressLen)
		}
		out = append(out, normalizeAddress(s))
		return nil
	})
	if err != nil {
		p.fail("%v", err)
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (p *fieldParser) tags() map[string]string {
	v, ok := p.present("tags")
	if !ok {
		return nil
	}
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		p.fail("tags is a %s, not a document", v.Type)
		return nil
	}
	out := map[string]string{}
	n := 0
	for rest := []byte(doc[4 : len(doc)-1]); len(rest) > 0; {
		e, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			p.fail("tags: malformed BSON")
			return nil
		}
		rest = next
		if n++; n > maxTags {
			p.fail("tags has more than %d entries", maxTags)
			return nil
		}
		name := e.Key()
		val, isStr := e.Value().StringValueOK()
		switch {
		case !isStr:
			p.fail("tag %.64q is a %s, not a string", name, bson.Type(e.Value().Type))
			return nil
		case len(name) > maxNameLen || len(val) > maxNameLen:
			p.fail("tag %.64q is longer than the limit of %d bytes", name, maxNameLen)
			return nil
		}
		out[name] = val
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (p *fieldParser) topologyVersion() *handshake.TopologyVersion {
	v, ok := p.present("topologyVersion")
	if !ok {
		return nil
	}
	tv, err := parseTopologyVersion(v)
	if err != nil {
		p.fail("%v", err)
	}
	return tv
}

// parseTopologyVersion reads a topologyVersion document: {processId:
// ObjectId, counter: integer}.
func parseTopologyVersion(v bson.RawValue) (*handshake.TopologyVersion, error) {
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		return nil, fmt.Errorf("topologyVersion is a %s, not a document", v.Type)
	}
	pid, ok := doc.Lookup("processId").ObjectIDOK()
	if !ok {
		return nil, fmt.Errorf("topologyVersion.processId is missing or not an ObjectId")
	}
	counter, ok := asInt64(doc.Lookup("counter"))
	if !ok {
		return nil, fmt.Errorf("topologyVersion.counter is missing or not an integer")
	}
	return &handshake.TopologyVersion{ProcessID: pid, Counter: counter}, nil
}

func (p *fieldParser) lastWrite() (time.Time, bson.RawValue) {
	v, ok := p.present("lastWrite")
	if !ok {
		return time.Time{}, bson.RawValue{}
	}
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		p.fail("lastWrite is a %s, not a document", v.Type)
		return time.Time{}, bson.RawValue{}
	}
	var date time.Time
	if d, err := doc.LookupErr("lastWriteDate"); err == nil {
		ms, isDate := d.DateTimeOK()
		if !isDate {
			p.fail("lastWrite.lastWriteDate is a %s, not a date", d.Type)
			return time.Time{}, bson.RawValue{}
		}
		date = time.UnixMilli(ms).UTC()
	}
	var opTime bson.RawValue
	if o, err := doc.LookupErr("opTime"); err == nil {
		if len(o.Value) > maxOpTimeLen {
			p.fail("lastWrite.opTime of %d bytes is longer than the limit of %d", len(o.Value), maxOpTimeLen)
			return time.Time{}, bson.RawValue{}
		}
		opTime = bson.RawValue{Type: o.Type, Value: slices.Clone(o.Value)}
	}
	return date, opTime
}

// eachValue calls fn with each entry of a validated array, in order, and
// stops at the first error. It allocates nothing itself, whatever the
// number of entries.
func eachValue(arr bson.Raw, fn func(i int, v bson.RawValue) error) error {
	var want [20]byte
	for i, rest := 0, []byte(arr[4:len(arr)-1]); len(rest) > 0; i++ {
		e, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return fmt.Errorf("malformed BSON: array entry %d is truncated", i)
		}
		rest = next
		if string(e.KeyBytes()) != string(strconv.AppendInt(want[:0], int64(i), 10)) {
			return fmt.Errorf("malformed BSON: array key %.20q is out of order", e.KeyBytes())
		}
		v := e.Value()
		if err := fn(i, bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}); err != nil {
			return err
		}
	}
	return nil
}
