package mongotest

import (
	"bytes"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// findAndModify runs {findAndModify: coll, query, sort, remove, update,
// new, fields, upsert}: it removes or updates the first document the query
// and sort give, and returns it (as it was, or with new as it is after),
// projected by fields, in value, with lastErrorObject telling what it did.
func (s *Server) findAndModify(req *request) (bson.D, error) {
	if err := checkFields(req, "query", "sort", "remove", "update", "new", "fields", "upsert",
		"bypassDocumentValidation", "collation", "arrayFilters", "hint", "let"); err != nil {
		return nil, err
	}
	coll, err := collectionArg(req)
	if err != nil {
		return nil, err
	}
	f, err := queryFilterArg(req, "query")
	if err != nil {
		return nil, err
	}
	sortDoc, err := docArg(req.body, "sort")
	if err != nil {
		return nil, err
	}
	sort, err := parseSort(sortDoc)
	if err != nil {
		return nil, err
	}
	var proj *projection
	if pd, err := docArg(req.body, "fields"); err != nil {
		return nil, err
	} else if len(pd) > 5 {
		if proj, err = parseFindAndModifyProjection(pd); err != nil {
			return nil, err
		}
	}
	var flags [3]bool
	for i, k := range []string{"remove", "new", "upsert"} {
		if flags[i], err = boolArg(req.body, k, false); err != nil {
			return nil, err
		}
	}
	remove, returnNew, upsert := flags[0], flags[1], flags[2]
	var u *update
	if uv, err := req.body.LookupErr("update"); err == nil {
		if u, err = parseUpdate(uv, "update"); err != nil {
			return nil, err
		}
	}
	switch {
	case remove && u != nil:
		return nil, errorf(codeFailedToParse, "Cannot specify both an update and remove=true")
	case !remove && u == nil:
		return nil, errorf(codeFailedToParse, "Either an update or remove=true must be specified")
	case remove && upsert:
		return nil, errorf(codeFailedToParse, "Cannot specify both upsert=true and remove=true")
	case remove && returnNew:
		return nil, errorf(codeFailedToParse, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document")
	}
	if u != nil {
		u.query = f
		if err := u.setArrayFilters(req.body.Lookup("arrayFilters"), req.body.Lookup("update")); err != nil {
			return nil, err
		}
	}
	if err := checkCollation(req.body); err != nil {
		return nil, err
	}
	var value bson.Raw // the document to return, nil for null
	lastError := bson.D{{Key: "n", Value: int32(0)}}
	store := s.storeOf(req)
	err = s.untilUnlocked(req, func() error {
		return store.withLazy(req.db, coll, func(c *collection, create func() *collection) error {
			if err := checkHint(c, req.body); err != nil {
				return err
			}
			scan := 1 // without a sort, the first match
			if len(sort) > 0 {
				scan = 0
			}
			recs := c.matching(f, scan)
			if err := f.err(); err != nil {
				return err
			}
			if len(sort) > 0 {
				recs = sortRecords(recs, sort)
			}
			if err := store.checkLocksLocked(c, recs[:min(len(recs), 1)]); err != nil {
				return err
			}
			if len(recs) > 0 {
				r := recs[0]
				lastError = bson.D{{Key: "n", Value: int32(1)}}
				if remove {
					value = r.doc
					if err := c.remove(r); err != nil {
						return err
					}
					return nil
				}
				doc, err := u.apply(r.doc, false)
				if err != nil {
					return err
				}
				value = r.doc
				if !bytes.Equal(doc, r.doc) {
					if err := c.replace(r, doc); err != nil {
						return err
					}
				}
				if returnNew {
					value = doc
				}
				lastError = append(lastError, bson.E{Key: "updatedExisting", Value: true})
				return nil
			}
			if u == nil || !upsert {
				if u != nil {
					lastError = append(lastError, bson.E{Key: "updatedExisting", Value: false})
				}
				return nil
			}
			doc, err := upsertDoc(f, u)
			if err != nil {
				return err
			}
			if cerr := checkStorable(doc); cerr != nil {
				return cerr
			}
			if c == nil {
				c = create()
			}
			if cerr := c.add(doc); cerr != nil {
				return cerr
			}
			lastError = bson.D{
				{Key: "n", Value: int32(1)},
				{Key: "updatedExisting", Value: false},
				{Key: "upserted", Value: doc.Lookup("_id")},
			}
			if returnNew {
				value = doc
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	var v any = nil
	if value != nil {
		if proj != nil {
			value = proj.apply(value)
		}
		v = value
	}
	return bson.D{{Key: "lastErrorObject", Value: lastError}, {Key: "value", Value: v}}, nil
}
