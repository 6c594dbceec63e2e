package topology

// The runner of the SDAM specification's unit tests: every file of the six
// folders of testdata/spec/sdam (see the README.md there) runs through the
// same code, and a file dropped into a folder needs no code change. A field
// the runner does not know fails its test by name, so that a newer file
// cannot pass by being half read.
//
// A file's client is its URI's settings (parsed by the connstring package),
// opened with Open. Each phase then
//
//   - applies its responses in order: an empty one is a network error of
//     the check (decideCheckError), any other goes through newServerDescription,
//     then Apply, or decideCheckError when the description is an Unknown with an
//     error (an ok: 0 reply);
//   - applies its applicationErrors through decideAppError, a command error being
//     the one ReplyError finds in the response (none for a reply whose only
//     errors are writeErrors);
//   - compares the outcome: the topology's fields and each server's, or, in
//     the monitoring folder, the events published since the last phase.
//
// Each server has a fake pool generation: 0 when the server is added,
// incremented by every decision that clears the pool, dropped when the
// server is removed.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connstring"
)

// specDir holds the specification's test files; specFolders are the
// folders this runner runs, each with at least one file.
const specDir = "../testdata/spec/sdam"

var specFolders = []string{"rs", "sharded", "single", "load-balanced", "errors", "monitoring"}

func TestSDAMSpec(t *testing.T) {
	for _, folder := range specFolders {
		files, err := filepath.Glob(filepath.Join(specDir, folder, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Errorf("no test files in %s/%s", specDir, folder)
		}
		for _, path := range files {
			t.Run(folder+"/"+strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
				runSpecFile(t, path)
			})
		}
	}
}

// The format of a file, decoded strictly (see decodeStrict).
type (
	specFile struct {
		Description string      `json:"description"`
		URI         string      `json:"uri"`
		Phases      []specPhase `json:"phases"`
	}
	specPhase struct {
		Description       string              `json:"description"`
		Responses         [][]json.RawMessage `json:"responses"`
		ApplicationErrors []specAppError      `json:"applicationErrors"`
		Outcome           specOutcome         `json:"outcome"`
	}
	specAppError struct {
		Address    string  `json:"address"`
		Generation *uint64 `json:"generation"`
		// MaxWireVersion is read but changes nothing: the rule it selected
		// (pre-4.2 servers clearing the pool on every state change) is gone
		// from the specification, and the client refuses such servers.
		MaxWireVersion int32           `json:"maxWireVersion"`
		When           string          `json:"when"`
		Type           string          `json:"type"`
		Response       json.RawMessage `json:"response"`
	}
	specOutcome struct {
		Servers                      map[string]specServer        `json:"servers"`
		TopologyType                 *string                      `json:"topologyType"`
		SetName                      opt                          `json:"setName"`
		LogicalSessionTimeoutMinutes opt                          `json:"logicalSessionTimeoutMinutes"`
		MaxSetVersion                opt                          `json:"maxSetVersion"`
		MaxElectionID                opt                          `json:"maxElectionId"`
		Compatible                   opt                          `json:"compatible"`
		Events                       []map[string]json.RawMessage `json:"events"`
	}
	specServer struct {
		Type                         string `json:"type"`
		Error                        opt    `json:"error"`
		SetName                      opt    `json:"setName"`
		SetVersion                   opt    `json:"setVersion"`
		ElectionID                   opt    `json:"electionId"`
		LogicalSessionTimeoutMinutes opt    `json:"logicalSessionTimeoutMinutes"`
		MinWireVersion               opt    `json:"minWireVersion"`
		MaxWireVersion               opt    `json:"maxWireVersion"`
		TopologyVersion              opt    `json:"topologyVersion"`
		Pool                         *struct {
			Generation uint64 `json:"generation"`
		} `json:"pool"`
	}
)

// opt is a field that may be absent (not checked), null, or a value.
type opt struct {
	set bool
	raw json.RawMessage
}

func (o *opt) UnmarshalJSON(b []byte) error {
	o.set, o.raw = true, slices.Clone(b)
	return nil
}

func (o opt) null() bool { return bytes.Equal(o.raw, []byte("null")) }

// decodeStrict decodes JSON, failing on a field v does not have.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// extValue decodes an extended JSON value ({"$oid": ...}, {"$numberLong":
// ...}, a document, a number).
func extValue(t testing.TB, raw json.RawMessage) bson.RawValue {
	t.Helper()
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(`{"v":`+string(raw)+`}`), false, &doc); err != nil {
		t.Fatalf("extended JSON %s: %v", raw, err)
	}
	return doc.Lookup("v")
}

func extDocument(t testing.TB, raw json.RawMessage) bson.Raw {
	t.Helper()
	var doc bson.Raw
	if err := bson.UnmarshalExtJSON(raw, false, &doc); err != nil {
		t.Fatalf("extended JSON %s: %v", raw, err)
	}
	return doc
}

// specRun is the state of one file's client.
type specRun struct {
	t      testing.TB
	id     bson.ObjectID
	d      Description
	gen    map[string]uint64 // the fake pools' generations
	events []Event           // published since the last phase
	now    time.Time
}

func runSpecFile(t testing.TB, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f specFile
	if err := decodeStrict(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cs, err := connstring.Parse(f.URI)
	if err != nil {
		t.Fatalf("uri %q: %v", f.URI, err)
	}
	settings := Settings{
		Seeds:            cs.Hosts,
		ReplicaSet:       cs.ReplicaSet,
		DirectConnection: cs.DirectConnection != nil && *cs.DirectConnection,
		LoadBalanced:     cs.LoadBalanced != nil && *cs.LoadBalanced,
	}
	r := &specRun{t: t, id: bson.NewObjectID(), gen: map[string]uint64{}, now: time.Unix(1700000000, 0)}
	d, events, err := openEvents(r.id, settings)
	if err != nil {
		t.Fatalf("Open(%+v): %v", settings, err)
	}
	r.d, r.events = d, events
	for _, s := range d.Servers() {
		r.gen[s.Address] = 0
	}
	for i, ph := range f.Phases {
		name := fmt.Sprintf("phase %d", i)
		if ph.Description != "" {
			name += " (" + ph.Description + ")"
		}
		for _, resp := range ph.Responses {
			r.response(resp)
		}
		for _, ae := range ph.ApplicationErrors {
			r.appError(ae)
		}
		if ph.Outcome.Events != nil {
			r.checkEvents(name, ph.Outcome.Events)
		} else {
			r.checkOutcome(name, ph.Outcome)
		}
		r.events = nil
		if t.Failed() {
			return // later phases build on this one
		}
	}
}

func (r *specRun) response(resp []json.RawMessage) {
	t := r.t
	if len(resp) != 2 {
		t.Fatalf("a response must be [address, reply], not %d values", len(resp))
	}
	var addr string
	if err := json.Unmarshal(resp[0], &addr); err != nil {
		t.Fatalf("response address %s: %v", resp[0], err)
	}
	r.now = r.now.Add(time.Second)
	doc := extDocument(t, resp[1])
	if len(doc) == 5 { // {}: a network error of the check
		r.decided(addr, r.d.decideCheckError(addr, kindNetwork, errors.New("network error (simulated)")))
		return
	}
	s := newServerDescription(addr, doc, time.Millisecond, r.now)
	if s.Error != nil {
		r.decided(addr, r.d.decideCheckError(addr, kindCommand, s.Error))
		return
	}
	r.apply(r.d.apply(s))
}

func (r *specRun) appError(ae specAppError) {
	t := r.t
	e := appError{Address: ae.Address}
	switch ae.Type {
	case "command":
		var ok bool
		if e, ok = replyError(ae.Address, extDocument(t, ae.Response)); !ok {
			return // no error for SDAM to handle (writeErrors only)
		}
	case "network":
		e.Kind, e.Err = kindNetwork, errors.New("network error (simulated)")
	case "timeout":
		e.Kind, e.Err = kindTimeout, errors.New("network timeout (simulated)")
	default:
		t.Fatalf("applicationError of unknown type %q", ae.Type)
	}
	if ae.Type != "command" && ae.Response != nil {
		t.Fatalf("applicationError of type %q has a response", ae.Type)
	}
	switch ae.When {
	case "beforeHandshakeCompletes":
		e.Phase = beforeHandshake
	case "afterHandshakeCompletes":
		e.Phase = afterHandshake
	default:
		t.Fatalf("applicationError with unknown when %q", ae.When)
	}
	e.Generation = r.gen[ae.Address]
	if ae.Generation != nil {
		e.Generation = *ae.Generation
	}
	r.decided(ae.Address, r.d.decideAppError(r.gen[ae.Address], e))
}

// decided carries out a decision about the server at addr: the Unknown
// description through Apply, and the clear on the fake pool.
func (r *specRun) decided(addr string, dec decision) {
	if dec.ServiceID != nil {
		r.t.Fatalf("decision to clear the connections of service %s: load-balanced pools are not modeled", dec.ServiceID.Hex())
	}
	if dec.MarkUnknown {
		if dec.Server.Type != ServerUnknown || dec.Server.Address != addr {
			r.t.Fatalf("decision to mark %s Unknown carries %s of %s", addr, dec.Server.Type, dec.Server.Address)
		}
		r.apply(r.d.apply(dec.Server))
	}
	if dec.Clear {
		if _, ok := r.gen[addr]; ok {
			r.gen[addr]++
		}
	}
}

func (r *specRun) apply(u update) {
	r.d = u.Description
	for _, a := range u.Removed {
		delete(r.gen, a)
	}
	for _, a := range u.Added {
		r.gen[a] = 0
	}
	r.events = append(r.events, u.events(r.id)...)
}

func (r *specRun) checkOutcome(phase string, o specOutcome) {
	t, d := r.t, r.d
	if o.TopologyType == nil {
		t.Fatalf("%s: the outcome has neither topologyType nor events", phase)
	}
	if got := d.Type.String(); got != *o.TopologyType {
		t.Errorf("%s: topologyType %s, want %s", phase, got, *o.TopologyType)
	}
	r.checkString(phase+": setName", d.SetName, o.SetName)
	r.checkInt(phase+": logicalSessionTimeoutMinutes", d.LogicalSessionTimeoutMinutes, o.LogicalSessionTimeoutMinutes)
	r.checkInt(phase+": maxSetVersion", d.MaxSetVersion, o.MaxSetVersion)
	r.checkOID(phase+": maxElectionId", d.MaxElectionID, o.MaxElectionID)
	if o.Compatible.set {
		var want bool
		if err := json.Unmarshal(o.Compatible.raw, &want); err != nil {
			t.Fatalf("%s: compatible %s: %v", phase, o.Compatible.raw, err)
		}
		if d.Compatible() != want {
			t.Errorf("%s: compatible %v (%v), want %v", phase, d.Compatible(), d.CompatibilityError, want)
		}
	}
	var got, want []string
	for _, s := range d.Servers() {
		got = append(got, s.Address)
	}
	for a := range o.Servers {
		want = append(want, a)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: servers %v, want %v", phase, got, want)
	}
	for addr, ws := range o.Servers {
		s, ok := d.Server(addr)
		if !ok {
			continue
		}
		r.checkServer(phase+": server "+addr, s, ws)
	}
}

func (r *specRun) checkServer(where string, s ServerDescription, w specServer) {
	t := r.t
	if s.Type.String() != w.Type {
		t.Errorf("%s: type %s (error %v), want %s", where, s.Type, s.Error, w.Type)
	}
	if w.Error.set {
		var sub string
		if err := json.Unmarshal(w.Error.raw, &sub); err != nil {
			t.Fatalf("%s: error %s: %v", where, w.Error.raw, err)
		}
		if s.Error == nil || !strings.Contains(s.Error.Error(), sub) {
			t.Errorf("%s: error %v, want one containing %q", where, s.Error, sub)
		}
	}
	r.checkString(where+": setName", s.SetName, w.SetName)
	r.checkInt(where+": setVersion", s.SetVersion, w.SetVersion)
	r.checkOID(where+": electionId", s.ElectionID, w.ElectionID)
	r.checkInt(where+": logicalSessionTimeoutMinutes", s.LogicalSessionTimeoutMinutes, w.LogicalSessionTimeoutMinutes)
	r.checkWire(where+": minWireVersion", s.MinWireVersion, w.MinWireVersion)
	r.checkWire(where+": maxWireVersion", s.MaxWireVersion, w.MaxWireVersion)
	if w.TopologyVersion.set {
		var want string
		if !w.TopologyVersion.null() {
			tv, err := parseTopologyVersion(extValue(t, w.TopologyVersion.raw))
			if err != nil {
				t.Fatalf("%s: topologyVersion %s: %v", where, w.TopologyVersion.raw, err)
			}
			want = fmt.Sprint(*tv)
		}
		got := ""
		if s.TopologyVersion != nil {
			got = fmt.Sprint(*s.TopologyVersion)
		}
		if got != want {
			t.Errorf("%s: topologyVersion %q, want %q", where, got, want)
		}
	}
	if w.Pool != nil {
		if g := r.gen[s.Address]; g != w.Pool.Generation {
			t.Errorf("%s: pool generation %d, want %d", where, g, w.Pool.Generation)
		}
	}
}

// checkString compares a string that may be null ("").
func (r *specRun) checkString(where, got string, w opt) {
	if !w.set {
		return
	}
	want := ""
	if !w.null() {
		if err := json.Unmarshal(w.raw, &want); err != nil {
			r.t.Fatalf("%s: %s: %v", where, w.raw, err)
		}
	}
	if got != want {
		r.t.Errorf("%s: %q, want %q", where, got, want)
	}
}

// checkInt compares an integer that may be null.
func (r *specRun) checkInt(where string, got *int64, w opt) {
	if !w.set {
		return
	}
	var want *int64
	if !w.null() {
		n, ok := asInt64(extValue(r.t, w.raw))
		if !ok {
			r.t.Fatalf("%s: %s is not an integer", where, w.raw)
		}
		want = &n
	}
	if !ptrEqual(got, want) {
		r.t.Errorf("%s: %s, want %s", where, showInt(got), showInt(want))
	}
}

// checkWire compares a wire version, null meaning unset (0).
func (r *specRun) checkWire(where string, got int32, w opt) {
	if !w.set {
		return
	}
	var want int64
	if !w.null() {
		var ok bool
		if want, ok = asInt64(extValue(r.t, w.raw)); !ok {
			r.t.Fatalf("%s: %s is not an integer", where, w.raw)
		}
	}
	if int64(got) != want {
		r.t.Errorf("%s: %d, want %d", where, got, want)
	}
}

// checkOID compares an ObjectId that may be null.
func (r *specRun) checkOID(where string, got *bson.ObjectID, w opt) {
	if !w.set {
		return
	}
	var want *bson.ObjectID
	if !w.null() {
		oid, ok := extValue(r.t, w.raw).ObjectIDOK()
		if !ok {
			r.t.Fatalf("%s: %s is not an ObjectId", where, w.raw)
		}
		want = &oid
	}
	if !ptrEqual(got, want) {
		r.t.Errorf("%s: %s, want %s", where, showOID(got), showOID(want))
	}
}
