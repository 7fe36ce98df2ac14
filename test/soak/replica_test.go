//go:build soak

package soak

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// acquired is what a CCM logs when it becomes the leader.
const acquired = "successfully acquired lease"

// lifetime is one run of a replica's process.
type lifetime struct {
	proc      *harness.Process
	start     time.Time
	leadSince time.Time // when the soak saw it log the acquired Lease; zero while it does not lead
	decisions string    // its decision log file
	stopping  bool      // the soak stops or kills it: its exit is no crash
	crashed   bool      // reported already
	cpu       time.Duration
	logTail   *tailer
	declTail  *tailer
}

// replica is one CCM replica: its command line, its endpoint and its runs.
type replica struct {
	Name    string
	args    []string
	env     []string
	bin     string
	ep      *endpoint
	webhook bool

	mu    sync.Mutex
	lives []*lifetime
	peak  resources
}

// resources are a process's peak resident memory and its CPU time (CPU is unused in peak).
type resources struct {
	RSSKiB int64
	CPU    time.Duration
}

// start runs a new lifetime of the replica.
func (r *replica) start(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	n := len(r.lives) + 1
	r.mu.Unlock()
	decisions := filepath.Join(harness.LogDir(t), fmt.Sprintf("%s-%d.decisions.jsonl", r.Name, n))
	args := append(append([]string(nil), r.args...), "--policy-decision-log-file="+decisions,
		"--secure-port="+strconv.Itoa(harness.FreePort(t)))
	env := append(append([]string(nil), r.env...), "HCLOUD_ENDPOINT="+r.ep.URL,
		"HCLOUD_METRICS_ADDRESS=127.0.0.1:"+strconv.Itoa(harness.FreePort(t)))
	p := harness.StartProcess(t, fmt.Sprintf("%s-%d", r.Name, n), r.bin, args, env)
	l := &lifetime{proc: p, start: time.Now(), decisions: decisions,
		logTail: &tailer{path: p.LogPath}, declTail: &tailer{path: decisions}}
	r.mu.Lock()
	r.lives = append(r.lives, l)
	r.mu.Unlock()
}

// started reports whether the replica has run at all.
func (r *replica) started() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lives) > 0
}

// current is the replica's latest lifetime; the replica has started.
func (r *replica) current() *lifetime {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lives[len(r.lives)-1]
}

// alive reports whether the current lifetime's process runs.
func (r *replica) alive() bool {
	exited, _ := r.current().proc.Exited()
	return !exited
}

// leads reports whether the current lifetime runs and has logged the acquired Lease.
func (r *replica) leads() bool {
	l := r.current()
	exited, _ := l.proc.Exited()
	r.mu.Lock()
	defer r.mu.Unlock()
	return !exited && !l.leadSince.IsZero()
}

// stop ends the current lifetime with SIGTERM (graceful) or SIGKILL.
func (r *replica) stop(kill bool) {
	l := r.current()
	r.mu.Lock()
	l.stopping = true
	r.mu.Unlock()
	if kill {
		l.proc.Kill()
	} else {
		l.proc.Stop()
	}
}

// lifetimeAt returns the lifetime that ran at time at (the latest that started before it).
func (r *replica) lifetimeAt(at time.Time) *lifetime {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.lives) - 1; i >= 0; i-- {
		if !r.lives[i].start.After(at) {
			return r.lives[i]
		}
	}
	return nil
}

// scan reads what the current lifetime logged since the last scan: the acquired Lease, panics.
// It returns the panic lines found.
func (r *replica) scan() []string {
	l := r.current()
	lines := l.logTail.next()
	var bad []string
	for _, line := range lines {
		lower := strings.ToLower(line)
		if strings.Contains(lower, acquired) {
			r.mu.Lock()
			if l.leadSince.IsZero() {
				l.leadSince = klogTime(line, time.Now())
			}
			r.mu.Unlock()
		}
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			bad = append(bad, line)
		}
	}
	return bad
}

// klogTime is the time in the header of a klog text line ("I1128 15:56:41.123456 ..."), in
// the local time zone and this year; seen when the line has none.
func klogTime(line string, seen time.Time) time.Time {
	if len(line) < 21 {
		return seen
	}
	t, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		return seen
	}
	return t.AddDate(seen.Year(), 0, 0)
}

// sample updates the peak RSS and CPU time from /proc.
func (r *replica) sample() {
	l := r.current()
	if exited, _ := l.proc.Exited(); exited {
		return
	}
	res, err := procResources(l.proc.Pid())
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.peak.RSSKiB = max(r.peak.RSSKiB, res.RSSKiB)
	l.cpu = res.CPU
}

// cpuTotal is the CPU time of every lifetime, as last sampled; r.mu is held.
func (r *replica) cpuTotal() time.Duration {
	var d time.Duration
	for _, l := range r.lives {
		d += l.cpu
	}
	return d
}

// procResources reads a process's peak resident set (VmHWM) and CPU time (utime+stime).
func procResources(pid int) (resources, error) {
	var res resources
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return res, fmt.Errorf("proc resources: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			res.RSSKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return res, fmt.Errorf("proc resources: %w", err)
	}
	// Fields after the command (which may hold spaces) start after the last ')'.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(rest) > 12 {
		utime, _ := strconv.ParseInt(rest[11], 10, 64)
		stime, _ := strconv.ParseInt(rest[12], 10, 64)
		res.CPU = time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
	}
	return res, nil
}

// tailer reads the lines appended to a file since its last call. It is safe for concurrent
// use; each line goes to one caller.
type tailer struct {
	path string

	mu      sync.Mutex
	offset  int64
	partial string
}

// next returns the complete lines appended since the last call (none if the file is missing).
func (tl *tailer) next() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	f, err := os.Open(tl.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(tl.offset, io.SeekStart); err != nil {
		return nil
	}
	var lines []string
	rd := bufio.NewReaderSize(f, 1<<20)
	for {
		chunk, err := rd.ReadString('\n')
		tl.offset += int64(len(chunk))
		if err != nil {
			tl.partial += chunk
			return lines
		}
		lines = append(lines, tl.partial+strings.TrimSuffix(chunk, "\n"))
		tl.partial = ""
	}
}
