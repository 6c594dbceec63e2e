package mongotest_test

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestOddArguments sends every operator, stage, accumulator and option
// with values of every kind, and checks that each reply is a reply: a
// result, or an error with a code. A panic would end the test binary.
func TestOddArguments(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	docs := bson.A{
		bson.D{{Key: "_id", Value: 1}, {Key: "a", Value: bson.A{1, "x", bson.D{{Key: "b", Value: bson.A{2}}}}}, {Key: "n", Value: 5}},
		bson.D{{Key: "_id", Value: "s"}, {Key: "a", Value: bson.D{{Key: "b", Value: nil}}}, {Key: "n", Value: 2.5}},
		bson.D{{Key: "_id", Value: bson.D{{Key: "k", Value: 1}}}, {Key: "a", Value: "str"}},
	}
	values := []any{
		1, -1, 0, 2.5, int64(1) << 62, "s", "$a", "$$ROOT", "", nil, true, bson.A{}, bson.A{1, 2, 3}, bson.A{"$a", bson.D{}},
		bson.D{}, bson.D{{Key: "$x", Value: 1}}, bson.D{{Key: "a", Value: 1}}, bson.D{{Key: "$each", Value: bson.A{1}}, {Key: "$slice", Value: -1}},
		bson.D{{Key: "$type", Value: "date"}}, bson.Regex{Pattern: "(", Options: "z"}, bson.Regex{Pattern: "x"},
		bson.MaxKey{}, bson.MinKey{}, bson.Decimal128{}, bson.NewObjectID(), bson.DateTime(5),
	}
	queryOps := []string{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$type", "$size",
		"$all", "$elemMatch", "$mod", "$not", "$regex", "$options", "$and", "$or", "$nor", "$comment", "$expr", "$frob"}
	updateOps := []string{"$set", "$unset", "$inc", "$mul", "$min", "$max", "$rename", "$setOnInsert", "$currentDate",
		"$push", "$addToSet", "$pop", "$pull", "$pullAll", "$bit", "$frob"}
	stages := []string{"$match", "$group", "$count", "$sort", "$skip", "$limit", "$project", "$unset", "$addFields",
		"$set", "$unwind", "$replaceRoot", "$replaceWith", "$lookup", "$frob"}
	accumulators := []string{"$sum", "$avg", "$min", "$max", "$first", "$last", "$push", "$addToSet", "$count", "$top", "$frob"}
	check := func(what string, c bson.D) {
		t.Helper()
		reply := r.run(c)
		ok, isNum := reply.Lookup("ok").AsFloat64OK()
		if !isNum || (ok != 1 && reply.Lookup("code").Type == 0) {
			t.Fatalf("%s: reply %s", what, reply)
		}
	}
	n := 0
	for _, v := range values {
		checkOK(t, r.run(cmd("x", bson.E{Key: "delete", Value: "c"}, bson.E{Key: "deletes", Value: bson.A{bson.D{{Key: "q", Value: bson.D{}}, {Key: "limit", Value: 0}}}})))
		checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "c"}, bson.E{Key: "documents", Value: docs})))
		for _, op := range queryOps {
			check("query "+op, cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: "a", Value: bson.D{{Key: op, Value: v}}}}}))
			check("top-level "+op, cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "filter", Value: bson.D{{Key: op, Value: v}}}))
			n += 2
		}
		for _, op := range updateOps {
			for _, path := range []string{"a", "a.b", "a.1", "n", "z.0.y", "_id"} {
				check("update "+op, cmd("x", bson.E{Key: "update", Value: "c"}, bson.E{Key: "updates", Value: bson.A{
					bson.D{{Key: "q", Value: bson.D{}}, {Key: "u", Value: bson.D{{Key: op, Value: bson.D{{Key: path, Value: v}}}}}, {Key: "multi", Value: true}},
					bson.D{{Key: "q", Value: bson.D{{Key: "_id", Value: 9}}}, {Key: "u", Value: bson.D{{Key: op, Value: bson.D{{Key: path, Value: v}}}}}, {Key: "upsert", Value: true}},
				}}, bson.E{Key: "ordered", Value: false}))
				n++
			}
		}
		for _, st := range stages {
			check("stage "+st, cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}},
				bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: st, Value: v}}}}))
			n++
		}
		for _, acc := range accumulators {
			check("accumulator "+acc, cmd("x", bson.E{Key: "aggregate", Value: "c"}, bson.E{Key: "cursor", Value: bson.D{}},
				bson.E{Key: "pipeline", Value: bson.A{bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: v}, {Key: "f", Value: bson.D{{Key: acc, Value: v}}}}}}}}))
			n++
		}
		for _, opt := range []string{"sort", "projection", "skip", "limit", "batchSize", "hint", "collation", "min", "tailable"} {
			check("find "+opt, cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: opt, Value: v}))
			n++
		}
		for _, opt := range []string{"query", "sort", "update", "fields", "remove", "new", "upsert"} {
			check("findAndModify "+opt, cmd("x", bson.E{Key: "findAndModify", Value: "c"}, bson.E{Key: opt, Value: v}, bson.E{Key: "update", Value: bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: v}}}}}))
			n++
		}
		check("distinct", cmd("x", bson.E{Key: "distinct", Value: "c"}, bson.E{Key: "key", Value: v}))
		check("createIndexes", cmd("x", bson.E{Key: "createIndexes", Value: "c"}, bson.E{Key: "indexes", Value: bson.A{bson.D{{Key: "key", Value: bson.D{{Key: "a", Value: v}}}, {Key: "name", Value: "x"}, {Key: "unique", Value: v}}}}))
		check("dropIndexes", cmd("x", bson.E{Key: "dropIndexes", Value: "c"}, bson.E{Key: "index", Value: v}))
		check("session", cmd("x", bson.E{Key: "find", Value: "c"}, bson.E{Key: "lsid", Value: v}, bson.E{Key: "txnNumber", Value: v}, bson.E{Key: "autocommit", Value: v}))
		n += 4
	}
	t.Logf("%d commands", n)
}
