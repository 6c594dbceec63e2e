package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// that are not in Go, with the replica set's controls of mongotest. Every
// reply is JSON: {"ok": true, ...} with 200, or {"ok": false, "error":
// "..."} with 400 for a bad request (an unknown member, a missing or
// malformed parameter, a fail point mongod would refuse), 404 for an
// unknown path, 405 for a wrong method, 409 when the set's state forbids
// the control (Elect of a stopped member, Stop of a stopped one, a
// step-down without a primary, ...) and 413 for a body too large.

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
	mu    sync.Mutex
	state []memberState
	logMu sync.Mutex
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
	// replSet says it needs a replica set.
	replSet bool
	handle  func(c *controller, r *http.Request, q url.Values) (map[string]any, error)
}

var routes = map[string]route{
	"/status":    {method: http.MethodGet, handle: (*controller).status},
	"/stats":     {method: http.MethodGet, params: []string{"member"}, handle: (*controller).stats},
	"/stepdown":  {method: http.MethodPost, params: []string{"next"}, replSet: true, handle: (*controller).stepDown},
	"/elect":     {method: http.MethodPost, params: []string{"member"}, replSet: true, handle: (*controller).elect},
	"/stop":      {method: http.MethodPost, params: []string{"member"}, replSet: true, handle: (*controller).stop},
	"/restart":   {method: http.MethodPost, params: []string{"member"}, replSet: true, handle: (*controller).restart},
	"/partition": {method: http.MethodPost, params: []string{"member"}, replSet: true, handle: (*controller).partition},
	"/heal":      {method: http.MethodPost, params: []string{"member"}, replSet: true, handle: (*controller).heal},
	"/lag":       {method: http.MethodPost, params: []string{"member", "ms"}, replSet: true, handle: (*controller).lag},
	"/failpoint": {method: http.MethodPost, params: []string{"member"}, handle: (*controller).failPoint},
	"/shutdown":  {method: http.MethodPost, handle: (*controller).stopCommand},
}

func newController(d *deployment, shutdown func(), log io.Writer) *controller {
	return &controller{d: d, shutdown: shutdown, log: log, state: make([]memberState, len(d.servers))}
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
			if len(rt.params) == 0 {
				return fail(badRequest("%s takes no parameter, not %q", r.URL.Path, name))
			}
			return fail(badRequest("%s takes the parameters %s, not %q", r.URL.Path, strings.Join(rt.params, ", "), name))
		case len(v) > 1:
			return fail(badRequest("the parameter %s is given %d times", name, len(v)))
		}
	}
	if rt.replSet && c.d.rs == nil {
		return fail(badRequest("%s controls a replica set, and this is a standalone: start mongotest with -replset N", r.URL.Path))
	}
	// Bodies are read only by /failpoint; the bound applies to all, so that
	// none is read without one.
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

// member parses the member parameter name of q: an index of a server.
// Without it, it returns def, or fails if def is negative.
func (c *controller) member(q url.Values, name string, def int) (int, error) {
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
	if i < 0 || i >= len(c.d.servers) {
		if c.d.rs == nil {
			return 0, badRequest("%s=%d: a standalone is member 0", name, i)
		}
		return 0, badRequest("%s=%d: the replica set's members are 0 to %d", name, i, len(c.d.servers)-1)
	}
	return i, nil
}

// primaryLocked returns the primary's index, -1 if none (or a standalone).
func (c *controller) primaryLocked() int {
	if c.d.rs == nil {
		return -1
	}
	return slices.Index(c.d.servers, c.d.rs.Primary())
}

// GET /status: the deployment, its members and its primary.
func (c *controller) status(*http.Request, url.Values) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	primary := c.primaryLocked()
	members := make([]map[string]any, len(c.d.servers))
	for i, s := range c.d.servers {
		st := c.state[i]
		state := "STANDALONE"
		switch {
		case c.d.rs == nil:
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
	reply := map[string]any{
		"uri":      c.d.uri,
		"topology": "standalone",
		"members":  members,
		"primary":  nil,
	}
	if c.d.rs != nil {
		reply["topology"], reply["setName"] = "replicaSet", c.d.rs.Name()
		if primary >= 0 {
			reply["primary"], reply["primaryHost"] = primary, c.d.servers[primary].Addr()
		}
	}
	return reply, nil
}

// GET /stats[?member=i]: mongotest's Stats of each server (or of member
// i), with JSON's lowerCamelCase names.
func (c *controller) stats(_ *http.Request, q url.Values) (map[string]any, error) {
	one := q.Has("member")
	i, err := c.member(q, "member", 0)
	if err != nil {
		return nil, err
	}
	toJSON := func(s *mongotest.Server) (map[string]any, error) {
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
	if one {
		st, err := toJSON(c.d.servers[i])
		if err != nil {
			return nil, err
		}
		return map[string]any{"member": i, "stats": st}, nil
	}
	all := make([]map[string]any, len(c.d.servers))
	for j, s := range c.d.servers {
		if all[j], err = toJSON(s); err != nil {
			return nil, err
		}
	}
	return map[string]any{"members": all}, nil
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
// mongotest's StepDown does, until /elect.
func (c *controller) stepDown(r *http.Request, q url.Values) (map[string]any, error) {
	next, auto := -1, !q.Has("next")
	if q.Has("next") && q.Get("next") != "none" {
		var err error
		if next, err = c.member(q, "next", -1); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.primaryLocked()
	if old < 0 {
		return nil, &httpError{http.StatusConflict, "StepDown: the replica set has no primary"}
	}
	ctx, cancel := context.WithTimeout(r.Context(), stepDownTimeout)
	defer cancel()
	if err := c.d.rs.StepDown(ctx); err != nil {
		return nil, conflict(err)
	}
	reply := map[string]any{"oldPrimary": old, "primary": nil}
	if auto {
		n := len(c.d.servers)
		for k := 1; k <= n; k++ {
			if j := (old + k) % n; !c.state[j].stopped && !c.state[j].partitioned {
				next = j
				break
			}
		}
	}
	if next >= 0 {
		if err := c.d.rs.Elect(next); err != nil {
			// The step-down happened: the reply says so with the error.
			return nil, conflict(fmt.Errorf("the primary (member %d) stepped down, but %w", old, err))
		}
		reply["primary"], reply["primaryHost"] = next, c.d.servers[next].Addr()
	}
	return reply, nil
}

// memberControl runs a control of member i (the member parameter) and
// records what it did.
func (c *controller) memberControl(q url.Values, do func(i int) error, record func(st *memberState)) (map[string]any, error) {
	i, err := c.member(q, "member", -1)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := do(i); err != nil {
		return nil, conflict(err)
	}
	if record != nil {
		record(&c.state[i])
	}
	reply := map[string]any{"member": i}
	if p := c.primaryLocked(); p >= 0 {
		reply["primary"] = p
	} else {
		reply["primary"] = nil
	}
	return reply, nil
}

// POST /elect?member=i
func (c *controller) elect(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl(q, c.d.rs.Elect, nil)
}

// POST /stop?member=i: as a killed mongod; a primary leaves the set
// without one until /elect.
func (c *controller) stop(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl(q, c.d.rs.Stop, func(st *memberState) { st.stopped = true })
}

// POST /restart?member=i: on the same port, as a secondary.
func (c *controller) restart(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl(q, c.d.rs.Restart, func(st *memberState) { st.stopped = false })
}

// POST /partition?member=i
func (c *controller) partition(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl(q, c.d.rs.Partition, func(st *memberState) { st.partitioned = true })
}

// POST /heal?member=i
func (c *controller) heal(_ *http.Request, q url.Values) (map[string]any, error) {
	return c.memberControl(q, c.d.rs.Heal, func(st *memberState) { st.partitioned = false })
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
	reply, err := c.memberControl(q, func(i int) error { return c.d.rs.SetLag(i, d) },
		func(st *memberState) { st.lag = d })
	if reply != nil {
		reply["lagMs"] = ms
	}
	return reply, err
}

// POST /failpoint[?member=i]: the body is the configureFailPoint command in
// (relaxed extended) JSON, {"configureFailPoint": "failCommand", "mode":
// {"times": 1}, "data": {...}}, which may leave out its first field. It
// applies to member i, by default the primary (or the standalone).
func (c *controller) failPoint(r *http.Request, q url.Values) (map[string]any, error) {
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

	c.mu.Lock()
	defer c.mu.Unlock()
	def := 0
	if c.d.rs != nil {
		if def = c.primaryLocked(); def < 0 {
			def = -1
		}
	}
	if def < 0 && !q.Has("member") {
		return nil, &httpError{http.StatusConflict, "the replica set has no primary: give the member, ?member=i"}
	}
	i, err := c.member(q, "member", def)
	if err != nil {
		return nil, err
	}
	n, err := c.d.servers[i].ConfigureFailPoint(raw)
	if err != nil {
		return nil, badRequest("%s", strings.TrimPrefix(err.Error(), "mongotest: ConfigureFailPoint: "))
	}
	return map[string]any{"member": i, "count": n}, nil
}

// POST /shutdown: the command stops after this reply.
func (c *controller) stopCommand(*http.Request, url.Values) (map[string]any, error) {
	c.shutdown()
	return nil, nil
}
