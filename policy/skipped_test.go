package policy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestSkippedSubdirs: the subdirectories that ReadDir leaves out are named (the CCM logs them),
// except the kubelet's dot-directories of a mounted ConfigMap.
func TestSkippedSubdirs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"inputs", "..data", ".git"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ports.rego"), []byte("package ccm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := policy.SkippedSubdirs(dir), []string{"inputs/"}; !slices.Equal(got, want) {
		t.Errorf("SkippedSubdirs = %q, want %q", got, want)
	}
	files, err := policy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files["ports.rego"] == nil {
		t.Errorf("ReadDir = %v, want ports.rego alone", files)
	}
	if got := policy.SkippedSubdirs(filepath.Join(dir, "missing")); got != nil {
		t.Errorf("SkippedSubdirs(missing) = %q, want none", got)
	}
}
