package unified

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The log severity levels of the logging specification, as its tests name
// them, mapped to slog levels. slog has four; the others sit between or
// beyond them, so that "at least this severe" keeps its meaning.
var levels = []struct {
	name  string
	level slog.Level
}{
	{"trace", slog.LevelDebug - 4},
	{"debug", slog.LevelDebug},
	{"info", slog.LevelInfo},
	{"notice", slog.LevelInfo + 2},
	{"warn", slog.LevelWarn},
	{"error", slog.LevelError},
	{"critical", slog.LevelError + 4},
	{"alert", slog.LevelError + 8},
	{"emergency", slog.LevelError + 12},
}

// levelOf returns the slog level of a specification level name.
func levelOf(name string) (slog.Level, error) {
	for _, l := range levels {
		if l.name == name {
			return l.level, nil
		}
	}
	return 0, fmt.Errorf("unknown log level %q (the logging specification's are trace, debug, info, notice, warn, error, critical, alert, emergency, off)", name)
}

// LevelName returns the specification's name of a slog level: the most severe
// specification level that l reaches.
func LevelName(l slog.Level) string {
	name := levels[0].name
	for _, x := range levels {
		if l >= x.level {
			name = x.name
		}
	}
	return name
}

// The log components of the logging specification.
var components = map[string]bool{"command": true, "topology": true, "serverSelection": true, "connection": true}

// logMessage is one captured log record as the format sees it.
type logMessage struct {
	level     string
	component string
	data      bson.Raw // "message" and the record's attributes
}

// capture is a slog.Handler that keeps the records of the observed
// components at or above their levels, until stop.
type capture struct {
	minLevel slog.Level            // the least level observed, for Enabled
	observe  map[string]slog.Level // by component
	mu       sync.Mutex
	stopped  bool
	messages []logMessage
	err      error // the first record that could not be captured
}

// newCapture builds a capture from an observeLogMessages document.
func newCapture(observe bson.Raw) (*capture, error) {
	elems, err := observe.Elements()
	if err != nil {
		return nil, fmt.Errorf("observeLogMessages: %w", err)
	}
	c := &capture{minLevel: math.MaxInt32, observe: map[string]slog.Level{}}
	for _, e := range elems {
		if !components[e.Key()] {
			return nil, fmt.Errorf("observeLogMessages: unknown log component %q", e.Key())
		}
		name, ok := e.Value().StringValueOK()
		if !ok {
			return nil, fmt.Errorf("observeLogMessages.%s: want a level name, got %s", e.Key(), show(e.Value()))
		}
		if name == "off" {
			continue
		}
		l, err := levelOf(name)
		if err != nil {
			return nil, fmt.Errorf("observeLogMessages.%s: %w", e.Key(), err)
		}
		c.observe[e.Key()] = l
		c.minLevel = min(c.minLevel, l)
	}
	return c, nil
}

// handler returns the slog.Handler to give the client.
func (c *capture) handler() slog.Handler { return &captureHandler{c: c} }

// stop ends the capture: records after it are dropped, as the format
// disables the listeners once a test's operations are done.
func (c *capture) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// captured returns the messages, or the error of a record that could not be
// turned into one.
func (c *capture) captured() ([]logMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]logMessage(nil), c.messages...), c.err
}

// captureHandler is a capture's slog.Handler, with the attributes and groups
// added through With.
type captureHandler struct {
	c      *capture
	attrs  []slog.Attr // already inside groups
	groups []string
}

func (h *captureHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.c.minLevel }

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), nest(h.groups, as)...)
	return &n
}

func (h *captureHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.groups = append(append([]string(nil), h.groups...), name)
	return &n
}

// nest puts attrs inside the groups, innermost last.
func nest(groups []string, attrs []slog.Attr) []slog.Attr {
	for i := len(groups) - 1; i >= 0; i-- {
		attrs = []slog.Attr{{Key: groups[i], Value: slog.GroupValue(attrs...)}}
	}
	return attrs
}

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	var recAttrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { recAttrs = append(recAttrs, a); return true })
	attrs := append(append([]slog.Attr(nil), h.attrs...), nest(h.groups, recAttrs)...)

	component := ""
	data := bson.D{{Key: "message", Value: r.Message}}
	var convErr error
	for _, a := range attrs {
		switch a.Key {
		case "component":
			component = a.Value.Resolve().String()
			continue
		case "":
			continue // slog's handlers drop attributes without a key
		}
		v, err := bsonValue(a.Value)
		if err != nil && convErr == nil {
			convErr = fmt.Errorf("log message %q, attribute %q: %w", r.Message, a.Key, err)
		}
		data = append(data, bson.E{Key: a.Key, Value: v})
	}

	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	least, observed := c.observe[component]
	if c.stopped || !observed || r.Level < least {
		return nil
	}
	if convErr != nil {
		if c.err == nil {
			c.err = convErr
		}
		return nil
	}
	raw, err := bson.Marshal(data)
	if err != nil {
		if c.err == nil {
			c.err = fmt.Errorf("log message %q: %w", r.Message, err)
		}
		return nil
	}
	c.messages = append(c.messages, logMessage{level: LevelName(r.Level), component: component, data: raw})
	return nil
}

// bsonValue turns a slog value into the BSON value the format matches: a
// string, a long, a double, a boolean, a date, a document for a group; an
// error or a fmt.Stringer becomes its text. Anything else is an error, so
// that a value the runner cannot represent fails the test rather than
// matching by accident.
func bsonValue(v slog.Value) (any, error) {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return v.String(), nil
	case slog.KindInt64:
		return v.Int64(), nil
	case slog.KindUint64:
		u := v.Uint64()
		if u > math.MaxInt64 {
			return nil, fmt.Errorf("the unsigned integer %d does not fit in a BSON long", u)
		}
		return int64(u), nil
	case slog.KindFloat64:
		return v.Float64(), nil
	case slog.KindBool:
		return v.Bool(), nil
	case slog.KindTime:
		return bson.NewDateTimeFromTime(v.Time()), nil
	case slog.KindDuration:
		// The specification gives durations in milliseconds.
		return float64(v.Duration()) / float64(time.Millisecond), nil
	case slog.KindGroup:
		d := bson.D{}
		for _, a := range v.Group() {
			x, err := bsonValue(a.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.Key, err)
			}
			d = append(d, bson.E{Key: a.Key, Value: x})
		}
		return d, nil
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return x.Error(), nil
		case fmt.Stringer:
			return x.String(), nil
		case nil:
			return nil, errors.New("a nil value (the logging specification omits absent values rather than logging null)")
		default:
			return nil, fmt.Errorf("a value of type %T, which the runner does not map to BSON", x)
		}
	}
	return nil, fmt.Errorf("a value of kind %s, which the runner does not map to BSON", v.Kind())
}
