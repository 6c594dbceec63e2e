package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mongopool/mongopool/internal/nodejs"
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
	node := nodejs.OrSkip(t, "nodetest")
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
	nodejs.SetProcessGroup(cmd)
	cmd.Cancel = func() error { return nodejs.KillProcessGroup(cmd) }
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
	for nodejs.ProcessGroupAlive(cmd) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if nodejs.ProcessGroupAlive(cmd) {
		t.Errorf("processes of the Node.js tests are left after %v; killed", testTimeout)
		nodejs.KillProcessGroup(cmd)
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
