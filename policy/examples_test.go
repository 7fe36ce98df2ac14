package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
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
// after decoding it strictly into policy.Input.
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
			if in.Version != policy.InputVersion {
				t.Errorf("version = %q, want %q", in.Version, policy.InputVersion)
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

func TestRunTests(t *testing.T) {
	failing := t.TempDir()
	writeFile(t, failing, "p.rego", "package ccm\n\ndeny contains \"x\" if input.a == 1\n")
	writeFile(t, failing, "p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_passes if count(ccm.deny) == 0\n\ntest_fails if count(ccm.deny) == 1\n")
	sandbox := t.TempDir()
	writeFile(t, sandbox, "p.rego", "package ccm\n\ndeny contains \"x\" if http.send({}).status_code == 1\n")
	writeFile(t, sandbox, "p_test.rego", "package ccm_test\n\nimport data.ccm\n\ntest_x if count(ccm.deny) == 0\n")
	empty := t.TempDir()
	writeFile(t, empty, "p.rego", "package ccm\n\ndeny contains \"x\" if input.a == 1\n")

	tests := []struct {
		name       string
		dir        string
		wantFailed int
		wantErr    string
		wantOutput string
	}{
		{name: "The example policies pass", dir: examplesDir, wantOutput: "PASS: "},
		{name: "A failing test is counted", dir: failing, wantFailed: 1, wantOutput: "FAIL: 1/2"},
		{name: "Tests compile with the sandbox", dir: sandbox, wantErr: "undefined function http.send"},
		{name: "No tests is an error", dir: empty, wantErr: "no policy tests found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			failed, err := policy.RunTests(context.Background(), []string{tc.dir}, &out, true)
			if failed != tc.wantFailed {
				t.Errorf("failed = %d, want %d\n%s", failed, tc.wantFailed, out.String())
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOutput) {
				t.Errorf("output does not contain %q:\n%s", tc.wantOutput, out.String())
			}
		})
	}
}

func TestEvalFile(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	err := policy.EvalFile(ctx, examplesDir, filepath.Join(examplesDir, "inputs", "lb_create_lb31_unlabelled.json"), &out, policy.Options{})
	if !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("EvalFile(lb31) = %v, want ErrDenied", err)
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
