package mongotest_test

import (
	"crypto/tls"
	"testing"

	"github.com/mongopool/mongopool/mongotest"
)

// TestOptionErrors checks that Start refuses invalid options, and AddUser
// invalid users.
func TestOptionErrors(t *testing.T) {
	for name, opt := range map[string]mongotest.Option{
		"nil TLS config":     mongotest.WithTLS(nil),
		"TLS without a cert": mongotest.WithTLS(&tls.Config{}),
		"unknown compressor": mongotest.WithCompressors("lz4"),
		"noop compressor":    mongotest.WithCompressors("noop"),
		"min above max":      mongotest.WithWireVersions(9, 8),
		"negative min":       mongotest.WithWireVersions(-1, 8),
	} {
		if srv, err := mongotest.Start(opt); err == nil {
			srv.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}
	srv := start(t)
	for _, tc := range []struct {
		db, user string
		mechs    []string
	}{
		{"", "u", nil},
		{"admin", "", nil},
		{"admin", "u", []string{"MONGODB-CR"}},
	} {
		if err := srv.AddUser(tc.db, tc.user, "p", tc.mechs...); err == nil {
			t.Errorf("AddUser(%q, %q, %v) succeeded", tc.db, tc.user, tc.mechs)
		}
	}
}
