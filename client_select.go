package mongopool

import (
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"github.com/mongopool/mongopool/topology"
)

// selector returns the server selector of an attempt of o: by o's read
// preference for a read (or a command), the primary for a write, with the
// servers earlier attempts failed on deprioritized.
func (c *Client) selector(o *operation, deprioritized []string) topology.Selector {
	crit := c.criteria
	crit.Write, crit.ReadPref, crit.Deprioritized = o.kind == opWrite, o.readPref, deprioritized
	if o.sel != nil {
		return o.sel
	}
	return func(d topology.Description, dst []topology.ServerDescription) ([]topology.ServerDescription, error) {
		return d.SelectCandidates(crit, dst)
	}
}

// serverAt returns the selector of the one server at address, once it is
// known (a cursor's getMore after its server was marked Unknown waits for
// it, until the selection times out).
func serverAt(address string) topology.Selector {
	return func(d topology.Description, dst []topology.ServerDescription) ([]topology.ServerDescription, error) {
		if sd, ok := d.Server(address); ok && sd.Type != topology.ServerUnknown {
			dst = append(dst, sd)
		}
		return dst, nil
	}
}

// operationOf returns what the selection log messages say of o; nothing
// (and nothing built) when no logger was given.
func (c *Client) operationOf(o *operation) topology.Operation {
	if !c.logs {
		return topology.Operation{}
	}
	// The operation's own copy: the log turns it into text before the
	// selection returns, and a copy here would go to the heap each time.
	o.crit = c.criteria
	o.crit.Write, o.crit.ReadPref = o.kind == opWrite, o.readPref
	return topology.Operation{Name: commandName(o.cmd), ID: o.id, Criteria: &o.crit}
}

// readPrefDoc returns rp as the $readPreference document: its mode, its tag
// sets when it has some, and maxStalenessSeconds when it has one.
func readPrefDoc(rp topology.ReadPref) bson.Raw {
	idx, doc := bsoncore.AppendDocumentStart(nil)
	doc = bsoncore.AppendStringElement(doc, "mode", rp.Mode.String())
	if len(rp.TagSets) > 0 {
		aidx, arr := bsoncore.AppendArrayElementStart(doc, "tags")
		doc = arr
		for i, ts := range rp.TagSets {
			tidx, d := bsoncore.AppendDocumentElementStart(doc, strconv.Itoa(i))
			doc = d
			for _, tag := range ts {
				doc = bsoncore.AppendStringElement(doc, tag.Name, tag.Value)
			}
			doc, _ = bsoncore.AppendDocumentEnd(doc, tidx)
		}
		doc, _ = bsoncore.AppendArrayEnd(doc, aidx)
	}
	if rp.HasMaxStaleness {
		doc = bsoncore.AppendInt64Element(doc, "maxStalenessSeconds", int64(rp.MaxStaleness.Seconds()))
	}
	doc, _ = bsoncore.AppendDocumentEnd(doc, idx)
	return doc
}
