package policy

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// SamplesSubdir is the directory below the --out directory of [WriteSamples] that holds the
// sample inputs: opa loads DIR/inputs/NAME.json as data.inputs.NAME.
const SamplesSubdir = "inputs"

// WriteSamples writes the sample inputs shipped in the binary (examples/policies/inputs) to
// dir/inputs/NAME.json, each wrapped as {"NAME": input} as in the repository, and returns the
// paths written. It is the CLI's `policy samples --out DIR`: with them, bare opa sees the
// data.inputs the CCM gives the Rego tests of a revision:
//
//	hcloud-policy-ccm policy samples --out policy-samples/
//	opa test policies/ policy-samples/
//
// # Notes
//
// Keep dir apart from the policies: the CCM loads a policy directory flat and ignores a
// subdirectory, so samples written below it reach opa test and not the CCM (which has them
// built in anyway). Existing files of the same names are replaced; other files are left alone.
//
// # Errors
//
// An error names the file that could not be written.
func WriteSamples(dir string) ([]string, error) {
	if dir == "" {
		return nil, errors.New("write sample inputs: no directory given")
	}
	entries, err := samples.ReadDir("samples")
	if err != nil {
		return nil, fmt.Errorf("read sample inputs: %w", err)
	}
	out := filepath.Join(dir, SamplesSubdir)
	if err := os.MkdirAll(out, 0o755); err != nil { //nolint:gosec // public documents, readable like a checkout of the repository
		return nil, fmt.Errorf("write sample inputs: %w", err)
	}
	written := make([]string, 0, len(entries))
	for _, ent := range entries {
		b, err := samples.ReadFile(path.Join("samples", ent.Name()))
		if err != nil {
			return written, fmt.Errorf("read sample input %s: %w", ent.Name(), err)
		}
		p := filepath.Join(out, ent.Name())
		if err := os.WriteFile(p, b, 0o644); err != nil { //nolint:gosec // as the directory
			return written, fmt.Errorf("write sample inputs: %w", err)
		}
		written = append(written, p)
	}
	return written, nil
}

// InputSchema returns the JSON Schema of the policy input, as docs/policy-input.schema.json
// holds it (gendoc writes both; TestGeneratedCurrent and TestInputSchema keep them equal). It is
// the CLI's `policy schema`, for `opa check --schema FILE`.
func InputSchema() []byte {
	return []byte(inputSchemaJSON)
}
