package mongotest

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestRemoveFromTheFront removes the documents of a collection one by one
// from the front, as a queue does, and checks that a scan still starts at
// the first document left, and that the removed ones do not pile up: each
// removal costs the same whatever the number removed before.
func TestRemoveFromTheFront(t *testing.T) {
	var st store
	st.init()
	c := st.collection("x", "c", true)
	const n = 1000
	for i := range n {
		doc, err := prepareInsert(mustMarshal(bson.D{{Key: "_id", Value: i}}))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.add(doc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		recs := c.matching(&filter{root: matchAll{}}, 1)
		if len(recs) != 1 || recs[0].doc.Lookup("_id").AsInt64() != int64(i) {
			t.Fatalf("the first document left is %v, want _id %d", recs, i)
		}
		c.remove(recs[0])
		if c.head < len(c.recs) && c.recs[c.head] == nil {
			t.Fatalf("after %d removals, a scan starts at a removed document (head %d)", i+1, c.head)
		}
		if left := n - i - 1; len(c.recs) > 2*left+33 {
			t.Fatalf("after %d removals, %d slots for %d documents", i+1, len(c.recs), left)
		}
	}
	if c.count() != 0 || len(c.byID) != 0 {
		t.Errorf("count %d, %d ids left", c.count(), len(c.byID))
	}
}
