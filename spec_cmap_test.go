package mongopool_test

// The runner of the CMAP specification's integration tests, the files of
// style "integration" in testdata/spec/cmap-format (see the README.md there):
// every such file runs, and a file dropped into the folder needs no code
// change. The unit files run in the pool package (pool/spec_test.go), with
// the same runner, internal/cmapspec.
//
// Each file gets its own mongotest server. As the README's integration runner
// says: the file's failPoint is sent as a configureFailPoint command on the
// admin database before the test's operations and turned off after them. The
// pool under test is, as in a driver, the pool of a client's topology (a
// Single one, of the server): its establishment errors go through the SDAM
// rules, which may clear it. Its connections' handshake carries the file's
// appName, which the failpoint uses to pick them; so does the monitor's,
// which checks the server once (by polling, with a heartbeat longer than any
// test) before the failpoint is set. The failpoint is set and cleared
// through a separate client, mongopool.Open, with another appName, so that
// the failpoint never touches it.
//
// These tests run in real time: the failpoints block handshakes for real
// (blockTimeMS), and the files' waits and timeouts are real.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mongopool/mongopool"
	"github.com/mongopool/mongopool/internal/cmapspec"
	"github.com/mongopool/mongopool/internal/leakcheck"
	"github.com/mongopool/mongopool/mongotest"
	"github.com/mongopool/mongopool/pool"
	"github.com/mongopool/mongopool/topology"
)

const (
	cmapSpecDir = "testdata/spec/cmap-format"
	// cmapAdminAppName is the appName of the client that configures the
	// failpoints: none of the files' failpoints matches it.
	cmapAdminAppName = "cmapSpecRunnerAdmin"
	// cmapCommandTimeout bounds each command of the admin client and the
	// server's start and stop.
	cmapCommandTimeout = 10 * time.Second
)

func TestCMAPSpecIntegration(t *testing.T) {
	files, err := cmapspec.Files(cmapSpecDir)
	if err != nil {
		t.Fatal(err)
	}
	runner := &cmapspec.Runner{
		// The files' operations take about a second; these bound a test
		// that goes wrong without making it wait long.
		WaitForEventTimeout: 5 * time.Second,
		ThreadTimeout:       10 * time.Second,
	}
	n := 0
	for _, path := range files {
		f, err := cmapspec.ReadFile(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if f.Style != cmapspec.StyleIntegration {
			continue // a unit file: pool/spec_test.go runs it
		}
		n++
		t.Run(f.Name, func(t *testing.T) {
			leakcheck.Check(t)
			runCMAPIntegrationFile(t, runner, f)
		})
	}
	if n == 0 {
		t.Errorf("no integration test files in %s", cmapSpecDir)
	}
}

// runCMAPIntegrationFile runs one integration file against a server of its
// own, closed at the end.
func runCMAPIntegrationFile(t *testing.T, runner *cmapspec.Runner, f *cmapspec.File) {
	srv, err := mongotest.Start()
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups, not defers: the failpoint's is registered later, and runs
	// first, with the admin client still open.
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing the server: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), cmapCommandTimeout)
	defer cancel()
	admin, err := mongopool.Open(ctx, srv.URI()+"?maxPoolSize=1&appName="+cmapAdminAppName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })

	version, err := cmapServerVersion(admin)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := f.RunsOn(version)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		// The runOn of the files asks for at least 4.9 and the test server
		// reports 7.0: this only happens with a new file meant for other
		// servers.
		t.Skipf("runOn %+v: not for a server of version %s", f.RunOn, version)
	}

	r := *runner
	r.NewPool = func(t *testing.T, f *cmapspec.File, opts []pool.Option) (*pool.Pool, error) {
		return cmapTopologyPool(t, srv, admin, f, opts)
	}
	r.Run(t, f)
}

// cmapTopologyPool returns the pool of the server in the topology of a
// client made for the test of f, with the pool options opts, once the
// monitor's first check found the server; and sets the file's failpoint
// then, turned off when the test ends.
func cmapTopologyPool(t *testing.T, srv *mongotest.Server, admin *mongopool.Pool, f *cmapspec.File, opts []pool.Option) (*pool.Pool, error) {
	uri := srv.URI() + "?directConnection=true&serverMonitoringMode=poll&heartbeatFrequencyMS=3600000&appName=" + f.AppName
	c, err := mongopool.NewClient(uri, mongopool.WithPoolOptions(opts...))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), cmapCommandTimeout)
	defer cancel()
	known := func(d topology.Description, dst []topology.ServerDescription) ([]topology.ServerDescription, error) {
		return d.SelectCandidates(topology.Criteria{ReadPref: topology.ReadPref{Mode: topology.ModeNearest}}, dst)
	}
	s, err := c.Topology().SelectServer(ctx, known)
	if err != nil {
		return nil, fmt.Errorf("the monitor's first check: %w", err)
	}
	s.Done()
	if f.FailPoint != nil {
		var cmd bson.D
		// Relaxed extended JSON keeps the key order and makes small
		// integers int32, as a driver would send them.
		if err := bson.UnmarshalExtJSON(f.FailPoint, false, &cmd); err != nil {
			return nil, fmt.Errorf("failPoint: %w", err)
		}
		if _, err := cmapAdminCommand(admin, cmd); err != nil {
			return nil, fmt.Errorf("setting the failpoint %s: %w", f.FailPoint, err)
		}
		name := cmd[0].Value
		t.Cleanup(func() {
			off := bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}}
			if _, err := cmapAdminCommand(admin, off); err != nil {
				t.Errorf("turning the failpoint %v off: %v", name, err)
			}
		})
	}
	return s.Pool(), nil
}

// cmapAdminCommand runs cmd on the admin database, bounded.
func cmapAdminCommand(admin *mongopool.Pool, cmd bson.D) (bson.Raw, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmapCommandTimeout)
	defer cancel()
	return admin.RunCommand(ctx, "admin", cmd)
}

// cmapServerVersion returns the version buildInfo reports.
func cmapServerVersion(admin *mongopool.Pool) (string, error) {
	reply, err := cmapAdminCommand(admin, bson.D{{Key: "buildInfo", Value: 1}})
	if err != nil {
		return "", fmt.Errorf("buildInfo: %w", err)
	}
	v, ok := reply.Lookup("version").StringValueOK()
	if !ok {
		return "", fmt.Errorf("buildInfo: no version in %v", reply)
	}
	return v, nil
}
