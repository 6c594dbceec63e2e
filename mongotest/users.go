package mongotest

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/xdg-go/scram"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The authentication mechanisms the server knows.
const (
	MechSCRAMSHA1   = "SCRAM-SHA-1"
	MechSCRAMSHA256 = "SCRAM-SHA-256"
	MechPLAIN       = "PLAIN"
	MechX509        = "MONGODB-X509"
)

// The SCRAM iteration counts mongod uses by default.
const (
	scramSHA1Iterations   = 10000
	scramSHA256Iterations = 15000
)

// userKey identifies a user: a name in its authentication database.
type userKey struct{ db, name string }

// user is a registered user and what authenticating it takes. A user is
// never changed once registered: updateUser registers a new one, so that
// what lookup returned may be read without the lock.
type user struct {
	mechs    []string                           // mechanisms it may use, in order
	scram    map[string]scram.StoredCredentials // by SCRAM mechanism
	password string                             // for PLAIN

	// What usersInfo reports besides: the userId mongod gives each user
	// (a UUID), its roles (which the server does not enforce) and
	// customData (nil if none).
	id         bson.Binary
	roles      []roleName
	customData bson.Raw
}

// roleName is a role of a database.
type roleName struct{ role, db string }

// users is the server's user registry.
type users struct {
	mu   sync.RWMutex
	m    map[userKey]*user
	x509 map[string]*user // by certificate subject: the users of $external that MONGODB-X509 authenticates
}

// AddUser registers (or replaces) the user name in the database db with
// password, allowed to authenticate with the given mechanisms:
// MechSCRAMSHA1, MechSCRAMSHA256 and MechPLAIN. With none, the user gets
// both SCRAM mechanisms, as MongoDB's createUser does. PLAIN checks the
// password directly; drivers use it with authSource=$external, so add PLAIN
// users to "$external".
//
// The SCRAM credentials are derived as mongod derives them (SCRAM-SHA-1
// from the MongoDB password digest, SCRAM-SHA-256 from the SASLprepped
// password, with mongod's default iteration counts).
//
// Once the server has a user, commands other than the handshake,
// authentication, ping, buildInfo and endSessions fail with Unauthorized
// (13) on connections that have not authenticated. usersInfo lists the
// user, with no roles; updateUser and dropUser change it as one made with
// createUser.
func (s *Server) AddUser(db, name, password string, mechanisms ...string) error {
	if db == "" || name == "" {
		return fmt.Errorf("mongotest: AddUser: empty database or user name")
	}
	if len(mechanisms) == 0 {
		mechanisms = []string{MechSCRAMSHA1, MechSCRAMSHA256}
	}
	u := &user{scram: map[string]scram.StoredCredentials{}, password: password, id: newUUID(), roles: []roleName{}}
	for _, m := range mechanisms {
		if slices.Contains(u.mechs, m) {
			continue
		}
		switch m {
		case MechSCRAMSHA1, MechSCRAMSHA256:
			creds, err := scramCredentials(m, name, password, true)
			if err != nil {
				return fmt.Errorf("mongotest: AddUser: %s credentials: %w", m, err)
			}
			u.scram[m] = creds
		case MechPLAIN:
		default:
			return fmt.Errorf("mongotest: AddUser: unsupported mechanism %q (supported: %s, %s, %s)",
				m, MechSCRAMSHA1, MechSCRAMSHA256, MechPLAIN)
		}
		u.mechs = append(u.mechs, m)
	}
	s.users.put(userKey{db, name}, u)
	return nil
}

// scramCredentials derives the stored SCRAM credentials of mechanism mech
// (MechSCRAMSHA1 or MechSCRAMSHA256) for the user name with password, with
// a new salt and mongod's default iteration count, as mongod derives them:
// SCRAM-SHA-1 from the MongoDB password digest, or from password itself
// when it is that digest already (digest false, createUser's
// digestPassword: false); SCRAM-SHA-256 from the SASLprepped password.
func scramCredentials(mech, name, password string, digest bool) (scram.StoredCredentials, error) {
	var (
		client *scram.Client
		err    error
		kf     = scram.KeyFactors{Salt: salt()}
	)
	if mech == MechSCRAMSHA1 {
		kf.Iters = scramSHA1Iterations
		if digest {
			password = mongoPasswordDigest(name, password)
		}
		client, err = scram.SHA1.NewClientUnprepped(name, password, "")
	} else {
		kf.Iters = scramSHA256Iterations
		// NewClient SASLpreps the password (and the authzID, empty);
		// the username plays no part in the stored credentials.
		client, err = scram.SHA256.NewClient("", password, "")
	}
	if err != nil {
		return scram.StoredCredentials{}, err
	}
	return client.GetStoredCredentialsWithError(kf)
}

// put registers u as the user key, replacing any.
func (r *users) put(key userKey, u *user) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[userKey]*user{}
	}
	r.m[key] = u
}

// AddX509User registers a MONGODB-X509 user: a client whose verified TLS
// certificate has this subject, in RFC 2253 form as
// x509.Certificate.Subject.String() returns it (such as
// "CN=client,OU=Drivers,O=MongoDB"). It authenticates on "$external". The
// server must run WithTLS with a tls.Config that verifies client
// certificates.
func (s *Server) AddX509User(subject string) {
	s.users.putX509(subject, &user{mechs: []string{MechX509}, id: newUUID(), roles: []roleName{}})
}

// putX509 registers u as the MONGODB-X509 user of subject, replacing any.
func (r *users) putX509(subject string, u *user) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.x509 == nil {
		r.x509 = map[string]*user{}
	}
	r.x509[subject] = u
}

// any reports whether the server has any user, which makes it require
// authentication.
func (r *users) any() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m) > 0 || len(r.x509) > 0
}

// lookup returns the user name of db, or nil.
func (r *users) lookup(db, name string) *user {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[userKey{db, name}]
}

// exists reports whether the user a connection authenticated as still
// exists (a $external user is a certificate's subject).
func (r *users) exists(k userKey) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if k.db == "$external" {
		return r.x509[k.name] != nil || r.m[k] != nil
	}
	return r.m[k] != nil
}

// hasX509 reports whether subject is a MONGODB-X509 user.
func (r *users) hasX509(subject string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.x509[subject] != nil
}

// mongoPasswordDigest is the password SCRAM-SHA-1 uses in MongoDB:
// hex(md5(user + ":mongo:" + password)).
func mongoPasswordDigest(name, password string) string {
	sum := md5.Sum([]byte(name + ":mongo:" + password))
	return hex.EncodeToString(sum[:])
}

// newUUID returns a new random UUID (version 4), as BSON binary subtype 4.
func newUUID() bson.Binary {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return bson.Binary{Subtype: bson.TypeBinaryUUID, Data: b}
}

// salt returns a new random SCRAM salt.
func salt() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return string(b)
}
