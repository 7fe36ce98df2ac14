package deploy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// setup returns the repository root and the helm binary, failing the test (with the command that
// builds helm) when helm is missing.
func setup(t *testing.T) (root, helm string) {
	t.Helper()
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	helm, err = HelmBin(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, helm
}

// TestManifestsCurrent is the one check that the manifests of deploy/ are what the chart renders
// today: every committed Manifest equals a fresh Render, byte for byte.
func TestManifestsCurrent(t *testing.T) {
	root, helm := setup(t)
	files, err := Render(t.Context(), helm, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Manifests {
		got, err := os.ReadFile(filepath.Join(root, m.Path))
		if err != nil {
			t.Errorf("%v: run %s", err, Regenerate)
			continue
		}
		if diff := cmp.Diff(string(files[m.Path]), string(got)); diff != "" {
			t.Errorf("%s is stale: run %s (-rendered +committed):\n%s", m.Path, Regenerate, diff)
		}
	}
}

// TestManifestsCarryTheExamplePolicies: the policy ConfigMap of every rendered manifest holds
// exactly the policy files of examples/policies, byte for byte (what .helmignore and the chart's
// glob let through is the selection of policyFiles).
func TestManifestsCarryTheExamplePolicies(t *testing.T) {
	root, helm := setup(t)
	want := policyFiles(t, filepath.Join(root, "examples/policies"))
	files, err := Render(t.Context(), helm, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Manifests {
		cm := policyConfigMap(t, m.Path, files[m.Path])
		if diff := cmp.Diff(want, cm.Data); diff != "" {
			t.Errorf("ConfigMap hcloud-ccm-policies of %s (-examples/policies +rendered):\n%s", m.Path, diff)
		}
	}
}

// TestChartShipsTheExamplePolicies: deploy/chart/policies is a symbolic link to
// examples/policies (not a copy), and `helm package` stores exactly the policy files of
// examples/policies in the archive, with their content, so a chart installed from the package
// renders the same ConfigMap as one installed from the directory.
func TestChartShipsTheExamplePolicies(t *testing.T) {
	root, helm := setup(t)
	link := filepath.Join(root, chartDir, "policies")
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatalf("%s: %v; it must be a symbolic link to ../../examples/policies (ln -s ../../examples/policies %s)", link, err, link)
	}
	if target != "../../examples/policies" {
		t.Errorf("%s links to %q, want ../../examples/policies", link, target)
	}

	want := policyFiles(t, filepath.Join(root, "examples/policies"))
	out := t.TempDir()
	if _, err := Helm(t.Context(), helm, root, "package", chartDir, "--destination", out); err != nil {
		t.Fatal(err)
	}
	archives, err := filepath.Glob(filepath.Join(out, "*.tgz"))
	if err != nil || len(archives) != 1 {
		t.Fatalf("helm package wrote %v (%v), want one .tgz", archives, err)
	}
	if diff := cmp.Diff(want, archivedPolicies(t, archives[0])); diff != "" {
		t.Errorf("policies/ in %s (-examples/policies +package):\n%s", filepath.Base(archives[0]), diff)
	}
	rendered, err := Helm(t.Context(), helm, root, "template", release, archives[0], "--namespace", namespace)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, policyConfigMap(t, "helm template of the package", rendered).Data); diff != "" {
		t.Errorf("ConfigMap rendered from the package (-examples/policies +rendered):\n%s", diff)
	}
}

// TestNoPolicyCopyInDeploy: deploy/ holds no policy or data file of its own (only the link
// deploy/chart/policies, which is not followed here): examples/policies is the one policy
// directory, and the manifests carry its files only in generated ConfigMaps.
func TestNoPolicyCopyInDeploy(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if !d.IsDir() && (strings.HasSuffix(name, ".rego") || name == "data.json" || name == "data.yaml" || name == "sync.sh") {
			t.Errorf("%s: a copy kept by hand; examples/policies is the one policy directory (deploy/chart/policies links to it)", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// policyFiles returns the files of dir that belong in the policy ConfigMap, name -> content:
// every *.rego except *_test.rego, and data.json / data.yaml.
func policyFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isPolicyFile(e.Name()) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(raw)
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no policy file", dir)
	}
	return out
}

func isPolicyFile(name string) bool {
	rego := strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, "_test.rego")
	return rego || name == "data.json" || name == "data.yaml"
}

// archivedPolicies returns the files under <chart>/policies/ of a packaged chart, name -> content.
func archivedPolicies(t *testing.T, archive string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("read %s: %v", archive, err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", archive, err)
		}
		_, rest, _ := strings.Cut(h.Name, "/") // <chart name>/...
		dir, name := filepath.Split(rest)
		if dir != "policies/" {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s in %s is not a regular file (type %c): the package must hold the files themselves", h.Name, archive, h.Typeflag)
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(body)
	}
	return out
}

// policyConfigMap returns the ConfigMap hcloud-ccm-policies of the multi-document YAML out (made
// by what), failing the test if there is not exactly one.
func policyConfigMap(t *testing.T, what string, out []byte) *corev1.ConfigMap {
	t.Helper()
	var found []*corev1.ConfigMap
	for doc := range strings.SplitSeq("\n"+string(out), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("parse %s: %v\n%s", what, err, doc)
		}
		if meta.Kind != "ConfigMap" || meta.Metadata.Name != "hcloud-ccm-policies" {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := yaml.UnmarshalStrict([]byte(doc), cm); err != nil {
			t.Fatalf("parse the policy ConfigMap of %s: %v", what, err)
		}
		found = append(found, cm)
	}
	if len(found) != 1 {
		t.Fatalf("%s renders %d ConfigMaps hcloud-ccm-policies, want 1", what, len(found))
	}
	return found[0]
}

// TestIsPolicyFile pins the selection itself, so a wrong isPolicyFile cannot make both sides of
// the checks above agree.
func TestIsPolicyFile(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"ports.rego", true},
		{"ports_test.rego", false},
		{"data.json", true},
		{"data.yaml", true},
		{"README.md", false},
		{"other.json", false},
	}
	for _, tc := range tests {
		if got := isPolicyFile(tc.name); got != tc.want {
			t.Errorf("isPolicyFile(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
