package mongotest

import (
	"crypto/tls"
	"fmt"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Defaults of the handshake reply.
const (
	// DefaultMaxWireVersion is the maxWireVersion the server announces
	// unless told otherwise: 21, MongoDB 7.0.
	DefaultMaxWireVersion = 21
	// MaxBSONObjectSize is the maxBsonObjectSize the server announces.
	MaxBSONObjectSize = 16 * 1024 * 1024
	// MaxMessageSize is the maxMessageSizeBytes the server announces, and
	// the largest message it reads; a longer one closes the connection.
	MaxMessageSize = wire.DefaultMaxMessageSize
	// MaxWriteBatchSize is the maxWriteBatchSize the server announces.
	MaxWriteBatchSize = 100000
	// LogicalSessionTimeoutMinutes is the logicalSessionTimeoutMinutes the
	// server announces, which tells drivers that it supports sessions.
	LogicalSessionTimeoutMinutes = 30
)

// Option configures a Server. Options are applied by Start, in order.
type Option func(*config) error

// config is the server's configuration, fixed at Start.
type config struct {
	tls            *tls.Config
	minWireVersion int32
	maxWireVersion int32
	compressors    []wire.CompressorID // in the server's order of preference
	loadBalanced   bool
	serviceID      bson.ObjectID
	replicaSet     string
	members        map[int]Member // WithMember's, by index
}

func defaultConfig() config {
	return config{
		maxWireVersion: DefaultMaxWireVersion,
		compressors:    []wire.CompressorID{wire.CompressorSnappy, wire.CompressorZlib, wire.CompressorZstd},
	}
}

// WithTLS makes the server accept TLS connections only, with cfg (which
// must hold a certificate). For MONGODB-X509, cfg must also ask for and
// verify client certificates (ClientAuth and ClientCAs). The server uses a
// clone of cfg.
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) error {
		if cfg == nil {
			return fmt.Errorf("mongotest: WithTLS: nil *tls.Config")
		}
		if len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
			return fmt.Errorf("mongotest: WithTLS: the tls.Config has no server certificate")
		}
		c.tls = cfg.Clone()
		return nil
	}
}

// WithWireVersions sets the minWireVersion and maxWireVersion the handshake
// announces (defaults: 0 and DefaultMaxWireVersion). buildInfo reports the
// MongoDB version that matches maxVersion.
func WithWireVersions(minVersion, maxVersion int32) Option {
	return func(c *config) error {
		if minVersion < 0 || maxVersion < minVersion {
			return fmt.Errorf("mongotest: WithWireVersions(%d, %d): need 0 <= min <= max", minVersion, maxVersion)
		}
		c.minWireVersion, c.maxWireVersion = minVersion, maxVersion
		return nil
	}
}

// WithCompressors sets the compressors the server accepts, among "snappy",
// "zlib" and "zstd" (default: all three). With none, the server negotiates
// no compression. The handshake reply lists the ones the client also asked
// for, in the client's order.
func WithCompressors(names ...string) Option {
	return func(c *config) error {
		ids := make([]wire.CompressorID, 0, len(names))
		for _, n := range names {
			id, ok := wire.ParseCompressor(n)
			if !ok {
				return fmt.Errorf("mongotest: WithCompressors: unknown compressor %q (known: snappy, zlib, zstd)", n)
			}
			ids = append(ids, id)
		}
		c.compressors = ids
		return nil
	}
}

// WithLoadBalanced makes the server behave like a mongos behind a load
// balancer: the handshake must carry loadBalanced: true (or it fails, as
// mongos fails it), and its reply carries serviceID as serviceId. A zero
// serviceID is replaced by a new ObjectID. As a mongos, the server takes
// retryable writes (see WithReplicaSet) but never adds the
// RetryableWriteError label itself.
func WithLoadBalanced(serviceID bson.ObjectID) Option {
	return func(c *config) error {
		if serviceID.IsZero() {
			serviceID = bson.NewObjectID()
		}
		c.loadBalanced, c.serviceID = true, serviceID
		return nil
	}
}

// WithReplicaSet makes the server the primary of a replica set of one
// member named name, rather than a standalone: it answers as a member of
// a replica set does (see StartReplicaSet), so that drivers discover it as
// a replica set and monitor it with awaitable hellos, and it takes
// retryable writes (a write command with a txnNumber runs once, and a
// retry of it gets the first reply) and adds the RetryableWriteError label
// to their retriable errors, as a replica set member does. Multi-document
// transactions are not implemented: they fail with BadValue. It cannot be
// combined with WithLoadBalanced. For a set of several members, use
// StartReplicaSet.
func WithReplicaSet(name string) Option {
	return func(c *config) error {
		if name == "" {
			return fmt.Errorf("mongotest: WithReplicaSet: the replica set needs a name")
		}
		c.replicaSet = name
		return nil
	}
}

// WithMember configures member i (from 0) of a replica set, started by
// StartReplicaSet or, for member 0, by WithReplicaSet: its tags, and
// whether it is passive, hidden or an arbiter. Members without it are
// ordinary electable, data-bearing members without tags. Given twice for
// the same member, the last one applies.
func WithMember(i int, m Member) Option {
	return func(c *config) error {
		if i < 0 {
			return fmt.Errorf("mongotest: WithMember(%d): a member index is 0 or more", i)
		}
		if c.members == nil {
			c.members = map[int]Member{}
		}
		c.members[i] = m.clone()
		return nil
	}
}
