package mongotest

import (
	"math"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements projections, as find, findAndModify and $project
// take them: an inclusion projection ({a: 1, "b.c": 1}) returns the fields
// named, in the document's order, then the computed ones ({x: "$a"}, in
// the projection's order); an exclusion projection ({a: 0}) returns all
// but the fields named. _id is returned unless excluded, in either kind.
// Mixing inclusions and exclusions (but for _id) is refused as mongod
// refuses it. find's projection may end a path with the positional $
// ({"a.$": 1}): the array a then holds only the element the query matched
// (see withMatchedElement). find's and findAndModify's take $slice
// ({a: {$slice: 2}}), which neither includes nor excludes: alone, it
// returns every field, a sliced; and $elemMatch ({a: {$elemMatch: cond}}),
// an inclusion of a's first element that matches cond. $meta, and the
// positional $, $slice and $elemMatch elsewhere, are refused as not
// implemented.

// projection is a parsed projection.
type projection struct {
	inclusion bool
	root      *projNode
	keepID    bool
	js        *jsRun // where its $function calls run; nil where none may
	// positional is the path of the array of {"a.$": 1}, nil if none;
	// allowPositional says that the command takes it (find).
	positional      []string
	allowPositional bool
	// operators says that the command takes the projection operators
	// $slice and $elemMatch (find and findAndModify; $project has an
	// expression of the first name, and not the second).
	operators bool
}

// projNode is a field of a projection: a leaf that is included, excluded
// or computed, or the fields beneath a dotted path or a nested object.
type projNode struct {
	leaf  bool
	expr  expression // for a computed leaf
	slice *slice     // for a leaf of {$slice: ...}
	// elemMatch, for a leaf of {$elemMatch: cond}, is the filter {x:
	// {$elemMatch: cond}}, which an array of one element matches when the
	// element does.
	elemMatch *filter
	children  map[string]*projNode
	order     []string // the children in the projection's order
}

func newProjNode() *projNode { return &projNode{children: map[string]*projNode{}} }

// parseProjection parses the projection spec of find, findAndModify or a
// $project stage, which take the same projections here.
func parseProjection(spec bson.Raw) (*projection, error) {
	return parseProjectionJS(spec, nil)
}

// parseFindProjection parses the projection of find, which may have the
// positional $.
func parseFindProjection(spec bson.Raw) (*projection, error) {
	return parseProjectionWith(&projection{allowPositional: true, operators: true}, spec)
}

// parseFindAndModifyProjection parses the projection (fields) of
// findAndModify, which may have $slice and $elemMatch.
func parseFindAndModifyProjection(spec bson.Raw) (*projection, error) {
	return parseProjectionWith(&projection{operators: true}, spec)
}

// parseProjectionJS parses a projection whose $function calls run in js.
func parseProjectionJS(spec bson.Raw, js *jsRun) (*projection, error) {
	return parseProjectionWith(&projection{js: js}, spec)
}

// parseProjectionWith parses spec into p.
func parseProjectionWith(p *projection, spec bson.Raw) (*projection, error) {
	p.root, p.keepID = newProjNode(), true
	kinds := &projKinds{}
	if err := p.parseInto(spec, "", kinds); err != nil {
		return nil, err
	}
	switch {
	case kinds.include || kinds.computed:
		p.inclusion = true
	case kinds.exclude:
		p.inclusion = false
	case kinds.idIncluded:
		p.inclusion = true // {_id: 1}: _id alone
	default:
		p.inclusion = false // {_id: 0}, or nothing
	}
	return p, nil
}

// projKinds tracks the kinds of fields a projection has, to refuse a mix.
type projKinds struct {
	include, exclude, computed bool
	idIncluded                 bool
}

func (p *projection) parseInto(spec bson.Raw, prefix string, k *projKinds) error {
	elems, err := spec.Elements()
	if err != nil {
		return errorf(codeBadValue, "invalid projection: %v", err)
	}
	if len(elems) == 0 && prefix != "" {
		return errorf(codeProjectionEmpty, "An empty sub-projection is not a valid value. Found empty object at path %s", strings.TrimSuffix(prefix, "."))
	}
	for _, e := range elems {
		key, v := e.Key(), e.Value()
		name := prefix + key
		switch {
		case strings.HasPrefix(key, "$"):
			return errorf(codeFieldPathDollar, "FieldPath field names may not start with '$'. Consider using $getField or $setField.")
		case strings.Contains(name, ".$."):
			return errorf(codeBadValue, "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent.")
		case strings.HasSuffix(name, ".$") && !p.allowPositional:
			return errorf(codeBadValue, "mongotest does not implement the positional projection %s here (find has it)", name)
		case strings.HasSuffix(name, ".$"):
			if err := p.parsePositional(name, v, k); err != nil {
				return err
			}
			continue
		}
		if d, ok := v.DocumentOK(); ok {
			op := commandName(d)
			switch {
			case op == "$elemMatch" && p.operators && len(mustElements(d)) == 1:
				if err := p.parseElemMatch(name, d.Lookup("$elemMatch"), k); err != nil {
					return err
				}
				continue
			case op == "$slice" && p.operators && len(mustElements(d)) == 1:
				sl, err := parseSlice(d.Lookup("$slice"), name)
				if err != nil {
					return err
				}
				path, err := splitPath(name)
				if err != nil {
					return err
				}
				if err := p.root.insert(path, &projNode{leaf: true, slice: sl}, name); err != nil {
					return err
				}
				continue
			case op == "$slice" || op == "$elemMatch" || op == "$meta":
				return errorf(codeBadValue, "mongotest does not implement the projection operator %s (on %s)", op, name)
			case !strings.HasPrefix(op, "$"):
				if err := p.parseInto(d, name+".", k); err != nil {
					return err
				}
				continue
			}
		}
		path, err := splitPath(name)
		if err != nil {
			return err
		}
		isID := name == "_id"
		var leaf *projNode
		switch {
		case v.Type == bson.TypeBoolean || isNumber(v):
			include := truthy(v)
			switch {
			case isID:
				p.keepID = include
				k.idIncluded = include
				continue
			case include && k.exclude:
				return errorf(codeInclusionInExclude, "Cannot do inclusion on field %s in exclusion projection", name)
			case !include && (k.include || k.computed):
				return errorf(codeExclusionInInclude, "Cannot do exclusion on field %s in inclusion projection", name)
			}
			if include {
				k.include = true
			} else {
				k.exclude = true
			}
			leaf = &projNode{leaf: true}
		default:
			if k.exclude {
				return errorf(codeInclusionInExclude, "Cannot do inclusion on field %s in exclusion projection", name)
			}
			x, err := compileExprJS(v, 0, p.js)
			if err != nil {
				return err
			}
			k.computed = true
			leaf = &projNode{leaf: true, expr: x}
			if isID {
				p.keepID = false // replaced by the computed _id
			}
		}
		if err := p.root.insert(path, leaf, name); err != nil {
			return err
		}
	}
	return nil
}

// parsePositional parses {"a.$": 1}, the positional projection name.
func (p *projection) parsePositional(name string, v bson.RawValue, k *projKinds) error {
	switch {
	case p.positional != nil:
		return errorf(codeBadValue, "Cannot specify more than one positional projection per query.")
	case (v.Type != bson.TypeBoolean && !isNumber(v)) || !truthy(v):
		return errorf(codeBadValue, "the positional projection %s must be an inclusion (1 or true)", name)
	case k.exclude:
		return errorf(codeInclusionInExclude, "Cannot do inclusion on field %s in exclusion projection", name)
	}
	path, err := splitPath(strings.TrimSuffix(name, ".$"))
	if err != nil {
		return err
	}
	p.positional, k.include = path, true
	return p.root.insert(path, &projNode{leaf: true}, name)
}

// withMatchedElement returns doc with the array at p's positional path
// holding only the element the query f matched ({"a.$": 1}), for the
// projection to include; it fails, as mongod fails the find, when f
// matched no element there.
func (p *projection) withMatchedElement(f *filter, doc bson.Raw) (bson.Raw, error) {
	j, ok := matchedIndex(f, doc, p.positional)
	if !ok {
		return nil, errorf(codePositionalNoMatch, "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array")
	}
	root := &mval{doc: newMdoc(doc)}
	arr := lookup(root, p.positional)
	arr.asArray()
	arr.arr = arr.arr[j : j+1]
	return root.doc.encode(), nil
}

// parseElemMatch parses {name: {$elemMatch: cond}}, the projection
// operator that returns, of the array, its first element that matches
// cond, and leaves the field out when none does or it is not an array. It
// includes its field, as an inclusion does.
func (p *projection) parseElemMatch(name string, cond bson.RawValue, k *projKinds) error {
	switch {
	case strings.Contains(name, "."):
		return errorf(codeBadValue, "Cannot use $elemMatch projection on a nested field.")
	case cond.Type != bson.TypeEmbeddedDocument:
		return errorf(codeBadValue, "elemMatch: Invalid argument, object required, but got %s", typeName(cond.Type))
	case k.exclude:
		return errorf(codeInclusionInExclude, "Cannot do inclusion on field %s in exclusion projection", name)
	}
	f, err := parseFilter(mustMarshal(bson.D{{Key: "x", Value: bson.D{{Key: "$elemMatch", Value: cond}}}}))
	if err != nil {
		return err
	}
	k.include = true
	return p.root.insert([]string{name}, &projNode{leaf: true, elemMatch: f}, name)
}

// firstMatching returns, as an array of one, the first element of the
// array v that the $elemMatch filter f matches.
func firstMatching(f *filter, v bson.RawValue) (bson.RawValue, bool) {
	if v.Type != bson.TypeArray {
		return bson.RawValue{}, false
	}
	for _, e := range arrayValues(v) {
		one := arrayValue([]bson.RawValue{e})
		if f.match(mustMarshal(bson.D{{Key: "x", Value: one}})) {
			return one, true
		}
	}
	return bson.RawValue{}, false
}

// slice is the projection operator $slice: the first n elements of an
// array ({$slice: n}), the last -n ({$slice: -n}), or limit elements from
// skip ({$slice: [skip, limit]}, skip from the end when negative). A value
// that is not an array is returned as it is, as in MongoDB.
type slice struct {
	skip, limit int64
	hasSkip     bool
}

// parseSlice parses the argument v of {name: {$slice: v}}.
func parseSlice(v bson.RawValue, name string) (*slice, error) {
	if isNumber(v) {
		return &slice{limit: sliceCount(v)}, nil
	}
	if v.Type == bson.TypeArray {
		vals := arrayValues(v)
		if len(vals) != 2 {
			return nil, errorf(codeBadValue, "$slice of %s takes a number or an array of two, [skip, limit]; got an array of %d", name, len(vals))
		}
		var args [2]int64
		for i, a := range vals {
			if !isNumber(a) {
				return nil, errorf(codeBadValue, "$slice of %s: [skip, limit] must be numbers, not %s", name, typeName(a.Type))
			}
			args[i] = sliceCount(a)
		}
		if args[1] <= 0 {
			return nil, errorf(codeBadValue, "$slice of %s: the limit must be positive, not %d", name, args[1])
		}
		return &slice{skip: args[0], limit: args[1], hasSkip: true}, nil
	}
	return nil, errorf(codeBadValue, "$slice of %s takes a number or an array of two, [skip, limit], not a %s", name, typeName(v.Type))
}

// sliceCount returns the number v as an int64, a fraction truncated and a
// double beyond int64's range clamped to it.
func sliceCount(v bson.RawValue) int64 {
	if n, ok := v.AsInt64OK(); ok && v.Type != bson.TypeDouble {
		return n
	}
	f := floatOf(v)
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// apply returns the elements of the array v that s takes.
func (s *slice) apply(v bson.RawValue) bson.RawValue {
	if v.Type != bson.TypeArray {
		return v
	}
	vals := arrayValues(v)
	n := int64(len(vals))
	start, end := int64(0), n
	switch {
	case s.hasSkip && s.skip < 0:
		start = max(n+s.skip, 0)
		end = start + min(s.limit, n-start) // start+limit may overflow
	case s.hasSkip:
		start = min(s.skip, n)
		end = start + min(s.limit, n-start)
	case s.limit >= 0:
		end = min(s.limit, n)
	default:
		start = max(n+s.limit, 0)
	}
	return arrayValue(vals[start:end])
}

// insert places leaf at path beneath n, refusing a path that collides with
// one placed before ("a" and "a.b").
func (n *projNode) insert(path []string, leaf *projNode, name string) error {
	cur := n
	for i, part := range path {
		if cur.leaf {
			return errorf(codePathCollision, "Path collision at %s", name)
		}
		child := cur.children[part]
		if i == len(path)-1 {
			if child != nil {
				return errorf(codePathCollision, "Path collision at %s", name)
			}
			cur.children[part] = leaf
			cur.order = append(cur.order, part)
			return nil
		}
		if child == nil {
			child = newProjNode()
			cur.children[part] = child
			cur.order = append(cur.order, part)
		}
		cur = child
	}
	return nil
}

// apply returns doc projected.
func (p *projection) apply(doc bson.Raw) bson.Raw {
	if p.inclusion {
		return p.root.include(doc, doc, p.keepID)
	}
	return p.root.exclude(doc, p.keepID)
}

// include returns the fields of doc that n includes, then its computed
// fields; root is the whole document, which field paths start from. keepID
// says what to do with a top-level _id (nil otherwise).
func (n *projNode) include(doc, root bson.Raw, keepID bool) bson.Raw {
	var b docBuilder
	elems, _ := doc.Elements()
	for _, e := range elems {
		key := e.Key()
		child := n.children[key]
		if child == nil {
			if keepID && key == "_id" {
				b.append(key, e.Value())
			}
			continue
		}
		switch {
		case child.slice != nil:
			b.append(key, child.slice.apply(e.Value()))
		case child.elemMatch != nil:
			if v, ok := firstMatching(child.elemMatch, e.Value()); ok {
				b.append(key, v)
			}
		case child.leaf && child.expr == nil:
			b.append(key, e.Value())
		case child.leaf:
			// computed: added below
		default:
			if v, ok := child.includeValue(e.Value(), root); ok {
				b.append(key, v)
			}
		}
	}
	for _, key := range n.order {
		child := n.children[key]
		switch {
		case child.leaf && child.expr != nil:
			if v, ok := child.expr.eval(root); ok {
				b.append(key, v)
			}
		case !child.leaf && child.hasComputed() && doc.Lookup(key).Type != bson.TypeEmbeddedDocument && doc.Lookup(key).Type != bson.TypeArray:
			// The computed fields beneath a path the document lacks make
			// the documents of that path.
			b.append(key, docValue(child.include(emptyDoc, root, false)))
		}
	}
	return b.doc()
}

// includeValue applies n, which has fields beneath it, to the value v of
// its field: a document is projected, an array has its elements
// projected (but for scalars, which are dropped), and a scalar is left out.
func (n *projNode) includeValue(v bson.RawValue, root bson.Raw) (bson.RawValue, bool) {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		return docValue(n.include(v.Document(), root, false)), true
	case bson.TypeArray:
		var out []bson.RawValue
		for _, e := range arrayValues(v) {
			if r, ok := n.includeValue(e, root); ok {
				out = append(out, r)
			}
		}
		return arrayValue(out), true
	}
	return bson.RawValue{}, false
}

// hasComputed reports whether a computed field lies beneath n.
func (n *projNode) hasComputed() bool {
	if n.leaf {
		return n.expr != nil
	}
	for _, c := range n.children {
		if c.hasComputed() {
			return true
		}
	}
	return false
}

// exclude returns doc without the fields n excludes.
func (n *projNode) exclude(doc bson.Raw, keepID bool) bson.Raw {
	var b docBuilder
	elems, _ := doc.Elements()
	for _, e := range elems {
		key := e.Key()
		child := n.children[key]
		switch {
		case key == "_id" && !keepID:
		case child == nil:
			b.append(key, e.Value())
		case child.slice != nil:
			b.append(key, child.slice.apply(e.Value()))
		case child.leaf:
		default:
			b.append(key, child.excludeValue(e.Value()))
		}
	}
	return b.doc()
}

// excludeValue applies n, which has fields beneath it, to the value v of
// its field: within documents, and within the documents of arrays.
func (n *projNode) excludeValue(v bson.RawValue) bson.RawValue {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		return docValue(n.exclude(v.Document(), true))
	case bson.TypeArray:
		vals := arrayValues(v)
		for i, e := range vals {
			vals[i] = n.excludeValue(e)
		}
		return arrayValue(vals)
	}
	return v
}
