package policy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestSampleInputsInSync checks that the sample inputs shipped in the binary (policy/samples)
// are exactly examples/policies/inputs.
func TestSampleInputsInSync(t *testing.T) {
	const src, dst = "../examples/policies/inputs", "samples"
	const fix = "run `cp examples/policies/inputs/*.json policy/samples/` (and remove stale files) and commit"
	want, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s has %d files, %s has %d: %s", src, len(want), dst, len(got), fix)
	}
	for i, ent := range want {
		if got[i].Name() != ent.Name() {
			t.Fatalf("file %d: %s in %s, %s in %s: %s", i, ent.Name(), src, got[i].Name(), dst, fix)
		}
		a, err := os.ReadFile(filepath.Join(src, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dst, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs: %s", ent.Name(), fix)
		}
	}
	ins, err := policy.SampleInputs()
	if err != nil || len(ins) != len(want) {
		t.Fatalf("SampleInputs() = %d inputs, %v; want %d", len(ins), err, len(want))
	}
}

// TestEngine_Load_vetsRevision proves that a revision is evaluated before it is put in force:
// an evaluation error on a sample input or a failing test of its own rejects it like a compile
// error (LoadError, PolicyRejected event), and the last good revision stays in force.
func TestEngine_Load_vetsRevision(t *testing.T) {
	// Fails on every sample input: service names are not numbers. Without strict built-in
	// errors this rule is simply undefined and the revision would allow everything.
	const builtinError = "package ccm\n\ndeny contains \"n\" if to_number(input.service.name) > 1\n"
	const failingTest = "package ccm_test\n\nimport data.ccm\n\ntest_lb31_denied if {\n\tcount(ccm.deny) == 2 with input as data.inputs.lb_create_lb31_unlabelled\n}\n"
	const passingTest = "package ccm_test\n\nimport data.ccm\n\ntest_lb31_denied if {\n\tcount(ccm.deny) == 1 with input as object.union(data.inputs.lb_create_default, {\"load_balancer\": {\"type\": \"lb31\"}})\n}\n"
	const erroringTest = "package ccm_test\n\ntest_div if {\n\tx := 0\n\t1 / x == 1\n}\n"
	tests := []struct {
		name     string
		files    map[string][]byte
		wantCode string // "" means accepted
		wantFile string
		wantMsg  string
	}{
		{name: "A built-in error on a sample input rejects the revision", files: files("n.rego", builtinError),
			wantCode: "ccm_sample_error", wantFile: "sample input lb_create_default", wantMsg: "to_number"},
		{name: "A failing test of the revision rejects it", files: files("lb.rego", denyLB31, "lb_test.rego", failingTest),
			wantCode: "ccm_test_failed", wantFile: "lb_test.rego", wantMsg: "ccm_test.test_lb31_denied failed"},
		{name: "A test with a built-in error rejects the revision", files: files("lb.rego", denyLB31, "div_test.rego", erroringTest),
			wantCode: "ccm_test_error", wantFile: "div_test.rego", wantMsg: "ccm_test.test_div"},
		{name: "Passing tests see the sample inputs as data.inputs", files: files("lb.rego", denyLB31, "lb_test.rego", passingTest)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ccm-policy"}}
			rec := record.NewFakeRecorder(10)
			e := policy.NewEngine(policy.Options{Recorder: rec})
			good := mustLoad(t, e, files("lb.rego", denyLB31))
			rev, err := e.Load(ctx, tc.files, policy.ConfigMapSource(cm))
			if tc.wantCode == "" {
				if err != nil || e.Revision() != rev {
					t.Fatalf("Load = %v, revision in force %q; want %q accepted", err, e.Revision(), rev)
				}
				return
			}
			var lerr *policy.LoadError
			if !errors.As(err, &lerr) {
				t.Fatalf("Load = %v, want a *LoadError", err)
			}
			found := false
			for _, p := range lerr.Problems {
				found = found || (p.Code == tc.wantCode && p.File == tc.wantFile && strings.Contains(p.Message, tc.wantMsg))
			}
			if !found {
				t.Fatalf("problems = %+v, want one with code %s, file %q, message containing %q", lerr.Problems, tc.wantCode, tc.wantFile, tc.wantMsg)
			}
			if e.Revision() != good {
				t.Fatalf("Revision() = %q, want the last good %q to stay in force", e.Revision(), good)
			}
			close(rec.Events)
			var events []string
			for ev := range rec.Events {
				events = append(events, ev)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "Warning PolicyRejected Policy revision "+rev) || !strings.Contains(events[0], tc.wantCode) {
				t.Fatalf("events = %q, want one PolicyRejected for %s naming %s", events, rev, tc.wantCode)
			}
		})
	}
}

// TestEngine_Load_examplesWithTests loads examples/policies as a directory including its
// *_test.rego files: the tests run against the shipped sample inputs and pass.
func TestEngine_Load_examplesWithTests(t *testing.T) {
	fs, err := policy.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name := range fs {
		if strings.HasSuffix(name, "_test.rego") {
			n++
		}
	}
	if n == 0 {
		t.Fatal("examples/policies holds no *_test.rego file")
	}
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), fs, policy.DirSource(examplesDir)); err != nil {
		t.Fatalf("Load(examples with %d test files) = %v", n, err)
	}
}

func BenchmarkEngine_Load_examplesWithTests(b *testing.B) {
	fs, err := policy.ReadDir(examplesDir)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		e := policy.NewEngine(policy.Options{})
		if _, err := e.Load(context.Background(), fs, policy.DirSource(examplesDir)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEngine_Load_undefinedFixturesEvent: the case. 31 tests read fixtures that only an
// inputs/ subdirectory held; the PolicyRejected event (cut at 1 KiB) still says why and how to
// fix it, before the list of failures.
func TestEngine_Load_undefinedFixturesEvent(t *testing.T) {
	var tests strings.Builder
	tests.WriteString("package ccm_test\n\nimport data.ccm\n")
	for i := range 31 {
		fmt.Fprintf(&tests, "\ntest_case_%d if count(ccm.deny) == 1 with input as data.inputs.case_%d\n", i, i)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ccm-policy"}}
	rec := record.NewFakeRecorder(10)
	e := policy.NewEngine(policy.Options{Recorder: rec})
	_, err := e.Load(context.Background(), files(
		"p.rego", "package ccm\n\ndeny contains \"x\" if input.action == \"route.create\"\n",
		"p_test.rego", tests.String()), policy.ConfigMapSource(cm))
	if err == nil {
		t.Fatal("Load = nil error, want the revision rejected")
	}
	ev := <-rec.Events
	for _, w := range []string{"PolicyRejected", "ccm_test_data_undefined: failing tests read data.inputs.case_0, data.inputs.case_1, data.inputs.case_10 and 28 more",
		"flat", "Fix: put each fixture in a data file beside the policies, e.g. fixtures.json"} {
		if !strings.Contains(ev, w) {
			t.Errorf("event %q\nlacks %q", ev, w)
		}
	}
}
