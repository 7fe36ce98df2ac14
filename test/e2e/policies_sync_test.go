package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestDeployPoliciesInSync checks that deploy/policies holds exactly the policies of
// examples/policies (every *.rego except *_test.rego, plus data.json and data.yaml) with the
// same content, and that its kustomization lists exactly those files. kustomize cannot load
// files outside deploy/, so deploy/policies/sync.sh copies them; this test catches a forgotten
// run. It needs no cluster and runs with the unit tests.
// checkPolicyCopy fails the test unless dst holds exactly the policy files of src with the same
// content; it returns their names.
func checkPolicyCopy(t *testing.T, src, dst, fix string) []string {
	t.Helper()
	want := policyFiles(t, src)
	if diff := cmp.Diff(want, policyFiles(t, dst)); diff != "" {
		t.Fatalf("policy files of %s and %s differ (-source +copy): %s\n%s", src, dst, fix, diff)
	}
	for _, name := range want {
		a, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between %s and %s: %s", name, src, dst, fix)
		}
	}
	return want
}

func TestDeployPoliciesInSync(t *testing.T) {
	const src, dst = "../../examples/policies", "../../deploy/policies"
	const fix = "run deploy/policies/sync.sh and commit the result"

	want := checkPolicyCopy(t, src, dst, fix)

	raw, err := os.ReadFile(filepath.Join(dst, "kustomization.yaml"))
	if err != nil {
		t.Fatalf("read kustomization: %v", err)
	}
	var k struct {
		ConfigMapGenerator []struct {
			Name  string   `json:"name"`
			Files []string `json:"files"`
		} `json:"configMapGenerator"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("parse %s/kustomization.yaml: %v", dst, err)
	}
	if len(k.ConfigMapGenerator) != 1 || k.ConfigMapGenerator[0].Name != "hcloud-ccm-policies" {
		t.Fatalf("%s/kustomization.yaml: want one configMapGenerator named hcloud-ccm-policies, got %+v", dst, k.ConfigMapGenerator)
	}
	listed := slices.Clone(k.ConfigMapGenerator[0].Files)
	slices.Sort(listed)
	if diff := cmp.Diff(want, listed, cmp.Comparer(slices.Equal[[]string])); diff != "" {
		t.Errorf("files listed in %s/kustomization.yaml (-want +got): %s\n%s", dst, fix, diff)
	}
}

// policyFiles lists, sorted, the files of dir that belong in the policy ConfigMap. A missing
// dir has none.
func policyFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		rego := strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, "_test.rego")
		if rego || name == "data.json" || name == "data.yaml" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
