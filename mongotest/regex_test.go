package mongotest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// regexDocs are the strings the regex tests match, by _id.
var regexDocs = []string{
	1:  "abc\n",
	2:  "abc",
	3:  "a\vb",
	4:  "ABC",
	5:  "abab",
	6:  "price: 10 EUR",
	7:  "line1\nline2",
	8:  "é1",
	9:  "x y",
	10: "x]",
	11: "1.*2",
}

// regexCases are regular expressions, as $regex with $options or as a
// BSON regular expression, with the _id of the regexDocs mongod matches.
// mongod matches with PCRE2 in UTF mode without UCP
// (https://www.mongodb.com/docs/manual/reference/operator/query/regex/,
// and SERVER-23881 for \w and \b being ASCII-only): $ matches before a
// final newline, \s matches the vertical tab, \d and \w are ASCII,
// lookarounds and backreferences work, [[:alpha:]] is a POSIX class.
var regexCases = []struct {
	pattern, options string
	want             string
}{
	{`abc$`, "", "1 2"},
	{`abc\z`, "", "2"},
	{`a\sb`, "", "3"},
	{`^abc$`, "i", "1 2 4"},
	{`(ab)\1`, "", "5"},
	{`\d+(?= EUR)`, "", "6"},
	{`(?<!\d)0`, "", ""},
	{`(?<=\d)0`, "", "6"},
	{`^line2`, "", ""},
	{`^line2`, "m", "7"},
	{`line1.line2`, "", ""},
	{`line1.line2`, "s", "7"},
	{"a b c # spaced out\n", "x", "1 2"},
	{`^\w\d`, "", ""},
	{`^[[:alpha:]]+$`, "", "1 2 4 5"},
	{`^[[:^alpha:]]`, "", "8 11"},
	{`\bEUR\b`, "", "6"},
	{`(?P<first>ab)(?P=first)`, "", "5"},
	{`^\x{61}b`, "", "1 2 5"},
	{`x\hy`, "", "9"},
	{`^\p{Ll}\d$`, "", "8"},
	// A [ in a class is a literal in PCRE, where .NET reads a subtraction.
	{`^[a-c-[x]]`, "", "10"},
	{`^\d\Q.*\E\d$`, "", "11"},
	{`^(?:x|1)(?#a comment)[]]`, "", "10"},
}

// TestRegexSemantics checks each pattern through find (as $regex with
// $options, and as a BSON regular expression) and $match.
func TestRegexSemantics(t *testing.T) {
	srv := start(t)
	r := dialRaw(t, srv)
	docs := bson.A{}
	for id, s := range regexDocs {
		if id > 0 {
			docs = append(docs, bson.D{{Key: "_id", Value: id}, {Key: "s", Value: s}})
		}
	}
	checkOK(t, r.run(cmd("x", bson.E{Key: "insert", Value: "re"}, bson.E{Key: "documents", Value: docs})))
	for _, tc := range regexCases {
		for _, filter := range []bson.D{
			{{Key: "s", Value: bson.D{{Key: "$regex", Value: tc.pattern}, {Key: "$options", Value: tc.options}}}},
			{{Key: "s", Value: bson.Regex{Pattern: tc.pattern, Options: tc.options}}},
		} {
			reply := r.run(cmd("x", bson.E{Key: "find", Value: "re"}, bson.E{Key: "filter", Value: filter}))
			if reply.Lookup("ok").Double() != 1 {
				t.Errorf("/%s/%s: %s", tc.pattern, tc.options, reply)
				continue
			}
			var ids []string
			for _, v := range arrayValues(t, reply.Lookup("cursor", "firstBatch")) {
				ids = append(ids, fmt.Sprint(v.Document().Lookup("_id").AsInt64()))
			}
			if got := strings.Join(ids, " "); got != tc.want {
				t.Errorf("find /%s/%s: _id %q, want %q", tc.pattern, tc.options, got, tc.want)
			}
		}
		var ids []string
		for _, d := range aggregate(t, r, "re", bson.D{{Key: "$match", Value: bson.D{{Key: "s", Value: bson.Regex{Pattern: tc.pattern, Options: tc.options}}}}}, bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 1}}}}) {
			ids = append(ids, d[len(`{"_id":`):len(d)-1])
		}
		if got := strings.Join(ids, " "); got != tc.want {
			t.Errorf("$match /%s/%s: _id %q, want %q", tc.pattern, tc.options, got, tc.want)
		}
	}

	// Refusals: an unknown option letter (51108), a pattern PCRE does not
	// compile (51091, "Regular expression is invalid"), both from mongod's
	// RegexMatchExpression (src/mongo/db/matcher/expression_leaf.cpp) and
	// pcre_util::flagsToOptions; PCRE features this package does not
	// implement (BadValue, saying so).
	for _, tc := range []struct {
		filter bson.D
		code   int32
		name   string
		msg    string
	}{
		{bson.D{{Key: "s", Value: bson.D{{Key: "$regex", Value: "a"}, {Key: "$options", Value: "g"}}}}, 51108, "Location51108", "invalid flag in regex options: g"},
		{bson.D{{Key: "s", Value: bson.Regex{Pattern: "a", Options: "iz"}}}, 51108, "Location51108", "invalid flag in regex options: z"},
		{bson.D{{Key: "s", Value: bson.Regex{Pattern: "(a", Options: ""}}}, 51091, "Location51091", "Regular expression is invalid: "},
		{bson.D{{Key: "s", Value: bson.Regex{Pattern: `\i`, Options: ""}}}, 51091, "Location51091", "Regular expression is invalid: "},
		{bson.D{{Key: "s", Value: bson.Regex{Pattern: `(?R)`, Options: ""}}}, 2, "BadValue", "mongotest does not implement"},
		{bson.D{{Key: "s", Value: bson.Regex{Pattern: `(*UCP)a`, Options: ""}}}, 2, "BadValue", "mongotest does not implement"},
		{bson.D{{Key: "s", Value: bson.D{{Key: "$in", Value: bson.A{bson.Regex{Pattern: "a", Options: "q"}}}}}}, 51108, "Location51108", "invalid flag in regex options: q"},
	} {
		reply := r.run(cmd("x", bson.E{Key: "find", Value: "re"}, bson.E{Key: "filter", Value: tc.filter}))
		if msg := checkError(t, reply, tc.code, tc.name); !strings.HasPrefix(msg, tc.msg) {
			t.Errorf("%v: errmsg %q, want it to start with %q", tc.filter, msg, tc.msg)
		}
	}
}

// TestRegexTimeout checks that a pattern that backtracks without end
// fails its command, clearly, rather than hold the server: the driver's
// find and updateMany get the error, and the server answers the next
// command.
func TestRegexTimeout(t *testing.T) {
	srv := start(t)
	coll := connect(t, srv.URI()).Database("x").Collection("slow")
	c := ctx(t)
	if _, err := coll.InsertMany(c, []any{
		bson.D{{Key: "_id", Value: 1}, {Key: "s", Value: strings.Repeat("a", 40) + "!"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "s", Value: strings.Repeat("a", 40) + "!"}},
	}); err != nil {
		t.Fatal(err)
	}
	evil := bson.D{{Key: "s", Value: bson.Regex{Pattern: `^(a+)+$`}}}
	begin := time.Now()
	_, err := coll.Find(c, evil)
	wantCode(t, "Find with a catastrophic pattern", err, 2, "mongotest stopped matching the regular expression /^(a+)+$/")
	res, err := coll.UpdateMany(c, evil, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: 1}}}})
	wantCode(t, "UpdateMany with a catastrophic pattern", err, 2, "mongotest stopped matching")
	if res != nil && res.ModifiedCount != 0 {
		t.Errorf("UpdateMany modified %d documents", res.ModifiedCount)
	}
	// Each command stops at its first match that takes too long.
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("the two commands took %v", d)
	}
	n, err := coll.CountDocuments(c, bson.D{{Key: "s", Value: bson.D{{Key: "$regex", Value: "!$"}}}}, options.Count())
	if err != nil || n != 2 {
		t.Errorf("CountDocuments after the timeouts = %d, %v; want 2", n, err)
	}
}
