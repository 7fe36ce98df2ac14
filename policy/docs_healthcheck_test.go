package policy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestDocsHealthCheckRule: the health check rule docs/policy.md shows (What to match on,
// Health checks) loads as it is written, denies a listener whose check runs every 60 s with the
// message the docs give, and allows one every 10 s and one whose interval is not sent (null).
func TestDocsHealthCheckRule(t *testing.T) {
	ctx := context.Background()
	docs, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(docs), "**Health checks.**")
	if !ok {
		t.Fatal("docs/policy.md has no paragraph **Health checks.**")
	}
	_, block, ok := strings.Cut(after, "```rego\n")
	if !ok {
		t.Fatal("no rego block after **Health checks.**")
	}
	block, _, _ = strings.Cut(block, "```")
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(ctx, map[string][]byte{"health_checks.rego": []byte("package ccm\n\n" + block)}, policy.Source{}); err != nil {
		t.Fatalf("the docs' rule does not load: %v", err)
	}
	tests := []struct {
		name     string
		interval *int
		deny     bool
	}{
		{name: "every 60 s: denied", interval: new(60), deny: true},
		{name: "every 10 s: allowed", interval: new(10)},
		{name: "not sent (null): allowed", interval: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := policy.ReadInputFile(filepath.Join(examplesDir, "inputs", "lb_create_default.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(in.LoadBalancer.Services) == 0 {
				t.Fatal("the sample create has no listener")
			}
			for i := range in.LoadBalancer.Services {
				in.LoadBalancer.Services[i].HealthCheck.Interval = tc.interval
			}
			d := e.Decide(ctx, in)
			if d.Err != nil {
				t.Fatal(d.Err)
			}
			if !tc.deny {
				if len(d.Deny) != 0 {
					t.Errorf("denied: %+v", d.Deny)
				}
				return
			}
			if len(d.Deny) != len(in.LoadBalancer.Services) {
				t.Fatalf("deny = %+v, want one message per listener", d.Deny)
			}
			port := in.LoadBalancer.Services[0].ListenPort
			want := fmt.Sprintf("listener %d: a health check every 60 s is too slow; set load-balancer.hetzner.cloud/health-check-interval to 30s or less", port)
			found := false
			for _, m := range d.Deny {
				found = found || (m.Msg == want && m.Code == "health_check_interval")
			}
			if !found {
				t.Errorf("deny = %+v, want %q (code health_check_interval)", d.Deny, want)
			}
		})
	}
}
