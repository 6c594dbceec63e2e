package mongotest

import (
	"cmp"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// This file implements the user management commands: createUser,
// updateUser, dropUser, dropAllUsersFromDatabase and usersInfo, as
// mongod's (src/mongo/db/commands/user_management_commands.cpp), on the
// users that AddUser and AddX509User register: a user created through the
// wire authenticates as one added with AddUser does, and usersInfo lists
// both.
//
// A user's SCRAM credentials are derived as mongod derives them (see
// scramCredentials). A user of $external, which has no password, is the
// subject of a client certificate that MONGODB-X509 authenticates, as
// AddX509User makes (mongod's $external users may also be LDAP or
// Kerberos users, which the test server does not have).
//
// Roles are checked as mongod checks them when a user is given them (the
// built-in roles exist, on the databases they exist on; the server has no
// user-defined roles) and reported, but not enforced: an authenticated
// user may do anything. authenticationRestrictions and the privileges of
// usersInfo are not implemented, and refused. Unlike mongod, the server
// does not end the authentication of the connections of a user that
// dropUser drops: they go on as that user.

// The error codes of the user management commands.
const (
	codeUserNotFound      = 11
	codeRoleNotFound      = 31
	codeUserAlreadyExists = 51003 // mongod has no name for it
)

func init() {
	for code, name := range map[int32]string{
		codeUserNotFound: "UserNotFound",
		codeRoleNotFound: "RoleNotFound",
	} {
		if _, ok := codeNames[code]; !ok {
			codeNames[code] = name
		}
	}
}

// The built-in roles of MongoDB
// (https://www.mongodb.com/docs/manual/reference/built-in-roles/): the
// database roles exist on every database, the others on admin only.
var (
	databaseRoles = []string{"read", "readWrite", "dbAdmin", "dbOwner", "userAdmin"}
	adminRoles    = []string{"clusterAdmin", "clusterManager", "clusterMonitor", "enableSharding", "hostManager",
		"backup", "restore", "readAnyDatabase", "readWriteAnyDatabase", "userAdminAnyDatabase", "dbAdminAnyDatabase",
		"root", "directShardOperations", "searchCoordinator", "__queryableBackup", "__system"}
)

// userArgs are the arguments createUser and updateUser share.
type userArgs struct {
	name       string
	pwd        *string
	roles      []roleName // nil if not given
	customData bson.Raw   // nil if not given
	mechanisms []string   // nil if not given
	digest     bool       // digestPassword
}

// parseUserArgs reads the arguments of createUser or updateUser (req),
// with the checks of their IDL.
func parseUserArgs(req *request) (*userArgs, error) {
	if err := checkFields(req, "pwd", "customData", "roles", "digestPassword", "authenticationRestrictions", "mechanisms"); err != nil {
		return nil, err
	}
	a := &userArgs{digest: true}
	first := req.body.Index(0).Value()
	name, ok := first.StringValueOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'", req.name, req.name, typeName(first.Type))
	}
	a.name = name
	if v, err := req.body.LookupErr("pwd"); err == nil {
		pwd, ok := v.StringValueOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.pwd' is the wrong type '%s', expected type 'string'", req.name, typeName(v.Type))
		}
		a.pwd = &pwd
	}
	if v, err := req.body.LookupErr("roles"); err == nil {
		if a.roles, err = parseRoles(req.name, v, req.db); err != nil {
			return nil, err
		}
	}
	if v, err := req.body.LookupErr("customData"); err == nil {
		d, ok := v.DocumentOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.customData' is the wrong type '%s', expected type 'object'", req.name, typeName(v.Type))
		}
		a.customData = d
	}
	if v, err := req.body.LookupErr("mechanisms"); err == nil {
		arr, ok := v.ArrayOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.mechanisms' is the wrong type '%s', expected type 'array'", req.name, typeName(v.Type))
		}
		a.mechanisms = []string{}
		for _, e := range mustValues(arr) {
			m, ok := e.StringValueOK()
			if !ok {
				return nil, errorf(codeTypeMismatch, "BSON field '%s.mechanisms' is the wrong type '%s', expected type 'string'", req.name, typeName(e.Type))
			}
			a.mechanisms = append(a.mechanisms, m)
		}
		if len(a.mechanisms) == 0 {
			return nil, errorf(codeBadValue, "mechanisms field must not be empty")
		}
	}
	digest, err := boolArg(req.body, "digestPassword", true)
	if err != nil {
		return nil, err
	}
	a.digest = digest
	if v, err := req.body.LookupErr("authenticationRestrictions"); err == nil {
		if arr, ok := v.ArrayOK(); !ok || len(mustValues(arr)) > 0 {
			return nil, errorf(codeBadValue, "mongotest does not implement authenticationRestrictions")
		}
	}
	return a, nil
}

// mustValues returns the values of an array the server has checked.
func mustValues(arr bson.RawArray) []bson.RawValue {
	vals, _ := arr.Values()
	return vals
}

// parseRoles reads the roles argument v of the command name run on db:
// role names of db, or {role, db} documents.
func parseRoles(name string, v bson.RawValue, db string) ([]roleName, error) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field '%s.roles' is the wrong type '%s', expected type 'array'", name, typeName(v.Type))
	}
	roles := []roleName{}
	for _, e := range mustValues(arr) {
		if s, ok := e.StringValueOK(); ok {
			roles = append(roles, roleName{s, db})
			continue
		}
		d, ok := e.DocumentOK()
		if !ok {
			return nil, errorf(codeTypeMismatch, "BSON field '%s.roles' has an element of type '%s', expected a string or an object", name, typeName(e.Type))
		}
		var r roleName
		for _, f := range mustElements(d) {
			s, ok := f.Value().StringValueOK()
			switch {
			case f.Key() != "role" && f.Key() != "db":
				return nil, errorf(codeIDLUnknownField, "BSON field '%s.roles.%s' is an unknown field.", name, f.Key())
			case !ok:
				return nil, errorf(codeTypeMismatch, "BSON field '%s.roles.%s' is the wrong type '%s', expected type 'string'", name, f.Key(), typeName(f.Value().Type))
			case f.Key() == "role":
				r.role = s
			default:
				r.db = s
			}
		}
		for _, key := range []string{"role", "db"} {
			if _, err := d.LookupErr(key); err != nil {
				return nil, errorf(codeMissingField, "BSON field '%s.roles.%s' is missing but a required field", name, key)
			}
		}
		roles = append(roles, r)
	}
	return roles, nil
}

// checkRoles fails with RoleNotFound for a role that does not exist: one
// that is not a built-in role of its database.
func checkRoles(roles []roleName) error {
	for _, r := range roles {
		if !slices.Contains(databaseRoles, r.role) && !(r.db == "admin" && slices.Contains(adminRoles, r.role)) {
			return errorf(codeRoleNotFound, "Could not find role: %s@%s", r.role, r.db)
		}
	}
	return nil
}

// credentials derives the SCRAM credentials of the user name with
// password for mechanisms (both SCRAM mechanisms if nil), and returns the
// mechanisms in mongod's order of them: SCRAM-SHA-1, then SCRAM-SHA-256.
func credentials(name, password string, mechanisms []string, digest bool) ([]string, map[string]scram.StoredCredentials, error) {
	want := []string{MechSCRAMSHA1, MechSCRAMSHA256}
	if mechanisms != nil {
		for _, m := range mechanisms {
			if m != MechSCRAMSHA1 && m != MechSCRAMSHA256 {
				return nil, nil, errorf(codeBadValue, "Unknown auth mechanism '%s'", m)
			}
		}
		want = slices.DeleteFunc(want, func(m string) bool { return !slices.Contains(mechanisms, m) })
	}
	creds := map[string]scram.StoredCredentials{}
	for _, m := range want {
		if m == MechSCRAMSHA256 && !digest {
			return nil, nil, errorf(codeBadValue, "Use of SCRAM-SHA-256 requires undigested passwords")
		}
		c, err := scramCredentials(m, name, password, digest)
		if err != nil {
			return nil, nil, errorf(codeBadValue, "Error preparing %s credentials: %v", m, err)
		}
		creds[m] = c
	}
	return want, creds, nil
}

// createUser runs {createUser: name, pwd, roles, customData, mechanisms,
// digestPassword}: a new user of the database, which authenticates at
// once.
func (s *Server) createUser(req *request) (bson.D, error) {
	a, err := parseUserArgs(req)
	if err != nil {
		return nil, err
	}
	// In the order of mongod's checks: the IDL's, the command's, the
	// credentials', the user document's, the roles'.
	if a.roles == nil {
		return nil, errorf(codeMissingField, "BSON field 'createUser.roles' is missing but a required field")
	}
	external := req.db == "$external"
	switch {
	case req.db == "local":
		return nil, errorf(codeBadValue, "Cannot create users in the local database")
	case strings.ContainsRune(a.name, 0):
		return nil, errorf(codeBadValue, "Username cannot contain NULL characters")
	case a.pwd == nil && !external:
		return nil, errorf(codeBadValue, "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db")
	case a.pwd != nil && external:
		return nil, errorf(codeBadValue, "Cannot set the password for users defined on the '$external' database")
	}
	u := &user{id: newUUID(), roles: a.roles, customData: a.customData}
	if external {
		u.mechs = []string{MechX509}
	} else if u.mechs, u.scram, err = credentials(a.name, *a.pwd, a.mechanisms, a.digest); err != nil {
		return nil, err
	}
	if a.name == "" {
		return nil, errorf(codeBadValue, "User document needs 'user' field to be non-empty")
	}
	if err := checkRoles(a.roles); err != nil {
		return nil, err
	}
	if !s.users.create(userKey{req.db, a.name}, u) {
		return nil, errorf(codeUserAlreadyExists, "User \"%s@%s\" already exists", a.name, req.db)
	}
	return bson.D{}, nil
}

// updateUser runs {updateUser: name, pwd, roles, customData, mechanisms,
// digestPassword}: pwd replaces the credentials (of mechanisms, or both),
// mechanisms alone keeps those of the credentials, roles and customData
// replace the user's.
func (s *Server) updateUser(req *request) (bson.D, error) {
	a, err := parseUserArgs(req)
	if err != nil {
		return nil, err
	}
	if a.pwd != nil && req.db == "$external" {
		return nil, errorf(codeBadValue, "Cannot set the password for users defined on the '$external' database")
	}
	if a.pwd == nil && a.mechanisms == nil && a.roles == nil && a.customData == nil {
		return nil, errorf(codeBadValue, "Must specify at least one field to update in updateUser")
	}
	var mechs []string
	var creds map[string]scram.StoredCredentials
	if a.pwd != nil {
		if mechs, creds, err = credentials(a.name, *a.pwd, a.mechanisms, a.digest); err != nil {
			return nil, err
		}
	}
	if a.roles != nil {
		if err := checkRoles(a.roles); err != nil {
			return nil, err
		}
	}
	key := userKey{req.db, a.name}
	err = s.users.update(key, func(old *user) (*user, error) {
		u := *old
		switch {
		case a.pwd != nil:
			u.mechs, u.scram, u.password = mechs, creds, ""
		case a.mechanisms != nil:
			// Keep the credentials of the mechanisms given, which the user
			// must have (mongod's trimCredentials).
			u.mechs, u.scram = nil, map[string]scram.StoredCredentials{}
			for _, m := range a.mechanisms {
				c, ok := old.scram[m]
				if !ok {
					return nil, errorf(codeBadValue, "mechanisms field must be a subset of previously set mechanisms")
				}
				u.scram[m] = c
			}
			for _, m := range old.mechs {
				if _, ok := u.scram[m]; ok {
					u.mechs = append(u.mechs, m)
				}
			}
		}
		if a.roles != nil {
			u.roles = a.roles
		}
		if a.customData != nil {
			u.customData = a.customData
		}
		return &u, nil
	})
	if err != nil {
		return nil, err
	}
	return bson.D{}, nil
}

// dropUser runs {dropUser: name}.
func (s *Server) dropUser(req *request) (bson.D, error) {
	if err := checkFields(req); err != nil {
		return nil, err
	}
	first := req.body.Index(0).Value()
	name, ok := first.StringValueOK()
	if !ok {
		return nil, errorf(codeTypeMismatch, "BSON field 'dropUser.dropUser' is the wrong type '%s', expected type 'string'", typeName(first.Type))
	}
	if s.users.drop(func(k userKey) bool { return k == userKey{req.db, name} }) == 0 {
		return nil, errorf(codeUserNotFound, "User '%s@%s' not found", name, req.db)
	}
	return bson.D{}, nil
}

// dropAllUsersFromDatabase runs {dropAllUsersFromDatabase: 1}: n is the
// count of the users of the database it dropped.
func (s *Server) dropAllUsersFromDatabase(req *request) (bson.D, error) {
	if err := checkFields(req); err != nil {
		return nil, err
	}
	n := s.users.drop(func(k userKey) bool { return k.db == req.db })
	return bson.D{{Key: "n", Value: int32(n)}}, nil
}

// usersInfo runs {usersInfo: 1 | name | {user, db} | [...] | {forAllDBs:
// true}, showCredentials, showCustomData, filter}: the users, sorted by
// name then database, as mongod lists them: {_id: "db.user", userId,
// user, db, credentials (if asked for), customData (unless
// showCustomData is false), roles, mechanisms}.
func (s *Server) usersInfo(req *request) (bson.D, error) {
	if err := checkFields(req, "showCredentials", "showCustomData", "showPrivileges", "showAuthenticationRestrictions", "filter"); err != nil {
		return nil, err
	}
	match, exact, err := parseUsersInfoArg(req.body.Index(0).Value(), req.db)
	if err != nil {
		return nil, err
	}
	showCreds, err := boolArg(req.body, "showCredentials", false)
	if err != nil {
		return nil, err
	}
	showCustom, err := boolArg(req.body, "showCustomData", true)
	if err != nil {
		return nil, err
	}
	_, noFilter := req.body.LookupErr("filter")
	for _, k := range []string{"showPrivileges", "showAuthenticationRestrictions"} {
		show, err := boolArg(req.body, k, false)
		switch {
		case err != nil:
			return nil, err
		case show && (!exact || noFilter == nil):
			return nil, errorf(codeIllegalOperation, "Privilege or restriction details require exact-match usersInfo queries")
		case show:
			return nil, errorf(codeBadValue, "mongotest does not implement %s: the server has no privileges or restrictions", k)
		}
	}
	f, err := filterArg(req.body, "filter")
	if err != nil {
		return nil, err
	}
	type entry struct {
		key userKey
		u   *user
	}
	var found []entry
	s.users.each(func(k userKey, u *user) {
		if match(k) {
			found = append(found, entry{k, u})
		}
	})
	slices.SortFunc(found, func(a, b entry) int {
		return cmp.Or(strings.Compare(a.key.name, b.key.name), strings.Compare(a.key.db, b.key.db))
	})
	users := bson.A{}
	for _, e := range found {
		doc := mustMarshal(userDoc(e.key, e.u, showCreds, showCustom))
		if f.match(doc) {
			users = append(users, doc)
		}
	}
	return bson.D{{Key: "users", Value: users}}, nil
}

// parseUsersInfoArg reads usersInfo's argument v, run on db: which users
// it asks for, and whether it names them (exact).
func parseUsersInfoArg(v bson.RawValue, db string) (match func(userKey) bool, exact bool, err error) {
	one := func(v bson.RawValue) (userKey, error) {
		if s, ok := v.StringValueOK(); ok {
			return userKey{db, s}, nil
		}
		d, ok := v.DocumentOK()
		if !ok {
			return userKey{}, errorf(codeBadValue, "User and role names must be either strings or objects")
		}
		u, okU := d.Lookup("user").StringValueOK()
		udb, okDB := d.Lookup("db").StringValueOK()
		if !okU || !okDB {
			return userKey{}, errorf(codeBadValue, "User name must contain a string field named: user and a string field named: db")
		}
		return userKey{udb, u}, nil
	}
	switch {
	case v.Type == bson.TypeArray:
		var keys []userKey
		for _, e := range mustValues(v.Array()) {
			k, err := one(e)
			if err != nil {
				return nil, false, err
			}
			keys = append(keys, k)
		}
		return func(k userKey) bool { return slices.Contains(keys, k) }, true, nil
	case v.Type == bson.TypeEmbeddedDocument:
		if all, ok := v.Document().Lookup("forAllDBs").BooleanOK(); ok {
			if !all {
				return nil, false, errorf(codeBadValue, "forAllDBs must be true")
			}
			return func(userKey) bool { return true }, false, nil
		}
		fallthrough
	case v.Type == bson.TypeString:
		k, err := one(v)
		if err != nil {
			return nil, false, err
		}
		return func(o userKey) bool { return o == k }, true, nil
	}
	if n, ok := v.AsFloat64OK(); ok && n == 1 {
		return func(k userKey) bool { return k.db == db }, false, nil
	}
	return nil, false, errorf(codeBadValue, "usersInfo takes 1, a user name, a {user, db} document, an array of them, or {forAllDBs: true}")
}

// userDoc returns the usersInfo entry of u, the user key.
func userDoc(key userKey, u *user, showCreds, showCustom bool) bson.D {
	d := bson.D{
		{Key: "_id", Value: key.db + "." + key.name},
		{Key: "userId", Value: u.id},
		{Key: "user", Value: key.name},
		{Key: "db", Value: key.db},
	}
	// mongod's credentials: one document of each SCRAM mechanism, or
	// external: true for a user whose password is elsewhere (MONGODB-X509,
	// and PLAIN, which is LDAP's in mongod).
	var mechs []string
	creds := bson.D{}
	for _, m := range u.mechs {
		switch m {
		case MechSCRAMSHA1, MechSCRAMSHA256:
			c := u.scram[m]
			mechs = append(mechs, m)
			creds = append(creds, bson.E{Key: m, Value: bson.D{
				{Key: "iterationCount", Value: int32(c.Iters)},
				{Key: "salt", Value: base64.StdEncoding.EncodeToString([]byte(c.Salt))},
				{Key: "storedKey", Value: base64.StdEncoding.EncodeToString(c.StoredKey)},
				{Key: "serverKey", Value: base64.StdEncoding.EncodeToString(c.ServerKey)},
			}})
		default:
			if !slices.Contains(mechs, "external") {
				mechs = append(mechs, "external")
				creds = append(creds, bson.E{Key: "external", Value: true})
			}
		}
	}
	if showCreds {
		d = append(d, bson.E{Key: "credentials", Value: creds})
	}
	if showCustom && u.customData != nil {
		d = append(d, bson.E{Key: "customData", Value: u.customData})
	}
	roles := bson.A{}
	for _, r := range u.roles {
		roles = append(roles, bson.D{{Key: "role", Value: r.role}, {Key: "db", Value: r.db}})
	}
	return append(d, bson.E{Key: "roles", Value: roles}, bson.E{Key: "mechanisms", Value: mechs})
}

// create registers u as the user key, unless it exists; it reports
// whether it did. A user of $external is a MONGODB-X509 user.
func (r *users) create(key userKey, u *user) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[key] != nil || (key.db == "$external" && r.x509[key.name] != nil) {
		return false
	}
	if key.db == "$external" && slices.Contains(u.mechs, MechX509) {
		if r.x509 == nil {
			r.x509 = map[string]*user{}
		}
		r.x509[key.name] = u
		return true
	}
	if r.m == nil {
		r.m = map[userKey]*user{}
	}
	r.m[key] = u
	return true
}

// update replaces the user key with what change makes of it, or fails
// with UserNotFound.
func (r *users) update(key userKey, change func(*user) (*user, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.m[key]; old != nil {
		u, err := change(old)
		if err == nil {
			r.m[key] = u
		}
		return err
	}
	if old := r.x509[key.name]; key.db == "$external" && old != nil {
		u, err := change(old)
		if err == nil {
			r.x509[key.name] = u
		}
		return err
	}
	return errorf(codeUserNotFound, "User %s@%s not found", key.name, key.db)
}

// drop removes the users whose key drop selects, and returns their count.
func (r *users) drop(selects func(userKey) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for k := range r.m {
		if selects(k) {
			delete(r.m, k)
			n++
		}
	}
	for subject := range r.x509 {
		if selects(userKey{"$external", subject}) {
			delete(r.x509, subject)
			n++
		}
	}
	return n
}

// each calls f with every user, MONGODB-X509 users as users of $external.
func (r *users) each(f func(userKey, *user)) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for k, u := range r.m {
		f(k, u)
	}
	for subject, u := range r.x509 {
		f(userKey{"$external", subject}, u)
	}
}
