package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nodeTimeout bounds the Node.js tests: seconds when they pass, and each of
// their own waits is bounded well below it.
const nodeTimeout = 5 * time.Minute

// TestNode runs the Node.js tests of nodetest/ (node --test) against the
// command built by TestMain: the official Node.js driver and mongosh, as
// pinned in nodetest/package-lock.json. Without Node.js 20.19 or later, or
// without the npm packages (npm ci --ignore-scripts in nodetest/), it is
// skipped, unless CI=true: CI installs them, and their absence there is a
// failure.
func TestNode(t *testing.T) {
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
	if v := strings.TrimSpace(string(out)); !nodeRecentEnough(v) {
		skip("node %s: the Node.js tests need 20.19 or later (the driver's engines)", v)
	}
	var pkg struct{ DevDependencies map[string]string }
	data, err := os.ReadFile(filepath.Join("nodetest", "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil {
		t.Fatalf("nodetest/package.json: %v", err)
	}
	for name, want := range pkg.DevDependencies {
		var installed struct{ Version string }
		data, err := os.ReadFile(filepath.Join("nodetest", "node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(data, &installed)
		}
		switch {
		case err != nil:
			skip("the npm package %s is not installed (%v): run npm ci --ignore-scripts in cmd/mongotest/nodetest", name, err)
		case installed.Version != want:
			skip("the npm package %s is at %s, not %s as pinned: run npm ci --ignore-scripts in cmd/mongotest/nodetest", name, installed.Version, want)
		}
	}
	files, err := filepath.Glob(filepath.Join("nodetest", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no nodetest/*.test.mjs (%v)", err)
	}
	for i, f := range files {
		files[i] = filepath.Base(f)
	}

	ctx, cancel := context.WithTimeout(t.Context(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.Dir = "nodetest"
	cmd.Env = append(os.Environ(),
		"MONGOTEST_BIN="+binary,
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"), // as launch says
		"NO_COLOR=1",
	)
	// node and everything it starts are one process group: a timeout kills
	// them all, and what is left at the end is seen.
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }
	cmd.WaitDelay = 10 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	err = cmd.Run()
	t.Logf("node --test %s:\n%s", strings.Join(files, " "), output.String())
	if ctx.Err() != nil {
		t.Errorf("the Node.js tests took longer than %v", nodeTimeout)
	}
	if err != nil {
		t.Errorf("node --test: %v", err)
	}

	// The tests stop the commands they start, and a command started with
	// -exit-on-eof stops by itself once node is gone: none is left.
	deadline := time.Now().Add(testTimeout)
	for processGroupAlive(cmd) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if processGroupAlive(cmd) {
		t.Errorf("processes of the Node.js tests are left after %v; killed", testTimeout)
		killProcessGroup(cmd)
	}

	// An honest count: tests ran, and passed.
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^ℹ (tests|pass|fail|skipped) (\d+)$`).FindAllStringSubmatch(output.String(), -1) {
		counts[m[1]], _ = strconv.Atoi(m[2])
	}
	if counts["pass"] == 0 || counts["fail"] != 0 {
		t.Errorf("node --test: %d tests, %d passed, %d failed", counts["tests"], counts["pass"], counts["fail"])
	}
	t.Logf("Node.js: %d tests, %d passed, %d skipped", counts["tests"], counts["pass"], counts["skipped"])
}

// nodeRecentEnough reports whether the version "vMAJOR.MINOR.PATCH" is 20.19
// or later.
func nodeRecentEnough(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 20 || major == 20 && minor >= 19)
}
