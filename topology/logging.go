package topology

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The log components of the logging specification that this package logs
// under: SDAM's messages and server selection's.
const (
	componentTopology  = "topology"
	componentSelection = "serverSelection"
)

// defaultMaxDocumentLength is the logging specification's default maximum
// length of a document in a log message, in bytes of its extended JSON;
// MONGODB_LOG_MAX_DOCUMENT_LENGTH changes it.
const defaultMaxDocumentLength = 1000

// defaultPort is MongoDB's port, which the log messages name when an
// address gives none.
const defaultPort = 27017

// logEvent logs the SDAM event e of the topology id as the logging
// specification's message for it: at level Debug, with the component
// "topology", the message as the record's message and the specification's
// fields as attributes. A ServerDescriptionChanged has no message (the
// specification leaves it out: the topology's message tells the same). The
// message is built only when l takes Debug records.
func logEvent(l *slog.Logger, id bson.ObjectID, e Event) {
	ctx := context.Background()
	if !l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("component", componentTopology), slog.String("topologyId", id.Hex()))
	var msg string
	switch e := e.(type) {
	case *TopologyOpening:
		msg = "Starting topology monitoring"
	case *TopologyClosed:
		msg = "Stopped topology monitoring"
	case *ServerOpening:
		msg = "Starting server monitoring"
		attrs = appendServer(attrs, e.Address)
	case *ServerClosed:
		msg = "Stopped server monitoring"
		attrs = appendServer(attrs, e.Address)
	case *TopologyDescriptionChanged:
		msg = "Topology description changed"
		attrs = append(attrs,
			slog.String("previousDescription", e.Previous.Summary()),
			slog.String("newDescription", e.New.Summary()))
	case *ServerHeartbeatStarted:
		msg = "Server heartbeat started"
		attrs = appendHeartbeat(attrs, e.Address, e.ConnectionID, e.ServerConnectionID, e.Awaited)
	case *ServerHeartbeatSucceeded:
		msg = "Server heartbeat succeeded"
		attrs = appendHeartbeat(attrs, e.Address, e.ConnectionID, e.ServerConnectionID, e.Awaited)
		attrs = append(attrs, durationMS(e.Duration), slog.String("reply", documentJSON(e.Reply)))
	case *ServerHeartbeatFailed:
		msg = "Server heartbeat failed"
		attrs = appendHeartbeat(attrs, e.Address, e.ConnectionID, e.ServerConnectionID, e.Awaited)
		failure := "unknown error"
		if e.Failure != nil {
			failure = e.Failure.Error()
		}
		attrs = append(attrs, durationMS(e.Duration), slog.String("failure", failure))
	default:
		return
	}
	l.LogAttrs(ctx, slog.LevelDebug, msg, attrs...)
}

// appendServer appends the serverHost and serverPort of address.
func appendServer(attrs []slog.Attr, address string) []slog.Attr {
	host, port := splitAddress(address)
	attrs = append(attrs, slog.String("serverHost", host))
	if port != 0 {
		attrs = append(attrs, slog.Int("serverPort", port))
	}
	return attrs
}

// appendHeartbeat appends the fields every heartbeat message has: the
// server, the monitoring connection's ids (the server's once known) and
// awaited.
func appendHeartbeat(attrs []slog.Attr, address string, connID, serverConnID int64, awaited bool) []slog.Attr {
	attrs = appendServer(attrs, address)
	attrs = append(attrs, slog.Int64("driverConnectionId", connID))
	if serverConnID > 0 {
		attrs = append(attrs, slog.Int64("serverConnectionId", serverConnID))
	}
	return append(attrs, slog.Bool("awaited", awaited))
}

// durationMS is a duration as the messages give it: milliseconds, with
// their fraction.
func durationMS(d time.Duration) slog.Attr {
	return slog.Float64("durationMS", float64(d)/float64(time.Millisecond))
}

// splitAddress returns the serverHost and serverPort of address: a Unix
// socket's path has no port (0), a host without a port has 27017.
func splitAddress(address string) (host string, port int) {
	if strings.HasSuffix(address, ".sock") || strings.HasPrefix(address, "/") {
		return address, 0
	}
	h, p, err := net.SplitHostPort(address)
	if err != nil {
		return strings.Trim(address, "[]"), defaultPort
	}
	if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 65536 {
		return h, n
	}
	return h, defaultPort
}

// documentJSON returns doc as relaxed extended JSON, cut at the maximum
// document length (at a character's boundary) and then marked with "...",
// as the logging specification says. A document that is not valid BSON is
// described as such rather than logged.
func documentJSON(doc bson.Raw) string {
	j, err := bson.MarshalExtJSON(doc, false, false)
	if err != nil {
		return fmt.Sprintf("(a document of %d bytes that is not valid BSON: %v)", len(doc), err)
	}
	n := maxDocumentLength()
	if len(j) <= n {
		return string(j)
	}
	for n > 0 && !utf8.RuneStart(j[n]) {
		n--
	}
	return string(j[:n]) + "..."
}

// maxDocumentLength returns the maximum length of a document in a log
// message: MONGODB_LOG_MAX_DOCUMENT_LENGTH when it is a positive integer,
// defaultMaxDocumentLength otherwise, as the logging specification's
// fallback asks.
func maxDocumentLength() int {
	if v := os.Getenv("MONGODB_LOG_MAX_DOCUMENT_LENGTH"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return defaultMaxDocumentLength
}

// Operation names the operation a server is selected for, in the server
// selection log messages that SelectServer writes to the Config's Logger.
type Operation struct {
	// Name is the operation's name: the command's name for a command.
	// The messages leave operation out when it is empty.
	Name string
	// ID is the operation's id, the one of its command monitoring events;
	// 0 for none, and the messages then leave operationId out.
	ID int64
	// Criteria are the selector's, when it selects by them: the messages
	// describe the selector by them (see Criteria.String). Nil stands for
	// a selector of another kind, which the messages call a custom
	// selector.
	Criteria *Criteria
}

// selectionLog writes the server selection log messages of one
// SelectServer call. A nil *selectionLog writes nothing: SelectServer has
// one only when the Logger takes Info records (the waiting message) or
// Debug ones (the others), so that selection builds nothing otherwise.
type selectionLog struct {
	on      bool      // someone would read it
	t       *Topology // whose delivery goroutine writes the records
	l       *slog.Logger
	ctx     context.Context // the selection's, for the time it leaves
	start   time.Time
	timeout time.Duration // serverSelectionTimeoutMS
	op      Operation
	begun   bool // "Server selection started" is logged
	waited  bool // "Waiting for suitable server" is logged
}

// selectionLog returns the log of a selection that began at start, off
// when nobody would read it. It is a value, kept on the selection's stack:
// a selection that logs nothing allocates nothing for it.
func (t *Topology) selectionLog(ctx context.Context, start time.Time, op []Operation) selectionLog {
	l := t.cfg.Logger
	if l == nil || !l.Enabled(ctx, slog.LevelInfo) && !l.Enabled(ctx, slog.LevelDebug) {
		return selectionLog{}
	}
	s := selectionLog{on: true, t: t, l: l, ctx: ctx, start: start, timeout: t.timeout}
	if len(op) > 0 {
		s.op = op[0]
	}
	return s
}

// started logs "Server selection started", once, with the Description the
// selection first sees.
func (s *selectionLog) started(d Description) {
	if !s.on || s.begun {
		return
	}
	s.begun = true
	s.log(slog.LevelDebug, "Server selection started", d)
}

// waiting logs "Waiting for suitable server to become available", once
// per selection, at Info, with the time left before the selection times
// out: the server selection timeout's or the context's, the sooner.
func (s *selectionLog) waiting(d Description) {
	if !s.on || s.waited {
		return
	}
	s.waited = true
	left := s.timeout - time.Since(s.start)
	if dl, ok := s.ctx.Deadline(); ok {
		left = min(left, time.Until(dl))
	}
	s.log(slog.LevelInfo, "Waiting for suitable server to become available", d,
		slog.Int64("remainingTimeMS", max(left, 0).Milliseconds()))
}

// succeeded logs "Server selection succeeded" with the selected server.
func (s *selectionLog) succeeded(d Description, address string) {
	if !s.on || !s.l.Enabled(s.ctx, slog.LevelDebug) {
		return // not even the server's fields are built
	}
	s.log(slog.LevelDebug, "Server selection succeeded", d, appendServer(nil, address)...)
}

// failed logs "Server selection failed" with why, and returns err. The
// failure leaves out the topology's description that a *SelectionError's
// message ends with: the message has it already.
func (s *selectionLog) failed(d Description, err error) error {
	if !s.on {
		return err
	}
	failure := err.Error()
	if se, ok := err.(*SelectionError); ok {
		failure = se.reason()
	}
	s.log(slog.LevelDebug, "Server selection failed", d, slog.String("failure", failure))
	return err
}

// log writes one message with the fields every server selection message
// has (selector, operationId, operation, topologyDescription) and extra.
func (s *selectionLog) log(level slog.Level, msg string, d Description, extra ...slog.Attr) {
	if !s.l.Enabled(s.ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 6+len(extra))
	attrs = append(attrs, slog.String("component", componentSelection), slog.String("selector", s.selector()))
	if s.op.ID != 0 {
		attrs = append(attrs, slog.Int64("operationId", s.op.ID))
	}
	if s.op.Name != "" {
		attrs = append(attrs, slog.String("operation", s.op.Name))
	}
	attrs = append(attrs, slog.String("topologyDescription", d.Summary()))
	attrs = append(attrs, extra...)
	// Built here, written by the delivery goroutine: the logger's
	// handler never runs on the operation's goroutine.
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	s.t.queueRecord(s.ctx, r)
}

// selector describes the selector: its criteria, or a custom selector.
func (s *selectionLog) selector() string {
	if s.op.Criteria == nil {
		return "custom selector"
	}
	return s.op.Criteria.String()
}

// reason is why the selection failed, without the topology's description
// that Error adds.
func (e *SelectionError) reason() string {
	switch {
	case e.Timeout > 0:
		return fmt.Sprintf("no suitable server within serverSelectionTimeoutMS (%v)", e.Timeout)
	case e.Err != nil && e.Waited > 0:
		return fmt.Sprintf("no suitable server before the operation's context ended after %v (%v)", e.Waited.Round(time.Millisecond), e.Err)
	case e.Err != nil:
		return e.Err.Error()
	}
	return "no suitable server"
}
