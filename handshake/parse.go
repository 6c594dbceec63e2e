package handshake

import (
	"errors"
	"fmt"
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/wire"
)

// Defaults of the limits a hello reply may leave out.
const (
	DefaultMaxBSONObjectSize   = 16 * 1024 * 1024
	DefaultMaxMessageSizeBytes = 48000000
	DefaultMaxWriteBatchSize   = 100000
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

	// Limits, defaulted when the reply leaves them out.
	MaxBSONObjectSize   int32
	MaxMessageSizeBytes int32
	MaxWriteBatchSize   int32

	// ConnectionID is the server's id for this connection (connectionId),
	// valid when HasConnectionID.
	ConnectionID    int64
	HasConnectionID bool

	// ServiceID is the serviceId of a load-balanced reply, valid when
	// HasServiceID.
	ServiceID    [12]byte
	HasServiceID bool

	// Compressor is the negotiated compressor: the first of the client's
	// Options.Compressors that the server also lists; "" for none.
	Compressor string

	// SaslSupportedMechs is the reply's saslSupportedMechs; nil when absent.
	// Its contents are not validated (non-string entries are skipped).
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
func Parse(reply bson.Raw, opts Options) (*Description, error) {
	if err := reply.Validate(); err != nil {
		return nil, invalid("malformed BSON: %v", err)
	}
	elems, err := reply.Elements()
	if err != nil {
		return nil, invalid("malformed BSON: %v", err)
	}
	// First occurrence of each key wins, as with Lookup.
	fields := make(map[string]bson.RawValue, len(elems))
	for _, e := range elems {
		k, err := e.KeyErr()
		if err != nil {
			return nil, invalid("malformed BSON: %v", err)
		}
		if _, dup := fields[k]; dup {
			continue
		}
		v, err := e.ValueErr()
		if err != nil {
			return nil, invalid("malformed BSON in field %q: %v", k, err)
		}
		fields[k] = v
	}
	p := parser{fields: fields}

	if err := p.checkOK(reply); err != nil {
		return nil, err
	}

	d := &Description{
		MaxBSONObjectSize:   DefaultMaxBSONObjectSize,
		MaxMessageSizeBytes: DefaultMaxMessageSizeBytes,
		MaxWriteBatchSize:   DefaultMaxWriteBatchSize,
	}
	p.int32Field("minWireVersion", &d.MinWireVersion, 0)
	p.int32Field("maxWireVersion", &d.MaxWireVersion, 0)
	p.int32Field("maxBsonObjectSize", &d.MaxBSONObjectSize, 1)
	p.int32Field("maxMessageSizeBytes", &d.MaxMessageSizeBytes, 1)
	p.int32Field("maxWriteBatchSize", &d.MaxWriteBatchSize, 1)
	if p.err == nil && d.MaxMessageSizeBytes < d.MaxBSONObjectSize {
		p.fail("maxMessageSizeBytes %d is smaller than maxBsonObjectSize %d", d.MaxMessageSizeBytes, d.MaxBSONObjectSize)
	}
	if p.err == nil && d.MinWireVersion > d.MaxWireVersion {
		p.fail("minWireVersion %d is greater than maxWireVersion %d", d.MinWireVersion, d.MaxWireVersion)
	}
	d.ConnectionID, d.HasConnectionID = p.int64Field("connectionId")
	if v, ok := p.fields["serviceId"]; ok {
		oid, isOID := v.ObjectIDOK()
		if !isOID {
			p.fail("serviceId is a %s, not an ObjectId", v.Type)
		}
		d.ServiceID, d.HasServiceID = oid, isOID
	}
	d.Compressor = p.compressor(opts.Compressors)
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

func (p *parser) stringField(key string, dst *string) {
	v, ok := p.fields[key]
	if !ok {
		return
	}
	s, isStr := v.StringValueOK()
	if !isStr {
		p.fail("%s is a %s, not a string", key, v.Type)
		return
	}
	*dst = s
}

// compressor returns the first of ours that the server lists.
func (p *parser) compressor(ours []string) string {
	v, ok := p.fields["compression"]
	if !ok {
		return ""
	}
	theirs, err := stringArray(v)
	if err != nil {
		p.fail("compression: %v", err)
		return ""
	}
	for _, c := range knownCompressors(ours) {
		for _, s := range theirs {
			if s == c {
				return s
			}
		}
	}
	return ""
}

// mechs reads saslSupportedMechs without judging its contents: non-string
// entries are skipped (the specification forbids validating them).
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
	vals, err := validValues(arr)
	if err != nil {
		p.fail("saslSupportedMechs: %v", err)
		return nil
	}
	out := make([]string, 0, len(vals))
	for _, e := range vals {
		if s, ok := e.StringValueOK(); ok {
			out = append(out, s)
		}
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

// stringArray reads an array whose entries must all be strings.
func stringArray(v bson.RawValue) ([]string, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, fmt.Errorf("a %s, not an array", v.Type)
	}
	vals, err := validValues(arr)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(vals))
	for i, e := range vals {
		s, ok := e.StringValueOK()
		if !ok {
			return nil, fmt.Errorf("entry %d is a %s, not a string", i, e.Type)
		}
		out = append(out, s)
	}
	return out, nil
}

func validValues(arr bson.RawArray) ([]bson.RawValue, error) {
	if err := arr.Validate(); err != nil {
		return nil, fmt.Errorf("malformed BSON: %w", err)
	}
	vals, err := arr.Values()
	if err != nil {
		return nil, fmt.Errorf("malformed BSON: %w", err)
	}
	return vals, nil
}

// describe names the type of v, and its value for non-integral doubles.
func describe(v bson.RawValue) string {
	if f, ok := v.DoubleOK(); ok {
		return fmt.Sprintf("double (%v)", f)
	}
	return v.Type.String()
}
