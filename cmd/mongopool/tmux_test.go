package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tmuxSession is a tmux server of the test's own, on a socket in a
// temporary directory, with one session; killed when the test ends.
type tmuxSession struct {
	t      *testing.T
	socket string
}

// tmuxWait bounds each wait for the screen to show something.
const tmuxWait = 30 * time.Second

func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", s.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen returns what the pane shows.
func (s *tmuxSession) screen() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-t", "view")
}

// history returns all the pane has shown, from the start.
func (s *tmuxSession) history() string {
	s.t.Helper()
	return s.tmux("capture-pane", "-p", "-S", "-", "-t", "view")
}

// waitFor polls the screen until cond holds, and returns it; there is no
// event to wait on in another process's terminal. It fails the test after
// tmuxWait.
func (s *tmuxSession) waitFor(what string, cond func(screen string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(tmuxWait)
	for {
		sc := s.screen()
		if cond(sc) {
			return sc
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen did not show %s within %v:\n%s", what, tmuxWait, sc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startTmux builds the command and runs it in a tmux session 120 columns
// wide, with args; it skips the test when tmux is missing, unless CI=true.
func startTmux(t *testing.T, args ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed: the live view cannot be tested")
		}
		t.Skip("tmux is not installed")
	}
	if testing.Short() {
		t.Skip("builds the command: not in -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mongopool")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	s := &tmuxSession{t: t, socket: filepath.Join(dir, "tmux.sock")}
	// A shell runs the command and then prints its exit status (tmux's own
	// record of it comes late, if at all); its trap keeps it alive through
	// the Ctrl-C, which the command gets as usual. The pane stays after
	// that, for its last screen.
	quoted := make([]string, 0, 1+len(args))
	for _, a := range append([]string{bin}, args...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	script := "trap true INT; " + strings.Join(quoted, " ") + `; echo "exit status $?"`
	s.tmux("new-session", "-d", "-s", "view", "-x", "120", "-y", "40", "sh", "-c", script, ";",
		"set-option", "-t", "view", "remain-on-exit", "on")
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	return s
}

// On a terminal, the live view is one block redrawn in place: its header is
// on the screen once, while its figures change from one look to the next;
// Ctrl-C ends the run with the summary and exit code 130.
func TestLiveViewInTmux(t *testing.T) {
	s := startTmux(t, "-scenario", "slow", "-delay", "5ms", "-duration", "60s", "-goroutines", "8", "-maxPoolSize", "4")
	const header = "checkouts/s"
	poolLine := func(screen string) string {
		for l := range strings.Lines(screen) {
			if strings.HasPrefix(l, "127.0.0.1:") {
				return l
			}
		}
		return ""
	}
	first := s.waitFor("the live view with a rate", func(sc string) bool {
		l := poolLine(sc)
		return l != "" && !strings.Contains(strings.Fields(l)[5], "-")
	})
	second := s.waitFor("the live view redrawn with other figures", func(sc string) bool {
		return poolLine(sc) != "" && poolLine(sc) != poolLine(first)
	})
	for _, sc := range []string{first, second} {
		if n := strings.Count(sc, header); n != 1 {
			t.Fatalf("the view's header is %d times on the screen, want once (redrawn in place):\n%s", n, sc)
		}
		if !strings.Contains(sc, "mongopool slow ") || !strings.Contains(sc, "] 4/4") {
			t.Errorf("the view lacks its title or the bar of 4 connections:\n%s", sc)
		}
	}

	s.tmux("send-keys", "-t", "view", "C-c")
	s.waitFor("the end of the command", func(sc string) bool { return strings.Contains(sc, "exit status ") })
	end := s.history()
	for _, want := range []string{"mongopool: interrupted", "\ndone ", "\nslow ", "checks       stats, events and the workload's own counts agree"} {
		if !strings.Contains(end, want) {
			t.Errorf("the last screen lacks %q:\n%s", want, end)
		}
	}
	if !strings.Contains(end, "\nexit status 130\n") {
		t.Errorf("want exit status 130 (interrupted):\n%s", end)
	}
}
