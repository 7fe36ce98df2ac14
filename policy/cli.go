package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown/lineage"
)

// EvalResult is the JSON form of a [Decision] that [EvalFile] prints.
type EvalResult struct {
	Allowed  bool      `json:"allowed"`
	DryRun   bool      `json:"dry_run"`
	Revision string    `json:"revision"`
	Deny     []Message `json:"deny"`
	Warn     []Message `json:"warn"`
	Error    string    `json:"error,omitempty"`
	// WarnError is a failure of the warn rules alone, which does not block (Decision.WarnErr).
	WarnError string `json:"warn_error,omitempty"`
}

// ReadInputFile reads one policy input from a JSON file, or from standard input when path is
// "-", rejecting unknown fields.
//
// A file that holds exactly one key equal to its base name without ".json" is unwrapped: the
// sample inputs in examples/policies/inputs use that form so that `opa test` can load them all
// into data.inputs without conflicts (inputs/lb_create_default.json holds
// {"lb_create_default": {...}}).
func ReadInputFile(path string) (input.Input, error) {
	var in input.Input
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return in, fmt.Errorf("read policy input: %w", err)
	}
	var wrapped map[string]json.RawMessage
	if path != "-" && json.Unmarshal(b, &wrapped) == nil && len(wrapped) == 1 {
		if inner, ok := wrapped[strings.TrimSuffix(filepath.Base(path), ".json")]; ok {
			b = inner
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("read policy input %s: %w (see docs/reference/policy-input.md)", path, err)
	}
	return in, nil
}

// EvalFile decides the input in inputFile (see [ReadInputFile]; "-" is standard input) with the policies of policyDir
// (read like [WatchDir] does) and the options o, and writes the decision to w as indented JSON
// ([EvalResult]). It is the CLI's `policy eval`.
//
// # Errors
//
// EvalFile returns an error when the files cannot be read or the revision is rejected (a
// *LoadError), and an error wrapping [ErrDenied] after writing a decision that does not allow
// the mutation, so that a CLI exits non-zero.
func EvalFile(ctx context.Context, policyDir, inputFile string, w io.Writer, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	in, err := ReadInputFile(inputFile)
	if err != nil {
		return err
	}
	e, err := loadDir(ctx, policyDir, o)
	if err != nil {
		return err
	}
	if e.Revision() == "" {
		return fmt.Errorf("evaluate policy: no .rego file in %s (the CCM would allow everything)", policyDir)
	}
	d := e.Decide(ctx, in)
	res := evalResult(d) // the shape a decision log line holds, so a replay compares like with like
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("write decision: %w", err)
	}
	if !d.Allowed {
		return fmt.Errorf("%s %s: %w; %s", in.Action, subject(in), ErrDenied, DenialScope(in.Action))
	}
	return nil
}

// DenialScope says what a denial of one step with action holds back in the CCM, for the
// output of `policy eval`: steps fail alone on an existing load balancer (the executor's
// Decide), a create or delete is all or nothing, and a route plan runs whole or not at all.
func DenialScope(action string) string {
	switch action {
	case input.ActionLoadBalancerUpdate:
		return "the CCM skips this step and the steps that need it, and runs the plan's other steps (hcloud-policy-ccm plan lists them)"
	case input.ActionLoadBalancerCreate:
		return "a create is all or nothing: the CCM creates no load balancer"
	case input.ActionLoadBalancerDelete:
		return "the CCM keeps the load balancer"
	case input.ActionRouteCreate, input.ActionRouteDelete:
		return "the CCM changes none of the node's routes"
	}
	return "the CCM runs nothing of this plan"
}

// TestOptions configure [RunTests], as the flags of `policy test`.
type TestOptions struct {
	// Verbose lists every test, as opa test -v.
	Verbose bool
	// Coverage reports coverage as JSON instead of the test list, as opa test --coverage.
	Coverage bool
	// Threshold is the coverage percentage below which RunTests fails; it implies Coverage.
	Threshold float64
	// Explain prints the trace of failing tests: "fails" (the failing expressions) or "full"
	// (every step), as opa test --explain; "" prints none. It implies Verbose.
	Explain string
}

// Explain modes of TestOptions.
const (
	ExplainFails = "fails"
	ExplainFull  = "full"
)

// RunTests loads the given directories and files as the CCM loads one policy revision, and
// runs its Rego tests (rules named test_* in *_test.rego files) as the CCM does before it puts
// the revision in force. It is the CLI's `policy test`, the faithful CI check:
//
//   - layout: each directory is read flat, like a ConfigMap or --policy-dir ([ReadDir]); files
//     in subdirectories (an inputs/ directory of fixtures) are not loaded. Several paths form
//     one revision, like `kubectl create configmap --from-file` of each;
//   - the revision must load: parse, compile in strict mode with the sandbox capabilities,
//     type check against the input schema, and decide every shipped sample input without an
//     evaluation error; otherwise RunTests returns the *LoadError the CCM would report;
//   - tests run with strict built-in errors, the revision's data, and data.inputs as the CCM
//     builds it (the shipped samples merged with the revision's own data.inputs).
//
// The report goes to w in opa test's format (or its JSON coverage report), once every test has
// run, with the tests grouped by file (files in name order, tests in line order). When failing tests
// read data the revision does not define, a note after the report names the data, the files
// that were not loaded, and the fix. TestRunTests_likeTheCCM shows that a revision passes here
// exactly when the CCM accepts it.
//
// # Errors
//
// failed counts failed and erroneous tests. err is set when the files do not load (a
// *LoadError), when no test was found (like `opa test --fail-on-empty`), or when coverage is
// below Threshold.
func RunTests(ctx context.Context, paths []string, w io.Writer, o TestOptions) (failed int, err error) {
	switch o.Explain {
	case "", ExplainFails, ExplainFull:
	default:
		return 0, fmt.Errorf("invalid --explain %q: want %q or %q", o.Explain, ExplainFails, ExplainFull)
	}
	if o.Threshold < 0 || o.Threshold > 100 {
		return 0, fmt.Errorf("invalid --threshold %v: want a percentage from 0 to 100", o.Threshold)
	}
	files, skipped, err := readRevision(paths)
	if err != nil {
		return 0, err
	}
	policies, data, tests := selectFiles(files)
	if len(tests) == 0 {
		return 0, fmt.Errorf("no policy tests found in %s: name test rules test_* in *_test.rego files at the top of the directory%s",
			strings.Join(paths, " "), skippedNote(skipped))
	}
	rev := revisionOf(policies, data, tests)
	e := NewEngine(Options{})
	c, problems := e.compile(ctx, rev, policies, data)
	if len(problems) == 0 {
		problems = e.vetSamples(ctx, c)
	}
	if len(problems) > 0 {
		return 0, &LoadError{Revision: rev, Problems: problems}
	}
	rt, problems := newRevisionTests(policies, data, tests)
	if len(problems) > 0 {
		return 0, &LoadError{Revision: rev, Problems: problems}
	}
	runner := rt.runner().EnableTracing(o.Explain != "")
	var cov *cover.Cover
	if o.Coverage || o.Threshold > 0 {
		cov = cover.New()
		runner = runner.SetCoverageQueryTracer(cov)
	}
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("compile policy tests: %w", &LoadError{Revision: rev, Problems: problemsFrom(err)})
	}
	var reporter tester.Reporter = tester.PrettyReporter{Output: w, Verbose: o.Verbose || o.Explain != ""}
	if cov != nil {
		reporter = tester.JSONCoverageReporter{Cover: cov, Modules: rt.modules, Output: w, Threshold: o.Threshold, Verbose: o.Verbose}
	}
	results := byFile(ch)
	total := len(results)
	var undefined []string
	counted := make(chan *tester.Result, len(results))
	for _, r := range results {
		if r.Fail || r.Error != nil {
			failed++
			undefined = append(undefined, rt.undefinedData(r.Package, r.Name)...)
		}
		switch o.Explain {
		case ExplainFails:
			r.Trace = lineage.Fails(r.Trace)
		case ExplainFull:
			r.Trace = lineage.Full(r.Trace)
		}
		counted <- r
	}
	close(counted)
	reportErr := reporter.Report(counted)
	for range counted { // the coverage reporter stops at the first erroneous test
	}
	if total == 0 {
		return 0, errors.New("no policy tests found: name test rules test_* in *_test.rego files")
	}
	if len(undefined) > 0 {
		slices.Sort(undefined)
		fmt.Fprintf(w, "\nnote: %s%s\n", undefinedDataMessage(slices.Compact(undefined), rt.sampleNames()), skippedNote(skipped))
	} else if o.Verbose && len(skipped) > 0 {
		fmt.Fprintf(w, "\nnote: not loaded, as the CCM loads a policy directory flat:%s\n", strings.TrimPrefix(skippedNote(skipped), "; not loaded:"))
	}
	if _, below := errors.AsType[*cover.CoverageThresholdError](reportErr); reportErr != nil {
		if below || failed == 0 {
			return failed, fmt.Errorf("report policy tests: %w", reportErr)
		}
		// The coverage reporter returns the first failure instead of a report; failed counts it.
		fmt.Fprintf(w, "no coverage report: %v\n", reportErr)
	}
	return failed, nil
}

// byFile drains the results of a test run and returns them sorted by file, then line, then
// name: the runner reports tests in no fixed order, so the report (and -v's list) would
// interleave the tests of different files. TestRunTests_verboseGroupedByFile checks the order.
func byFile(ch <-chan *tester.Result) []*tester.Result {
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	slices.SortStableFunc(results, func(a, b *tester.Result) int {
		fa, ra := resultPlace(a)
		fb, rb := resultPlace(b)
		if c := strings.Compare(fa, fb); c != 0 {
			return c
		}
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Name, b.Name)
	})
	return results
}

// resultPlace returns the file and line of a test result ("", 0 when unknown).
func resultPlace(r *tester.Result) (string, int) {
	if r.Location == nil {
		return "", 0
	}
	return r.Location.File, r.Location.Row
}

// skippedNote lists files that opa test would load and policy test does not, for messages.
func skippedNote(skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	const most = 5
	list := strings.Join(skipped[:min(len(skipped), most)], ", ")
	if len(skipped) > most {
		list += fmt.Sprintf(" and %d more", len(skipped)-most)
	}
	return "; not loaded: " + list
}

// readRevision reads paths as one revision: a directory's files flat ([ReadDir]), a file by its
// base name. It also returns the policy and data files below the directories (outside hidden
// directories such as a mounted ConfigMap's ..data), which opa test would load and the CCM
// does not.
func readRevision(paths []string) (files map[string][]byte, skipped []string, err error) {
	files = map[string][]byte{}
	from := map[string]string{}
	add := func(name, origin string, content []byte) error {
		if prev, ok := from[name]; ok {
			return fmt.Errorf("read policies: %s and %s have the same name, and a revision (like a ConfigMap) holds one file per name", prev, origin)
		}
		from[name], files[name] = origin, content
		return nil
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("read policies: %w", err)
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, nil, fmt.Errorf("read policies: %w", err)
			}
			if err := add(filepath.Base(p), p, b); err != nil {
				return nil, nil, err
			}
			continue
		}
		dir, err := ReadDir(p)
		if err != nil {
			return nil, nil, err
		}
		for _, name := range sortedKeys(dir) {
			if err := add(name, filepath.Join(p, name), dir[name]); err != nil {
				return nil, nil, err
			}
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if filepath.Dir(path) != filepath.Clean(p) && knownExtension(d.Name()) {
				skipped = append(skipped, path)
			}
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("read policies: %w", err)
		}
	}
	return files, skipped, nil
}

// knownExtension reports whether Load would select a file of this name.
func knownExtension(name string) bool {
	for _, ext := range []string{".rego", ".json", ".yaml", ".yml"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// testCompiler is the compiler of Rego tests: the production sandbox.
func testCompiler() *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(Capabilities()).
		WithEnablePrintStatements(true).
		WithStrict(true)
}

// loadDir returns an engine with o's mode, failure mode and timeout and the policies of
// policyDir (read like [WatchDir] does), for the CLI's one-shot decisions (`policy eval`, and its
// --decision-log-line replay). An engine without a revision (no .rego file) is no error here:
// each caller says what that means for it.
func loadDir(ctx context.Context, policyDir string, o Options) (*Engine, error) {
	files, err := ReadDir(policyDir)
	if err != nil {
		return nil, err
	}
	e := NewEngine(Options{Mode: o.Mode, FailureMode: o.FailureMode, Timeout: o.Timeout})
	if _, err := e.Load(ctx, files, DirSource(policyDir)); err != nil {
		return nil, err
	}
	return e, nil
}
