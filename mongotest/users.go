package mongotest

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/xdg-go/scram"
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

// user is a registered user and what authenticating it takes.
type user struct {
	mechs    []string                           // mechanisms it may use, in order
	scram    map[string]scram.StoredCredentials // by SCRAM mechanism
	password string                             // for PLAIN
}

// users is the server's user registry.
type users struct {
	mu   sync.RWMutex
	m    map[userKey]*user
	x509 map[string]bool // certificate subjects, users of $external
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
// (13) on connections that have not authenticated.
func (s *Server) AddUser(db, name, password string, mechanisms ...string) error {
	if db == "" || name == "" {
		return fmt.Errorf("mongotest: AddUser: empty database or user name")
	}
	if len(mechanisms) == 0 {
		mechanisms = []string{MechSCRAMSHA1, MechSCRAMSHA256}
	}
	u := &user{scram: map[string]scram.StoredCredentials{}, password: password}
	for _, m := range mechanisms {
		if slices.Contains(u.mechs, m) {
			continue
		}
		var (
			client *scram.Client
			err    error
			kf     = scram.KeyFactors{Salt: salt()}
		)
		switch m {
		case MechSCRAMSHA1:
			kf.Iters = scramSHA1Iterations
			client, err = scram.SHA1.NewClientUnprepped(name, mongoPasswordDigest(name, password), "")
		case MechSCRAMSHA256:
			kf.Iters = scramSHA256Iterations
			// NewClient SASLpreps the password (and the authzID, empty);
			// the username plays no part in the stored credentials.
			client, err = scram.SHA256.NewClient("", password, "")
		case MechPLAIN:
		default:
			return fmt.Errorf("mongotest: AddUser: unsupported mechanism %q (supported: %s, %s, %s)",
				m, MechSCRAMSHA1, MechSCRAMSHA256, MechPLAIN)
		}
		if err != nil {
			return fmt.Errorf("mongotest: AddUser: %s credentials: %w", m, err)
		}
		if client != nil {
			creds, err := client.GetStoredCredentialsWithError(kf)
			if err != nil {
				return fmt.Errorf("mongotest: AddUser: %s credentials: %w", m, err)
			}
			u.scram[m] = creds
		}
		u.mechs = append(u.mechs, m)
	}
	r := s.users
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[userKey]*user{}
	}
	r.m[userKey{db, name}] = u
	return nil
}

// AddX509User registers a MONGODB-X509 user: a client whose verified TLS
// certificate has this subject, in RFC 2253 form as
// x509.Certificate.Subject.String() returns it (such as
// "CN=client,OU=Drivers,O=MongoDB"). It authenticates on "$external". The
// server must run WithTLS with a tls.Config that verifies client
// certificates.
func (s *Server) AddX509User(subject string) {
	r := s.users
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.x509 == nil {
		r.x509 = map[string]bool{}
	}
	r.x509[subject] = true
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

// hasX509 reports whether subject is a MONGODB-X509 user.
func (r *users) hasX509(subject string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.x509[subject]
}

// mongoPasswordDigest is the password SCRAM-SHA-1 uses in MongoDB:
// hex(md5(user + ":mongo:" + password)).
func mongoPasswordDigest(name, password string) string {
	sum := md5.Sum([]byte(name + ":mongo:" + password))
	return hex.EncodeToString(sum[:])
}

// salt returns a new random SCRAM salt.
func salt() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return string(b)
}
