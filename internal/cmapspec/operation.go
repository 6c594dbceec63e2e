package cmapspec

import (
	"fmt"
	"time"
)

// operation is one operation of a test file.
type operation struct {
	index      int
	name       string
	thread     string        // "" for the main thread
	label      string        // checkOut
	connection string        // checkIn
	interrupt  bool          // clear
	target     string        // start, waitForThread
	ms         time.Duration // wait
	event      string        // waitForEvent
	count      int           // waitForEvent
	timeout    time.Duration // waitForEvent, if hasTimeout
	hasTimeout bool          // waitForEvent: the file gives a timeout
}

func (op operation) String() string {
	s := fmt.Sprintf("operation %d (%s", op.index, op.name)
	if op.thread != "" {
		s += " on " + op.thread
	}
	return s + ")"
}

// operationFields lists, per operation name, the fields it takes besides
// name and thread; required ones are marked true.
var operationFields = map[string]map[string]bool{
	"ready":         {},
	"close":         {},
	"checkOut":      {"label": false},
	"checkIn":       {"connection": true},
	"clear":         {"interruptInUseConnections": false},
	"start":         {"target": true},
	"wait":          {"ms": true},
	"waitForThread": {"target": true},
	"waitForEvent":  {"event": true, "count": true, "timeout": false},
}

func parseOperation(raw map[string]any) (operation, error) {
	var op operation
	name, ok := raw["name"].(string)
	if !ok {
		return op, fmt.Errorf("no name: %v", raw)
	}
	fields, ok := operationFields[name]
	if !ok {
		return op, fmt.Errorf("unknown operation %q", name)
	}
	op.name = name
	for k := range raw {
		if _, ok := fields[k]; !ok && k != "name" && k != "thread" {
			return op, fmt.Errorf("%s: unknown field %q", name, k)
		}
	}
	for k, required := range fields {
		if _, ok := raw[k]; required && !ok {
			return op, fmt.Errorf("%s: missing field %q", name, k)
		}
	}
	str := func(k string) (string, error) {
		v, ok := raw[k]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return "", fmt.Errorf("%s: %s is not a non-empty string: %v", name, k, v)
		}
		return s, nil
	}
	num := func(k string) (int64, error) {
		v, ok := raw[k]
		if !ok {
			return 0, nil
		}
		n, err := jsonInt(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %s: %v", name, k, err)
		}
		if n < 0 {
			return 0, fmt.Errorf("%s: %s is negative: %d", name, k, n)
		}
		return n, nil
	}
	var err error
	if op.thread, err = str("thread"); err != nil {
		return op, err
	}
	if op.label, err = str("label"); err != nil {
		return op, err
	}
	if op.connection, err = str("connection"); err != nil {
		return op, err
	}
	if op.target, err = str("target"); err != nil {
		return op, err
	}
	if op.event, err = str("event"); err != nil {
		return op, err
	}
	if op.event != "" && !eventNames[op.event] {
		return op, fmt.Errorf("%s: unknown event type %q", name, op.event)
	}
	if v, ok := raw["interruptInUseConnections"]; ok {
		if op.interrupt, ok = v.(bool); !ok {
			return op, fmt.Errorf("%s: interruptInUseConnections is not a boolean: %v", name, v)
		}
	}
	ms, err := num("ms")
	if err != nil {
		return op, err
	}
	op.ms = time.Duration(ms) * time.Millisecond
	count, err := num("count")
	if err != nil {
		return op, err
	}
	op.count = int(count)
	timeout, err := num("timeout")
	if err != nil {
		return op, err
	}
	op.timeout = time.Duration(timeout) * time.Millisecond
	_, op.hasTimeout = raw["timeout"]
	if op.thread != "" && (name == "start" || name == "waitForThread") {
		// The format does not need it and the runner keeps its threads on
		// the main goroutine.
		return op, fmt.Errorf("%s on a thread is not supported", name)
	}
	return op, nil
}
