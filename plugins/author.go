package plugins

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Tools for plugin authors, behind `<ccm> plugin bench|check|test`: they load modules exactly
// as the CCM does (Load, the same sandbox and validation).

// ConfigMapLimit is the most data one ConfigMap holds: the API server refuses a ConfigMap whose
// data and binaryData add up to more than 1 MiB.
const ConfigMapLimit = 1 << 20

// LastAppliedLimit is the most a kubectl.kubernetes.io/last-applied-configuration annotation
// holds (256 KiB, the limit of all annotations): a client-side `kubectl apply` of a ConfigMap
// whose base64 module is larger fails; `kubectl apply --server-side` does not write it.
const LastAppliedLimit = 256 << 10

// BenchResult is what Bench measured.
type BenchResult struct {
	Calls         int
	P50, P99, Max time.Duration
	// MemoryBytes is the linear memory of the instance after the calls (0 if unknown).
	MemoryBytes uint32
}

// String formats r as one line: "1000 calls: p50 58µs, p99 120µs, max 900µs; instance memory 1.1 MiB".
func (r BenchResult) String() string {
	return fmt.Sprintf("%d calls: p50 %s, p99 %s, max %s; instance memory %s",
		r.Calls, micro(r.P50), micro(r.P99), micro(r.Max), mib(int64(r.MemoryBytes)))
}

// Bench calls hook of the module at modulePath n times with the JSON request in inputFile, on
// one instance (after one warm-up call that is not counted, which also builds the instance),
// and returns the latency percentiles and the instance's memory. Each call is the whole host
// path: encode, copy in, run, copy out, decode, validate.
//
// # Errors
//
// n < 1, any Load error, an input that does not decode, and the first failing call.
func Bench(ctx context.Context, modulePath, hook, inputFile string, n int) (BenchResult, error) {
	if n < 1 {
		return BenchResult{}, fmt.Errorf("plugin bench: %d calls, want at least 1", n)
	}
	input, err := readInput(inputFile)
	if err != nil {
		return BenchResult{}, fmt.Errorf("plugin bench: read input: %w", err)
	}
	p, err := Load(ctx, modulePath, Options{Stderr: os.Stderr, PoolSize: 1, CallTimeout: 10 * time.Second})
	if err != nil {
		return BenchResult{}, err
	}
	defer p.Close(ctx)
	if _, err := callJSON(ctx, p, hook, input); err != nil {
		return BenchResult{}, fmt.Errorf("plugin bench: warm-up call: %w", err)
	}
	times := make([]time.Duration, n)
	for i := range times {
		start := time.Now()
		if _, err := callJSON(ctx, p, hook, input); err != nil {
			return BenchResult{}, fmt.Errorf("plugin bench: call %d: %w", i+1, err)
		}
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	r := BenchResult{Calls: n, P50: percentile(times, 50), P99: percentile(times, 99), Max: times[n-1]}
	r.MemoryBytes, _ = p.idleMemoryBytes()
	return r, nil
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n)
	return sorted[max(rank, 1)-1]
}

// ModuleReport is what Check found about one module.
type ModuleReport struct {
	Path string
	// RawBytes is the size of the wasm module, GzipBytes of it compressed with gzip -9.
	RawBytes, GzipBytes int64
	// Hooks are the hooks the module exports; LoadError is why the host refuses it ("" if not).
	Hooks     []string
	LoadError string
}

// shipped is the size the module takes in a ConfigMap: gzipped, as the docs ship it.
func (m ModuleReport) shipped() int64 { return m.GzipBytes }

// Check loads each module as the CCM does and reports its size (raw and gzipped), whether it
// fits a ConfigMap alone (gzipped, with room to spare) and, for two modules or more, whether
// they fit one ConfigMap together, its exports and the ABI version. It writes a readable
// report to w and returns the reports, and an error when a module does not load or they do
// not fit.
//
// # Errors
//
// An unreadable file; a module the host refuses, or modules over ConfigMapLimit (the report is
// written first).
func Check(ctx context.Context, paths []string, w io.Writer) ([]ModuleReport, error) {
	var reports []ModuleReport
	var problems []string
	var total int64
	for _, path := range paths {
		r, err := checkModule(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("plugin check: %w", err)
		}
		reports = append(reports, r)
		total += r.shipped()
		writeModuleReport(w, r)
		if r.LoadError != "" {
			problems = append(problems, path+" does not load")
		}
		if r.shipped() > ConfigMapLimit {
			problems = append(problems, path+" does not fit a ConfigMap")
		}
	}
	if len(paths) > 1 {
		fmt.Fprintf(w, "together: %s gzipped: %s\n", kib(total), fitLine(total))
		if total > ConfigMapLimit {
			problems = append(problems, "the modules do not fit one ConfigMap together (build one module with both hooks, or mount them from an image volume)")
		}
	}
	if len(problems) > 0 {
		return reports, fmt.Errorf("plugin check: %s", strings.Join(problems, "; "))
	}
	return reports, nil
}

func checkModule(ctx context.Context, path string) (ModuleReport, error) {
	wasm, err := readModule(path)
	if err != nil {
		return ModuleReport{}, fmt.Errorf("%s: %w", path, err)
	}
	r := ModuleReport{Path: path, RawBytes: int64(len(wasm)), GzipBytes: gzipSize(wasm)}
	p, err := LoadBytes(ctx, path, wasm, Options{Stderr: io.Discard})
	if err != nil {
		r.LoadError = err.Error()
		return r, nil
	}
	r.Hooks = p.Hooks()
	_ = p.Close(ctx) // only its exports were wanted
	return r, nil
}

func writeModuleReport(w io.Writer, r ModuleReport) {
	fmt.Fprintf(w, "%s\n", r.Path)
	fmt.Fprintf(w, "  size: %s raw, %s gzipped (gzip -9)\n", kib(r.RawBytes), kib(r.GzipBytes))
	fmt.Fprintf(w, "  alone in a ConfigMap (gzipped): %s\n", fitLine(r.GzipBytes))
	if r.GzipBytes*4/3 > LastAppliedLimit {
		fmt.Fprintf(w, "  apply with kubectl apply --server-side: client-side apply's last-applied annotation holds at most 256 KiB\n")
	}
	if r.LoadError != "" {
		fmt.Fprintf(w, "  refused by the host: %s\n", r.LoadError)
		return
	}
	var exports []string
	for _, h := range r.Hooks {
		exports = append(exports, hookExports[h]+" ("+h+")")
	}
	fmt.Fprintf(w, "  exports: %s\n", strings.Join(exports, ", "))
	fmt.Fprintf(w, "  ABI version: %d (this host's)\n", ABIVersion)
}

// fitLine says whether size bytes fit a ConfigMap, and by how much.
func fitLine(size int64) string {
	if size > ConfigMapLimit {
		return fmt.Sprintf("does not fit (%s over the 1 MiB limit)", kib(size-ConfigMapLimit))
	}
	return fmt.Sprintf("fits (%s to spare of 1 MiB)", kib(ConfigMapLimit-size))
}

func gzipSize(b []byte) int64 {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level never fails
	_, _ = zw.Write(b)                                       // a bytes.Buffer never fails
	_ = zw.Close()
	return int64(buf.Len())
}

// TestResult is the outcome of one case of RunTests.
type TestResult struct {
	Case, Hook string
	// Problem is why the case failed ("" when it passed).
	Problem string
}

// RunTests runs the module at modulePath against the cases in dir and writes one line per
// case to w. A case is a pair of files: CASE.request.json, the request, and
// CASE.reply.json, the reply expected after the host's validation: {"labels": {...}} or
// {"name": "..."}, compared as JSON values, or {"error": "TEXT"}, passing when the call fails
// with an error containing TEXT (an error reply, a refused reply, a trap...). The hook is the
// name of the directory the files are in (dir/node_labels/, dir/load_balancer_name/), or, for
// files directly in dir, the module's only hook. Guest output goes to standard error.
//
// # Errors
//
// No case found, a case without its reply file, any Load error, or failed cases (counted).
func RunTests(ctx context.Context, modulePath, dir string, w io.Writer) ([]TestResult, error) {
	p, err := Load(ctx, modulePath, Options{Stderr: os.Stderr, CallTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer p.Close(ctx)
	cases, err := findCases(dir, p.Hooks())
	if err != nil {
		return nil, fmt.Errorf("plugin test: %w", err)
	}
	var results []TestResult
	failed := 0
	for _, c := range cases {
		r := c.run(ctx, p)
		results = append(results, r)
		if r.Problem != "" {
			failed++
			fmt.Fprintf(w, "FAIL %s (%s): %s\n", r.Case, r.Hook, r.Problem)
			continue
		}
		fmt.Fprintf(w, "ok   %s (%s)\n", r.Case, r.Hook)
	}
	if failed > 0 {
		return results, fmt.Errorf("plugin test: %d of %d cases failed", failed, len(cases))
	}
	fmt.Fprintf(w, "PASS: %d cases\n", len(cases))
	return results, nil
}

// testCase is one request file and its expected reply.
type testCase struct{ name, hook, request, reply string }

const requestSuffix, replySuffix = ".request.json", ".reply.json"

// findCases lists the cases of dir: its hook subdirectories, then its own files.
func findCases(dir string, hooks []string) ([]testCase, error) {
	var cases []testCase
	for _, h := range hookOrder {
		sub := filepath.Join(dir, h)
		if fi, err := os.Stat(sub); err == nil && fi.IsDir() {
			found, err := casesIn(sub, h)
			if err != nil {
				return nil, err
			}
			cases = append(cases, found...)
		}
	}
	top, err := casesIn(dir, "")
	if err != nil {
		return nil, err
	}
	if len(top) > 0 {
		if len(hooks) != 1 {
			return nil, fmt.Errorf("%s: the module exports %d hooks, so cases go in %s/HOOK/ (node_labels or load_balancer_name)", dir, len(hooks), dir)
		}
		for i := range top {
			top[i].hook = hooks[0]
		}
		cases = append(cases, top...)
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("%s: no case (CASE%s with CASE%s)", dir, requestSuffix, replySuffix)
	}
	return cases, nil
}

func casesIn(dir, hook string) ([]testCase, error) {
	reqs, err := filepath.Glob(filepath.Join(dir, "*"+requestSuffix))
	if err != nil {
		return nil, err
	}
	var cases []testCase
	for _, req := range reqs {
		base := strings.TrimSuffix(req, requestSuffix)
		reply := base + replySuffix
		if _, err := os.Stat(reply); err != nil {
			return nil, fmt.Errorf("case %s: no expected reply: %w", req, err)
		}
		name := filepath.Base(base)
		if hook != "" {
			name = hook + "/" + name
		}
		cases = append(cases, testCase{name: name, hook: hook, request: req, reply: reply})
	}
	return cases, nil
}

// run calls the case's hook and compares the outcome with the expected reply.
func (c testCase) run(ctx context.Context, p *Plugin) TestResult {
	r := TestResult{Case: c.name, Hook: c.hook}
	req, err := os.ReadFile(c.request)
	if err != nil {
		r.Problem = err.Error()
		return r
	}
	var want map[string]any
	if err := readJSON(c.reply, &want); err != nil {
		r.Problem = err.Error()
		return r
	}
	got, callErr := callJSON(ctx, p, c.hook, req)
	r.Problem = compareReply(want, got, callErr)
	return r
}

// compareReply returns why got (or callErr) is not the expected reply want, or "".
func compareReply(want map[string]any, got any, callErr error) string {
	if wantErr, ok := want["error"].(string); ok {
		switch {
		case callErr == nil:
			return fmt.Sprintf("the call succeeded with %s, want an error containing %q", mustJSON(got), wantErr)
		case !strings.Contains(callErr.Error(), wantErr):
			return fmt.Sprintf("error %q does not contain %q", callErr, wantErr)
		}
		return ""
	}
	if callErr != nil {
		return callErr.Error()
	}
	var gotMap map[string]any
	_ = json.Unmarshal([]byte(mustJSON(got)), &gotMap) // the reply types always round-trip
	if normalise(gotMap) != normalise(want) {
		return fmt.Sprintf("reply %s, want %s", normalise(gotMap), normalise(want))
	}
	return ""
}

// normalise encodes a reply with sorted keys, an empty labels object the same as none.
func normalise(m map[string]any) string {
	if l, ok := m["labels"].(map[string]any); ok && len(l) == 0 {
		delete(m, "labels")
	}
	if len(m) == 0 {
		return "{}"
	}
	return mustJSON(m)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func micro(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
