package mongopool

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/connstring"
)

// This file applies the connection string's write concern (w, journal,
// wTimeoutMS) and read concern (readConcernLevel) as the read and write
// concern specification says: a Write whose command has no writeConcern
// gets the connection string's, a Read whose command has no readConcern
// gets its level, and a transaction without its own takes them; a
// RunCommand gets neither (the generic command helper adds no concern).
// Nothing is sent when the connection string sets nothing: the server's
// defaults apply.

// writeConcernOf returns the write concern document of cs, nil if it sets
// none.
func writeConcernOf(cs *connstring.ConnString) bson.Raw {
	if cs.W == nil && cs.Journal == nil && cs.WTimeout == nil {
		return nil
	}
	b := bsoncore.NewDocumentBuilder()
	if w := cs.W; w != nil {
		if w.Tag != "" {
			b.AppendString("w", w.Tag)
		} else {
			b.AppendInt32("w", int32(w.N))
		}
	}
	if j := cs.Journal; j != nil {
		b.AppendBoolean("j", *j)
	}
	if t := cs.WTimeout; t != nil {
		b.AppendInt64("wtimeout", t.Milliseconds())
	}
	return bson.Raw(b.Build())
}

// readConcernOf returns the read concern document of cs, nil if it sets
// no level.
func readConcernOf(cs *connstring.ConnString) bson.Raw {
	if cs.ReadConcernLevel == "" {
		return nil
	}
	return bson.Raw(bsoncore.NewDocumentBuilder().AppendString("level", cs.ReadConcernLevel).Build())
}

// defaultUnacknowledged reports whether cmd, a write without a
// writeConcern of its own, takes the connection string's w: 0.
func (c *Client) defaultUnacknowledged(cmd bson.Raw) bool {
	if c.writeConcern == nil {
		return false
	}
	if _, err := cmd.LookupErr("writeConcern"); err == nil {
		return false
	}
	w, ok := c.writeConcern.Lookup("w").AsInt64OK()
	return ok && w == 0
}

// concernFields appends the default concerns o's command takes, outside a
// transaction: the write concern to a Write, the read concern to a Read
// (unless causal consistency added one already, which starts from the
// default: see prepare).
func (c *Client) concernFields(o *operation, causal bool, fields []field) []field {
	switch {
	case o.tx != nil:
	case o.kind == opWrite && c.writeConcern != nil:
		fields = append(fields, field{"writeConcern", docValue(c.writeConcern)})
	case o.kind == opRead && c.readConcern != nil && !causal:
		fields = append(fields, field{"readConcern", docValue(c.readConcern)})
	}
	return fields
}
