package unified

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Version is a version string of the format: major, minor and patch.
type Version [3]int

// ParseVersion parses "major", "major.minor" or "major.minor.patch", each a
// non-negative integer; missing components are zero.
func ParseVersion(s string) (Version, error) {
	var v Version
	parts := strings.Split(s, ".")
	if s == "" || len(parts) > 3 {
		return v, fmt.Errorf("malformed version string %q: want major[.minor[.patch]]", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p == "" || p[0] == '+' {
			return v, fmt.Errorf("malformed version string %q: component %q is not a non-negative integer", s, p)
		}
		v[i] = n
	}
	return v, nil
}

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w,
// comparing the components numerically.
func (v Version) Compare(w Version) int {
	for i := range v {
		switch {
		case v[i] < w[i]:
			return -1
		case v[i] > w[i]:
			return 1
		}
	}
	return 0
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// Topologies are the topology names of runOnRequirement.
var topologies = []string{"single", "replicaset", "sharded", "load-balanced", "sharded-replicaset"}

// Server is what the runner knows of the deployment it runs a test against,
// to evaluate runOnRequirements.
type Server struct {
	Version  Version
	Topology string // one of "single", "replicaset", "sharded", "load-balanced"
	Auth     bool   // the server requires authentication
	// AuthMechanisms are the mechanisms the server supports (its
	// authenticationMechanisms parameter).
	AuthMechanisms []string
	// Serverless is true for an Atlas Serverless deployment.
	Serverless bool
	// Streams is true when the server reports a topologyVersion, as
	// mongod does from 4.4 on: only then may a client's monitor stream.
	Streams bool
	// GetParameter asks the server for a parameter's value; an error means
	// the server does not support it.
	GetParameter func(ctx context.Context, name string) (bson.RawValue, error)
}

// Satisfied evaluates runOnRequirements: met is true when one of the
// requirements holds, and why says otherwise what failed. A requirement the
// runner cannot evaluate (an unknown field, a malformed value) is an error.
func (s *Server) Satisfied(ctx context.Context, where string, reqs []bson.RawValue) (met bool, why string, err error) {
	if len(reqs) == 0 {
		return false, "", fmt.Errorf("%s: runOnRequirements is empty (it needs one requirement or more)", where)
	}
	var reasons []string
	for i, r := range reqs {
		ok, why, err := s.satisfies(ctx, fmt.Sprintf("%s[%d]", where, i), r)
		if err != nil {
			return false, "", err
		}
		if ok {
			return true, "", nil
		}
		reasons = append(reasons, why)
	}
	return false, strings.Join(reasons, "; "), nil
}

// satisfies evaluates one runOnRequirement. Every field is checked, even
// after one fails, so that an unknown or malformed field is always reported.
func (s *Server) satisfies(ctx context.Context, where string, r bson.RawValue) (bool, string, error) {
	o := readObject(where, r, []string{"minServerVersion", "maxServerVersion", "topologies", "serverless",
		"serverParameters", "auth", "authMechanism", "csfle"})
	var unmet []string
	if o.has("minServerVersion") {
		lo, err := ParseVersion(o.str("minServerVersion", false))
		if o.err != nil {
			return false, "", o.err
		}
		if err != nil {
			return false, "", fmt.Errorf("%s: minServerVersion: %w", where, err)
		}
		if s.Version.Compare(lo) < 0 {
			unmet = append(unmet, fmt.Sprintf("server version %s < minServerVersion %s", s.Version, lo))
		}
	}
	if o.has("maxServerVersion") {
		hi, err := ParseVersion(o.str("maxServerVersion", false))
		if o.err != nil {
			return false, "", o.err
		}
		if err != nil {
			return false, "", fmt.Errorf("%s: maxServerVersion: %w", where, err)
		}
		if s.Version.Compare(hi) > 0 {
			unmet = append(unmet, fmt.Sprintf("server version %s > maxServerVersion %s", s.Version, hi))
		}
	}
	if o.has("topologies") {
		ts := o.strings("topologies")
		if o.err == nil && len(ts) == 0 {
			o.fail("topologies is empty")
		}
		match := false
		for _, t := range ts {
			if !slices.Contains(topologies, t) {
				o.fail("unknown topology %q (known: %s)", t, strings.Join(topologies, ", "))
			}
			// "sharded" accepts any sharded cluster; "sharded-replicaset"
			// only one whose shards are replica sets, as the runner's are.
			match = match || t == s.Topology || t == "sharded-replicaset" && s.Topology == "sharded"
		}
		if !match {
			unmet = append(unmet, fmt.Sprintf("topology %s not in %v", s.Topology, ts))
		}
	}
	if o.has("serverless") {
		switch v := o.str("serverless", false); v {
		case "require":
			if !s.Serverless {
				unmet = append(unmet, "serverless: require, and the server is not serverless")
			}
		case "forbid":
			if s.Serverless {
				unmet = append(unmet, "serverless: forbid, and the server is serverless")
			}
		case "allow":
		default:
			o.fail("serverless: %q is not require, forbid or allow", v)
		}
	}
	if auth, ok := o.boolean("auth"); ok && auth != s.Auth {
		unmet = append(unmet, fmt.Sprintf("auth: %v, and the server's authentication is %v", auth, s.Auth))
	}
	if o.has("authMechanism") {
		m := o.str("authMechanism", false)
		if !slices.ContainsFunc(s.AuthMechanisms, func(x string) bool { return strings.EqualFold(x, m) }) {
			unmet = append(unmet, fmt.Sprintf("authMechanism %s not among the server's %v", m, s.AuthMechanisms))
		}
	}
	if v, ok := o.value("csfle", false); ok {
		switch v.Type {
		case bson.TypeBoolean:
			if v.Boolean() {
				unmet = append(unmet, "csfle: the clients have no client-side field level encryption")
			}
		case bson.TypeEmbeddedDocument:
			co := readObject(where+".csfle", v, []string{"minLibmongocryptVersion"})
			co.str("minLibmongocryptVersion", false)
			if co.err != nil {
				return false, "", co.err
			}
			unmet = append(unmet, "csfle: the clients have no client-side field level encryption")
		default:
			o.fail("csfle: want a boolean or a document, got %s", show(v))
		}
	}
	if params := o.document("serverParameters", false); params != nil && o.err == nil {
		why, err := s.checkParameters(ctx, where, params)
		if err != nil {
			return false, "", err
		}
		if why != "" {
			unmet = append(unmet, why)
		}
	}
	if o.err != nil {
		return false, "", o.err
	}
	return len(unmet) == 0, strings.Join(unmet, ", "), nil
}

// checkParameters compares the server's parameters with the wanted values,
// numbers flexibly. A parameter the server does not report makes the
// requirement unmet, as the format says.
func (s *Server) checkParameters(ctx context.Context, where string, params bson.Raw) (string, error) {
	elems, err := params.Elements()
	if err != nil {
		return "", fmt.Errorf("%s: serverParameters: %w", where, err)
	}
	if s.GetParameter == nil {
		return "", fmt.Errorf("%s: serverParameters: the runner cannot ask this server for its parameters", where)
	}
	for _, e := range elems {
		got, err := s.GetParameter(ctx, e.Key())
		if err != nil {
			return fmt.Sprintf("server parameter %s unsupported (%v)", e.Key(), err), nil
		}
		if isNumber(got.Type) && isNumber(e.Value().Type) {
			if !numbersEqual(got, e.Value()) {
				return fmt.Sprintf("server parameter %s is %s, not %s", e.Key(), show(got), show(e.Value())), nil
			}
			continue
		}
		if got.Type != e.Value().Type || !got.Equal(e.Value()) {
			return fmt.Sprintf("server parameter %s is %s, not %s", e.Key(), show(got), show(e.Value())), nil
		}
	}
	return "", nil
}
