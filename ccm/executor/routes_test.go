package executor_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

func planned(dest, gw string) routeplan.Route {
	return routeplan.Route{Destination: netip.MustParsePrefix(dest), Gateway: netip.MustParseAddr(gw)}
}

// TestRunRoutes_gatewayChangeDecidedAsAWhole is issue 10's half-applied route replacement: a
// gateway change is one plan; when the policy allows the delete and denies the add, nothing
// runs and the old route stays.
func TestRunRoutes_gatewayChangeDecidedAsAWhole(t *testing.T) {
	denyCreate := func(in input.Input) policy.Decision {
		if in.Action == input.ActionRouteCreate {
			return policy.Decision{Deny: []policy.Message{{Msg: "no new routes"}}}
		}
		return policy.Decision{Allowed: true}
	}
	tests := []struct {
		name       string
		decide     func(input.Input) policy.Decision
		wantErr    bool
		wantRoutes []string
		wantWrites int
	}{
		{name: "delete allowed and add denied: nothing runs, the old route stays", decide: denyCreate,
			wantErr: true, wantRoutes: []string{"10.244.1.0/24 via 10.0.0.12"}, wantWrites: 0},
		{name: "both allowed: the route moves to the new gateway", decide: allow,
			wantRoutes: []string{"10.244.1.0/24 via 10.0.0.11"}, wantWrites: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow, withActionPoll(time.Millisecond))
			ctx := context.Background()
			old := planned("10.244.1.0/24", "10.0.0.12")
			if err := ev.exec.RunRoutes(ctx, ev.network, routeplan.Plan{Node: "node-2", Mutations: []routeplan.Mutation{routeplan.Add(old)}}); err != nil {
				t.Fatal(err)
			}
			ev.emu.ResetRequests()
			ev.events()
			ev.decider.decision = tc.decide
			ev.decider.inputs = nil

			plan := routeplan.Ensure([]routeplan.Route{old}, planned("10.244.1.0/24", "10.0.0.11"), "node-1")
			err := ev.exec.RunRoutes(ctx, ev.network, plan)
			if gotErr := errors.Is(err, policy.ErrDenied); gotErr != tc.wantErr {
				t.Fatalf("RunRoutes() error = %v, want denied %v", err, tc.wantErr)
			}
			n, _ := ev.emu.Network(ev.network.ID)
			var got []string
			for _, r := range n.Routes {
				got = append(got, r.Destination+" via "+r.Gateway)
			}
			if diff := cmp.Diff(tc.wantRoutes, got); diff != "" {
				t.Errorf("routes mismatch (-want +got):\n%s", diff)
			}
			if w := ev.emu.MutatingRequests(); w != tc.wantWrites {
				t.Errorf("writes = %d, want %d (%v)", w, tc.wantWrites, ev.emu.Counts())
			}
			// Both mutations were decided, the delete first, both for the node of the plan.
			var decided []string
			for _, in := range ev.decider.inputs {
				decided = append(decided, in.Operation+" "+in.Route.Destination+" via "+in.Route.Gateway+" for "+in.Route.Node)
			}
			want := []string{"delete_route 10.244.1.0/24 via 10.0.0.12 for node-1", "add_route 10.244.1.0/24 via 10.0.0.11 for node-1"}
			if diff := cmp.Diff(want, decided); diff != "" {
				t.Errorf("decided inputs mismatch (-want +got):\n%s", diff)
			}
			if tc.wantErr {
				events := ev.events()
				if len(events) != 1 || !strings.HasPrefix(events[0], "Warning PolicyDenied nothing changed: no new routes: for add_route(10.244.1.0/24 via 10.0.0.11)") {
					t.Errorf("events = %v, want one PolicyDenied naming the add", events)
				}
				if !strings.Contains(err.Error(), "1 of 2 changes denied, nothing changed") {
					t.Errorf("error = %v, want it to say 1 of 2 changes denied", err)
				}
			}
		})
	}
}

// TestRunRoutes_concurrentWritesSharePolls: 100 route writes at once (the route controller runs
// up to 200 CreateRoute calls in parallel) wait for their actions with a few shared polls, not
// one poll each.
func TestRunRoutes_concurrentWritesSharePolls(t *testing.T) {
	ev := newEnv(t, allow, withActionPoll(50*time.Millisecond))
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			r := planned(fmt.Sprintf("10.244.%d.0/24", i), "10.0.0.11")
			errs <- ev.exec.RunRoutes(context.Background(), ev.network, routeplan.Plan{Node: "node-1", Mutations: []routeplan.Mutation{routeplan.Add(r)}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	counts := ev.emu.Counts()
	if counts["POST /v1/networks/{id}/actions/add_route"] != n {
		t.Errorf("add_route requests = %d, want %d", counts["POST /v1/networks/{id}/actions/add_route"], n)
	}
	// ceil(100/50) per round; the writes may straddle a few rounds.
	if polls := counts["GET /v1/actions"]; polls == 0 || polls > 10 {
		t.Errorf("action polls = %d for %d concurrent writes, want 1..10 (%v)", polls, n, counts)
	}
	if got, _ := ev.emu.Network(ev.network.ID); len(got.Routes) != n {
		t.Errorf("routes = %d, want %d", len(got.Routes), n)
	}
}

// TestRunRoutes_failedAction: an action that ends in error fails the run with the label.
func TestRunRoutes_failedAction(t *testing.T) {
	ev := newEnv(t, allow, withActionPoll(time.Millisecond))
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/networks/*/actions/add_route", Times: 1, FailAction: true})
	err := ev.exec.RunRoutes(context.Background(), ev.network, routeplan.Plan{Node: "node-1",
		Mutations: []routeplan.Mutation{routeplan.Add(planned("10.244.1.0/24", "10.0.0.11"))}})
	if err == nil || !strings.HasPrefix(err.Error(), "add_route(10.244.1.0/24 via 10.0.0.11): ") {
		t.Errorf("RunRoutes() error = %v, want the failed action prefixed with the label", err)
	}
}
