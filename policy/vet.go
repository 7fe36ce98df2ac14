package policy

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"path"
	"slices"
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
func SampleInputs() (map[string]input.Input, error) {
	entries, err := samples.ReadDir("samples")
	if err != nil {
		return nil, fmt.Errorf("read sample inputs: %w", err)
	}
	out := make(map[string]input.Input, len(entries))
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
		var in input.Input
		if err := dec.Decode(&in); err != nil {
			return nil, fmt.Errorf("read sample input %s: %w", name, err)
		}
		out[name] = in
	}
	return out, nil
}

// vet evaluates a compiled revision before it is put in force: every shipped sample input must
// decide without an evaluation error ([Engine.vetSamples]), and the revision's own Rego tests
// (tests, "*_test.rego" files) must pass. It returns the problems that reject the revision.
func (e *Engine) vet(ctx context.Context, c *compiled, policies, data, tests map[string][]byte) []Problem {
	problems := e.vetSamples(ctx, c)
	if len(tests) > 0 {
		problems = append(problems, runRevisionTests(ctx, policies, data, tests)...)
	}
	return problems
}

// vetSamples decides every shipped sample input with the compiled revision: an evaluation error
// (a built-in error, a malformed message, the deadline) is a problem. A deny for a sample is
// fine: policies are meant to deny some of them.
func (e *Engine) vetSamples(ctx context.Context, c *compiled) []Problem {
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
	return problems
}

// revisionTests is what the Rego tests of one revision run with: its policy and test modules,
// its data with the sample inputs, and the compiler (the production sandbox) that compiles
// them. The CCM's vetting and `policy test` both build it with newRevisionTests, so a test
// passes in one exactly when it passes in the other (shown by TestRunTests_likeTheCCM).
type revisionTests struct {
	modules  map[string]*ast.Module
	data     map[string]any
	compiler *ast.Compiler
}

// newRevisionTests parses the modules of a revision and builds its test data: the revision's
// data files merged at the root, and under data.inputs the shipped sample inputs (as `opa test
// examples/policies` sees examples/policies/inputs) merged with the revision's own data.inputs,
// whose keys win over samples of the same name.
func newRevisionTests(policies, data, tests map[string][]byte) (*revisionTests, []Problem) {
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
		return nil, problems
	}
	samples, err := sampleDocs()
	if err != nil {
		return nil, []Problem{{Code: "ccm_sample_error", Message: err.Error()}}
	}
	switch own := doc["inputs"].(type) {
	case nil:
		doc["inputs"] = samples
	case map[string]any:
		for k, v := range samples {
			if _, ok := own[k]; !ok {
				own[k] = v
			}
		}
	}
	return &revisionTests{modules: modules, data: doc, compiler: testCompiler()}, nil
}

// runner returns a test runner over the revision with the production sandbox and strict
// built-in errors, as the CCM runs the tests.
func (rt *revisionTests) runner() *tester.Runner {
	return tester.NewRunner().
		SetCompiler(rt.compiler).
		SetStore(inmem.NewFromObject(rt.data)).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(true).
		SetTimeout(testTimeout).
		SetModules(rt.modules)
}

// runRevisionTests runs the Rego tests of a revision (see newRevisionTests) and returns a
// problem per failing or erroneous test. When failing tests read data the revision does not
// define (typically fixtures under an inputs/ subdirectory, which a ConfigMap cannot hold), a
// first problem, ccm_test_data_undefined, names that data and the fix, and each failure
// names what it read.
func runRevisionTests(ctx context.Context, policies, data, tests map[string][]byte) []Problem {
	rt, problems := newRevisionTests(policies, data, tests)
	if len(problems) > 0 {
		return problems
	}
	ch, err := rt.runner().RunTests(ctx, nil)
	if err != nil {
		return problemsFrom(err)
	}
	var allUndefined []string
	for r := range ch {
		test := strings.TrimPrefix(r.Package, "data.") + "." + r.Name
		p := Problem{Code: "ccm_test_failed", Message: fmt.Sprintf("Rego test %s failed", test)}
		switch {
		case r.Error != nil:
			p.Code, p.Message = "ccm_test_error", fmt.Sprintf("Rego test %s: %v", test, r.Error)
		case !r.Fail:
			continue
		}
		if undef := rt.undefinedData(r.Package, r.Name); len(undef) > 0 {
			p.Message += fmt.Sprintf(" (it reads %s, which this revision does not define)", strings.Join(undef, ", "))
			allUndefined = append(allUndefined, undef...)
		}
		if r.Location != nil {
			p.File, p.Row, p.Col = r.Location.File, r.Location.Row, r.Location.Col
		}
		problems = append(problems, p)
	}
	if len(allUndefined) > 0 {
		slices.Sort(allUndefined)
		problems = append([]Problem{{Code: "ccm_test_data_undefined", Message: undefinedDataMessage(slices.Compact(allUndefined), rt.sampleNames())}}, problems...)
	}
	return problems
}

// undefinedDataMessage says which data the failing tests read that the revision lacks, why, and
// how to fix it; the fix comes before the list of samples, which grows with the samples, so that
// it survives the 1 KiB cut of an event (TestEngine_Load_undefinedFixturesEvent).
func undefinedDataMessage(undefined, samples []string) string {
	return fmt.Sprintf("failing tests read %s, undefined in this revision: the CCM loads a policy ConfigMap or --policy-dir flat, "+
		"so fixtures in a subdirectory such as inputs/ (which opa test loads as data.inputs...) are not part of the revision. "+
		"Fix: put each fixture in a data file beside the policies, e.g. fixtures.json holding {\"inputs\": {\"NAME\": {...}}}, "+
		"or build it in the test with object.union(data.inputs.lb_create_default, {...}). "+
		"data.inputs holds the shipped sample inputs (%s) and the revision's own data.inputs",
		listAtMost(undefined, 3), strings.Join(samples, ", "))
}

// listAtMost joins the first n names and counts the rest, so that the fix in a message survives
// the 1 KiB cut of an event even when 30 fixtures are missing.
func listAtMost(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// sampleNames returns the names of the shipped sample inputs, sorted.
func (rt *revisionTests) sampleNames() []string {
	samples, err := sampleDocs()
	if err != nil {
		return nil
	}
	return sortedKeys(samples)
}

// undefinedData returns the data references of the test rule pkg.name (after compilation, so
// imports are resolved) that no data file and no package of the revision defines, e.g.
// "data.inputs.my_case". A reference through a variable key, or into a value that is not an
// object, counts as defined: it cannot be told statically.
func (rt *revisionTests) undefinedData(pkg, name string) []string {
	ref, err := ast.ParseRef(pkg)
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, rule := range rt.compiler.GetRulesExact(ref.Append(ast.StringTerm(name))) {
		ast.WalkRefs(rule, func(r ast.Ref) bool {
			if !r[0].Equal(ast.DefaultRootDocument) {
				return false
			}
			if s := rt.undefinedPrefix(r); s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
			return false
		})
	}
	return out
}

// undefinedPrefix returns the shortest prefix of the data reference r that is undefined, or "".
func (rt *revisionTests) undefinedPrefix(r ast.Ref) string {
	var path []string
	for _, t := range r[1:] {
		s, ok := t.Value.(ast.String)
		if !ok {
			break
		}
		path = append(path, string(s))
	}
	if len(path) == 0 {
		return ""
	}
	for _, m := range rt.compiler.Modules {
		var pkg []string
		for _, t := range m.Package.Path[1:] {
			if s, ok := t.Value.(ast.String); ok {
				pkg = append(pkg, string(s))
			}
		}
		if n := min(len(pkg), len(path)); slices.Equal(pkg[:n], path[:n]) {
			return "" // rules of the revision's packages, not data
		}
	}
	var cur any = rt.data
	for i, k := range path {
		obj, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		if cur, ok = obj[k]; !ok {
			return "data." + strings.Join(path[:i+1], ".")
		}
	}
	return ""
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
