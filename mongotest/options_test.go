package mongotest_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
)

// TestOptionErrors checks that Start refuses invalid options, and AddUser
// invalid users, with errors that name the problem.
func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  mongotest.Option
		want string
	}{
		{"nil TLS config", mongotest.WithTLS(nil), "WithTLS: nil *tls.Config"},
		{"TLS without a cert", mongotest.WithTLS(&tls.Config{}), "WithTLS: the tls.Config has no server certificate"},
		{"unknown compressor", mongotest.WithCompressors("lz4"), `WithCompressors: unknown compressor "lz4"`},
		{"noop compressor", mongotest.WithCompressors("noop"), `WithCompressors: unknown compressor "noop"`},
		{"min above max", mongotest.WithWireVersions(9, 8), "WithWireVersions(9, 8): need 0 <= min <= max"},
		{"negative min", mongotest.WithWireVersions(-1, 8), "WithWireVersions(-1, 8): need 0 <= min <= max"},
		{"not a version", mongotest.WithVersion("latest"), `WithVersion: version "latest" is not a MongoDB release such as 8.0`},
		{"a patch release", mongotest.WithVersion("8.0.1"), `WithVersion: version "8.0.1" is not a MongoDB release`},
		{"too old", mongotest.WithVersion("4.2"), "WithVersion: MongoDB 4.2 is not a release mongotest presents itself as"},
		{"no such minor", mongotest.WithVersion("7.4"), "WithVersion: MongoDB 7.4 is not a release"},
		{"no such major", mongotest.WithVersion("9.0"), "WithVersion: MongoDB 9.0 is not a release"},
	} {
		srv, err := mongotest.Start(tc.opt)
		if err == nil {
			srv.Close()
			t.Errorf("%s: Start succeeded", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	srv := start(t)
	for _, tc := range []struct {
		db, user string
		mechs    []string
		want     string
	}{
		{"", "u", nil, "AddUser: empty database or user name"},
		{"admin", "", nil, "AddUser: empty database or user name"},
		{"admin", "u", []string{"MONGODB-CR"}, `AddUser: unsupported mechanism "MONGODB-CR"`},
	} {
		if err := srv.AddUser(tc.db, tc.user, "p", tc.mechs...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddUser(%q, %q, %v): %v; want an error saying %q", tc.db, tc.user, tc.mechs, err, tc.want)
		}
	}
}
