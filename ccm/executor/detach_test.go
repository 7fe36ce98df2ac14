package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// failures records the errors RunDetached hands to its failure callback.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *failures) get() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs
}

// serviceLB adds a load balancer without targets for a Service of its own (uid "svc-<i>").
func (ev *env) serviceLB(t *testing.T, i int) (*corev1.Service, *hcloud.LoadBalancer) {
	t.Helper()
	svc := newService()
	svc.Name, svc.UID = fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("svc-%d", i))
	id, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: svc.Name, Labels: map[string]string{lbplan.LabelServiceUID: string(svc.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	lb, _, err := ev.client.LoadBalancer.GetByID(context.Background(), id)
	if err != nil || lb == nil {
		t.Fatalf("get load balancer %d: %v", id, err)
	}
	return svc, lb
}

// targetIDs are the server IDs of the targets of load balancer id in the emulator.
func (ev *env) targetIDs(t *testing.T, id int64) []int64 {
	t.Helper()
	lb, ok := ev.emu.LoadBalancer(id)
	if !ok {
		t.Fatalf("load balancer %d is gone", id)
	}
	var out []int64
	for _, tg := range lb.Targets {
		if tg.Server != nil {
			out = append(out, tg.Server.ID)
		}
	}
	return out
}

func stateTargets(a *lbplan.Actual) []int64 {
	if a == nil {
		return nil
	}
	var out []int64
	for _, tg := range a.Targets {
		out = append(out, tg.ServerID)
	}
	return out
}

// TestRunDetached: a plan of target changes returns once the API accepted its first request,
// with the state the load balancer has once every request succeeded; the rest ends in the
// background (Settle waits for it). A failed action reaches the failure callback and a Warning
// event; a plan with other changes, a denial and a failed first request behave as Run.
func TestRunDetached(t *testing.T) {
	addBoth := func(ev *env) []lbplan.Mutation {
		return []lbplan.Mutation{
			lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[0], Node: "node-1"}},
			lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[1], Node: "node-2"}},
		}
	}
	addFirst := func(ev *env) []lbplan.Mutation { return addBoth(ev)[:1] }
	tests := []struct {
		name      string
		decide    func(input.Input) policy.Decision
		fault     *hcloudemu.Fault
		mutations func(ev *env) []lbplan.Mutation
		// wantErr is the start of RunDetached's error; "" for none.
		wantErr string
		// wantState are the targets of the returned state.
		wantState []int64 // by index into ev.servers
		// wantTargets are the targets in the API once the run ended.
		wantTargets []int64
		// wantFailure is the start of the error the callback got; "" for no call.
		wantFailure string
		wantEvent   string // a Warning reason expected among the events
	}{{
		name: "two targets: both added, the state returned at once has both", decide: allow, mutations: addBoth,
		wantState: []int64{0, 1}, wantTargets: []int64{0, 1},
	}, {
		name: "the first action fails: the callback and a Warning event get the error, the target is not there", decide: allow,
		fault:     &hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true, Times: 1},
		mutations: addFirst, wantState: []int64{0},
		wantFailure: "add_target(server:1): Action failed (action_failed", wantEvent: executor.ReasonUpdateLoadBalancerFailed,
	}, {
		name: "the second request fails in the background: the first stays, the callback gets the second's error", decide: allow,
		fault:     &hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", Skip: 1, Code: "server_error", Times: 1},
		mutations: addBoth, wantState: []int64{0, 1}, wantTargets: []int64{0},
		wantFailure: "add_target(server:2): injected fault: server_error", wantEvent: executor.ReasonUpdateLoadBalancerFailed,
	}, {
		name: "the first request fails: RunDetached fails, nothing runs in the background", decide: allow,
		fault:     &hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", Code: "server_error", Times: 1},
		mutations: addBoth, wantErr: "add_target(server:1): injected fault",
	}, {
		name: "denied: nothing sent", decide: denyAll, mutations: addBoth,
		wantErr: "2 of 2 changes denied", wantEvent: executor.ReasonPolicyDenied,
	}, {
		name: "a plan with a listener is not detachable: it runs as Run, a failure is RunDetached's error", decide: allow,
		fault: &hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_service", FailAction: true, Times: 1},
		mutations: func(ev *env) []lbplan.Mutation {
			return append(addFirst(ev), lbplan.AddService{Listener: lbplan.Listener{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: 80, DestinationPort: 30080}})
		},
		wantErr: "add_service", wantTargets: []int64{0},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, tc.decide, withActionPoll(time.Millisecond))
			svc, lb := ev.serviceLB(t, 1)
			if tc.fault != nil {
				ev.emu.AddFault(*tc.fault)
			}
			var f failures
			plan := lbplan.Plan{Actual: lbplan.NewActual(lb), IPv6: true, Mutations: tc.mutations(ev)}
			got, err := ev.exec.RunDetached(context.Background(), svc, plan, f.add)
			if (err != nil || tc.wantErr != "") && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)) {
				t.Fatalf("RunDetached() error = %v, want prefix %q", err, tc.wantErr)
			}
			if err := ev.exec.Settle(context.Background(), svc.UID); err != nil {
				t.Fatal(err)
			}
			var wantState, wantTargets []int64
			for _, i := range tc.wantState {
				wantState = append(wantState, ev.servers[i])
			}
			for _, i := range tc.wantTargets {
				wantTargets = append(wantTargets, ev.servers[i])
			}
			if s := stateTargets(got); fmt.Sprint(s) != fmt.Sprint(wantState) {
				t.Errorf("returned state's targets = %v, want %v", s, wantState)
			}
			if tg := ev.targetIDs(t, lb.ID); fmt.Sprint(tg) != fmt.Sprint(wantTargets) {
				t.Errorf("targets in the API = %v, want %v", tg, wantTargets)
			}
			errs := f.get()
			switch {
			case tc.wantFailure == "" && len(errs) > 0:
				t.Errorf("failure callback got %v, want no call", errs)
			case tc.wantFailure != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tc.wantFailure)):
				t.Errorf("failure callback got %v, want one error starting %q", errs, tc.wantFailure)
			}
			if tc.wantEvent != "" && count(ev.events(), corev1.EventTypeWarning+" "+tc.wantEvent) != 1 {
				t.Errorf("no Warning event %s", tc.wantEvent)
			}
		})
	}
}

// TestRunDetached_roundSharesPolls is issue 24's shared action polls: the service controller
// calls UpdateLoadBalancer for one Service after the other; each run returns once its request
// was accepted, so the actions of the round are awaited together: far fewer GET /actions than
// runs (one when the round takes less than the first poll interval).
func TestRunDetached_roundSharesPolls(t *testing.T) {
	const services = 8
	ev := newEnv(t, allow, withActionPoll(300*time.Millisecond))
	var svcs []*corev1.Service
	var plans []lbplan.Plan
	for i := range services {
		svc, lb := ev.serviceLB(t, i)
		svcs = append(svcs, svc)
		plans = append(plans, lbplan.Plan{Actual: lbplan.NewActual(lb), IPv6: true, Mutations: []lbplan.Mutation{
			lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[0], Node: "node-1"}},
		}})
	}
	ev.emu.ResetRequests()
	var f failures
	for i, svc := range svcs {
		if _, err := ev.exec.RunDetached(context.Background(), svc, plans[i], f.add); err != nil {
			t.Fatal(err)
		}
	}
	for _, svc := range svcs {
		if err := ev.exec.Settle(context.Background(), svc.UID); err != nil {
			t.Fatal(err)
		}
	}
	counts := ev.emu.Counts()
	if n := counts["POST /v1/load_balancers/{id}/actions/add_target"]; n != services {
		t.Errorf("%d add_target, want %d: %v", n, services, counts)
	}
	// One poll when the 8 runs took less than 300 ms; a loaded machine may need a second.
	if n := counts["GET /v1/actions"]; n < 1 || n > 2 {
		t.Errorf("%d action polls for %d runs, want 1 (2 on a slow machine): %v", n, services, counts)
	}
	if errs := f.get(); len(errs) > 0 {
		t.Errorf("failures: %v", errs)
	}
}

// TestSettle: while a detached run is in flight, Settle waits (and gives up with its ctx);
// Run of the same Service waits for it; Services are independent.
func TestSettle(t *testing.T) {
	ev := newEnv(t, allow, withActionPoll(time.Millisecond))
	svc, lb := ev.serviceLB(t, 1)
	// The action polls hang for 300 ms: the run stays in flight that long.
	ev.emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/actions", Delay: 300 * time.Millisecond, Times: 1})
	plan := lbplan.Plan{Actual: lbplan.NewActual(lb), IPv6: true, Mutations: []lbplan.Mutation{
		lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[0], Node: "node-1"}},
	}}
	if _, err := ev.exec.RunDetached(context.Background(), svc, plan, nil); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := ev.exec.Settle(short, svc.UID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Settle() while in flight = %v, want the deadline", err)
	}
	if err := ev.exec.Settle(short, "another-service"); err != nil {
		t.Errorf("Settle() of another Service = %v, want nil at once", err)
	}
	start := time.Now()
	next := lbplan.Plan{Actual: plan.Mutations[0].Apply(lbplan.NewActual(lb)), IPv6: true, Mutations: []lbplan.Mutation{
		lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[1], Node: "node-2"}},
	}}
	if _, err := ev.exec.Run(context.Background(), svc, next); err != nil {
		t.Fatalf("Run() after the detached run = %v (it must wait, not meet a locked load balancer)", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("Run() returned after %v: it did not wait for the detached run", waited)
	}
	if tg := ev.targetIDs(t, lb.ID); len(tg) != 2 {
		t.Errorf("targets = %v, want both", tg)
	}
}
