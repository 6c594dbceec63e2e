package mongopool_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRootDependencies checks that the package users import does not
// compile mongotest's JavaScript engine (goja): only the tests and tools
// that import mongotest do.
func TestRootDependencies(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/mongopool/mongopool").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/dop251/") || pkg == "github.com/mongopool/mongopool/mongotest" {
			t.Errorf("the root package depends on %s", pkg)
		}
	}
}
