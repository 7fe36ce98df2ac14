package policy

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/util"
)

// samples are the sample inputs of examples/policies/inputs, shipped in the binary
// (TestSampleInputsInSync keeps the copy equal). Every revision is evaluated against each of them
// before it is put in force.
//
//go:embed samples/*.json
var samples embed.FS

// testTimeout bounds one Rego test of a revision, as opa test's default does.
const testTimeout = 5 * time.Second

// SampleInputs returns the shipped sample inputs by name (the file name without ".json"), as
// [ReadInputFile] decodes them.
//
// # Errors
//
// None for the shipped files (a test proves they decode); the error is for completeness.
func SampleInputs() (map[string]Input, error) {
	entries, err := samples.ReadDir("samples")
	if err != nil {
		return nil, fmt.Errorf("read sample inputs: %w", err)
	}
	out := make(map[string]Input, len(entries))
	for _, ent := range entries {
		name := strings.TrimSuffix(ent.Name(), ".json")
		b, err := samples.ReadFile("samples/" + ent.Name())
		if err != nil {
			return nil, fmt.Errorf("read sample input %s: %w", name, err)
		}
		var wrapped map[string]json.RawMessage
		if err := json.Unmarshal(b, &wrapped); err != nil {
			return nil, fmt.Errorf("read sample input %s: %w", name, err)
		}
		dec := json.NewDecoder(bytes.NewReader(wrapped[name]))
		dec.DisallowUnknownFields()
		var in Input
		if err := dec.Decode(&in); err != nil {
			return nil, fmt.Errorf("read sample input %s: %w", name, err)
		}
		out[name] = in
	}
	return out, nil
}

// vet evaluates a compiled revision before it is put in force: every shipped sample input must
// decide without an evaluation error (a built-in error, a malformed message, the deadline), and
// the revision's own Rego tests (tests, "*_test.rego" files) must pass. A deny for a sample is
// fine: policies are meant to deny some of them. It returns the problems that reject the
// revision.
func (e *Engine) vet(ctx context.Context, c *compiled, policies, data, tests map[string][]byte) []Problem {
	ins, err := SampleInputs()
	if err != nil {
		return []Problem{{Code: "ccm_sample_error", Message: err.Error()}}
	}
	var problems []Problem
	for _, name := range sortedKeys(ins) {
		ectx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
		_, _, warnErr, err := evalQuery(ectx, c, ins[name])
		cancel()
		if err == nil && warnErr != nil {
			err = fmt.Errorf("warn rules: %w", warnErr) // would not block in production, but is a bug all the same
		}
		if err != nil {
			problems = append(problems, Problem{File: "sample input " + name, Code: "ccm_sample_error",
				Message: fmt.Sprintf("evaluation failed: %v (every decision with this revision that reaches the same code would fail; fix the rule or guard it)", err)})
		}
	}
	if len(tests) > 0 {
		problems = append(problems, runRevisionTests(ctx, policies, data, tests)...)
	}
	return problems
}

// runRevisionTests runs the Rego tests of a revision with the production sandbox. The tests see
// the revision's data, plus the shipped sample inputs as data.inputs (as `opa test
// examples/policies` sees examples/policies/inputs) unless the revision defines data.inputs.
func runRevisionTests(ctx context.Context, policies, data, tests map[string][]byte) []Problem {
	modules := map[string]*ast.Module{}
	var problems []Problem
	for _, files := range []map[string][]byte{policies, tests} {
		for _, name := range sortedKeys(files) {
			m, err := ast.ParseModuleWithOpts(name, string(files[name]), ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				problems = append(problems, problemsFrom(err)...)
				continue
			}
			modules[name] = m
		}
	}
	doc, dataProblems := mergeData(data)
	problems = append(problems, dataProblems...)
	if len(problems) > 0 {
		return problems
	}
	if _, ok := doc["inputs"]; !ok {
		inputs, err := sampleDocs()
		if err != nil {
			return []Problem{{Code: "ccm_sample_error", Message: err.Error()}}
		}
		doc["inputs"] = inputs
	}
	ch, err := tester.NewRunner().
		SetCompiler(testCompiler()).
		SetStore(inmem.NewFromObject(doc)).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		SetTimeout(testTimeout).
		SetModules(modules).
		RunTests(ctx, nil)
	if err != nil {
		return problemsFrom(err)
	}
	for r := range ch {
		p := Problem{Code: "ccm_test_failed", Message: fmt.Sprintf("Rego test %s.%s failed", strings.TrimPrefix(r.Package, "data."), r.Name)}
		switch {
		case r.Error != nil:
			p.Code, p.Message = "ccm_test_error", fmt.Sprintf("Rego test %s.%s: %v", strings.TrimPrefix(r.Package, "data."), r.Name, r.Error)
		case !r.Fail:
			continue
		}
		if r.Location != nil {
			p.File, p.Row, p.Col = r.Location.File, r.Location.Row, r.Location.Col
		}
		problems = append(problems, p)
	}
	return problems
}

// sampleDocs returns the shipped sample inputs as the JSON documents data.inputs holds.
func sampleDocs() (map[string]any, error) {
	entries, err := samples.ReadDir("samples")
	if err != nil {
		return nil, fmt.Errorf("read sample inputs: %w", err)
	}
	out := map[string]any{}
	for _, ent := range entries {
		b, err := samples.ReadFile(path.Join("samples", ent.Name()))
		if err != nil {
			return nil, fmt.Errorf("read sample input %s: %w", ent.Name(), err)
		}
		var wrapped map[string]any
		if err := util.UnmarshalJSON(b, &wrapped); err != nil {
			return nil, fmt.Errorf("read sample input %s: %w", ent.Name(), err)
		}
		for k, v := range wrapped {
			out[k] = v
		}
	}
	return out, nil
}
