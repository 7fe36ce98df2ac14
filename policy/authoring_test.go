package policy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/internal/inputdoc"
)

// TestWriteSamples: `policy samples --out DIR` writes exactly the files of
// examples/policies/inputs to DIR/inputs, so that opa loads them as data.inputs.NAME (the
// command line of docs/policy.md is run by TestDocBareOpa in cmd/hcloud-policy-ccm). Writing
// again replaces them and leaves other files alone.
func TestWriteSamples(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, policy.SamplesSubdir, "my_case.json")
	writeFile(t, dir, filepath.Join(policy.SamplesSubdir, "my_case.json"), `{"my_case": {}}`)
	for range 2 {
		written, err := policy.WriteSamples(dir)
		if err != nil {
			t.Fatal(err)
		}
		want, err := filepath.Glob(filepath.Join(examplesDir, "inputs", "*.json"))
		if err != nil || len(want) == 0 {
			t.Fatalf("no sample inputs in the examples: %v", err)
		}
		if len(written) != len(want) {
			t.Fatalf("wrote %d files, want the %d of %s/inputs: %v", len(written), len(want), examplesDir, written)
		}
		for _, w := range want {
			a, err := os.ReadFile(w)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(dir, policy.SamplesSubdir, filepath.Base(w)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs from %s", filepath.Base(w), w)
			}
		}
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("an own file beside the samples is gone: %v", err)
	}
	if _, err := policy.WriteSamples(""); err == nil {
		t.Error("WriteSamples(\"\") succeeded, want an error")
	}
}

// TestInputSchema: `policy schema` prints docs/policy-input.schema.json.
func TestInputSchema(t *testing.T) {
	got := policy.InputSchema()
	want, err := os.ReadFile(filepath.Join("..", inputdoc.SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("InputSchema() differs from %s: run `make generate`", inputdoc.SchemaPath)
	}
}
