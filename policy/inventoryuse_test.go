package policy_test

import (
	"context"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestEngine_ReadsInventory: a revision reads the inventory when a module names
// input.inventory or input.cost, by reference or as an object.get key; an allow-all revision
// does not, and neither does an engine without a revision.
func TestEngine_ReadsInventory(t *testing.T) {
	tests := []struct {
		name string
		body string // of a deny rule
		want bool
	}{
		{"an allow-all policy", `input.action == "never"`, false},
		{"a reference", `input.inventory.cluster.load_balancers > 3`, true},
		{"the cost", `input.cost.delta.monthly_gross > 10`, true},
		{"an object.get path", `object.get(input, ["inventory", "cluster", "load_balancers"], 0) > 3`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := policy.NewEngine(policy.Options{})
			if e.ReadsInventory() {
				t.Fatal("an engine without a revision reads the inventory")
			}
			src := "package ccm\n\ndeny contains \"x\" if {\n    " + tt.body + "\n}\n"
			if _, err := e.Load(context.Background(), files("p.rego", src), policy.Source{Name: "test"}); err != nil {
				t.Fatal(err)
			}
			if got := e.ReadsInventory(); got != tt.want {
				t.Errorf("ReadsInventory = %v, want %v", got, tt.want)
			}
		})
	}
}
