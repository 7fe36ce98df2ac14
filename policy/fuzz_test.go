package policy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// FuzzEngine_Load feeds arbitrary policy and data files to Load and decides with whatever got
// loaded: neither may panic, a rejection is always a *LoadError with at least one problem, and
// a decision is always allowed or carries its reason.
func FuzzEngine_Load(f *testing.F) {
	f.Add(denyLB31, `{"config": {}}`, "lb31")
	f.Add("package ccm\n\ndeny contains msg if msg := y\n", `{}`, "lb11")
	f.Add("package ccm\n\ndeny contains 42 if true\n", `[]`, "lb11")
	f.Add("package ccm\n\nwarn contains {\"msg\": 1} if true\n", "a: [", "")
	f.Add("package ccm\n\ndeny contains x if { x := input.load_balancer.type; x != \"lb11\" }\n", `{"a": {"b": 1}}`, "lb21")
	f.Fuzz(func(t *testing.T, rules, data, typ string) {
		ctx := context.Background()
		e := policy.NewEngine(policy.Options{})
		_, err := e.Load(ctx, map[string][]byte{"p.rego": []byte(rules), "d.json": []byte(data)}, policy.Source{Name: "fuzz"})
		if err != nil {
			var lerr *policy.LoadError
			if !errors.As(err, &lerr) || len(lerr.Problems) == 0 {
				t.Fatalf("Load error %v is not a *LoadError with problems", err)
			}
		}
		d := e.Decide(ctx, lbInput(typ))
		if !d.Allowed && len(d.Deny) == 0 && d.Err == nil {
			t.Fatalf("Decide = %+v: denied without a message or an error", d)
		}
	})
}
