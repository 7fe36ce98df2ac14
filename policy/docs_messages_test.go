package policy_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestDocsMessages_format: the quota messages docs/policy.md shows are what
// examples/policies/quotas.rego gives, with whole-number prices (5 EUR per lb11, which reach
// Rego as integers: the trap of sprintf("%.2f", 15)), for a create and for the audit. Each
// message must appear in the docs (line breaks aside) up to where they cut it ("…").
func TestDocsMessages_format(t *testing.T) {
	ctx := context.Background()
	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchDir(ctx, e, examplesDir); err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		owned  int    // lb11 load balancers team-a owns before the step
		budget string // the namespace's budget label; "" for none
		audit  bool
		code   string
		prefix int // how much of the message the docs show; 0: all of it
	}{
		{name: "a create over the budget", owned: 2, budget: "12", code: "quota_monthly_budget"},
		{name: "the audit: the third of three under a limit of 2", owned: 2, audit: true, code: "quota_load_balancers_per_namespace",
			prefix: len(`namespace "team-a" already owned 2 load balancers when this one was created and at most 2 are allowed`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := teamAInput(t, tc.owned, tc.budget, tc.audit)
			var quota policy.Decision
			if tc.code == "quota_load_balancers_per_namespace" {
				quota = decideWithLimit(ctx, t, in, 2)
			} else {
				quota = e.Decide(ctx, in)
			}
			var msg string
			for _, m := range quota.Deny {
				if m.Code == tc.code {
					msg = m.Msg
				}
			}
			if msg == "" {
				t.Fatalf("no %s message in %+v", tc.code, quota.Deny)
			}
			if strings.Contains(msg, "%!") {
				t.Errorf("message %q has a formatting error", msg)
			}
			shown := msg
			if tc.prefix > 0 {
				shown = msg[:tc.prefix]
			}
			if !strings.Contains(oneLine(string(docs)), oneLine(shown)) {
				t.Errorf("docs/policy.md does not show the message the example gives:\n%s", shown)
			}
		})
	}
}

// oneLine is s with every run of white space (a line break of the docs' source) one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// teamAInput is the sample create in namespace team-a, which owns owned lb11 at 5 EUR net (a
// whole number) a month each, with the budget label when budget is set.
func teamAInput(t *testing.T, owned int, budget string, audit bool) input.Input {
	t.Helper()
	in, err := policy.ReadInputFile(filepath.Join(examplesDir, "inputs", "lb_create_default.json"))
	if err != nil {
		t.Fatal(err)
	}
	in.Service.Namespace = "team-a"
	in.Service.NamespaceLabels = map[string]string{"hcloud-ccm/public": "true"}
	if budget != "" {
		in.Service.NamespaceLabels["hcloud-policy-ccm.io/monthly-budget"] = budget
	}
	in.Audit = audit
	net := float64(5 * owned)
	totals := input.Totals{LoadBalancers: owned, ByType: map[string]int{"lb11": owned}, MonthlyNet: net, MonthlyGross: net * 1.19}
	in.Inventory = &input.Inventory{Currency: "EUR", LoadBalancers: []input.InventoryLoadBalancer{},
		Namespaces: map[string]input.Totals{"team-a": totals}, Cluster: totals}
	in.Cost = &input.Cost{Currency: "EUR", After: input.Amount{MonthlyNet: 5, MonthlyGross: 5.95}, Delta: input.Amount{MonthlyNet: 5, MonthlyGross: 5.95}}
	return in
}

// decideWithLimit decides in with the example policies under max_load_balancers_per_namespace
// limit (the example's tests left out: they assume the example's limit).
func decideWithLimit(ctx context.Context, t *testing.T, in input.Input, limit int) policy.Decision {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		if f.IsDir() || strings.HasSuffix(f.Name(), "_test.rego") { // their cases assume the limit of data.json
			continue
		}
		b, err := os.ReadFile(filepath.Join(examplesDir, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if f.Name() == "data.json" {
			b = []byte(strings.Replace(string(b), `"max_load_balancers_per_namespace": 10`, `"max_load_balancers_per_namespace": `+strconv.Itoa(limit), 1))
		}
		writeFile(t, dir, f.Name(), string(b))
	}
	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchDir(ctx, e, dir); err != nil {
		t.Fatal(err)
	}
	return e.Decide(ctx, in)
}
