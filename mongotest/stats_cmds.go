package mongotest

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file answers dbStats and connectionStatus as mongod does, for the
// shells and tools that call them (mongosh's db.stats(), and
// db.runCommand({connectionStatus: 1}) to see who is logged in).

// dbStats runs {dbStats: 1, scale}: the counts of the database's
// collections, documents and indexes, and sizes (the BSON size of the
// documents: this server has no storage of its own to measure), divided
// by scale, as mongod divides them.
func (s *Server) dbStats(req *request) (bson.D, error) {
	if err := checkFields(req, "scale", "freeStorage"); err != nil {
		return nil, err
	}
	scale := int64(1)
	if v, err := req.body.LookupErr("scale"); err == nil {
		n, ok := v.AsInt64OK()
		if !ok && v.Type == bson.TypeDouble {
			n, ok = int64(v.Double()), true
		}
		if !ok || n <= 0 {
			return nil, errorf(codeBadValue, "Scale factor must be a positive number")
		}
		scale = n
	}
	var colls, objects, dataSize, indexes int64
	st := s.storeOf(req)
	st.mu.Lock()
	for _, c := range st.dbs[req.db] {
		colls++
		indexes += int64(len(c.indexes)) + 1
		for _, r := range c.recs[c.head:] {
			if r != nil {
				objects++
				dataSize += int64(len(r.doc))
			}
		}
	}
	st.mu.Unlock()
	avg := 0.0
	if objects > 0 {
		avg = float64(dataSize) / float64(objects)
	}
	// mongod appends its counts and sizes as the smallest number type that
	// holds them (BSONObjBuilder::appendNumber).
	return bson.D{
		{Key: "db", Value: req.db},
		{Key: "collections", Value: number(colls)},
		{Key: "views", Value: int32(0)},
		{Key: "objects", Value: number(objects)},
		{Key: "avgObjSize", Value: avg},
		{Key: "dataSize", Value: number(dataSize / scale)},
		{Key: "storageSize", Value: number(dataSize / scale)},
		{Key: "indexes", Value: number(indexes)},
		{Key: "indexSize", Value: int32(0)},
		{Key: "totalSize", Value: number(dataSize / scale)},
		{Key: "scaleFactor", Value: number(scale)},
	}, nil
}

// number returns n as an int32 if it fits, as an int64 otherwise.
func number(n int64) any {
	if n >= -1<<31 && n < 1<<31 {
		return int32(n)
	}
	return n
}

// connectionStatus runs {connectionStatus: 1, showPrivileges}: the user the
// connection authenticated as, and its roles (which this server does not
// enforce); showPrivileges is refused, as privileges are not modelled.
func (s *Server) connectionStatus(req *request) (bson.D, error) {
	if err := checkFields(req, "showPrivileges"); err != nil {
		return nil, err
	}
	if show, _ := req.body.Lookup("showPrivileges").BooleanOK(); show {
		return nil, errorf(codeBadValue, "mongotest does not implement connectionStatus with showPrivileges: it has no privileges")
	}
	users, roles := bson.A{}, bson.A{}
	if k := req.conn.user; k != nil {
		users = append(users, bson.D{{Key: "user", Value: k.name}, {Key: "db", Value: k.db}})
		if u := s.users.lookup(k.db, k.name); u != nil {
			for _, r := range u.roles {
				roles = append(roles, bson.D{{Key: "role", Value: r.role}, {Key: "db", Value: r.db}})
			}
		}
	}
	return bson.D{{Key: "authInfo", Value: bson.D{
		{Key: "authenticatedUsers", Value: users},
		{Key: "authenticatedUserRoles", Value: roles},
	}}}, nil
}
