package policy_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestEvalFile_enforcementAndWarnErrors: `policy eval` shows a deny message's own enforcement
// and a failed warn rule, and decides as the CCM does: neither blocks.
func TestEvalFile_enforcementAndWarnErrors(t *testing.T) {
	const input = `{"version": "v1", "action": "loadbalancer.create", "operation": "create",
		"service": {"namespace": "default", "name": "web"},
		"load_balancer": {"name": "web", "type": "lb99", "location": "fsn1"}}`
	tests := []struct {
		name       string
		rules      string
		wantDenied bool
		want       []string // in the JSON output
	}{
		{
			name:  "A dry-run deny message shows its enforcement and does not block",
			rules: `deny contains {"msg": "lb99 soon denied", "code": "new", "enforcement": "dryrun"} if input.load_balancer.type == "lb99"`,
			want:  []string{`"allowed": true`, `"dry_run": true`, `"enforcement": "dryrun"`},
		},
		{
			name: "An enforced deny next to it blocks",
			rules: `deny contains {"msg": "lb99 soon denied", "enforcement": "dryrun"} if input.load_balancer.type == "lb99"

deny contains "no lb99" if input.load_balancer.type == "lb99"`,
			wantDenied: true,
			want:       []string{`"allowed": false`, `"dry_run": true`, `"msg": "no lb99"`},
		},
		{
			name: "A warn rule that fails shows warn_error and does not block",
			rules: `warn contains "w" if {
	input.load_balancer.type == "lb99"
	10 / (count(input.service.name) - 3) > 1
}`,
			want: []string{`"allowed": true`, `"warn_error": "policy revision`, `divide by zero`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "gate.rego", "package ccm\n\n"+tc.rules+"\n")
			in := filepath.Join(t.TempDir(), "in.json")
			writeFile(t, filepath.Dir(in), "in.json", input)
			var out bytes.Buffer
			err := policy.EvalFile(context.Background(), dir, in, &out, policy.Options{})
			if denied := errors.Is(err, policy.ErrDenied); denied != tc.wantDenied || (err != nil && !denied) {
				t.Fatalf("EvalFile = %v, want denied %v", err, tc.wantDenied)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %s:\n%s", w, out.String())
				}
			}
		})
	}
}
