// Package nodejs finds what the Node.js tests of the commands need: a
// recent enough node and the npm packages pinned in a package.json, and
// runs node with its children as one process group. For tests only.
package nodejs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// OrSkip returns the path of node, or skips the test (fails it when
// CI=true, where .ci/run installs them) without Node.js 20.19 or later or
// without the npm packages that packages/package.json pins (its
// devDependencies) installed in packages/node_modules at those versions.
func OrSkip(t testing.TB, packages string) string {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: .ci/run installs them)", msg)
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node not found: the Node.js tests need Node.js 20.19 or later")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		skip("node --version: %v", err)
	}
	if v := strings.TrimSpace(string(out)); !RecentEnough(v) {
		skip("node %s: the Node.js tests need 20.19 or later (the driver's engines)", v)
	}
	var pkg struct{ DevDependencies map[string]string }
	file := filepath.Join(packages, "package.json")
	data, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(pkg.DevDependencies) == 0 {
		t.Fatalf("%s pins no package", file)
	}
	for name, want := range pkg.DevDependencies {
		var installed struct{ Version string }
		data, err := os.ReadFile(filepath.Join(packages, "node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(data, &installed)
		}
		switch {
		case err != nil:
			skip("the npm package %s is not installed (%v): run npm ci --ignore-scripts in %s", name, err, packages)
		case installed.Version != want:
			skip("the npm package %s is at %s, not %s as pinned: run npm ci --ignore-scripts in %s", name, installed.Version, want, packages)
		}
	}
	return node
}

// RecentEnough reports whether the version "vMAJOR.MINOR.PATCH" is 20.19
// or later.
func RecentEnough(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 20 || major == 20 && minor >= 19)
}
