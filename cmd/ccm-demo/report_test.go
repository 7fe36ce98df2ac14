package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitPolicyEvent(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		want        []finding
	}{
		{
			name:  "A denial of a plan groups the operations per message",
			event: `nothing changed: create(demo-shop-web-1): namespace "shop" may not: label it (code); add_service(80): namespace "shop" may not: label it (code); add_target(server:101): port 80 only`,
			want: []finding{
				{msg: `namespace "shop" may not: label it (code)`, subjects: []string{"create(demo-shop-web-1)", "add_service(80)"}},
				{msg: "port 80 only", subjects: []string{"add_target(server:101)"}},
			},
		},
		{
			name:  "A warning of one operation",
			event: "add_service(80): the load balancer listens on port 80 without 443: traffic is not encrypted",
			want:  []finding{{msg: "the load balancer listens on port 80 without 443: traffic is not encrypted", subjects: []string{"add_service(80)"}}},
		},
		{
			name:  "A message in another format is kept whole",
			event: "policy evaluation failed: timeout",
			want:  []finding{{msg: "policy evaluation failed: timeout"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := splitPolicyEvent(tc.event)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(finding{})); diff != "" {
				t.Errorf("splitPolicyEvent (-want +got):\n%s", diff)
			}
		})
	}
}
