package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const examplesDir = "../examples/policies"

// TestExamplePolicies runs the *_test.rego files of examples/policies, the same files
// `go tool opa test examples/policies` runs, with the production sandbox: each Rego test is a
// subtest, and finding no test fails.
func TestExamplePolicies(t *testing.T) {
	ctx := context.Background()
	modules, store, err := tester.Load([]string{examplesDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	comp := ast.NewCompiler().WithCapabilities(policy.Capabilities()).WithEnablePrintStatements(true).WithStrict(true)
	ch, err := tester.NewRunner().SetCompiler(comp).SetStore(store).
		CapturePrintOutput(true).RaiseBuiltinErrors(true).SetModules(modules).RunTests(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r := range ch {
		n++
		t.Run(strings.TrimPrefix(r.Package, "data.")+"."+r.Name, func(t *testing.T) {
			switch {
			case r.Skip:
				t.Fatal("todo_test_ rules are not allowed in the examples")
			case r.Error != nil:
				t.Fatalf("error: %v\n%s", r.Error, r.Output)
			case r.Fail:
				t.Fatalf("failed\n%s", r.Output)
			}
		})
	}
	if n == 0 {
		t.Fatal("no Rego tests found in " + examplesDir)
	}
}

// TestExamplePolicies_sampleInputs decides every sample input with the engine, as the CCM does,
// after decoding it strictly into input.Input.
func TestExamplePolicies_sampleInputs(t *testing.T) {
	ctx := context.Background()
	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchDir(ctx, e, examplesDir); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file      string
		wantAllow bool
		wantCodes []string
	}{
		{file: "lb_create_default.json", wantAllow: true},
		{file: "lb_create_lb31_unlabelled.json", wantCodes: []string{"lb_type_needs_namespace_label"}},
		{file: "lb_update_change_type.json", wantAllow: true},
		{file: "lb_delete_protected.json", wantCodes: []string{"load_balancer_protected"}},
		{file: "route_create.json", wantAllow: true},
		// ports.rego denies with a plain string message: no code.
		{file: "lb_update_add_service.json", wantCodes: []string{""}},
		{file: "lb_update_robot_ip_target.json", wantAllow: true},
		{file: "lb_update_managed_certificate.json", wantAllow: true},
		// A group within one namespace, on the allowed ports.
		{file: "lb_update_group_add_service.json", wantAllow: true},
	}
	entries, err := os.ReadDir(filepath.Join(examplesDir, "inputs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(tests) {
		t.Fatalf("%d sample inputs, %d cases: give every sample input a case", len(entries), len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			in, err := policy.ReadInputFile(filepath.Join(examplesDir, "inputs", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if in.Version != input.InputVersion {
				t.Errorf("version = %q, want %q", in.Version, input.InputVersion)
			}
			d := e.Decide(ctx, in)
			if d.Err != nil || d.Allowed != tc.wantAllow {
				t.Fatalf("Decide = %+v, want Allowed=%v", d, tc.wantAllow)
			}
			var codes []string
			for _, m := range d.Deny {
				codes = append(codes, m.Code)
			}
			if diff := cmp.Diff(tc.wantCodes, codes); diff != "" {
				t.Errorf("deny codes mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// testRevisions are directories shaped as a policy author would: each is one revision.
func testRevisions(t *testing.T) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	mk := func(name string, kv ...string) {
		d := t.TempDir()
		for i := 0; i+1 < len(kv); i += 2 {
			writeFile(t, d, kv[i], kv[i+1])
		}
		dirs[name] = d
	}
	mk("failing",
		"p.rego", "package ccm\n\ndeny contains \"x\" if input.action == \"route.create\"\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_passes if count(ccm.deny) == 0\n\ntest_fails if count(ccm.deny) == 1\n")
	mk("sandbox",
		"p.rego", "package ccm\n\ndeny contains \"x\" if http.send({}).status_code == 1\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_x if count(ccm.deny) == 0\n")
	mk("no tests but one",
		"p.rego", "package ccm\n\ndeny contains \"x\" if input.action == \"route.create\"\n\nwarn contains \"y\" if input.action == \"route.delete\"\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_deny if \"x\" in ccm.deny with input as {\"action\": \"route.create\"}\n")
	mk("no tests", "p.rego", "package ccm\n\ndeny contains \"x\" if input.action == \"route.create\"\n")
	// The layout: fixtures under inputs/, which opa test loads as data.inputs.
	mk("fixtures in inputs/",
		"p.rego", "package ccm\n\ndeny contains \"no ssh\" if {\n\tsome s in input.load_balancer.services\n\ts.listen_port == 22\n}\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_ssh_denied if \"no ssh\" in ccm.deny with input as data.inputs.ssh\n",
		"inputs/ssh.json", `{"ssh": {"action": "loadbalancer.create", "load_balancer": {"services": [{"listen_port": 22}]}}}`)
	// The fix the note suggests: the fixture in a data file at the top.
	mk("fixtures in a data file",
		"p.rego", "package ccm\n\ndeny contains \"no ssh\" if {\n\tsome s in input.load_balancer.services\n\ts.listen_port == 22\n}\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_ssh_denied if \"no ssh\" in ccm.deny with input as data.inputs.ssh\n\n"+
			"test_samples_still_there if count(ccm.deny) == 0 with input as data.inputs.lb_create_default\n",
		"fixtures.json", `{"inputs": {"ssh": {"action": "loadbalancer.create", "load_balancer": {"services": [{"listen_port": 22}]}}}}`)
	// Passes opa test (count(null) is undefined there, so nothing is denied) and errors in the
	// CCM, which raises built-in errors.
	mk("unguarded count",
		"p.rego", "package ccm\n\ndeny contains \"too many targets\" if count(input.final.targets) > 50\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_no_targets if count(ccm.deny) == 0 with input as {\"final\": {\"targets\": null}}\n")
	mk("typo in an input field",
		"p.rego", "package ccm\n\ndeny contains \"x\" if input.route.destinaton == \"0.0.0.0/0\"\n",
		"p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_ok if count(ccm.deny) == 0\n")
	// A test that errors only with strict built-in errors.
	mk("built-in error in a test",
		"p.rego", "package ccm\n\ndeny contains \"x\" if input.action == \"route.create\"\n",
		"p_test.rego", "package ccm_test\n\ntest_port if to_number(\"web\") > 1\n")
	return dirs
}

func TestRunTests(t *testing.T) {
	dirs := testRevisions(t)
	tests := []struct {
		name       string
		dir        string
		opts       policy.TestOptions
		wantFailed int
		wantErr    string
		wantOutput []string
	}{
		{name: "The example policies pass", dir: examplesDir, opts: policy.TestOptions{Verbose: true},
			wantOutput: []string{"PASS: ", "not loaded, as the CCM loads a policy directory flat", "inputs/lb_create_default.json"}},
		{name: "A failing test is counted", dir: dirs["failing"], wantFailed: 1, wantOutput: []string{"FAIL: 1/2"}},
		{name: "Tests compile with the sandbox", dir: dirs["sandbox"], wantErr: "undefined function http.send"},
		{name: "No tests is an error", dir: dirs["no tests"], wantErr: "no policy tests found"},
		{name: "Fixtures under inputs/ are not loaded, and the note says why and how to fix it", dir: dirs["fixtures in inputs/"], wantFailed: 1,
			wantOutput: []string{"FAIL: 1/1", "note: failing tests read data.inputs.ssh, undefined in this revision", "loads a policy ConfigMap or --policy-dir flat",
				"fixtures.json", "not loaded: " + filepath.Join(dirs["fixtures in inputs/"], "inputs", "ssh.json")}},
		{name: "Fixtures in a data file load, and the samples stay", dir: dirs["fixtures in a data file"], wantOutput: []string{"PASS: 2/2"}},
		{name: "An unguarded count errors, as in the CCM", dir: dirs["unguarded count"], wantFailed: 1,
			wantOutput: []string{"data.ccm_test.test_no_targets: ERROR", "count: operand 1 must be one of {array, object, set, string} but got null"}},
		{name: "A misspelt input field is a type error with file and line", dir: dirs["typo in an input field"],
			wantErr: `p.rego:3:22: rego_type_error: undefined ref: input.route.destinaton: input.route has no field "destinaton"; did you mean "destination"?`}, //nolint:misspell // the misspelling is what is tested
		{name: "Built-in errors are strict", dir: dirs["built-in error in a test"], wantFailed: 1, wantOutput: []string{"ERROR"}},
		{name: "--explain fails prints the failing expression", dir: dirs["failing"], opts: policy.TestOptions{Explain: policy.ExplainFails}, wantFailed: 1,
			wantOutput: []string{"FAIL: 1/2", "| | Fail __local1__ = 1"}},
		{name: "--explain full prints every step", dir: dirs["failing"], opts: policy.TestOptions{Explain: policy.ExplainFull}, wantFailed: 1,
			wantOutput: []string{"Enter data.ccm_test.test_fails", "| Eval count(__local"}},
		{name: "--coverage prints opa test's JSON report", dir: dirs["fixtures in a data file"], opts: policy.TestOptions{Coverage: true},
			wantOutput: []string{`"coverage": 100`, `"p.rego": {`}},
		{name: "--coverage with a failing test lists the failure", dir: dirs["failing"], opts: policy.TestOptions{Coverage: true}, wantFailed: 1,
			wantOutput: []string{"data.ccm_test.test_fails: FAIL"}},
		{name: "--threshold fails below it", dir: dirs["no tests but one"], opts: policy.TestOptions{Threshold: 100},
			wantErr: "Code coverage threshold not met"},
		{name: "--explain takes fails or full", dir: examplesDir, opts: policy.TestOptions{Explain: "notes"}, wantErr: `invalid --explain "notes"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			failed, err := policy.RunTests(context.Background(), []string{tc.dir}, &out, tc.opts)
			if failed != tc.wantFailed {
				t.Errorf("failed = %d, want %d\n%s", failed, tc.wantFailed, out.String())
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			for _, w := range tc.wantOutput {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output does not contain %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// TestRunTests_verboseGroupedByFile: `policy test -v` lists the tests of each file together, in
// line order, and the files in name order (the runner reports tests in no fixed order). The
// example policies have tests in several files.
func TestRunTests_verboseGroupedByFile(t *testing.T) {
	var out bytes.Buffer
	if failed, err := policy.RunTests(context.Background(), []string{examplesDir}, &out, policy.TestOptions{Verbose: true}); failed != 0 || err != nil {
		t.Fatalf("RunTests = %d, %v\n%s", failed, err, out.String())
	}
	type place struct {
		file string
		row  int
	}
	var places []place
	for _, m := range regexp.MustCompile(`(?m)^(\S+_test\.rego):(\d+):$`).FindAllStringSubmatch(out.String(), -1) {
		row, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		places = append(places, place{m[1], row})
	}
	files := map[string]bool{}
	for _, p := range places {
		files[p.file] = true
	}
	if len(files) < 3 {
		t.Fatalf("the report names %d test files, want at least 3 (the examples have more):\n%s", len(files), out.String())
	}
	for i := 1; i < len(places); i++ {
		prev, cur := places[i-1], places[i]
		if cur.file < prev.file || cur.file == prev.file && cur.row < prev.row {
			t.Fatalf("%s:%d is listed after %s:%d; want the tests grouped by file, in file and line order:\n%s",
				cur.file, cur.row, prev.file, prev.row, out.String())
		}
	}
}

// TestRunTests_likeTheCCM: policy test fails a revision exactly when the CCM, loading the same
// directory, rejects it; and the CCM's rejection of fixtures under inputs/ says why.
func TestRunTests_likeTheCCM(t *testing.T) {
	dirs := testRevisions(t)
	dirs["examples"] = examplesDir
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			failed, testErr := policy.RunTests(context.Background(), []string{dir}, io.Discard, policy.TestOptions{})
			files, err := policy.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, loadErr := policy.NewEngine(policy.Options{}).Load(context.Background(), files, policy.DirSource(dir))
			if name == "no tests" {
				// The CCM needs no tests; policy test, like opa test --fail-on-empty, does.
				if loadErr != nil || testErr == nil {
					t.Fatalf("Load = %v, RunTests = %v; want the CCM to accept and policy test to fail", loadErr, testErr)
				}
				return
			}
			if ccmRejects, testFails := loadErr != nil, failed > 0 || testErr != nil; ccmRejects != testFails {
				t.Fatalf("CCM rejects: %v (%v); policy test fails: %v (%d failed, %v)", ccmRejects, loadErr, testFails, failed, testErr)
			}
			if name == "fixtures in inputs/" {
				for _, w := range []string{"ccm_test_data_undefined: failing tests read data.inputs.ssh", "fixtures.json",
					"ccm_test_failed: Rego test ccm_test.test_ssh_denied failed (it reads data.inputs.ssh, which this revision does not define)"} {
					if !strings.Contains(loadErr.Error(), w) {
						t.Errorf("the CCM's rejection %q\nlacks %q", loadErr, w)
					}
				}
			}
		})
	}
}

func TestEvalFile(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	err := policy.EvalFile(ctx, examplesDir, filepath.Join(examplesDir, "inputs", "lb_create_lb31_unlabelled.json"), &out, policy.Options{})
	if !errors.Is(err, policy.ErrDenied) || !strings.HasSuffix(err.Error(), "a create is all or nothing: the CCM creates no load balancer") {
		t.Fatalf("EvalFile(lb31) = %v, want ErrDenied saying what it holds back", err)
	}
	var got policy.EvalResult
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if got.Allowed || len(got.Deny) != 1 || got.Deny[0].Code != "lb_type_needs_namespace_label" || len(got.Revision) != 12 {
		t.Fatalf("EvalFile output = %+v, want one lb_type_needs_namespace_label denial", got)
	}

	out.Reset()
	err = policy.EvalFile(ctx, examplesDir, filepath.Join(examplesDir, "inputs", "lb_create_lb31_unlabelled.json"), &out, policy.Options{Mode: policy.ModeDryRun})
	if err != nil || !strings.Contains(out.String(), `"dry_run": true`) {
		t.Fatalf("EvalFile(dry run) = %v, output:\n%s", err, out.String())
	}

	// "-" reads standard input, without unwrapping.
	sample, err := readSample(filepath.Join(examplesDir, "inputs", "route_create.json"))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(sample)
	if err != nil {
		t.Fatal(err)
	}
	plainFile := filepath.Join(t.TempDir(), "route.json")
	writeFile(t, filepath.Dir(plainFile), "route.json", string(plain))
	f, err := os.Open(plainFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = saved }()
	out.Reset()
	if err := policy.EvalFile(ctx, examplesDir, "-", &out, policy.Options{}); err != nil || !strings.Contains(out.String(), `"allowed": true`) {
		t.Fatalf("EvalFile(stdin) = %v, output:\n%s", err, out.String())
	}

	if err := policy.EvalFile(ctx, t.TempDir(), plainFile, &out, policy.Options{}); err == nil || !strings.Contains(err.Error(), "no .rego file") {
		t.Fatalf("EvalFile with an empty policy directory = %v, want a no .rego file error", err)
	}

	unknown := filepath.Join(t.TempDir(), "in.json")
	writeFile(t, filepath.Dir(unknown), "in.json", `{"action": "loadbalancer.create", "load_balancer": {"typ": "lb11"}}`)
	if err := policy.EvalFile(ctx, examplesDir, unknown, &out, policy.Options{}); err == nil || !strings.Contains(err.Error(), `unknown field "typ"`) {
		t.Fatalf("EvalFile with a misspelt field = %v, want an unknown field error", err)
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readSample returns a sample input as the generic JSON document the schema describes.
func readSample(path string) (any, error) {
	in, err := policy.ReadInputFile(path)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// TestDenialScope: `policy eval` says what a denial holds back, by action: one step and what
// needs it on an existing load balancer (steps fail alone), everything for a create or delete.
func TestDenialScope(t *testing.T) {
	for action, want := range map[string]string{
		input.ActionLoadBalancerUpdate: "the plan's other steps",
		input.ActionLoadBalancerCreate: "all or nothing",
		input.ActionLoadBalancerDelete: "keeps the load balancer",
		input.ActionRouteCreate:        "none of the node's routes",
		"something.else":               "nothing of this plan",
	} {
		if got := policy.DenialScope(action); !strings.Contains(got, want) {
			t.Errorf("DenialScope(%s) = %q, want it to contain %q", action, got, want)
		}
	}
}
