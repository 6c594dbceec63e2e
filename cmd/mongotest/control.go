package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/mongopool/mongopool/mongotest"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file is the control endpoint: HTTP on 127.0.0.1, for test suites
// that are not in Go, with the controls of mongotest: those of a replica
// set, addressed to the deployment's replica set or, with ?shard=k, to a
// shard of a sharded cluster, and those of a cluster's mongoses, under
// /mongos/. Every reply is JSON: {"ok": true, ...} with 200, or {"ok":
// false, "error": "..."} with 400 for a bad request (an unknown member,
// shard or mongos, a missing or malformed parameter, a control that does
// not apply to the deployment, a fail point mongod would refuse), 404 for
// an unknown path, 405 for a wrong method, 409 when the state forbids the
// control (Elect of a stopped member, Stop of a stopped one, a step-down
// without a primary, a fail point on a stopped server, ...) and 413 for a
// body too large.

// maxBody bounds a request's body: a configureFailPoint command is a few
// hundred bytes.
const maxBody = 64 << 10

// stepDownTimeout bounds a step-down's wait for the writes it interrupts.
const stepDownTimeout = 20 * time.Second

// maxLag bounds /lag: a day is more than any staleness test needs, and a
// bound keeps the duration far from overflowing.
const maxLag = 24 * time.Hour

// controller serves the control endpoint of a deployment.
type controller struct {
	d        *deployment
	shutdown func()
	log      io.Writer

	// mu serializes the controls, so that the state recorded here follows
	// the order in which mongotest applied them.
	mu sync.Mutex
	// state is what the controls did to each member of each replica set:
	// state[0] is the standalone's or the replica set's, state[k] shard
	// k's.
	state [][]memberState
	// mongosStopped says which of a sharded cluster's mongoses are
	// stopped.
	mongosStopped []bool
	logMu         sync.Mutex
}

// memberState is what the controls did to a member, which mongotest does
// not report: the command is the only one to control the set, so what it
// did is the member's state.
type memberState struct {
	stopped     bool
	partitioned bool
	lag         time.Duration
}

// route is one path of the endpoint.
type route struct {
	method string
	// params are the query parameters it takes; any other is an error, so
	// that a misspelt one is not ignored.
	params []string
	// on are the topologies it applies to.
	on     topology
	handle func(c *controller, r *http.Request, q url.Values) (map[string]any, error)
}

// The topologies of the routes: any, those with replica sets (the
// deployment's, or a cluster's shards), a sharded cluster.
const (
	anyTopology = standalone | replicaSet | sharded
	withSets    = replicaSet | sharded
)

var routes = map[string]route{
	"/status":    {method: http.MethodGet, on: anyTopology, handle: (*controller).status},
	"/stats":     {method: http.MethodGet, params: []string{"shard", "member"}, on: anyTopology, handle: (*controller).stats},
	"/stepdown":  {method: http.MethodPost, params: []string{"shard", "next"}, on: withSets, handle: (*controller).stepDown},
	"/elect":     {method: http.MethodPost, params: []string{"shard", "member"}, on: withSets, handle: (*controller).elect},
	"/stop":      {method: http.MethodPost, params: []string{"shard", "member"}, on: withSets, handle: (*controller).stop},
	"/restart":   {method: http.MethodPost, params: []string{"shard", "member"}, on: withSets, handle: (*controller).restart},
	"/partition": {method: http.MethodPost, params: []string{"shard", "member"}, on: withSets, handle: (*controller).partition},
	"/heal":      {method: http.MethodPost, params: []string{"shard", "member"}, on: withSets, handle: (*controller).heal},
	"/lag":       {method: http.MethodPost, params: []string{"shard", "member", "ms"}, on: withSets, handle: (*controller).lag},
	"/failpoint": {method: http.MethodPost, params: []string{"shard", "member"}, on: anyTopology, handle: (*controller).failPoint},
	"/shutdown":  {method: http.MethodPost, on: anyTopology, handle: (*controller).stopCommand},

	"/shardof":          {method: http.MethodGet, params: []string{"db"}, on: sharded, handle: (*controller).shardOf},
	"/mongos/stop":      {method: http.MethodPost, params: []string{"member"}, on: sharded, handle: (*controller).mongosStop},
	"/mongos/restart":   {method: http.MethodPost, params: []string{"member"}, on: sharded, handle: (*controller).mongosRestart},
	"/mongos/failpoint": {method: http.MethodPost, params: []string{"member"}, on: sharded, handle: (*controller).mongosFailPoint},
	"/mongos/stats":     {method: http.MethodGet, params: []string{"member"}, on: sharded, handle: (*controller).mongosStats},
}

func newController(d *deployment, shutdown func(), log io.Writer) *controller {
	c := &controller{d: d, shutdown: shutdown, log: log}
	for _, rs := range d.sets() {
		c.state = append(c.state, make([]memberState, len(rs.Members())))
	}
	if c.state == nil {
		c.state = [][]memberState{make([]memberState, len(d.servers))}
	}
	if d.sc != nil {
		c.mongosStopped = make([]bool, len(d.servers))
	}
	return c
}

// httpError is an error with its HTTP status.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// conflict is mongotest's refusal of a control in the set's state.
func conflict(err error) error {
	return &httpError{http.StatusConflict, strings.TrimPrefix(err.Error(), "mongotest: ")}
}

// conflictf is a refusal of the command's own, for the state.
func conflictf(format string, args ...any) error {
	return &httpError{http.StatusConflict, fmt.Sprintf(format, args...)}
}

func (c *controller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, reply := c.handle(w, r)
	c.logf("%s %s: %d", r.Method, r.URL.RequestURI(), status)
	body, err := json.Marshal(reply)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"ok":false,"error":"encoding the reply"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// handle runs the request and returns the status and the reply. A panic,
// which would be a bug here, is a 500 reply rather than a dropped
// connection.
func (c *controller) handle(w http.ResponseWriter, r *http.Request) (status int, reply map[string]any) {
	defer func() {
		if p := recover(); p != nil {
			status, reply = http.StatusInternalServerError, map[string]any{"ok": false, "error": fmt.Sprintf("internal error: %v", p)}
		}
	}()
	fail := func(err error) (int, map[string]any) {
		status := http.StatusInternalServerError
		var he *httpError
		if errors.As(err, &he) {
			status = he.status
		}
		return status, map[string]any{"ok": false, "error": err.Error()}
	}
	rt, ok := routes[r.URL.Path]
	if !ok {
		paths := make([]string, 0, len(routes))
		for p := range routes {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		return fail(&httpError{http.StatusNotFound, fmt.Sprintf("no such path %q; the paths are %s", r.URL.Path, strings.Join(paths, ", "))})
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method)
		return fail(&httpError{http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, rt.method, r.Method)})
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fail(badRequest("the query: %v", err))
	}
	for name, v := range q {
		switch {
		case !slices.Contains(rt.params, name):
			// shard is taken everywhere (to say why it does not apply),
			// but named only where it does.
			params := rt.params
			if c.d.sc == nil {
				params = slices.DeleteFunc(slices.Clone(params), func(p string) bool { return p == "shard" })
			}
			if len(params) == 0 {
				return fail(badRequest("%s takes no parameter, not %q", r.URL.Path, name))
			}
			return fail(badRequest("%s takes the parameters %s, not %q", r.URL.Path, strings.Join(params, ", "), name))
		case len(v) > 1:
			return fail(badRequest("the parameter %s is given %d times", name, len(v)))
		}
	}
	if topo := c.d.topology(); rt.on&topo == 0 {
		if rt.on&replicaSet != 0 {
			return fail(badRequest("%s controls a replica set, and this is a standalone: start mongotest with -replset N, or -mongos N -shards K for a sharded cluster (whose shards it controls with ?shard=k)", r.URL.Path))
		}
		return fail(badRequest("%s controls a sharded cluster, and this is %s: start mongotest with -mongos N -shards K", r.URL.Path, topo.phrase()))
	}
	// Bodies are read only by the fail points; the bound applies to
	// all, so that none is read without one.
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	reply, err = rt.handle(c, r, q)
	if err != nil {
		return fail(err)
	}
	if reply == nil {
		reply = map[string]any{}
	}
	reply["ok"] = true
	return http.StatusOK, reply
}

func (c *controller) logf(format string, args ...any) {
	c.logMu.Lock()
	defer c.logMu.Unlock()
	fmt.Fprintf(c.log, "mongotest: control: "+format+"\n", args...)
}

// target is the servers a control addresses: the standalone, the replica
// set, or a shard of a sharded cluster.
type target struct {
	set     int                   // its index in controller.state: 0, or the shard's
	shard   bool                  // a shard of a sharded cluster
	rs      *mongotest.ReplicaSet // nil for a standalone
	members []*mongotest.Server
}

// String names the target in messages: "shard 1".
func (t target) String() string {
	switch {
	case t.shard:
		return fmt.Sprintf("shard %d", t.set)
	case t.rs != nil:
		return "the replica set"
	}
	return "the standalone"
}

// withShard adds the shard's index to a reply about t.
func (t target) withShard(reply map[string]any) map[string]any {
	if t.shard {
		reply["shard"] = t.set
	}
	return reply
}

// target returns the servers that the request for path addresses: on a
// sharded cluster, shard k of the parameter shard, which it needs; on
// another deployment, the deployment, and shard is an error.
func (c *controller) target(path string, q url.Values) (target, error) {
	if c.d.sc == nil {
		if q.Has("shard") {
			return target{}, badRequest("shard=%s: this is %s, not a sharded cluster: leave shard out", q.Get("shard"), c.d.topology().phrase())
		}
		return target{rs: c.d.rs, members: c.d.servers}, nil
	}
	shards := c.d.sc.Shards()
	if !q.Has("shard") {
		hint := ""
		switch path {
		case "/failpoint":
			hint = "; /mongos/failpoint?member=i sets one on a mongos"
		case "/stats":
			hint = "; /mongos/stats?member=i is a mongos's"
		}
		return target{}, badRequest("the parameter shard, a shard's index (0 to %d), is missing: on a sharded cluster, %s addresses a shard's members%s",
			len(shards)-1, path, hint)
	}
	s := q.Get("shard")
	k, err := strconv.Atoi(s)
	if err != nil {
		return target{}, badRequest("shard=%q: a shard's index is an integer", s)
	}
	if k < 0 || k >= len(shards) {
		return target{}, badRequest("shard=%d: the cluster's shards are 0 to %d", k, len(shards)-1)
	}
	return target{set: k, shard: true, rs: shards[k], members: shards[k].Members()}, nil
}

// member parses the member parameter name of q: an index of a member of
// t. Without it, it returns def, or fails if def is negative.
func (c *controller) member(q url.Values, name string, def int, t target) (int, error) {
	s := q.Get(name)
	if !q.Has(name) {
		if def < 0 {
			return 0, badRequest("the parameter %s, a member's index, is missing", name)
		}
		return def, nil
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return 0, badRequest("%s=%q: a member's index is an integer", name, s)
	}
	if i < 0 || i >= len(t.members) {
		switch {
		case t.rs == nil:
			return 0, badRequest("%s=%d: a standalone is member 0", name, i)
		case t.shard:
			return 0, badRequest("%s=%d: shard %d's members are 0 to %d", name, i, t.set, len(t.members)-1)
		}
		return 0, badRequest("%s=%d: the replica set's members are 0 to %d", name, i, len(t.members)-1)
	}
	return i, nil
}

// mongos parses the member parameter of a /mongos/ control: the index of
// a mongos, which it needs.
func (c *controller) mongos(q url.Values) (int, error) {
	n := len(c.d.servers)
	if !q.Has("member") {
		return 0, badRequest("the parameter member, a mongos's index (0 to %d), is missing", n-1)
	}
	s := q.Get("member")
	i, err := strconv.Atoi(s)
	if err != nil {
		return 0, badRequest("member=%q: a mongos's index is an integer", s)
	}
	if i < 0 || i >= n {
		return 0, badRequest("member=%d: the cluster's mongoses are 0 to %d", i, n-1)
	}
	return i, nil
}

// primaryLocked returns the index of t's primary, -1 if none (or a
// standalone).
func (c *controller) primaryLocked(t target) int {
	if t.rs == nil {
		return -1
	}
	return slices.Index(t.members, t.rs.Primary())
}

// GET /status: the deployment, its members and its primary; for a sharded
// cluster, its mongoses and its shards, each with its members and primary.
func (c *controller) status(*http.Request, url.Values) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reply := map[string]any{"uri": c.d.uri, "topology": c.d.topology().String()}
	if c.d.sc == nil {
		t := target{rs: c.d.rs, members: c.d.servers}
		maps.Copy(reply, c.setStatusLocked(t))
		if c.d.rs != nil {
			reply["setName"] = c.d.rs.Name()
		}
		return reply, nil
	}
	mongoses := make([]map[string]any, len(c.d.servers))
	for i, s := range c.d.servers {
		state := "RUNNING"
		if c.mongosStopped[i] {
			state = "STOPPED"
		}
		mongoses[i] = map[string]any{"member": i, "host": s.Addr(), "state": state}
	}
	shards := make([]map[string]any, 0, len(c.state))
	for k, rs := range c.d.sc.Shards() {
		st := c.setStatusLocked(target{set: k, shard: true, rs: rs, members: rs.Members()})
		st["shard"], st["setName"] = k, rs.Name()
		shards = append(shards, st)
	}
	reply["mongoses"], reply["shards"] = mongoses, shards
	return reply, nil
}

// setStatusLocked returns the members of t and its primary, for /status.
func (c *controller) setStatusLocked(t target) map[string]any {
	primary := c.primaryLocked(t)
	members := make([]map[string]any, len(t.members))
	for i, s := range t.members {
		st := c.state[t.set][i]
		state := "STANDALONE"
		switch {
		case t.rs == nil:
		case st.stopped:
			state = "STOPPED"
		case i == primary:
			state = "PRIMARY"
		default:
			state = "SECONDARY"
		}
		members[i] = map[string]any{
			"member":      i,
			"host":        s.Addr(),
			"state":       state,
			"partitioned": st.partitioned,
			"lagMs":       st.lag.Milliseconds(),
		}
	}
	out := map[string]any{"members": members, "primary": nil}
	if primary >= 0 {
		out["primary"], out["primaryHost"] = primary, t.members[primary].Addr()
	}
	return out
}

// GET /stats[?member=i]: mongotest's Stats of each server (or of member
// i), with JSON's lowerCamelCase names. On a sharded cluster, /stats
// without parameters reports the mongoses and every shard's members, and
// ?shard=k[&member=i] one shard (or one of its members).
func (c *controller) stats(_ *http.Request, q url.Values) (map[string]any, error) {
	if c.d.sc != nil && len(q) == 0 {
		mongoses, err := allStats(c.d.servers)
		if err != nil {
			return nil, err
		}
		var shards []map[string]any
		for k, rs := range c.d.sc.Shards() {
			members, err := allStats(rs.Members())
			if err != nil {
				return nil, err
			}
			shards = append(shards, map[string]any{"shard": k, "members": members})
		}
		return map[string]any{"mongoses": mongoses, "shards": shards}, nil
	}
	t, err := c.target("/stats", q)
	if err != nil {
		return nil, err
	}
	one := q.Has("member")
	i, err := c.member(q, "member", 0, t)
	if err != nil {
		return nil, err
	}
	if one {
		st, err := statsJSON(t.members[i])
		if err != nil {
			return nil, err
		}
		return t.withShard(map[string]any{"member": i, "stats": st}), nil
	}
	all, err := allStats(t.members)
	if err != nil {
		return nil, err
	}
	return t.withShard(map[string]any{"members": all}), nil
}

// GET /mongos/stats[?member=i]: the Stats of each mongos, or of mongos i.
func (c *controller) mongosStats(_ *http.Request, q url.Values) (map[string]any, error) {
	if !q.Has("member") {
		all, err := allStats(c.d.servers)
		if err != nil {
			return nil, err
		}
		return map[string]any{"mongoses": all}, nil
	}
	i, err := c.mongos(q)
	if err != nil {
		return nil, err
	}
	st, err := statsJSON(c.d.servers[i])
	if err != nil {
		return nil, err
	}
	return map[string]any{"member": i, "stats": st}, nil
}

// allStats returns the Stats of servers, in JSON's style.
func allStats(servers []*mongotest.Server) ([]map[string]any, error) {
	out := make([]map[string]any, len(servers))
	for i, s := range servers {
		var err error
		if out[i], err = statsJSON(s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// statsJSON returns the Stats of s with JSON's lowerCamelCase names.
func statsJSON(s *mongotest.Server) (map[string]any, error) {
	data, err := json.Marshal(s.Stats())
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[lowerFirst(k)] = v
	}
	return out, nil
}

// lowerFirst turns a Go field name into JSON's style: ConnectionsOpen,
// connectionsOpen.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// POST /stepdown[?next=i|none]: the primary steps down, and member next
// (by default the next member after it that runs and is not partitioned,
// or itself when no other can be) is elected, as a real set elects a new
// primary within seconds. next=none leaves the set without a primary, as
// mongotest's StepDown does, until /elect. On a sharded cluster, the
// primary of shard k (?shard=k).
func (c *controller) stepDown(r *http.Request, q url.Values) (map[string]any, error) {
	t, err := c.target("/stepdown", q)
	if err != nil {
		return nil, err
	}
	next, auto := -1, !q.Has("next")
	if q.Has("next") && q.Get("next") != "none" {
		if next, err = c.member(q, "next", -1, t); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.primaryLocked(t)
	if old < 0 {
		if t.shard {
			return nil, conflictf("StepDown: shard %d has no primary", t.set)
		}
		return nil, conflictf("StepDown: the replica set has no primary")
	}
	ctx, cancel := context.WithTimeout(r.Context(), stepDownTimeout)
	defer cancel()
	if err := t.rs.StepDown(ctx); err != nil {
		return nil, conflict(err)
	}
	reply := t.withShard(map[string]any{"oldPrimary": old, "primary": nil})
	if auto {
		state := c.state[t.set]
		n := len(t.members)
		for k := 1; k <= n; k++ {
			if j := (old + k) % n; !state[j].stopped && !state[j].partitioned {
				next = j
				break
			}
		}
	}
	if next >= 0 {
		if err := t.rs.Elect(next); err != nil {
			// The step-down happened: the reply says so with the error.
			return nil, conflict(fmt.Errorf("the primary (member %d) stepped down, but %w", old, err))
		}
		reply["primary"], reply["primaryHost"] = next, t.members[next].Addr()
	}
	return reply, nil
}

// memberControl runs a control of member i (the member parameter) of the
// replica set or shard that path addresses, and records what it did.
func (c *controller) memberControl(path string, q url.Values, do func(rs *mongotest.ReplicaSet, i int) error, record func(st *memberState)) (map[string]any, error) {
	t, err := c.target(path, q)
	if err != nil {
		return nil, err
	}
	i, err := c.member(q, "member", -1, t)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := do(t.rs, i); err != nil {
		return nil, conflict(err)
	}
	if record != nil {
		record(&c.state[t.set][i])
	}
	reply := t.withShard(map[string]any{"member": i, "primary": nil})
	if p := c.primaryLocked(t); p >= 0 {
		reply["primary"] = p
	}
	return reply, nil
}

// POST /elect?member=i
func (c *controller) elect(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl("/elect", q, (*mongotest.ReplicaSet).Elect, nil)
}

// POST /stop?member=i: as a killed mongod; a primary leaves the set
// without one until /elect.
func (c *controller) stop(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl("/stop", q, (*mongotest.ReplicaSet).Stop, func(st *memberState) { st.stopped = true })
}

// POST /restart?member=i: on the same port, as a secondary.
func (c *controller) restart(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl("/restart", q, (*mongotest.ReplicaSet).Restart, func(st *memberState) { st.stopped = false })
}

// POST /partition?member=i
func (c *controller) partition(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl("/partition", q, (*mongotest.ReplicaSet).Partition, func(st *memberState) { st.partitioned = true })
}

// POST /heal?member=i
func (c *controller) heal(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl("/heal", q, (*mongotest.ReplicaSet).Heal, func(st *memberState) { st.partitioned = false })
}

// POST /lag?member=i&ms=N: member i's lastWrite trails by N ms (0: none).
func (c *controller) lag(_ *http.Request, q url.Values) (map[string]any, error) {
	s := q.Get("ms")
	if !q.Has("ms") {
		return nil, badRequest("the parameter ms, the lag in milliseconds, is missing")
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 || ms > maxLag.Milliseconds() {
		return nil, badRequest("ms=%q: the lag is an integer of milliseconds from 0 to %d", s, maxLag.Milliseconds())
	}
	d := time.Duration(ms) * time.Millisecond
	reply, err := c.memberControl("/lag", q, func(rs *mongotest.ReplicaSet, i int) error { return rs.SetLag(i, d) },
		func(st *memberState) { st.lag = d })
	if reply != nil {
		reply["lagMs"] = ms
	}
	return reply, err
}

// readFailPoint reads the body of a /failpoint request: the
// configureFailPoint command in (relaxed extended) JSON, {"configureFailPoint":
// "failCommand", "mode": {"times": 1}, "data": {...}}, which may leave out
// its first field.
func readFailPoint(r *http.Request) (bson.Raw, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &httpError{http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", maxBody)}
		}
		return nil, badRequest("reading the body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, badRequest(`the body is empty: send the configureFailPoint command, such as {"configureFailPoint": "failCommand", "mode": {"times": 1}, "data": {"failCommands": ["insert"], "errorCode": 91}}`)
	}
	var cmd bson.D
	if err := bson.UnmarshalExtJSON(body, false, &cmd); err != nil {
		return nil, badRequest("the body is not a JSON object: %v", err)
	}
	if !slices.ContainsFunc(cmd, func(e bson.E) bool { return e.Key == "configureFailPoint" }) {
		cmd = append(bson.D{{Key: "configureFailPoint", Value: "failCommand"}}, cmd...)
	}
	raw, err := bson.Marshal(cmd)
	if err != nil {
		return nil, badRequest("the body: %v", err)
	}
	return raw, nil
}

// configureFailPoint sets the fail point cmd on s; mongod's refusals of it
// are bad requests.
func configureFailPoint(s *mongotest.Server, cmd bson.Raw) (int64, error) {
	n, err := s.ConfigureFailPoint(cmd)
	if err != nil {
		return 0, badRequest("%s", strings.TrimPrefix(err.Error(), "mongotest: ConfigureFailPoint: "))
	}
	return n, nil
}

// POST /failpoint[?member=i]: the body is the configureFailPoint command
// (see readFailPoint). It applies to member i, by default the primary (or
// the standalone); on a sharded cluster, to a member of shard k
// (?shard=k). A stopped member takes none: its restart would clear it.
func (c *controller) failPoint(r *http.Request, q url.Values) (map[string]any, error) {
	t, err := c.target("/failpoint", q)
	if err != nil {
		return nil, err
	}
	cmd, err := readFailPoint(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	def := 0
	if t.rs != nil {
		def = c.primaryLocked(t)
	}
	if def < 0 && !q.Has("member") {
		if t.shard {
			return nil, conflictf("shard %d has no primary: give the member, ?shard=%d&member=i", t.set, t.set)
		}
		return nil, conflictf("the replica set has no primary: give the member, ?member=i")
	}
	i, err := c.member(q, "member", def, t)
	if err != nil {
		return nil, err
	}
	if c.state[t.set][i].stopped {
		return nil, conflictf("member %d of %s is stopped: restart it first (a restart clears the fail points)", i, t)
	}
	n, err := configureFailPoint(t.members[i], cmd)
	if err != nil {
		return nil, err
	}
	return t.withShard(map[string]any{"member": i, "count": n}), nil
}

// GET /shardof?db=NAME: the shard that holds database NAME (every
// collection of a database lives on its database's shard), and its
// primary: where a test steps down or sets a fail point for that
// database's commands.
func (c *controller) shardOf(_ *http.Request, q url.Values) (map[string]any, error) {
	db := q.Get("db")
	switch {
	case !q.Has("db"):
		return nil, badRequest("the parameter db, a database's name, is missing")
	case db == "":
		return nil, badRequest("db is empty: a database has a name")
	case len(db) >= 64 || strings.ContainsAny(db, "/\\. \"$\x00"):
		// NamespaceString's rules for a database name.
		return nil, badRequest("db=%q: a database's name is shorter than 64 bytes, without / \\ . space \" $ or NUL", db)
	}
	k := c.d.sc.ShardOf(db)
	rs := c.d.sc.Shards()[k]
	c.mu.Lock()
	defer c.mu.Unlock()
	reply := map[string]any{"db": db, "shard": k, "setName": rs.Name(), "primary": nil}
	t := target{set: k, shard: true, rs: rs, members: rs.Members()}
	if p := c.primaryLocked(t); p >= 0 {
		reply["primary"], reply["primaryHost"] = p, t.members[p].Addr()
	}
	return reply, nil
}

// POST /mongos/stop?member=i: mongos i stops, as a killed mongos: its
// port refuses connections until /mongos/restart.
func (c *controller) mongosStop(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.mongosControl(q, c.d.sc.StopMongos, true)
}

// POST /mongos/restart?member=i: mongos i starts again on its port, as a
// new process: no cursor, no transaction, no fail point.
func (c *controller) mongosRestart(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.mongosControl(q, c.d.sc.RestartMongos, false)
}

func (c *controller) mongosControl(q url.Values, do func(i int) error, stopped bool) (map[string]any, error) {
	i, err := c.mongos(q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := do(i); err != nil {
		return nil, conflict(err)
	}
	c.mongosStopped[i] = stopped
	return map[string]any{"member": i, "host": c.d.servers[i].Addr()}, nil
}

// POST /mongos/failpoint?member=i: the fail point of the body (see
// readFailPoint) on mongos i, for the commands it receives; the shards'
// are set with /failpoint?shard=k.
func (c *controller) mongosFailPoint(r *http.Request, q url.Values) (map[string]any, error) {
	i, err := c.mongos(q)
	if err != nil {
		return nil, err
	}
	cmd, err := readFailPoint(r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mongosStopped[i] {
		return nil, conflictf("mongos %d is stopped: restart it first (a restart clears the fail points)", i)
	}
	n, err := configureFailPoint(c.d.servers[i], cmd)
	if err != nil {
		return nil, err
	}
	return map[string]any{"member": i, "count": n}, nil
}

// POST /shutdown: the command stops after this reply.
func (c *controller) stopCommand(*http.Request, url.Values) (map[string]any, error) {
	c.shutdown()
	return nil, nil
}
