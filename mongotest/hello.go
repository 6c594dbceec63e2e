package mongotest

import (
	"slices"
	"strings"
	"time"

	"github.com/mongopool/mongopool/wire"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// hello answers hello and legacy hello (isMaster, ismaster) as a standalone
// mongod does, as a member of a replica set (see helloMember), or as a
// mongos (WithMongos), or one behind a load balancer (WithLoadBalanced).
// It also negotiates compression, lists a user's mechanisms
// (saslSupportedMechs) and runs the first step of speculative
// authentication.
//
// A standalone's, a replica set member's and a sharded cluster's mongos's
// replies have a topologyVersion (from MongoDB 4.4, maxWireVersion 9), and
// they answer awaitable and exhaust hellos, which drivers stream; a lone
// mongos's (WithMongos) have none, so drivers poll it.
func (s *Server) hello(req *request) (bson.D, error) {
	body := req.body
	lb, _ := body.Lookup("loadBalanced").BooleanOK()
	if s.cfg.loadBalanced && !lb {
		return nil, errorf(codeLoadBalancerSupportMismatch,
			"The server is being accessed through a load balancer, but this driver does not have load balancing enabled")
	}
	var d bson.D
	if s.rs != nil {
		var err error
		if d, err = s.helloMember(req); err != nil {
			return nil, err
		}
	} else if s.role == roleStandalone || s.router != nil {
		var err error
		if d, err = s.helloStandalone(req); err != nil {
			return nil, err
		}
	} else if req.name == "hello" {
		d = append(d, bson.E{Key: "isWritablePrimary", Value: true})
	} else {
		d = append(d, bson.E{Key: "ismaster", Value: true})
	}
	if ok, _ := body.Lookup("helloOk").BooleanOK(); ok {
		d = append(d, bson.E{Key: "helloOk", Value: true})
	}
	if s.cfg.mongos {
		d = append(d, bson.E{Key: "msg", Value: "isdbgrid"})
	}
	if s.cfg.loadBalanced {
		d = append(d, bson.E{Key: "serviceId", Value: s.cfg.serviceID})
	}
	d = append(d,
		bson.E{Key: "maxBsonObjectSize", Value: int32(MaxBSONObjectSize)},
		bson.E{Key: "maxMessageSizeBytes", Value: int32(MaxMessageSize)},
		bson.E{Key: "maxWriteBatchSize", Value: int32(MaxWriteBatchSize)},
		bson.E{Key: "localTime", Value: bson.NewDateTimeFromTime(time.Now())},
		bson.E{Key: "logicalSessionTimeoutMinutes", Value: int32(LogicalSessionTimeoutMinutes)},
		bson.E{Key: "connectionId", Value: req.conn.id},
		bson.E{Key: "minWireVersion", Value: s.cfg.minWireVersion},
		bson.E{Key: "maxWireVersion", Value: s.cfg.maxWireVersion},
		bson.E{Key: "readOnly", Value: false},
	)
	if names := s.negotiateCompression(body.Lookup("compression")); len(names) > 0 {
		d = append(d, bson.E{Key: "compression", Value: names})
	}
	if who, ok := body.Lookup("saslSupportedMechs").StringValueOK(); ok {
		if db, name, ok := strings.Cut(who, "."); ok {
			if u := s.users.lookup(db, name); u != nil {
				d = append(d, bson.E{Key: "saslSupportedMechs", Value: slices.Clone(u.mechs)})
			}
		}
	}
	if doc, ok := body.Lookup("speculativeAuthenticate").DocumentOK(); ok {
		if r := s.speculate(req.conn, doc); r != nil {
			d = append(d, bson.E{Key: "speculativeAuthenticate", Value: r})
		}
	}
	return d, nil
}

// noteClientMetadata records the application name of the first hello
// (body) that carries client metadata, {client: {application: {name}}}.
// mongod takes it before the command runs, and so does dispatch, so that a
// fail point with an appName applies to that hello too.
func (c *conn) noteClientMetadata(body bson.Raw) {
	if c.hasMetadata {
		return
	}
	client, ok := body.Lookup("client").DocumentOK()
	if !ok {
		return
	}
	c.hasMetadata = true
	c.appName, _ = client.Lookup("application", "name").StringValueOK()
}

// negotiateCompression returns the compressors of the client's list (the
// hello's compression array) that the server accepts, in the client's order.
func (s *Server) negotiateCompression(v bson.RawValue) []string {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, err := arr.Values()
	if err != nil {
		return nil
	}
	var names []string
	for _, v := range vals {
		name, ok := v.StringValueOK()
		if !ok {
			continue
		}
		if id, ok := wire.ParseCompressor(name); ok && slices.Contains(s.cfg.compressors, id) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// acceptsCompressor reports whether the server decompresses messages
// compressed with id: the compressors it accepts, and noop.
func (s *Server) acceptsCompressor(id wire.CompressorID) bool {
	return id == wire.CompressorNoop || slices.Contains(s.cfg.compressors, id)
}
