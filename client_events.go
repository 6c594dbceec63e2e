package mongopool

import (
	"bytes"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool/connection"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

// CommandEventType tells the command monitoring events apart.
type CommandEventType uint8

// The command monitoring events: each command sent has a CommandStarted,
// then a CommandSucceeded or a CommandFailed.
const (
	CommandStarted CommandEventType = iota
	CommandSucceeded
	CommandFailed
)

// String returns the event's name, such as "CommandStarted".
func (t CommandEventType) String() string {
	switch t {
	case CommandStarted:
		return "CommandStarted"
	case CommandSucceeded:
		return "CommandSucceeded"
	case CommandFailed:
		return "CommandFailed"
	}
	return "CommandEventType(?)"
}

// CommandEvent is a command monitoring event of a Client: a command sent to
// a server, and its outcome. Each attempt of a retried operation has its own
// events, with the same OperationID.
type CommandEvent struct {
	Type CommandEventType
	// Name is the command's name (its first field), Database its $db.
	Name, Database string
	// Command is the command as sent (CommandStarted), Reply the server's
	// reply (CommandSucceeded); both are empty for the commands that carry
	// secrets (authentication, user management, a hello with
	// speculativeAuthenticate). They are the event's own copies.
	Command, Reply bson.Raw
	// Failure is the error of a CommandFailed event.
	Failure error
	// Duration is the time from sending the command to its outcome
	// (CommandSucceeded, CommandFailed).
	Duration time.Duration
	// Address is the server's; ConnectionID the pool's id of the
	// connection; ServerConnectionID the server's own (its hello's
	// connectionId, 0 when it gave none).
	Address            string
	ConnectionID       int64
	ServerConnectionID int64
	// ServiceID is the serviceId of a load-balanced connection; nil
	// otherwise.
	ServiceID *bson.ObjectID
	// OperationID is the same for the attempts of one operation.
	OperationID int64
}

// WithCommandEventHandler receives the command monitoring events of every
// command the client sends for RunCommand, Read and Write (not those of Do,
// whose commands the caller sends). The handler runs on a goroutine of the
// client's own, one event at a time, in the order the events were made by
// each operation; no operation waits for it, and it may call the client.
// Events that come while it is 65,536 events behind are dropped. Their
// Command and Reply are copies, which the handler may keep.
func WithCommandEventHandler(fn func(CommandEvent)) ClientOption {
	return func(c *clientConfig) error {
		c.commands = fn
		return nil
	}
}

// sensitiveCommands are the commands whose body and reply the command
// monitoring specification says never to publish: they carry credentials.
var sensitiveCommands = []string{
	"authenticate", "saslstart", "saslcontinue", "getnonce",
	"createuser", "updateuser", "copydbgetnonce", "copydbsaslstart", "copydb",
}

// isSensitive reports whether the command named name (cmd its body) carries
// secrets: one of sensitiveCommands, or a hello with speculativeAuthenticate.
func isSensitive(name string, cmd bson.Raw) bool {
	lower := strings.ToLower(name)
	for _, s := range sensitiveCommands {
		if lower == s {
			return true
		}
	}
	switch lower {
	case "hello", "ismaster":
		_, err := cmd.LookupErr("speculativeAuthenticate")
		return err == nil
	}
	return false
}

// commandName returns the name of cmd: its first field.
func commandName(cmd bson.Raw) string {
	if len(cmd) < 5 {
		return "" // none (Do's), whose error would cost an allocation
	}
	e, err := cmd.IndexErr(0)
	if err != nil {
		return ""
	}
	return e.Key()
}

// commandEvent returns the event of a command of o sent on pc, without its
// type and outcome.
func (c *Client) commandEvent(s *topology.Server, pc *pool.Conn, conn *connection.Conn, o *operation, cmd bson.Raw) CommandEvent {
	e := CommandEvent{
		Name:         commandName(cmd),
		Address:      s.Address(),
		ConnectionID: pc.ID(),
		OperationID:  o.id,
	}
	e.Database, _ = cmd.Lookup("$db").StringValueOK()
	if d := conn.Description(); d != nil && d.HasConnectionID {
		e.ServerConnectionID = d.ConnectionID
	}
	if id := pc.ServiceID(); !id.IsZero() {
		oid := bson.ObjectID(id)
		e.ServiceID = &oid
	}
	return e
}

// commandStarted publishes the CommandStarted event of cmd and returns when
// it was sent.
func (c *Client) commandStarted(s *topology.Server, pc *pool.Conn, conn *connection.Conn, o *operation, cmd bson.Raw) time.Time {
	e := c.commandEvent(s, pc, conn, o, cmd)
	e.Type = CommandStarted
	if !isSensitive(e.Name, cmd) {
		e.Command = bytes.Clone(cmd) // the event outlives the operation's buffers
	}
	c.queueCommandEvent(e)
	return time.Now()
}

// commandDone publishes the outcome of cmd.
func (c *Client) commandDone(s *topology.Server, pc *pool.Conn, conn *connection.Conn, o *operation, cmd, reply bson.Raw, err error, d time.Duration) {
	e := c.commandEvent(s, pc, conn, o, cmd)
	e.Duration = max(d, 1) // measured, never zero
	if err != nil {
		e.Type, e.Failure = CommandFailed, err
	} else {
		e.Type = CommandSucceeded
		if !isSensitive(e.Name, cmd) {
			e.Reply = bytes.Clone(reply)
		}
	}
	c.queueCommandEvent(e)
}

// queueCommandEvent queues e for the command event handler.
func (c *Client) queueCommandEvent(e CommandEvent) {
	if c.commandEvents.Push(e) {
		c.commandEvents.Wake()
	}
}
