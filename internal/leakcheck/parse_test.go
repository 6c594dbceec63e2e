package leakcheck

import "testing"

// Dumps as runtime.Stack writes them: a goroutine that has not run yet shows
// runtime.goexit as its last frame, and the test framework's goroutines start
// in main.main and testing.tRunner.
func TestParseEntry(t *testing.T) {
	for _, tc := range []struct {
		dump     string
		id       uint64
		entry    string
		harmless bool
	}{
		{
			dump: `goroutine 14 [runnable]:
example.com/pkg.TestX.gowrap1()
	/src/pkg/x_test.go:7
runtime.goexit({})
	/usr/local/go/src/runtime/asm_amd64.s:1771 +0x1
created by example.com/pkg.TestX in goroutine 22
	/src/pkg/x_test.go:7 +0xda`,
			id: 14, entry: "example.com/pkg.TestX.gowrap1",
		},
		{
			dump: `goroutine 7 [chan receive, 2 minutes]:
example.com/pkg.(*Pool).wait(0xc000010000)
	/src/pkg/pool.go:12 +0x25
example.com/pkg.(*Pool).loop(...)
	/src/pkg/pool.go:20
created by example.com/pkg.New in goroutine 1
	/src/pkg/pool.go:30 +0x6a`,
			id: 7, entry: "example.com/pkg.(*Pool).loop",
		},
		{
			dump: `goroutine 22 [running]:
example.com/pkg.TestX(0xc0000a8488)
	/src/pkg/x_test.go:9 +0x105
testing.tRunner(0xc0000a8488, 0x654148)
	/usr/local/go/src/testing/testing.go:2036 +0x21d
created by testing.(*T).Run in goroutine 1
	/usr/local/go/src/testing/testing.go:2101 +0xb13`,
			id: 22, entry: "testing.tRunner", harmless: true,
		},
		{
			dump: `goroutine 1 [chan receive]:
testing.(*M).Run(0xc0000a01e0)
	/usr/local/go/src/testing/testing.go:2443 +0xf4c
main.main()
	_testmain.go:46 +0x165`,
			id: 1, entry: "main.main", harmless: true,
		},
	} {
		g, ok := parse(tc.dump)
		if !ok || g.id != tc.id || g.entry != tc.entry || harmless(g) != tc.harmless {
			t.Errorf("parse: %v, id %d, entry %q, harmless %v; want id %d, entry %q, harmless %v\n%s",
				ok, g.id, g.entry, harmless(g), tc.id, tc.entry, tc.harmless, tc.dump)
		}
	}
	if _, ok := parse("not a goroutine"); ok {
		t.Error("parse accepted a text without a goroutine header")
	}
}
