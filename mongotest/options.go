package mongotest

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

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
	mongos         bool // WithMongos, or WithLoadBalanced
	serviceID      bson.ObjectID
	replicaSet     string
	members        map[int]Member // WithMember's, by index
	advertised     []string       // WithAdvertisedHosts's, by member
	network        *Network       // WithNetwork's; nil for TCP
	// transactionLifetime is WithTransactionLifetime's.
	transactionLifetime time.Duration
	// shardMembers is WithShardMembers's; users, the users a sharded
	// cluster's shards share with its mongoses.
	shardMembers int
	users        *users
	ports        []int // WithPorts's, by member
	// jsTimeout is WithJavaScriptTimeout's.
	jsTimeout time.Duration
}

func defaultConfig() config {
	return config{
		maxWireVersion:      DefaultMaxWireVersion,
		compressors:         []wire.CompressorID{wire.CompressorSnappy, wire.CompressorZlib, wire.CompressorZstd},
		transactionLifetime: defaultTransactionLifetime,
		shardMembers:        1,
		jsTimeout:           DefaultJavaScriptTimeout,
	}
}

// WithVersion makes the server present itself as the MongoDB release
// version ("8.0", "7.0", ...): the maxWireVersion of its handshake and the
// version of buildInfo are that release's, and the commands it has are
// those of the release where they differ (bulkWrite from 8.0). The
// releases are 4.4, 5.0 to 5.3, 6.0 to 6.3, 7.0 to 7.3 and 8.0 on; 7.0
// is the default. It is WithWireVersions(0, the release's wire version).
func WithVersion(version string) Option {
	return func(c *config) error {
		w, err := WireVersionOf(version)
		if err != nil {
			return fmt.Errorf("mongotest: WithVersion: %w", err)
		}
		c.minWireVersion, c.maxWireVersion = 0, w
		return nil
	}
}

// WireVersionOf returns the maxWireVersion of the MongoDB release version,
// "major.minor": 25 for "8.0", 21 for "7.0". The releases are those
// WithVersion takes.
func WireVersionOf(version string) (int32, error) {
	var major, minor int
	if n, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil || n != 2 || fmt.Sprintf("%d.%d", major, minor) != version {
		return 0, fmt.Errorf("version %q is not a MongoDB release such as 8.0", version)
	}
	first := map[int]int32{5: 13, 6: 17, 7: 21, 8: 25}
	switch w, ok := first[major]; {
	case major == 4 && minor == 4:
		return 9, nil
	case ok && (minor <= 3 || major >= 8) && minor <= 99:
		return w + int32(minor), nil
	}
	return 0, fmt.Errorf("MongoDB %s is not a release mongotest presents itself as (4.4, 5.0 to 5.3, 6.0 to 6.3, 7.0 to 7.3, 8.0 and on)", version)
}

// WithTransactionLifetime sets how long a transaction may run before the
// server aborts it, mongod's transactionLifetimeLimitSeconds (default 60
// seconds): a test of an abandoned transaction need not wait a minute.
func WithTransactionLifetime(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("mongotest: WithTransactionLifetime: the lifetime must be positive, not %v", d)
		}
		c.transactionLifetime = d
		return nil
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
// MongoDB version that matches maxVersion. Below 9 (MongoDB 4.4),
// standalones and replica set members behave as older mongods do: their
// hellos and errors carry no topologyVersion, and an awaitable hello is
// answered at once, so clients poll them. Below 13 (MongoDB 5.0), a
// replica set configuration (replSetGetConfig) has slaveDelay rather than
// secondaryDelaySecs.
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
		c.loadBalanced, c.mongos, c.serviceID = true, true, serviceID
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

// WithMongos makes the server a mongos of a sharded cluster, which drivers
// reach directly rather than through a load balancer (for that, see
// WithLoadBalanced): its hello says msg: "isdbgrid", by which drivers know
// a mongos, with no set name, and it takes retryable writes but never adds
// the RetryableWriteError label itself, as a mongos does not. There are no
// shards behind it: each server has its own store, so several servers
// started with it look like the mongoses of one cluster to a driver's
// discovery, not to its data. It cannot be combined with WithReplicaSet.
func WithMongos() Option {
	return func(c *config) error {
		c.mongos = true
		return nil
	}
}

// WithAdvertisedHosts gives the members of a replica set the addresses
// they advertise, as a replica set configured with host names has them:
// member i reports hosts[i] rather than its 127.0.0.1 address wherever a
// member's address appears (hosts, passives, arbiters, primary and me in
// hello; host in serverStatus), and ReplicaSet.URI lists them. The members
// still listen on 127.0.0.1, each on its own port (Server.Addr): a client
// reaches them through a dialer that maps each advertised address to its
// member's Addr. On a Network (WithNetwork), though, each member listens
// on its advertised address, which its Addr is then (host lower-cased),
// and the Network's DialContext reaches it with no mapping. It takes one
// distinct "host:port" per member of a set started by StartReplicaSet, or
// one for WithReplicaSet.
func WithAdvertisedHosts(hosts ...string) Option {
	return func(c *config) error {
		if len(hosts) == 0 {
			return fmt.Errorf("mongotest: WithAdvertisedHosts: no address")
		}
		seen := make(map[string]bool, len(hosts))
		for _, h := range hosts {
			host, port, err := net.SplitHostPort(h)
			switch {
			case err != nil:
				return fmt.Errorf("mongotest: WithAdvertisedHosts: %q is not host:port", h)
			case host == "":
				return fmt.Errorf("mongotest: WithAdvertisedHosts: %q has no host", h)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("mongotest: WithAdvertisedHosts: %q has no valid port (1 to 65535)", h)
			}
			// Host names are case-insensitive: drivers lower-case them.
			key := strings.ToLower(h)
			if seen[key] {
				return fmt.Errorf("mongotest: WithAdvertisedHosts: %q is given twice", h)
			}
			seen[key] = true
		}
		c.advertised = append([]string(nil), hosts...)
		return nil
	}
}
