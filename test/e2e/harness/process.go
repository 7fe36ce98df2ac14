package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a child process started by StartProcess. Its stdout and stderr go to one log file
// (LogPath) in the test's log directory.
//
// # Notes
//
//   - A Process is stopped when the test ends (t.Cleanup), and if the test failed the tail of
//     its log is written to the test log; the whole log stays in the log directory.
//   - Stop and Kill may be called more than once and from several goroutines.
type Process struct {
	// Name identifies the process in messages and names its log file.
	Name string
	// LogPath is the file that receives the process's stdout and stderr.
	LogPath string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error // set before done is closed
}

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 10 * time.Second

// logTailLines is how many lines of each log are written to the test log when a test fails.
const logTailLines = 60

// StartProcess starts bin with args and the environment env ("KEY=value" entries) plus a few
// variables inherited from the test process (PATH, HOME, USER, TMPDIR, LANG, TZ, GOCOVERDIR):
// nothing else leaks in, so an HCLOUD_* or KUBECONFIG variable in a developer's shell cannot
// change what a test runs against. It fails the test if the process cannot be started. The
// process is stopped (Stop) when the test ends.
func StartProcess(t T, name, bin string, args, env []string) *Process {
	t.Helper()
	dir := LogDir(t)
	logPath := uniquePath(filepath.Join(dir, sanitize(name)+".log"))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("start %s: create log file: %v", name, err)
	}
	fmt.Fprintf(logFile, "# %s %s\n", bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Env = append(inheritedEnv(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- last %d lines of %s (%s) ---\n%s", logTailLines, p.Name, p.LogPath, p.Tail(logTailLines))
		}
	})
	return p
}

// inheritedVars are the variables StartProcess passes on from the test process.
var inheritedVars = []string{"PATH", "HOME", "USER", "TMPDIR", "LANG", "TZ", "GOCOVERDIR"}

func inheritedEnv() []string {
	var env []string
	for _, k := range inheritedVars {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and if so its wait error (nil for exit 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM and waits for the process to exit, sending SIGKILL after 10 s. It returns
// once the process is gone.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited meanwhile
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.Kill()
	}
}

// Kill sends SIGKILL, as a crash or an OOM kill would (no graceful shutdown, a held leader
// Lease is not released), and waits for the process to exit.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill() // it may have exited meanwhile
	<-p.done
}

// Logs returns everything the process wrote so far.
func (p *Process) Logs() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	return string(b)
}

// Tail returns the last n lines the process wrote.
func (p *Process) Tail(n int) string {
	return tail(p.Logs(), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logDirs maps each test to its log directory.
var logDirs sync.Map // T -> string

// LogDir returns the directory that holds the logs and files of the processes of test t,
// creating it on first use. Unlike t.TempDir it survives a failed test: its path is written to
// the test log and it is kept; after a passing test it is removed. Set E2E_KEEP_LOGS=1 to keep
// it always.
func LogDir(t T) string {
	t.Helper()
	if d, ok := logDirs.Load(t); ok {
		return d.(string)
	}
	dir, err := os.MkdirTemp("", "hcloud-e2e-"+sanitize(t.Name())+"-")
	if err != nil {
		t.Fatalf("create log directory: %v", err)
	}
	logDirs.Store(t, dir)
	// Registered before any process of the test starts, so it runs after they are stopped.
	t.Cleanup(func() {
		logDirs.Delete(t)
		if t.Failed() || os.Getenv("E2E_KEEP_LOGS") != "" {
			t.Logf("logs of %s kept in %s", t.Name(), dir)
			return
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove log directory: %v", err)
		}
	})
	return dir
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func sanitize(name string) string {
	return unsafeChars.ReplaceAllString(name, "_")
}

// uniquePath returns path, or path with a counter before its extension if path exists.
func uniquePath(path string) string {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return path
	}
	ext := filepath.Ext(path)
	base := strings.TrimSuffix(path, ext)
	for i := 2; ; i++ {
		p := fmt.Sprintf("%s.%d%s", base, i, ext)
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return p
		}
	}
}

// run runs bin to completion with a deadline and returns its combined output; the error names
// the command and carries the output.
func run(timeout time.Duration, bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("run %s: %w", filepath.Base(bin), err)
	}
	timer := time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		return out.String(), fmt.Errorf("run %s %s: timed out after %s\n%s", filepath.Base(bin), strings.Join(args, " "), timeout, out.String())
	}
	if err != nil {
		return out.String(), fmt.Errorf("run %s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}
