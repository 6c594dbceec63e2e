package bench

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the proxy benchmark reads of other processes, from Linux's /proc:
// CPU time (utime + stime of /proc/PID/stat, in clock ticks), resident
// memory (VmRSS of /proc/PID/status) and the children of a process. On
// other systems every figure is missing, and the report says n/a.

// clockTicks returns the clock ticks per second of /proc/PID/stat's times,
// as `getconf CLK_TCK` gives them (100 if it cannot be asked).
var clockTicks = sync.OnceValue(func() int64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && n > 0 {
			return n
		}
	}
	return 100
})

// procStat returns the parent and the CPU time (user + system) of process
// pid so far.
func procStat(pid int) (ppid int, cpu time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14 and stime 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ppid, time.Duration(utime+stime) * time.Second / time.Duration(clockTicks()), nil
}

// procTree returns pid and its descendants, as they are now.
func procTree(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, err := procStat(p); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

// treeCPU returns the CPU time the processes of pids have used so far;
// those that have ended count for nothing.
func treeCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	var ok bool
	var first error
	for _, p := range pids {
		_, cpu, err := procStat(p)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		ok = true
		sum += cpu
	}
	if !ok {
		return 0, first
	}
	return sum, nil
}

// procRSS returns the resident set of process pid, in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseInt(f[0], 10, 64)
				return n << 10, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// listenerPID returns the process, among pids, that holds the socket
// listening on 127.0.0.1:port: the one that serves a peer started through
// a shell or `go run`. It returns 0 if none is found.
func listenerPID(pids []int, port int) int {
	inode := listeningInode(port)
	if inode == "" {
		return 0
	}
	want := "socket:[" + inode + "]"
	for _, p := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", p)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
				return p
			}
		}
	}
	return 0
}

// listeningInode returns the inode of the TCP socket listening on port
// (IPv4 or IPv6), from /proc/net/tcp and tcp6, or "" if there is none.
func listeningInode(port int) string {
	hexPort := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) >= 10 && strings.HasSuffix(f[1], hexPort) && f[3] == "0A" { // 0A: LISTEN
				return f[9]
			}
		}
	}
	return ""
}

// countEstablished counts the lines of a /proc/net/tcp table (a header,
// then a socket per line: "sl local_address rem_address st ...", addresses
// as HEXIP:HEXPORT, st 01 for established) whose local port is port.
func countEstablished(table []byte, port int) (int, error) {
	lines := strings.Split(strings.TrimSpace(string(table)), "\n")
	if len(lines) == 0 || !strings.Contains(lines[0], "local_address") {
		return 0, errors.New("not a socket table: no header")
	}
	n := 0
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 4 {
			return 0, fmt.Errorf("a line of %d fields: %q", len(f), line)
		}
		i := strings.LastIndexByte(f[1], ':')
		if i < 0 {
			return 0, fmt.Errorf("a local address without a port: %q", f[1])
		}
		p, err := strconv.ParseUint(f[1][i+1:], 16, 16)
		if err != nil {
			return 0, fmt.Errorf("a local port that is not hexadecimal: %q", f[1])
		}
		if int(p) == port && f[3] == "01" {
			n++
		}
	}
	return n, nil
}
