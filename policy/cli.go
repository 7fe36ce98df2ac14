package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
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
func ReadInputFile(path string) (Input, error) {
	var in Input
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
	files, err := ReadDir(policyDir)
	if err != nil {
		return err
	}
	e := NewEngine(Options{Mode: o.Mode, FailureMode: o.FailureMode, Timeout: o.Timeout})
	if _, err := e.Load(ctx, files, DirSource(policyDir)); err != nil {
		return err
	}
	if e.Revision() == "" {
		return fmt.Errorf("evaluate policy: no .rego file in %s (the CCM would allow everything)", policyDir)
	}
	d := e.Decide(ctx, in)
	res := EvalResult{Allowed: d.Allowed, DryRun: d.DryRun, Revision: d.Revision, Deny: d.Deny, Warn: d.Warn}
	if res.Deny == nil {
		res.Deny = []Message{}
	}
	if res.Warn == nil {
		res.Warn = []Message{}
	}
	if d.Err != nil {
		res.Error = d.Err.Error()
	}
	if d.WarnErr != nil {
		res.WarnError = d.WarnErr.Error()
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("write decision: %w", err)
	}
	if !d.Allowed {
		return fmt.Errorf("%s %s: %w", in.Action, subject(in), ErrDenied)
	}
	return nil
}

// RunTests runs the Rego tests (rules named test_*) of the given files and directories like
// `opa test` does: directories load recursively, data files included. Tests compile with the
// production sandbox ([Capabilities], strict mode, print enabled). The report goes to w in
// opa test's format (verbose lists each test). It is the CLI's `policy test`.
//
// # Errors
//
// failed counts failed and erroneous tests. err is set when the files do not load or compile,
// or when no test was found (like `opa test --fail-on-empty`).
func RunTests(ctx context.Context, dirs []string, w io.Writer, verbose bool) (failed int, err error) {
	modules, store, err := tester.Load(dirs, nil)
	if err != nil {
		return 0, fmt.Errorf("load policy tests: %w", err)
	}
	ch, err := tester.NewRunner().
		SetCompiler(testCompiler()).
		SetStore(store).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		SetTimeout(5*time.Second). // opa test's default
		SetModules(modules).
		RunTests(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("compile policy tests: %w", &LoadError{Revision: "under test", Problems: problemsFrom(err)})
	}
	total := 0
	counted := make(chan *tester.Result)
	go func() {
		defer close(counted)
		for r := range ch {
			total++
			if r.Fail || r.Error != nil {
				failed++
			}
			counted <- r
		}
	}()
	if err := (tester.PrettyReporter{Output: w, Verbose: verbose}).Report(counted); err != nil {
		return failed, fmt.Errorf("report policy tests: %w", err)
	}
	if total == 0 {
		return 0, errors.New("no policy tests found: name test rules test_* in *_test.rego files")
	}
	return failed, nil
}

// testCompiler is the compiler of Rego tests: the production sandbox.
func testCompiler() *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(Capabilities()).
		WithEnablePrintStatements(true).
		WithStrict(true)
}
