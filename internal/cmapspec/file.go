package cmapspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mongopool/mongopool/pool"
)

// The styles of test file.
const (
	// StyleUnit files run against a pool with a mock connection.
	StyleUnit = "unit"
	// StyleIntegration files must run against a server, with a failpoint.
	StyleIntegration = "integration"
)

// File is a parsed test file. Unknown fields, operations, event types and
// options make parsing fail, so that a file the runner does not fully
// understand never passes by accident.
type File struct {
	// Name is the file's base name without ".json".
	Name string
	// Style is StyleUnit or StyleIntegration.
	Style string
	// Description is the file's description.
	Description string
	// RunOn lists the server requirements of an integration file, one of
	// which must hold for it to run; empty means none.
	RunOn []Requirement
	// FailPoint is the configureFailPoint command of an integration file, as
	// it appears in the file (its key order matters: the command name comes
	// first), or nil.
	FailPoint json.RawMessage
	// AppName is the poolOptions' appName: a connection option that the
	// handshake carries, which the failpoint uses to pick the connections of
	// the test. "" if not given.
	AppName string
	// Options are the file's poolOptions as pool options (appName aside).
	Options []pool.Option

	events  []any           // expected events, each a JSON object
	err     map[string]any  // expected error of the main thread, or nil
	ignored map[string]bool // the event types to leave out of the check
	ops     []operation     // the operations, checked
}

// Requirement is an element of an integration file's runOn.
type Requirement struct {
	// MinServerVersion and MaxServerVersion bound the server version,
	// inclusively; "" means no bound.
	MinServerVersion string `json:"minServerVersion"`
	MaxServerVersion string `json:"maxServerVersion"`
}

// Files returns the test files of dir, sorted by name. A folder without any
// is an error: a wrong path must not make a test pass.
func Files(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("cmapspec: no test files in %s", dir)
	}
	sort.Strings(files)
	return files, nil
}

// ReadFile reads and parses the test file at path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Name = strings.TrimSuffix(filepath.Base(path), ".json")
	return f, nil
}

// fileJSON is the file as written.
type fileJSON struct {
	Version     int               `json:"version"`
	Style       string            `json:"style"`
	Description string            `json:"description"`
	RunOn       []json.RawMessage `json:"runOn"`
	FailPoint   json.RawMessage   `json:"failPoint"`
	PoolOptions map[string]any    `json:"poolOptions"`
	Operations  []map[string]any  `json:"operations"`
	Error       map[string]any    `json:"error"`
	Events      []any             `json:"events"`
	Ignore      []string          `json:"ignore"`
}

// Parse parses a test file.
func Parse(data []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j fileJSON
	if err := dec.Decode(&j); err != nil {
		return nil, err
	}
	if j.Version != 1 {
		return nil, fmt.Errorf("unsupported format version %d (the runner knows version 1)", j.Version)
	}
	f := &File{
		Style:       j.Style,
		Description: j.Description,
		events:      j.Events,
		err:         j.Error,
	}
	switch j.Style {
	case StyleUnit:
		// The unit format has no server: a failpoint or requirement in a
		// unit file is a mistake the runner could not honour.
		if j.FailPoint != nil || j.RunOn != nil {
			return nil, errors.New(`runOn and failPoint are for style "integration", not "unit"`)
		}
	case StyleIntegration:
	default:
		return nil, fmt.Errorf("unknown style %q (known: %q, %q)", j.Style, StyleUnit, StyleIntegration)
	}
	for i, raw := range j.RunOn {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var r Requirement
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("runOn[%d]: %v", i, err)
		}
		for _, v := range []string{r.MinServerVersion, r.MaxServerVersion} {
			if _, err := parseVersion(v); v != "" && err != nil {
				return nil, fmt.Errorf("runOn[%d]: %v", i, err)
			}
		}
		f.RunOn = append(f.RunOn, r)
	}
	if j.FailPoint != nil {
		if err := checkFailPoint(j.FailPoint); err != nil {
			return nil, fmt.Errorf("failPoint: %v", err)
		}
		f.FailPoint = j.FailPoint
	}
	if j.Operations == nil {
		return nil, errors.New("no operations")
	}
	labels := make(map[string]bool)
	for i, raw := range j.Operations {
		op, err := parseOperation(raw)
		if err != nil {
			return nil, fmt.Errorf("operation %d: %v", i, err)
		}
		op.index = i
		// Catch a misspelt label even where the check-in would not run
		// (on a thread stopped by an earlier error).
		if op.label != "" {
			labels[op.label] = true
		}
		if op.connection != "" && !labels[op.connection] {
			return nil, fmt.Errorf("%v: no earlier checkOut has label %q", op, op.connection)
		}
		f.ops = append(f.ops, op)
	}
	f.ignored = make(map[string]bool)
	for _, name := range j.Ignore {
		if !eventNames[name] {
			return nil, fmt.Errorf("ignore: unknown event type %q", name)
		}
		f.ignored[name] = true
	}
	for k := range j.Error {
		switch k {
		case "type", "message", "address":
		default:
			return nil, fmt.Errorf("error: unknown field %q", k)
		}
	}
	for i, e := range j.Events {
		if _, ok := e.(map[string]any); !ok {
			return nil, fmt.Errorf("events[%d] is not an object", i)
		}
	}
	var err error
	if f.Options, f.AppName, err = poolOptions(j.PoolOptions); err != nil {
		return nil, fmt.Errorf("poolOptions: %v", err)
	}
	return f, nil
}

// checkFailPoint checks that raw is a configureFailPoint command: an object
// whose first field, the command's name, is configureFailPoint with the name
// of a failpoint.
func checkFailPoint(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not an object")
	}
	key, err := dec.Token()
	if err != nil || key != "configureFailPoint" {
		return fmt.Errorf("the first field is %v, want configureFailPoint", key)
	}
	var name any
	if err := dec.Decode(&name); err != nil {
		return err
	}
	if s, ok := name.(string); !ok || s == "" {
		return fmt.Errorf("configureFailPoint is not a failpoint name: %v", name)
	}
	var all map[string]any
	if err := json.Unmarshal(raw, &all); err != nil {
		return err
	}
	if _, ok := all["mode"]; !ok {
		return errors.New("no mode")
	}
	return nil
}

// poolOptions converts the poolOptions of a test file.
func poolOptions(raw map[string]any) (opts []pool.Option, appName string, err error) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		if k == "appName" {
			// A connection option: the handshake carries it, not the pool.
			s, ok := v.(string)
			if !ok || s == "" {
				return nil, "", fmt.Errorf("appName is not a non-empty string: %v", v)
			}
			appName = s
			continue
		}
		n, err := jsonInt(v)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %v", k, err)
		}
		ms := time.Duration(n) * time.Millisecond
		switch k {
		case "maxPoolSize":
			opts = append(opts, pool.WithMaxPoolSize(int(n)))
		case "minPoolSize":
			opts = append(opts, pool.WithMinPoolSize(int(n)))
		case "maxConnecting":
			opts = append(opts, pool.WithMaxConnecting(int(n)))
		case "maxIdleTimeMS":
			opts = append(opts, pool.WithMaxIdleTime(ms))
		case "waitQueueTimeoutMS":
			opts = append(opts, pool.WithWaitQueueTimeout(ms))
		case "backgroundThreadIntervalMS":
			switch {
			case n == 0:
				return nil, "", errors.New("backgroundThreadIntervalMS must not be 0")
			case n < 0: // never run the maintenance
				opts = append(opts, pool.WithMaintenanceInterval(-1))
			default:
				opts = append(opts, pool.WithMaintenanceInterval(ms))
			}
		default:
			return nil, "", fmt.Errorf("unknown pool option %q", k)
		}
	}
	return opts, appName, nil
}

// jsonInt returns the integer value of a JSON number.
func jsonInt(v any) (int64, error) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("not an integer: %v", v)
	}
	return int64(f), nil
}

// RunsOn reports whether a server of the given version ("7.0.0") meets one of
// the file's requirements, as the integration runner must check before
// running it. A file without requirements runs everywhere.
func (f *File) RunsOn(serverVersion string) (bool, error) {
	if len(f.RunOn) == 0 {
		return true, nil
	}
	have, err := parseVersion(serverVersion)
	if err != nil {
		return false, fmt.Errorf("server version: %v", err)
	}
	for _, r := range f.RunOn {
		ok := true
		if r.MinServerVersion != "" {
			min, _ := parseVersion(r.MinServerVersion) // checked by Parse
			ok = ok && compareVersions(have, min) >= 0
		}
		if r.MaxServerVersion != "" {
			max, _ := parseVersion(r.MaxServerVersion)
			ok = ok && compareVersions(have, max) <= 0
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// parseVersion parses a dotted version such as "4.4.0" or "4.9".
func parseVersion(s string) ([]int, error) {
	if s == "" {
		return nil, errors.New("empty version")
	}
	var v []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("version %q: %q is not a number", s, part)
		}
		v = append(v, n)
	}
	return v, nil
}

// compareVersions compares two parsed versions; missing parts count as 0, so
// "4.4" equals "4.4.0".
func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
