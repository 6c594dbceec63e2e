package pool_test

// The runner of the CMAP specification's unit tests, the files of style
// "unit" in testdata/spec/cmap-format (see the README.md there): every such
// file runs, and a file dropped into the folder needs no code change. The
// runner itself is internal/cmapspec.
//
// The files of style "integration" need a server with failpoints: they run
// with the real connector against a mongotest server, in the root package's
// TestCMAPSpecIntegration (spec_cmap_test.go).
//
// Unit files run in a testing/synctest bubble with the fake connector: the
// pool, its goroutines and the test's threads all live in it, so that "wait"
// operations, waitForEvent timeouts and the pool's own timers
// (waitQueueTimeoutMS, maxIdleTimeMS, the maintenance interval) use the
// bubble's fake clock and the tests are fast and deterministic.

import (
	"testing"

	"github.com/mongopool/mongopool/internal/cmapspec"
	"github.com/mongopool/mongopool/pool"
)

const (
	cmapSpecDir = "../testdata/spec/cmap-format"
	// cmapSpecAddress is the address of the pools under test.
	cmapSpecAddress = "127.0.0.1:27017"
)

func TestCMAPSpec(t *testing.T) {
	files, err := cmapspec.Files(cmapSpecDir)
	if err != nil {
		t.Fatal(err)
	}
	runner := &cmapspec.Runner{
		Synctest: true,
		NewPool: func(_ *testing.T, _ *cmapspec.File, opts []pool.Option) (*pool.Pool, error) {
			return pool.New(cmapSpecAddress, &fakeConnector{}, opts...)
		},
	}
	units := 0
	for _, path := range files {
		f, err := cmapspec.ReadFile(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if f.Style != cmapspec.StyleUnit {
			continue // an integration file: see the comment at the top
		}
		units++
		t.Run(f.Name, func(t *testing.T) { runner.Run(t, f) })
	}
	if units == 0 {
		t.Errorf("no unit test files in %s", cmapSpecDir)
	}
}
