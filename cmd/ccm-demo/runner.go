package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// runner is the demo's harness.T: it logs to a writer (stderr), keeps a stack of cleanups, and
// on Fatalf prints the error, runs the cleanups and exits with status 1.
type runner struct {
	log io.Writer

	mu       sync.Mutex
	cleanups []func()
	root     string // parent of every TempDir, removed last

	failed  atomic.Bool
	exiting atomic.Bool
}

func newRunner(log io.Writer) *runner { return &runner{log: log} }

func (r *runner) Helper() {}

func (r *runner) Name() string { return "ccm-demo" }

func (r *runner) Logf(format string, args ...any) {
	fmt.Fprintf(r.log, "ccm-demo: %s\n", fmt.Sprintf(format, args...))
}

// Fatalf marks the run failed (so the harness keeps the logs and prints their tails), prints
// the error, stops everything and exits 1. It does not return.
func (r *runner) Fatalf(format string, args ...any) {
	r.failed.Store(true)
	r.Logf("error: %s", fmt.Sprintf(format, args...))
	r.exit(1)
}

func (r *runner) Failed() bool { return r.failed.Load() }

// fail marks the run failed without exiting (the demo did not converge).
func (r *runner) fail() { r.failed.Store(true) }

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// TempDir returns a new directory below one root directory, which is removed when the demo
// exits (after every process is stopped).
func (r *runner) TempDir() string {
	r.mu.Lock()
	if r.root == "" {
		root, err := os.MkdirTemp("", "ccm-demo-")
		if err != nil {
			r.mu.Unlock()
			r.Fatalf("create a temporary directory: %v", err)
		}
		r.root = root
		r.cleanups = append(r.cleanups, func() {
			if err := os.RemoveAll(root); err != nil {
				r.Logf("remove %s: %v", root, err)
			}
		})
	}
	root := r.root
	r.mu.Unlock()
	dir, err := os.MkdirTemp(root, "")
	if err != nil {
		r.Fatalf("create a temporary directory: %v", err)
	}
	return dir
}

// exit runs the cleanups, newest first, and exits with code. Only the first caller runs them;
// any other goroutine that calls exit (a Fatalf from the main goroutine while a signal stops the
// demo) waits here until the process exits.
func (r *runner) exit(code int) {
	if r.exiting.Swap(true) {
		select {}
	}
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			break
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		f()
	}
	os.Exit(code)
}
