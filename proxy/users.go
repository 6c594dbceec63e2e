package proxy

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/xdg-go/scram"

	"github.com/mongopool/mongopool"
)

// The authentication mechanisms a proxy offers its clients.
const (
	MechSCRAMSHA256 = "SCRAM-SHA-256"
	MechSCRAMSHA1   = "SCRAM-SHA-1"
	MechX509        = "MONGODB-X509"
)

// User is a client the proxy authenticates, as mongod keeps a user: by
// name in an authentication database, with the stored keys of SCRAM
// (never a password), or as the subject of a client certificate.
type User struct {
	// Name is the user name; for X.509, the certificate's subject in
	// RFC 2253 form ("CN=app,OU=billing,O=Example").
	Name string `json:"user"`
	// DB is the authentication database: "admin" when empty;
	// "$external" for X.509.
	DB string `json:"db,omitempty"`
	// Upstream names the upstream credential whose pools serve the user
	// (see Config.Upstreams); empty: the proxy's client.
	Upstream string `json:"upstream,omitempty"`
	// SCRAMSHA256 and SCRAMSHA1 are the user's SCRAM stored keys, one per
	// mechanism the user may use.
	SCRAMSHA256 *SCRAMKeys `json:"scramSHA256,omitempty"`
	SCRAMSHA1   *SCRAMKeys `json:"scramSHA1,omitempty"`
	// X509 makes the user one of MONGODB-X509: Name is the subject of
	// the client certificates it authenticates with, DB "$external".
	X509 bool `json:"x509,omitempty"`
	// Admin lets the user pause, resume and reconnect the proxy's
	// upstreams (proxyPause, proxyResume, proxyReconnect).
	Admin bool `json:"admin,omitempty"`
}

// SCRAMKeys are what a server stores of a SCRAM password: the salt and
// iteration count of its derivation, StoredKey (which checks a client's
// proof) and ServerKey (which proves the server to the client).
type SCRAMKeys struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// mechanisms returns the mechanisms the user may authenticate with.
func (u *User) mechanisms() []string {
	var m []string
	if u.SCRAMSHA256 != nil {
		m = append(m, MechSCRAMSHA256)
	}
	if u.SCRAMSHA1 != nil {
		m = append(m, MechSCRAMSHA1)
	}
	if u.X509 {
		m = append(m, MechX509)
	}
	return m
}

// Users is a set of users, made by ParseUsers.
type Users struct {
	byKey map[userKey]*User
	// ups are the clients of the upstream credentials, as the proxy had
	// them when it was given the users (SetUsers, SetUpstreams): a user
	// found here is served by the client its upstream names here, whatever
	// a reload stored since.
	ups map[string]*mongopool.Client
}

// bound returns us with the upstream clients ups.
func (us *Users) bound(ups map[string]*mongopool.Client) *Users {
	return &Users{byKey: us.byKey, ups: ups}
}

type userKey struct{ db, name string }

// The least iteration counts a users file may give: those mongod uses by
// default are 10,000 (SHA-1) and 15,000 (SHA-256); fewer makes stolen keys
// cheap to attack.
const (
	minSHA1Iterations   = 4096
	minSHA256Iterations = 4096
)

// usersFile is the JSON form of a users file.
type usersFile struct {
	Users []User `json:"users"`
}

// ParseUsers reads a users file, {"users": [User...]} in JSON, and checks
// it: every user has a name, a mechanism, well-formed keys, and is listed
// once.
func ParseUsers(data []byte) (*Users, error) {
	var f usersFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("proxy: the users file: %w", err)
	}
	return NewUsers(f.Users)
}

// NewUsers makes a set of users, checked as ParseUsers checks a file's.
func NewUsers(list []User) (*Users, error) {
	us := &Users{byKey: map[userKey]*User{}}
	for i := range list {
		u := list[i]
		where := fmt.Sprintf("user %d (%q)", i+1, u.Name)
		if u.Name == "" {
			return nil, fmt.Errorf("proxy: the users file: user %d has no name", i+1)
		}
		if u.X509 {
			if u.DB == "" {
				u.DB = "$external"
			}
			if u.DB != "$external" {
				return nil, fmt.Errorf("proxy: the users file: %s: an X.509 user belongs to the $external database, not %q", where, u.DB)
			}
		} else if u.DB == "" {
			u.DB = "admin"
		}
		if len(u.mechanisms()) == 0 {
			return nil, fmt.Errorf("proxy: the users file: %s has no mechanism: give scramSHA256 (derive it with the users subcommand), scramSHA1 or x509", where)
		}
		for _, k := range []struct {
			name string
			keys *SCRAMKeys
			size int
			min  int
		}{{"scramSHA256", u.SCRAMSHA256, 32, minSHA256Iterations}, {"scramSHA1", u.SCRAMSHA1, 20, minSHA1Iterations}} {
			if k.keys == nil {
				continue
			}
			switch {
			case len(k.keys.Salt) < 8:
				return nil, fmt.Errorf("proxy: the users file: %s: %s.salt has %d bytes, want at least 8", where, k.name, len(k.keys.Salt))
			case k.keys.Iterations < k.min:
				return nil, fmt.Errorf("proxy: the users file: %s: %s.iterations %d is below %d", where, k.name, k.keys.Iterations, k.min)
			case len(k.keys.StoredKey) != k.size || len(k.keys.ServerKey) != k.size:
				return nil, fmt.Errorf("proxy: the users file: %s: %s's storedKey and serverKey must have %d bytes", where, k.name, k.size)
			}
		}
		key := userKey{u.DB, u.Name}
		if _, dup := us.byKey[key]; dup {
			return nil, fmt.Errorf("proxy: the users file: %s is listed twice in %q", where, u.DB)
		}
		us.byKey[key] = &u
	}
	return us, nil
}

// Len returns the number of users.
func (us *Users) Len() int { return len(us.byKey) }

func (us *Users) lookup(db, name string) *User {
	if us == nil {
		return nil
	}
	return us.byKey[userKey{db, name}]
}

// upstreams returns the upstream names the users refer to.
func (us *Users) upstreams() []string {
	seen := map[string]bool{}
	var names []string
	for _, u := range us.byKey {
		if !seen[u.Upstream] {
			seen[u.Upstream] = true
			names = append(names, u.Upstream)
		}
	}
	return names
}

// DeriveUser derives the entry of a SCRAM user from its password, with a
// new random salt and mongod's iteration counts, for the mechanisms given
// (SCRAM-SHA-256 when none): what a users file holds instead of the
// password. SCRAM-SHA-1 derives from MongoDB's password digest, as mongod
// does.
func DeriveUser(name, db, password, upstream string, mechanisms ...string) (User, error) {
	if name == "" || password == "" {
		return User{}, errors.New("proxy: a user needs a name and a password")
	}
	if db == "" {
		db = "admin"
	}
	if len(mechanisms) == 0 {
		mechanisms = []string{MechSCRAMSHA256}
	}
	u := User{Name: name, DB: db, Upstream: upstream}
	for _, mech := range mechanisms {
		salt := make([]byte, 16)
		rand.Read(salt)
		var (
			client *scram.Client
			err    error
			iters  int
		)
		switch mech {
		case MechSCRAMSHA256:
			iters = 15000
			client, err = scram.SHA256.NewClient("", password, "")
		case MechSCRAMSHA1:
			iters = 10000
			client, err = scram.SHA1.NewClientUnprepped(name, mongoPasswordDigest(name, password), "")
		default:
			return User{}, fmt.Errorf("proxy: unknown mechanism %q: use SCRAM-SHA-256 or SCRAM-SHA-1", mech)
		}
		if err != nil {
			return User{}, fmt.Errorf("proxy: deriving the %s keys: %w", mech, err)
		}
		creds, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iters})
		if err != nil {
			return User{}, fmt.Errorf("proxy: deriving the %s keys: %w", mech, err)
		}
		keys := &SCRAMKeys{Salt: salt, Iterations: iters, StoredKey: creds.StoredKey, ServerKey: creds.ServerKey}
		if mech == MechSCRAMSHA256 {
			u.SCRAMSHA256 = keys
		} else {
			u.SCRAMSHA1 = keys
		}
	}
	return u, nil
}

// mongoPasswordDigest is MongoDB's digest of a password, which SCRAM-SHA-1
// uses as the password: hex(md5(user + ":mongo:" + password)).
func mongoPasswordDigest(user, password string) string {
	sum := md5.Sum([]byte(user + ":mongo:" + password))
	return hex.EncodeToString(sum[:])
}
