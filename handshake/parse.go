package handshake

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/wire"
)

// The limits MongoDB announces in its hello reply, and has since 3.6: a
// 16 MiB document (BSONObjMaxUserSize), a 48,000,000-byte message
// (MaxMessageSizeBytes) and 100,000 writes per batch (kMaxWriteBatchSize).
// Parse uses them where a reply leaves a limit out, and lowers any larger
// limit a reply announces to them: nothing a server can legitimately need
// lies beyond, and the connection sizes buffers from these limits.
const (
	DefaultMaxBSONObjectSize   = 16 * 1024 * 1024
	DefaultMaxMessageSizeBytes = 48000000
	DefaultMaxWriteBatchSize   = 100000
)

// MaxReplySize is the largest hello reply, in bytes, that Parse accepts, and
// the bound the connection package puts on the message carrying it, which
// arrives before the server's limits are known. It is the largest reply
// document MongoDB builds: maxBsonObjectSize plus the 16 KiB it allows for
// a command's own fields (BSONObjMaxInternalSize).
const MaxReplySize = DefaultMaxBSONObjectSize + wire.CommandOverhead

// Bounds on what Parse copies out of a reply, whose size only MaxReplySize
// limits. Past them, a reply is hostile, not merely unusual.
const (
	// maxSaslMechs is how many saslSupportedMechs entries Parse keeps: the
	// first ones. MongoDB knows seven mechanisms.
	maxSaslMechs = 32
	// maxMechNameLen is the longest SASL mechanism name (RFC 4422, 3.1);
	// longer entries are skipped, as non-strings are.
	maxMechNameLen = 20
	// maxStringLen bounds setName and msg. A replica set name is a few
	// words; msg is "isdbgrid".
	maxStringLen = 1024
)

// Errors that Parse returns. Each is wrapped with the details; test with
// errors.Is.
var (
	// ErrIncompatible: the server's wire-version range does not meet
	// mongopool's. The message is the one the SDAM specification gives.
	ErrIncompatible = errors.New("incompatible wire version")

	// ErrLoadBalancingUnsupported: in load-balanced mode the reply has no
	// serviceId. The message is the load-balancer specification's.
	ErrLoadBalancingUnsupported = errors.New("Driver attempted to initialize in load balancing mode, but the server does not support this mode.") //nolint:staticcheck // the specification's exact message

	// ErrInvalidReply: the reply is malformed, or a field has a wrong type
	// or an impossible value.
	ErrInvalidReply = errors.New("invalid hello reply")
)

// Description is what the handshake reply tells about the server and the
// connection.
type Description struct {
	// Wire-version range of the server (0 when absent).
	MinWireVersion, MaxWireVersion int32

	// Limits, defaulted when the reply leaves them out and lowered to the
	// Default values (MongoDB's own) when it announces more.
	MaxBSONObjectSize   int32
	MaxMessageSizeBytes int32
	MaxWriteBatchSize   int32

	// ConnectionID is the server's id for this connection (connectionId),
	// valid when HasConnectionID.
	ConnectionID    int64
	HasConnectionID bool

	// LogicalSessionTimeoutMinutes is the server's session timeout, valid
	// when HasLogicalSessionTimeout (absent: the server has no sessions).
	// Behind a load balancer, where no monitor describes the servers, the
	// handshake is what tells it.
	LogicalSessionTimeoutMinutes int64
	HasLogicalSessionTimeout     bool

	// ServiceID is the serviceId of a load-balanced reply, valid when
	// HasServiceID.
	ServiceID    [12]byte
	HasServiceID bool

	// Compressor is the negotiated compressor: the first of the client's
	// Options.Compressors that the server also lists; "" for none.
	Compressor string

	// Compressors are all the compressors of the client's
	// Options.Compressors (known ones only) that the server also lists, in
	// the client's order: the ones the server may compress its replies with.
	// Compressor is the first; nil for none.
	Compressors []string

	// SaslSupportedMechs is the reply's saslSupportedMechs; nil when absent.
	// Its contents are not validated: non-string entries, and strings longer
	// than a SASL mechanism name can be (20 bytes), are skipped, and only the
	// first 32 entries are kept.
	SaslSupportedMechs []string

	// SpeculativeAuthenticate is the reply's speculativeAuthenticate
	// document; nil when absent.
	SpeculativeAuthenticate bson.Raw

	// Topology hints.
	IsWritablePrimary bool   // isWritablePrimary, or the legacy ismaster
	HelloOK           bool   // helloOk: the server supports "hello"
	Msg               string // "isdbgrid" from a mongos
	SetName           string
	Secondary         bool
	ArbiterOnly       bool
	Hidden            bool
	IsReplicaSet      bool // isreplicaset: an RSGhost

	// TopologyVersion is the reply's topologyVersion; nil when absent.
	TopologyVersion *TopologyVersion
}

// IsMongos reports whether the server is a mongos (msg:"isdbgrid").
func (d *Description) IsMongos() bool { return d.Msg == "isdbgrid" }

// IsArbiter reports whether the server is a replica set arbiter (RSArbiter),
// on which no authentication is possible.
func (d *Description) IsArbiter() bool { return d.ArbiterOnly && d.SetName != "" }

// TopologyVersion is the server's topologyVersion.
type TopologyVersion struct {
	ProcessID [12]byte
	Counter   int64
}

// specError is an error whose text is fixed by a specification and that
// unwraps to one of the package's sentinel errors.
type specError struct {
	msg  string
	kind error
}

func (e *specError) Error() string { return e.msg }
func (e *specError) Unwrap() error { return e.kind }

func invalid(format string, args ...any) error {
	return &specError{msg: "handshake: invalid hello reply: " + fmt.Sprintf(format, args...), kind: ErrInvalidReply}
}

// Parse checks the reply to the handshake command built from opts and
// returns what it describes.
//
// It fails with an error wrapping the reply's *wire.CommandError
// ("handshake: hello failed: ...", from wire.CheckReply) when ok is not 1,
// with ErrIncompatible when the server's wire versions are out of
// mongopool's range, with ErrLoadBalancingUnsupported when a load-balanced
// handshake got no serviceId, and with ErrInvalidReply when the reply is
// malformed (including a missing ok, or an ok that is not a number or a
// boolean) or a field has a wrong type or an absurd value. It does not panic
// on any input.
//
// A reply larger than MaxReplySize is invalid. Parse copies only what it
// keeps, within fixed bounds, so a reply of millions of fields or array
// entries costs no more memory than a small one.
func Parse(reply bson.Raw, opts Options) (*Description, error) {
	if len(reply) > MaxReplySize {
		return nil, invalid("reply of %d bytes exceeds the %d bytes a hello reply may have", len(reply), MaxReplySize)
	}
	if err := reply.Validate(); err != nil {
		return nil, invalid("malformed BSON: %v", err)
	}
	// Validate checked the framing of every element. Only the fields read
	// below are kept; the first occurrence of each wins, as with Lookup.
	fields := make(map[string]bson.RawValue, len(fieldNames))
	for rest := reply[4 : len(reply)-1]; len(rest) > 0; {
		e, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return nil, invalid("malformed BSON: truncated element")
		}
		rest = next
		k, known := fieldNames[string(e.KeyBytes())]
		if !known {
			continue
		}
		if _, dup := fields[k]; dup {
			continue
		}
		v, err := e.ValueErr()
		if err != nil {
			return nil, invalid("malformed BSON in field %q: %v", k, err)
		}
		fields[k] = bson.RawValue{Type: bson.Type(v.Type), Value: v.Data}
	}
	p := parser{fields: fields}

	if err := p.checkOK(reply); err != nil {
		return nil, err
	}

	d := &Description{}
	p.int32Field("minWireVersion", &d.MinWireVersion, 0)
	p.int32Field("maxWireVersion", &d.MaxWireVersion, 0)
	maxBSON := p.limit("maxBsonObjectSize", DefaultMaxBSONObjectSize)
	maxMessage := p.limit("maxMessageSizeBytes", DefaultMaxMessageSizeBytes)
	maxBatch := p.limit("maxWriteBatchSize", DefaultMaxWriteBatchSize)
	if p.err == nil && maxMessage < maxBSON {
		p.fail("maxMessageSizeBytes %d is smaller than maxBsonObjectSize %d", maxMessage, maxBSON)
	}
	d.MaxBSONObjectSize = int32(min(maxBSON, DefaultMaxBSONObjectSize))
	d.MaxMessageSizeBytes = int32(min(maxMessage, DefaultMaxMessageSizeBytes))
	d.MaxWriteBatchSize = int32(min(maxBatch, DefaultMaxWriteBatchSize))
	if p.err == nil && d.MinWireVersion > d.MaxWireVersion {
		p.fail("minWireVersion %d is greater than maxWireVersion %d", d.MinWireVersion, d.MaxWireVersion)
	}
	d.ConnectionID, d.HasConnectionID = p.int64Field("connectionId")
	d.LogicalSessionTimeoutMinutes, d.HasLogicalSessionTimeout = p.int64Field("logicalSessionTimeoutMinutes")
	if v, ok := p.fields["serviceId"]; ok {
		oid, isOID := v.ObjectIDOK()
		if !isOID {
			p.fail("serviceId is a %s, not an ObjectId", v.Type)
		}
		d.ServiceID, d.HasServiceID = oid, isOID
	}
	d.Compressors = p.compressors(opts.Compressors)
	if len(d.Compressors) > 0 {
		d.Compressor = d.Compressors[0]
	}
	d.SaslSupportedMechs = p.mechs()
	if v, ok := p.fields["speculativeAuthenticate"]; ok {
		doc, isDoc := v.DocumentOK()
		if !isDoc {
			p.fail("speculativeAuthenticate is a %s, not a document", v.Type)
		} else if err := doc.Validate(); err != nil {
			p.fail("speculativeAuthenticate: malformed BSON: %v", err)
		} else {
			d.SpeculativeAuthenticate = doc
		}
	}
	d.TopologyVersion = p.topologyVersion()

	var ismaster bool
	p.boolField("isWritablePrimary", &d.IsWritablePrimary)
	p.boolField("ismaster", &ismaster)
	d.IsWritablePrimary = d.IsWritablePrimary || ismaster
	p.boolField("helloOk", &d.HelloOK)
	p.boolField("secondary", &d.Secondary)
	p.boolField("arbiterOnly", &d.ArbiterOnly)
	p.boolField("hidden", &d.Hidden)
	p.boolField("isreplicaset", &d.IsReplicaSet)
	p.stringField("msg", &d.Msg)
	p.stringField("setName", &d.SetName)
	if p.err != nil {
		return nil, p.err
	}

	if err := checkWireVersions(d, opts.Address); err != nil {
		return nil, err
	}
	if opts.LoadBalanced && !d.HasServiceID {
		return nil, &specError{msg: ErrLoadBalancingUnsupported.Error(), kind: ErrLoadBalancingUnsupported}
	}
	return d, nil
}

// checkWireVersions applies the SDAM compatibility rule, with its messages.
func checkWireVersions(d *Description, address string) error {
	server := "Server"
	if address != "" {
		server = "Server at " + address
	}
	if d.MinWireVersion > MaxWireVersion {
		return &specError{
			msg: fmt.Sprintf("%s requires wire version %d, but this version of %s only supports up to %d.",
				server, d.MinWireVersion, DriverName, MaxWireVersion),
			kind: ErrIncompatible,
		}
	}
	if d.MaxWireVersion < MinWireVersion {
		return &specError{
			msg: fmt.Sprintf("%s reports wire version %d, but this version of %s requires at least %d (MongoDB %s).",
				server, d.MaxWireVersion, DriverName, MinWireVersion, minMongoDBVersion),
			kind: ErrIncompatible,
		}
	}
	return nil
}

// fieldNames are the reply's fields Parse reads, each mapped to itself so
// that the key kept is not a copy of the reply's bytes. It is never written.
var fieldNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"ok", "minWireVersion", "maxWireVersion", "maxBsonObjectSize", "maxMessageSizeBytes",
		"maxWriteBatchSize", "connectionId", "serviceId", "compression", "saslSupportedMechs",
		"speculativeAuthenticate", "topologyVersion", "isWritablePrimary", "ismaster", "helloOk",
		"secondary", "arbiterOnly", "hidden", "isreplicaset", "msg", "setName", "logicalSessionTimeoutMinutes",
	} {
		m[k] = k
	}
	return m
}()

// parser reads fields of a validated reply, keeping the first error.
type parser struct {
	fields map[string]bson.RawValue
	err    error
}

func (p *parser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = invalid(format, args...)
	}
}

// checkOK requires ok:1, as wire.CheckReply decides it, and wraps the
// *wire.CommandError of any other ok. A missing ok, or one of a type
// wire.CheckReply does not accept, makes the reply invalid.
func (p *parser) checkOK(reply bson.Raw) error {
	err := wire.CheckReply(reply)
	if err == nil {
		return nil
	}
	var ce *wire.CommandError
	if errors.As(err, &ce) {
		return fmt.Errorf("handshake: hello failed: %w", ce)
	}
	// Parse validated the reply: CheckReply objected to ok itself.
	v, ok := p.fields["ok"]
	if !ok {
		return invalid("no ok field")
	}
	switch v.Type {
	case bson.TypeDouble, bson.TypeInt32, bson.TypeInt64, bson.TypeBoolean:
		return invalid("ok: %v", err)
	}
	return invalid("ok is a %s, not a number or a boolean", v.Type)
}

// asInt64 reads an int32, an int64 or an integral double.
func asInt64(v bson.RawValue) (int64, bool) {
	switch v.Type {
	case bson.TypeInt32:
		n, ok := v.Int32OK()
		return int64(n), ok
	case bson.TypeInt64:
		return v.Int64OK()
	case bson.TypeDouble:
		f, ok := v.DoubleOK()
		// float64(math.MaxInt64) rounds up to 2^63, so use <.
		if !ok || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

// int32Field reads a numeric field into *dst when present; the value must
// be an integer in [minVal, MaxInt32].
func (p *parser) int32Field(key string, dst *int32, minVal int32) {
	v, ok := p.fields[key]
	if !ok {
		return
	}
	n, isInt := asInt64(v)
	switch {
	case !isInt:
		p.fail("%s is a %s, not an integer", key, describe(v))
	case n < int64(minVal):
		p.fail("%s is %d, must be at least %d", key, n, minVal)
	case n > math.MaxInt32:
		p.fail("%s is %d, more than the largest supported %d", key, n, math.MaxInt32)
	default:
		*dst = int32(n)
	}
}

// limit reads a size limit: def when absent, otherwise an integer of at
// least 1, returned as announced (the caller lowers it).
func (p *parser) limit(key string, def int64) int64 {
	v, ok := p.fields[key]
	if !ok {
		return def
	}
	n, isInt := asInt64(v)
	switch {
	case !isInt:
		p.fail("%s is a %s, not an integer", key, describe(v))
	case n < 1:
		p.fail("%s is %d, must be at least 1", key, n)
	default:
		return n
	}
	return def
}

// int64Field reads an integral number (int32, int64 or double).
func (p *parser) int64Field(key string) (int64, bool) {
	v, ok := p.fields[key]
	if !ok {
		return 0, false
	}
	n, isInt := asInt64(v)
	if !isInt {
		p.fail("%s is a %s, not an integer", key, describe(v))
		return 0, false
	}
	return n, true
}

func (p *parser) boolField(key string, dst *bool) {
	v, ok := p.fields[key]
	if !ok {
		return
	}
	b, isBool := v.BooleanOK()
	if !isBool {
		p.fail("%s is a %s, not a boolean", key, v.Type)
		return
	}
	*dst = b
}

// stringField reads a string of at most maxStringLen bytes.
func (p *parser) stringField(key string, dst *string) {
	v, ok := p.fields[key]
	if !ok {
		return
	}
	b, isStr := stringBytes(bsoncore.Value{Type: bsoncore.Type(v.Type), Data: v.Value})
	if !isStr {
		p.fail("%s is a %s, not a string", key, v.Type)
		return
	}
	if len(b) > maxStringLen {
		p.fail("%s of %d bytes is longer than %d", key, len(b), maxStringLen)
		return
	}
	*dst = string(b)
}

// compressors returns those of ours that the server lists, in our order.
// The server's entries must all be strings; they are compared, not copied.
func (p *parser) compressors(ours []string) []string {
	v, ok := p.fields["compression"]
	if !ok {
		return nil
	}
	arr, isArr := v.ArrayOK()
	if !isArr {
		p.fail("compression: a %s, not an array", v.Type)
		return nil
	}
	known := [...]string{CompressorSnappy, CompressorZlib, CompressorZstd}
	var listed [len(known)]bool
	err := eachEntry(arr, func(i int, e bsoncore.Value) error {
		s, isStr := stringBytes(e)
		if !isStr {
			return fmt.Errorf("entry %d is a %s, not a string", i, bson.Type(e.Type))
		}
		for j, name := range known {
			if string(s) == name {
				listed[j] = true
			}
		}
		return nil
	})
	if err != nil {
		p.fail("compression: %v", err)
		return nil
	}
	var out []string
	for _, c := range knownCompressors(ours) {
		for j, name := range known {
			if c == name && listed[j] {
				out = append(out, name)
			}
		}
	}
	return out
}

// mechs reads saslSupportedMechs without judging its contents: non-string
// entries, and strings too long to name a SASL mechanism, are skipped (the
// specification forbids validating them), and only the first maxSaslMechs
// are kept.
func (p *parser) mechs() []string {
	v, ok := p.fields["saslSupportedMechs"]
	if !ok {
		return nil
	}
	arr, isArr := v.ArrayOK()
	if !isArr {
		p.fail("saslSupportedMechs is a %s, not an array", v.Type)
		return nil
	}
	out := []string{}
	err := eachEntry(arr, func(_ int, e bsoncore.Value) error {
		if s, isStr := stringBytes(e); isStr && len(s) <= maxMechNameLen && len(out) < maxSaslMechs {
			out = append(out, string(s))
		}
		return nil
	})
	if err != nil {
		p.fail("saslSupportedMechs: %v", err)
		return nil
	}
	return out
}

func (p *parser) topologyVersion() *TopologyVersion {
	v, ok := p.fields["topologyVersion"]
	if !ok {
		return nil
	}
	doc, isDoc := v.DocumentOK()
	if !isDoc {
		p.fail("topologyVersion is a %s, not a document", v.Type)
		return nil
	}
	if err := doc.Validate(); err != nil {
		p.fail("topologyVersion: malformed BSON: %v", err)
		return nil
	}
	pid, err := doc.LookupErr("processId")
	if err != nil {
		p.fail("topologyVersion has no processId")
		return nil
	}
	oid, ok := pid.ObjectIDOK()
	if !ok {
		p.fail("topologyVersion.processId is a %s, not an ObjectId", pid.Type)
		return nil
	}
	cv, err := doc.LookupErr("counter")
	if err != nil {
		p.fail("topologyVersion has no counter")
		return nil
	}
	n, ok := asInt64(cv)
	if !ok {
		p.fail("topologyVersion.counter is a %s, not an integer", describe(cv))
		return nil
	}
	return &TopologyVersion{ProcessID: oid, Counter: n}
}

// eachEntry calls fn with each entry of arr, in order, after checking the
// entry's framing and key ("0", "1", ...), and stops at the first error. It
// allocates nothing, whatever the number of entries.
func eachEntry(arr bson.RawArray, fn func(i int, v bsoncore.Value) error) error {
	n, _, ok := bsoncore.ReadLength(arr)
	if !ok || n < 5 || int(n) != len(arr) || arr[n-1] != 0 {
		return errors.New("malformed BSON: bad array framing")
	}
	var want [20]byte
	for i, rest := 0, []byte(arr[4:n-1]); len(rest) > 0; i++ {
		e, next, ok := bsoncore.ReadElement(rest)
		if !ok {
			return fmt.Errorf("malformed BSON: entry %d is truncated", i)
		}
		rest = next
		key, err := e.KeyBytesErr()
		if err != nil {
			return fmt.Errorf("malformed BSON: entry %d: %w", i, err)
		}
		if !bytes.Equal(key, strconv.AppendInt(want[:0], int64(i), 10)) {
			return fmt.Errorf("malformed BSON: array key %q is out of order or invalid", key)
		}
		v, err := e.ValueErr()
		if err != nil {
			return fmt.Errorf("malformed BSON: entry %d: %w", i, err)
		}
		if err := fn(i, v); err != nil {
			return err
		}
	}
	return nil
}

// stringBytes returns the bytes of a string value without copying them.
func stringBytes(v bsoncore.Value) ([]byte, bool) {
	if v.Type != bsoncore.TypeString || len(v.Data) < 5 {
		return nil, false
	}
	n := int64(int32(binary.LittleEndian.Uint32(v.Data)))
	if n < 1 || 4+n > int64(len(v.Data)) || v.Data[4+n-1] != 0 {
		return nil, false
	}
	return v.Data[4 : 4+n-1], true
}

// describe names the type of v, and its value for non-integral doubles.
func describe(v bson.RawValue) string {
	if f, ok := v.DoubleOK(); ok {
		return fmt.Sprintf("double (%v)", f)
	}
	return v.Type.String()
}
