package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The processes of the proxy benchmark: the test server, the proxies, the
// load workers. Each runs in a process group of its own, which stop
// signals whole; what it prints is kept, its last lines, for the report.

// outputLines is how many of its last lines of output a process keeps.
const outputLines = 20

// proc is a process the benchmark started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
	err  error         // its exit, once done is closed

	mu    sync.Mutex
	lines []string // the last outputLines lines
	count int      // lines in all
	first chan string
}

// startProc starts cmd, its standard output and error kept line by line.
// The first line of its standard output goes to the channel firstLine
// returns, as well.
func startProc(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), first: make(chan string, 1)}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.keep(stdout, true) }()
	go func() { defer wg.Done(); p.keep(stderr, false) }()
	go func() {
		// Wait closes the pipes once the process is gone, or once the
		// readers are done: they are, first.
		wg.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// keep reads r to its end, line by line.
func (p *proc) keep(r io.Reader, stdout bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	first := stdout
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			p.first <- line
		}
		p.mu.Lock()
		p.count++
		p.lines = append(p.lines, line)
		if len(p.lines) > outputLines {
			p.lines = p.lines[1:]
		}
		p.mu.Unlock()
	}
	// A reader that stopped on a line longer than the buffer drains the
	// rest, so that the process never blocks on a full pipe.
	io.Copy(io.Discard, r)
	if first {
		close(p.first)
	}
}

// output returns the process's last lines of output, and how many it
// printed in all.
func (p *proc) output() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...), p.count
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited returns whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop asks the process's group to stop (SIGTERM), kills it if it has not
// ended within grace, and says how it ended: "exit 0", "exit status 1",
// "signal: terminated", or that it had to be killed.
func (p *proc) stop(grace time.Duration) string {
	if done, err := p.exited(); done {
		return "had ended before: " + exitString(err)
	}
	signalGroup(p.cmd, syscall.SIGTERM)
	select {
	case <-p.done:
		return exitString(p.err)
	case <-time.After(grace):
	}
	signalGroup(p.cmd, syscall.SIGKILL)
	<-p.done
	return fmt.Sprintf("did not stop within %s of SIGTERM: killed", grace)
}

func exitString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// freeAddr returns 127.0.0.1:port for a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func portOf(addr string) int {
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

// waitReady waits until addr accepts connections and answers a hello, or
// p ends, or timeout passes.
func waitReady(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s ended before it answered on %s (%s)%s", p.name, addr, exitString(err), p.lastLines())
		}
		c, err := dialWire(addr, time.Second)
		if err == nil {
			c.close()
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer a hello on %s within %s: %v%s", p.name, addr, timeout, last, p.lastLines())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lastLines returns the process's last lines of output, for an error.
func (p *proc) lastLines() string {
	lines, _ := p.output()
	if len(lines) == 0 {
		return ""
	}
	return "; its last output:\n\t" + strings.Join(lines, "\n\t")
}
