package unified

import (
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/mongotest"
)

// replicaSetMembers is the size of the replica sets the runner starts: three
// members, as the specifications' test deployments have, so that tests that
// count the topology's changes as its members are found see the same counts.
const replicaSetMembers = 3

// replicaSetName is the name of the runner's replica sets.
const replicaSetName = "repl0"

// providedTopologies are the runOnRequirement topologies the runner can
// start a deployment of, in the order it tries them for a test that accepts
// any.
var providedTopologies = []string{"single", "replicaset", "sharded", "load-balanced"}

// shardedMongoses is the number of mongoses of the runner's sharded
// clusters: two, so that useMultipleMongoses means something, in front of
// one shard, a replica set of one member.
const shardedMongoses = 2

// unprovided says why the runner cannot start a deployment of the topology
// t.
func unprovided(t string) string {
	return fmt.Sprintf("a %s topology", t)
}

// deployment is the servers a test runs against: a standalone, a replica
// set, a sharded cluster (two mongoses), or a mongos behind a load balancer
// (the test server in load-balanced mode, the only server behind its
// address).
type deployment struct {
	topology string
	// auth is true when the servers have the runner's user, and the
	// clients its credentials.
	auth bool
	// members are the servers, by address; hosts their addresses in order.
	members map[string]*mongotest.Server
	hosts   []string
	// options are the URI options every client of the deployment needs
	// (replicaSet, loadBalanced), as key=value.
	options []string
	close   func() error
}

// startDeployment starts a deployment of topology t (one of
// providedTopologies) whose servers all have the runner's user, or none
// (and then need no authentication) when auth is false.
func startDeployment(t string, auth bool) (*deployment, error) {
	d := &deployment{topology: t, auth: auth, members: map[string]*mongotest.Server{}}
	var servers []*mongotest.Server
	switch t {
	case "single":
		srv, err := mongotest.Start()
		if err != nil {
			return nil, err
		}
		servers, d.close = []*mongotest.Server{srv}, srv.Close
	case "load-balanced":
		srv, err := mongotest.Start(mongotest.WithLoadBalanced(bson.ObjectID{}))
		if err != nil {
			return nil, err
		}
		servers, d.close = []*mongotest.Server{srv}, srv.Close
		d.options = []string{"loadBalanced=true"}
	case "replicaset":
		rs, err := mongotest.StartReplicaSet(replicaSetName, replicaSetMembers)
		if err != nil {
			return nil, err
		}
		servers, d.close = rs.Members(), rs.Close
		d.options = []string{"replicaSet=" + replicaSetName}
	case "sharded":
		sc, err := mongotest.StartShardedCluster(shardedMongoses, 1)
		if err != nil {
			return nil, err
		}
		// The servers a test sees are the mongoses (a fail point goes on
		// the one the client selects).
		servers, d.close = sc.Mongoses(), sc.Close
	default:
		return nil, fmt.Errorf("the runner cannot start %s", unprovided(t))
	}
	for _, s := range servers {
		d.members[s.Addr()] = s
		d.hosts = append(d.hosts, s.Addr())
	}
	// The members of a replica set share their users: adding it to the
	// first adds it to all.
	if auth {
		if err := servers[0].AddUser("admin", runnerUser, runnerPassword); err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

// uri returns the connection string of a client of the deployment: the
// runner's credentials, the hosts, the deployment's options and then opts
// (key=value, escaped), which replace the deployment's options of the same
// name. A client with directConnection=true gets the first host only and no
// replicaSet, as the format asks.
func (d *deployment) uri(opts []string) string {
	return d.uriOfClient(opts, true)
}

// uriOfClient is uri for a client that reaches every mongos of a sharded
// cluster (useMultipleMongoses) or only the first: the format has a client
// of a sharded cluster reach one mongos unless it says otherwise.
func (d *deployment) uriOfClient(opts []string, multipleMongoses bool) string {
	var q []string
	direct := false
	for _, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		if strings.EqualFold(k, "directConnection") && v == "true" {
			direct = true
		}
	}
	for _, o := range d.options {
		k, _, _ := strings.Cut(o, "=")
		overridden := slices.ContainsFunc(opts, func(x string) bool {
			xk, _, _ := strings.Cut(x, "=")
			return strings.EqualFold(xk, k)
		})
		if overridden || direct && strings.EqualFold(k, "replicaSet") {
			continue
		}
		q = append(q, o)
	}
	q = append(q, opts...)
	hosts := d.hosts
	if direct || d.topology == "sharded" && !multipleMongoses {
		hosts = hosts[:1]
	}
	uri := fmt.Sprintf("mongodb://%s%s/", d.credentials(), strings.Join(hosts, ","))
	if len(q) > 0 {
		uri += "?" + strings.Join(q, "&")
	}
	return uri
}

// uriOf returns the connection string of a client of the server at address
// alone: connected to it directly, or through the load balancer.
func (d *deployment) uriOf(address string) string {
	q := []string{"directConnection=true"}
	if d.topology == "load-balanced" {
		q = []string{"loadBalanced=true"}
	}
	return fmt.Sprintf("mongodb://%s%s/?%s", d.credentials(), address, strings.Join(q, "&"))
}

// credentials returns the userinfo of the deployment's connection strings,
// with its @; "" when its servers need no authentication.
func (d *deployment) credentials() string {
	if !d.auth {
		return ""
	}
	return escape(runnerUser) + ":" + escape(runnerPassword) + "@"
}
