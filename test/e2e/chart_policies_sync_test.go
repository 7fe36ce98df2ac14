package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestChartPoliciesInSync checks that deploy/chart/policies holds exactly the policies of
// examples/policies (the same selection as deploy/policies) with the same content: the chart
// renders its default policy ConfigMap from these copies, because helm reads only files inside
// the chart. It needs no cluster and runs with the unit tests.
func TestChartPoliciesInSync(t *testing.T) {
	const src, dst = "../../examples/policies", "../../deploy/chart/policies"
	const fix = "run deploy/chart/policies/sync.sh and commit the result"

	want := policyFiles(t, src)
	got := policyFiles(t, dst)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("policy files of %s and %s differ (-examples +chart): %s\n%s", src, dst, fix, diff)
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
}
