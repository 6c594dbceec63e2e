package mongotest

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements the aggregate command with the stages $match,
// $group (with $sum, $avg, $min, $max, $first, $last, $push, $addToSet and
// $count), $count, $sort, $skip, $limit, $project, $unset, $addFields
// ($set), $unwind and $replaceRoot ($replaceWith); expressions are those of
// expr.go. A stage MongoDB has and this package does not ($lookup, $facet,
// $out, ...) is refused with BadValue; a stage MongoDB does not have is
// refused as mongod refuses it: "Unrecognized pipeline stage name".

// maxPipelineStages bounds a pipeline, as mongod does.
const maxPipelineStages = 1000

// stage is one compiled stage: it turns the documents that reach it into
// those it passes on.
type stage func(docs []bson.Raw) ([]bson.Raw, error)

// mongodStages are the stage names of MongoDB that this package does not
// implement.
var mongodStages = map[string]bool{
	"$bucket": true, "$bucketAuto": true, "$changeStream": true, "$changeStreamSplitLargeEvent": true,
	"$collStats": true, "$currentOp": true, "$densify": true, "$documents": true, "$facet": true,
	"$fill": true, "$geoNear": true, "$graphLookup": true, "$indexStats": true, "$listLocalSessions": true,
	"$listSampledQueries": true, "$listSearchIndexes": true, "$listSessions": true, "$lookup": true,
	"$merge": true, "$out": true, "$planCacheStats": true, "$querySettings": true, "$queryStats": true,
	"$redact": true, "$sample": true, "$search": true, "$searchMeta": true, "$setWindowFields": true,
	"$shardedDataDistribution": true, "$sortByCount": true, "$unionWith": true, "$vectorSearch": true,
	"$listClusterCatalog": true, "$rankFusion": true, "$scoreFusion": true, "$score": true,
}

// aggregate runs {aggregate: coll, pipeline: [...], cursor: {batchSize}}.
func (s *Server) aggregate(req *request) (bson.D, error) {
	if err := checkFields(req, "pipeline", "cursor", "explain", "allowDiskUse", "bypassDocumentValidation",
		"collation", "hint", "let", "fromMongos", "needsMerge", "isMapReduceCommand"); err != nil {
		return nil, err
	}
	if _, ok := req.body.Lookup("aggregate").StringValueOK(); !ok {
		return nil, errorf(codeBadValue, "mongotest does not implement aggregate without a collection (aggregate: 1)")
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	if v, err := req.body.LookupErr("explain"); err == nil && truthy(v) {
		return nil, errorf(codeBadValue, "mongotest does not implement explain")
	}
	cv, err := req.body.LookupErr("cursor")
	if err != nil {
		return nil, errorf(codeFailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument")
	}
	cursorDoc, ok := cv.DocumentOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'cursor' is the wrong type '%s', expected type 'object'", typeName(cv.Type))
	}
	batchSize, err := nonNegativeArg(cursorDoc, "batchSize", defaultFirstBatch)
	if err != nil {
		return nil, err
	}
	if err := checkCollation(req.body); err != nil {
		return nil, err
	}
	pv, err := req.body.LookupErr("pipeline")
	if err != nil {
		return nil, errorf(40414, "BSON field 'aggregate.pipeline' is missing but a required field")
	}
	if pv.Type != bson.TypeArray {
		return nil, errorf(codeTypeMismatch, "'pipeline' option must be specified as an array")
	}
	js := newJSRun(req)
	stages, err := parsePipeline(arrayValues(pv), js)
	if err != nil {
		return nil, err
	}
	var docs []bson.Raw
	err = s.storeOf(req).with(req.db, coll, false, func(c *collection) error {
		if err := checkHint(c, req.body); err != nil {
			return err
		}
		docs = docsOf(c.matching(nil, 0))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, st := range stages {
		if docs, err = st(docs); err != nil {
			return nil, err
		}
		if err := js.err(); err != nil {
			return nil, err // a $function failed
		}
	}
	return s.firstBatch(&cursor{ns: req.db + "." + coll, docs: docs, left: -1}, batchSize, false), nil
}

// parsePipeline compiles the stages of a pipeline, whose JavaScript runs
// in js.
func parsePipeline(specs []bson.RawValue, js *jsRun) ([]stage, error) {
	if len(specs) > maxPipelineStages {
		return nil, errorf(7749501, "Pipeline length must be no longer than %d stages.", maxPipelineStages)
	}
	stages := make([]stage, 0, len(specs))
	for _, v := range specs {
		d, ok := v.DocumentOK()
		elems, _ := d.Elements()
		if !ok || len(elems) != 1 {
			return nil, errorf(codeStageOneField, "A pipeline stage specification object must contain exactly one field.")
		}
		st, err := parseStage(elems[0].Key(), elems[0].Value(), js)
		if err != nil {
			return nil, err
		}
		stages = append(stages, st)
	}
	return stages, nil
}

// parseStage compiles one stage.
func parseStage(name string, v bson.RawValue, js *jsRun) (stage, error) {
	switch name {
	case "$match":
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errorf(15959, "the match filter must be an expression in an object")
		}
		// $match takes $expr, but no $where (mongod's
		// Pipeline::kAllowedMatcherFeatures).
		f, err := parseFilterWith(d, filterFeatures{js: js, expr: true})
		if err != nil {
			return nil, err
		}
		return func(docs []bson.Raw) ([]bson.Raw, error) {
			out := docs[:0:0]
			for _, d := range docs {
				if f.match(d) {
					out = append(out, d)
				}
			}
			return out, f.err()
		}, nil
	case "$sort":
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errorf(15973, "the $sort key specification must be an object")
		}
		spec, err := parseSort(d)
		if err != nil {
			return nil, err
		}
		if len(spec) == 0 {
			return nil, errorf(codeSortNoKeys, "$sort stage must have at least one sort key")
		}
		return func(docs []bson.Raw) ([]bson.Raw, error) {
			sortDocs(docs, spec)
			return docs, nil
		}, nil
	case "$skip", "$limit":
		return parseSkipLimit(name, v)
	case "$count":
		return parseCount(v)
	case "$group":
		return parseGroup(v, js)
	case "$project":
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errorf(15969, "$project specification must be an object")
		}
		if len(d) <= 5 {
			return nil, errorf(codeProjectionEmpty, "Invalid $project :: caused by :: projection specification must have at least one field")
		}
		p, err := parseProjectionJS(d, js)
		if err != nil {
			return nil, err
		}
		return projectStage(p), nil
	case "$unset":
		var fields []string
		switch v.Type {
		case bson.TypeString:
			fields = []string{v.StringValue()}
		case bson.TypeArray:
			for _, e := range arrayValues(v) {
				s, ok := e.StringValueOK()
				if !ok {
					return nil, errorf(31120, "$unset specification must be a string or an array containing only string values")
				}
				fields = append(fields, s)
			}
		default:
			return nil, errorf(31002, "$unset specification must be a string or an array")
		}
		var b docBuilder
		for _, f := range fields {
			b.append(f, int32Value(0))
		}
		p, err := parseProjection(b.doc())
		if err != nil {
			return nil, err
		}
		return projectStage(p), nil
	case "$addFields", "$set":
		return parseAddFields(name, v, js)
	case "$unwind":
		return parseUnwind(v)
	case "$replaceRoot", "$replaceWith":
		return parseReplaceRoot(name, v, js)
	}
	if mongodStages[name] {
		return nil, errorf(codeBadValue, "mongotest does not implement the %s stage", name)
	}
	return nil, errorf(codeUnrecognizedStage, "Unrecognized pipeline stage name: '%s'", name)
}

// projectStage applies a projection to each document.
func projectStage(p *projection) stage {
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		out := make([]bson.Raw, len(docs))
		for i, d := range docs {
			out[i] = p.apply(d)
		}
		return out, nil
	}
}

// parseSkipLimit compiles $skip and $limit.
func parseSkipLimit(name string, v bson.RawValue) (stage, error) {
	f := floatOf(v)
	switch {
	case !isNumber(v) && name == "$skip":
		return nil, errorf(15972, "Argument to $skip must be a number")
	case !isNumber(v):
		return nil, errorf(15957, "the limit must be specified as a number")
	case f != math.Trunc(f):
		return nil, errorf(codeBadValue, "invalid argument to %s stage: Cannot represent as a 64-bit integer: %s: %s", name, name, formatValue(v))
	case name == "$skip" && f < 0:
		return nil, errorf(codeSkipNegative, "invalid argument to $skip stage: Expected a non-negative number in: $skip: %s", formatValue(v))
	case name == "$limit" && f <= 0:
		return nil, errorf(codeLimitNotPositive, "the limit must be positive")
	}
	n := truncInt(f)
	if name == "$skip" {
		return func(docs []bson.Raw) ([]bson.Raw, error) {
			return docs[min(n, int64(len(docs))):], nil
		}, nil
	}
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		return docs[:min(n, int64(len(docs)))], nil
	}, nil
}

// parseCount compiles {$count: "name"}: one document {name: n}, none when
// nothing reaches it.
func parseCount(v bson.RawValue) (stage, error) {
	name, ok := v.StringValueOK()
	switch {
	case !ok || name == "":
		return nil, errorf(codeCountFieldEmpty, "the count field must be a non-empty string")
	case strings.HasPrefix(name, "$"):
		return nil, errorf(codeCountFieldDollar, "the count field cannot be a $-prefixed path")
	case strings.Contains(name, "."):
		return nil, errorf(codeCountFieldDotted, "the count field cannot contain '.'")
	}
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		if len(docs) == 0 {
			return nil, nil
		}
		var b docBuilder
		b.append(name, intValue(int64(len(docs))))
		return []bson.Raw{b.doc()}, nil
	}, nil
}

// parseAddFields compiles $addFields and $set: each field is set to its
// expression; a nested object sets fields within the document there.
func parseAddFields(name string, v bson.RawValue, js *jsRun) (stage, error) {
	d, ok := v.DocumentOK()
	if !ok {
		return nil, errorf(40272, "%s specification stage must be an object, got %s", name, typeName(v.Type))
	}
	type field struct {
		path []string
		x    expression
	}
	var fields []field
	var walk func(d bson.Raw, prefix string) error
	walk = func(d bson.Raw, prefix string) error {
		elems, _ := d.Elements()
		if len(elems) == 0 && prefix != "" {
			path, err := splitPath(strings.TrimSuffix(prefix, "."))
			if err != nil {
				return err
			}
			fields = append(fields, field{path, constExpr{docValue(emptyDoc)}})
		}
		for _, e := range elems {
			k := e.Key()
			if strings.HasPrefix(k, "$") {
				return errorf(codeFieldPathDollar, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
			}
			if sub, ok := e.Value().DocumentOK(); ok && !strings.HasPrefix(commandName(sub), "$") {
				if err := walk(sub, prefix+k+"."); err != nil {
					return err
				}
				continue
			}
			x, err := compileExprJS(e.Value(), 0, js)
			if err != nil {
				return err
			}
			path, err := splitPath(prefix + k)
			if err != nil {
				return err
			}
			fields = append(fields, field{path, x})
		}
		return nil
	}
	if err := walk(d, ""); err != nil {
		return nil, err
	}
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		out := make([]bson.Raw, len(docs))
		for i, doc := range docs {
			root := &mval{doc: newMdoc(doc)}
			for _, f := range fields {
				val, ok := f.x.eval(doc)
				if !ok {
					unsetPath(root, f.path)
					continue
				}
				if err := setPath(root, f.path, val); err != nil {
					return nil, err
				}
			}
			out[i] = root.doc.encode()
		}
		return out, nil
	}, nil
}

// parseUnwind compiles $unwind: "$path", or {path, includeArrayIndex,
// preserveNullAndEmptyArrays}: one document per element of the array.
func parseUnwind(v bson.RawValue) (stage, error) {
	var pathStr, indexField string
	preserve := false
	switch v.Type {
	case bson.TypeString:
		pathStr = v.StringValue()
	case bson.TypeEmbeddedDocument:
		for _, e := range mustElements(v.Document()) {
			switch e.Key() {
			case "path":
				s, ok := e.Value().StringValueOK()
				if !ok {
					return nil, errorf(28808, "expected a string as the path for $unwind stage, got %s", typeName(e.Value().Type))
				}
				pathStr = s
			case "includeArrayIndex":
				s, ok := e.Value().StringValueOK()
				if !ok || s == "" || strings.HasPrefix(s, "$") {
					return nil, errorf(28810, "includeArrayIndex option to $unwind stage should be a non-empty string not starting with '$'")
				}
				indexField = s
			case "preserveNullAndEmptyArrays":
				b, ok := e.Value().BooleanOK()
				if !ok {
					return nil, errorf(28809, "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage")
				}
				preserve = b
			default:
				return nil, errorf(28811, "unrecognized option to $unwind stage: %s", e.Key())
			}
		}
		if pathStr == "" {
			return nil, errorf(28812, "no path specified to $unwind stage")
		}
	default:
		return nil, errorf(15981, "expected either a string or an object as specification for $unwind stage, got %s", typeName(v.Type))
	}
	if !strings.HasPrefix(pathStr, "$") || len(pathStr) < 2 {
		return nil, errorf(codeUnwindPath, "path option to $unwind stage should be prefixed with a '$': %s", pathStr)
	}
	path, err := splitPath(pathStr[1:])
	if err != nil {
		return nil, err
	}
	var indexPath []string
	if indexField != "" {
		if indexPath, err = splitPath(indexField); err != nil {
			return nil, err
		}
	}
	emit := func(doc bson.Raw, val bson.RawValue, setVal bool, idx bson.RawValue) (bson.Raw, error) {
		root := &mval{doc: newMdoc(doc)}
		if setVal {
			if err := setPath(root, path, val); err != nil {
				return nil, err
			}
		}
		if indexPath != nil {
			if err := setPath(root, indexPath, idx); err != nil {
				return nil, err
			}
		}
		return root.doc.encode(), nil
	}
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		var out []bson.Raw
		for _, doc := range docs {
			val, found := lookupPath(doc, path)
			var elems []bson.RawValue
			switch {
			case found && val.Type == bson.TypeArray:
				elems = arrayValues(val)
			case found && !isNullish(val):
				d, err := emit(doc, val, false, nullValue)
				if err != nil {
					return nil, err
				}
				out = append(out, d)
				continue
			}
			if len(elems) == 0 {
				if preserve {
					d, err := emit(doc, val, false, nullValue)
					if err != nil {
						return nil, err
					}
					if found && val.Type == bson.TypeArray {
						// An empty array preserved loses its field, as in MongoDB.
						root := &mval{doc: newMdoc(d)}
						unsetPath(root, path)
						d = root.doc.encode()
					}
					out = append(out, d)
				}
				continue
			}
			for i, e := range elems {
				d, err := emit(doc, e, true, int64Value(int64(i)))
				if err != nil {
					return nil, err
				}
				out = append(out, d)
			}
		}
		return out, nil
	}, nil
}

// parseReplaceRoot compiles $replaceRoot {newRoot: expr} and $replaceWith
// expr.
func parseReplaceRoot(name string, v bson.RawValue, js *jsRun) (stage, error) {
	spec := v
	if name == "$replaceRoot" {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errorf(40229, "expected an object as specification for $replaceRoot stage, got %s", typeName(v.Type))
		}
		nr, err := d.LookupErr("newRoot")
		if err != nil {
			return nil, errorf(40231, "no newRoot specified for the $replaceRoot stage")
		}
		spec = nr
	}
	x, err := compileExprJS(spec, 0, js)
	if err != nil {
		return nil, err
	}
	return func(docs []bson.Raw) ([]bson.Raw, error) {
		out := make([]bson.Raw, len(docs))
		for i, doc := range docs {
			r, ok := x.eval(doc)
			if !ok || r.Type != bson.TypeEmbeddedDocument {
				shown, t := "missing", "missing"
				if ok {
					shown, t = formatValue(r), typeName(r.Type)
				}
				return nil, errorf(codeNewRootNotObject, "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'. Input document: %s", shown, t, formatDoc(doc))
			}
			out[i] = r.Document()
		}
		return out, nil
	}, nil
}
