package routeplan_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

func route(dest, gw string) routeplan.Route {
	return routeplan.Route{Destination: netip.MustParsePrefix(dest), Gateway: netip.MustParseAddr(gw)}
}

func TestEnsure(t *testing.T) {
	tests := []struct {
		name       string
		have       []routeplan.Route
		want       routeplan.Route
		wantLabels []string
	}{
		{
			name:       "a missing route is added",
			have:       []routeplan.Route{route("10.244.2.0/24", "10.0.0.3")},
			want:       route("10.244.1.0/24", "10.0.0.2"),
			wantLabels: []string{"add_route(10.244.1.0/24 via 10.0.0.2)"},
		},
		{
			name:       "an identical route is left alone",
			have:       []routeplan.Route{route("10.244.1.0/24", "10.0.0.2")},
			want:       route("10.244.1.0/24", "10.0.0.2"),
			wantLabels: []string{},
		},
		{
			name: "a gateway change is one plan: delete the old route, then add the new one",
			have: []routeplan.Route{route("10.244.1.0/24", "10.0.0.3"), route("10.244.2.0/24", "10.0.0.3")},
			want: route("10.244.1.0/24", "10.0.0.2"),
			wantLabels: []string{
				"delete_route(10.244.1.0/24 via 10.0.0.3)",
				"add_route(10.244.1.0/24 via 10.0.0.2)",
			},
		},
		{
			name:       "a route to another destination through the same gateway is not touched",
			have:       []routeplan.Route{route("10.244.9.0/24", "10.0.0.2")},
			want:       route("10.244.1.0/24", "10.0.0.2"),
			wantLabels: []string{"add_route(10.244.1.0/24 via 10.0.0.2)"},
		},
		{
			name:       "an empty network gets the route",
			want:       route("10.244.1.0/24", "10.0.0.2"),
			wantLabels: []string{"add_route(10.244.1.0/24 via 10.0.0.2)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := routeplan.Ensure(tc.have, tc.want, "node-1")
			if diff := cmp.Diff(tc.wantLabels, p.Labels()); diff != "" {
				t.Errorf("Ensure() labels mismatch (-want +got):\n%s", diff)
			}
			if p.Node != "node-1" {
				t.Errorf("Node = %q, want node-1", p.Node)
			}
			if p.Empty() != (len(tc.wantLabels) == 0) {
				t.Errorf("Empty() = %v with %d mutations", p.Empty(), len(tc.wantLabels))
			}
			// After the plan the network has the wanted route and no other to its destination.
			var toDest []routeplan.Route
			for _, r := range p.Apply(tc.have) {
				if r.Destination == tc.want.Destination {
					toDest = append(toDest, r)
				}
			}
			if diff := cmp.Diff([]routeplan.Route{tc.want}, toDest, cmp.Comparer(func(a, b routeplan.Route) bool { return a == b })); diff != "" {
				t.Errorf("routes to %s after the plan (-want +got):\n%s", tc.want.Destination, diff)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	have := []routeplan.Route{route("10.244.1.0/24", "10.0.0.2"), route("10.244.2.0/24", "10.0.0.3")}
	tests := []struct {
		name       string
		dest       string
		wantLabels []string
		wantAfter  []routeplan.Route
	}{
		{name: "the route to the destination is deleted", dest: "10.244.1.0/24",
			wantLabels: []string{"delete_route(10.244.1.0/24 via 10.0.0.2)"}, wantAfter: have[1:]},
		{name: "a destination without a route plans nothing", dest: "10.244.3.0/24",
			wantLabels: []string{}, wantAfter: have},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := routeplan.Remove(have, netip.MustParsePrefix(tc.dest), "node-1")
			if diff := cmp.Diff(tc.wantLabels, p.Labels()); diff != "" {
				t.Errorf("Remove() labels mismatch (-want +got):\n%s", diff)
			}
			after := p.Apply(have)
			if diff := cmp.Diff(tc.wantAfter, after, cmp.Comparer(func(a, b routeplan.Route) bool { return a == b })); diff != "" {
				t.Errorf("routes after the plan (-want +got):\n%s", diff)
			}
			if len(have) != 2 {
				t.Errorf("Apply modified its argument: %v", have)
			}
		})
	}
}

func TestApply_isIdempotent(t *testing.T) {
	have := []routeplan.Route{route("10.244.2.0/24", "10.0.0.3")}
	p := routeplan.Ensure(have, route("10.244.1.0/24", "10.0.0.2"), "node-1")
	once := p.Apply(have)
	if diff := cmp.Diff(once, p.Apply(once), cmp.Comparer(func(a, b routeplan.Route) bool { return a == b })); diff != "" {
		t.Errorf("applying a plan twice differs from once (-once +twice):\n%s", diff)
	}
}

func TestMutations(t *testing.T) {
	r := route("10.244.1.0/24", "10.0.0.2")
	tests := []struct {
		m                 routeplan.Mutation
		action, op, label string
	}{
		{m: routeplan.Add(r), action: input.ActionRouteCreate, op: "add_route", label: "add_route(10.244.1.0/24 via 10.0.0.2)"},
		{m: routeplan.Delete(r), action: input.ActionRouteDelete, op: "delete_route", label: "delete_route(10.244.1.0/24 via 10.0.0.2)"},
	}
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			if tc.m.Action() != tc.action || tc.m.Operation() != tc.op || tc.m.Label() != tc.label || tc.m.Route() != r {
				t.Errorf("%T = (%s, %s, %s, %s), want (%s, %s, %s, %s)", tc.m, tc.m.Action(), tc.m.Operation(), tc.m.Label(), tc.m.Route(), tc.action, tc.op, tc.label, r)
			}
		})
	}
}
