package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// crossNamespace is the rule of examples/policies/groups.rego for a group that is not listed
// in cross_namespace_groups, in Go: a step that does not only shrink the load balancer is
// denied when a member it involves (the acting Service, or the owner of a listener the step
// adds) lives in another namespace than the leader.
func crossNamespace(in input.Input) string {
	if in.Group == nil || in.Operation == lbplan.OpDeleteService || in.Operation == lbplan.OpRemoveTarget {
		return ""
	}
	had := map[int]bool{}
	if in.Current != nil {
		for _, s := range in.Current.Services {
			had[s.ListenPort] = true
		}
	}
	adds := map[int]bool{}
	if in.LoadBalancer != nil {
		for _, s := range in.LoadBalancer.Services {
			adds[s.ListenPort] = !had[s.ListenPort]
		}
	}
	for _, m := range in.Group.Members {
		involved := in.Service != nil && m.Namespace == in.Service.Namespace && m.Name == in.Service.Name
		for _, p := range m.Ports {
			involved = involved || adds[p]
		}
		if involved && m.Namespace != in.Group.Leader.Namespace {
			return fmt.Sprintf("Service %s/%s may not join load balancer group %q: the group lives in namespace %q", m.Namespace, m.Name, in.Group.Name, in.Group.Leader.Namespace)
		}
	}
	return ""
}

// TestGroup_DeniedMemberDoesNotBlockTheGroup: a member the policy denies (here: in another
// namespace than the leader) is left out of the other members' syncs instead of denying them,
// its listener is never added through them, and its own sync keeps being denied; a denial of
// the acting member's own step still denies its sync.
func TestGroup_DeniedMemberDoesNotBlockTheGroup(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	b.Namespace = "other"
	c := groupMember("c", 2, "web", []int32{82})
	update := func(g *groupEnv, svc *corev1.Service, nodes int) error {
		return g.lbs.UpdateLoadBalancer(context.Background(), clusterName, svc, g.nodes[:nodes])
	}
	ensure := func(g *groupEnv, svc *corev1.Service) error { _, err := g.ensure(svc); return err }
	tests := []struct {
		name string
		// before runs with the leader a alone in the lister (its load balancer exists), or
		// nothing when nil (no load balancer yet).
		existing bool
		members  []*corev1.Service // added to the lister after the leader's first sync
		denyOps  []string          // denied besides the cross-namespace rule
		run      func(g *groupEnv) error
		wantErr  bool
		ports    []int
		targets  int
		// wantGroup is the member ports of input.group of the last decision, when set.
		wantGroup map[string][]int
	}{
		{"a leader's target change goes through while a cross-namespace member is denied", true, []*corev1.Service{b}, nil,
			func(g *groupEnv) error { return update(g, a, 1) }, false, []int{80}, 1, map[string][]int{"a": {80}, "b": {}}},
		{"a leader's sync adds a member of its namespace, not the denied one", true, []*corev1.Service{b, c}, nil,
			func(g *groupEnv) error { return ensure(g, a) }, false, []int{80, 82}, 2, map[string][]int{"a": {80}, "b": {}, "c": {82}}},
		{"a newer member's sync adds its own port, not the denied older one's", true, []*corev1.Service{b, c}, nil,
			func(g *groupEnv) error { return ensure(g, c) }, false, []int{80, 82}, 2, map[string][]int{"a": {80}, "b": {}, "c": {82}}},
		{"a create leaves the denied member out; the others come with their own syncs", false, []*corev1.Service{a, b, c}, nil,
			func(g *groupEnv) error {
				if err := ensure(g, a); err != nil {
					return err
				}
				if err := ensure(g, b); !errors.Is(err, policy.ErrDenied) {
					return fmt.Errorf("the denied member's sync: %w, want a denial", err)
				}
				if ev := g.events(); !hasEvent(ev, `Warning PolicyDenied nothing changed: Service other/b may not join load balancer group "web"`) {
					return fmt.Errorf("the denied member's events %v, want its PolicyDenied", ev)
				}
				return ensure(g, c)
			}, false, []int{80, 82}, 2, nil},
		{"the acting member's own denied step still denies its sync", true, []*corev1.Service{b}, []string{lbplan.OpRemoveTarget},
			func(g *groupEnv) error { return update(g, a, 1) }, true, []int{80}, 2, nil},
		{"the denied member's own sync is denied", true, []*corev1.Service{b}, nil,
			func(g *groupEnv) error { return ensure(g, b) }, true, []int{80}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroupEnv(t)
			g.decider.denyIf = crossNamespace
			if tt.existing {
				g.add(a)
				g.mustEnsure(a)
			}
			g.add(tt.members...)
			g.events()
			g.decider.set(false, tt.denyOps...)
			err := tt.run(g)
			if got := errors.Is(err, policy.ErrDenied); got != tt.wantErr {
				t.Fatalf("err = %v, want denied: %v", err, tt.wantErr)
			}
			lb := g.onlyLB()
			if got := listenPortsOf(lb); !reflect.DeepEqual(got, tt.ports) || len(lb.Targets) != tt.targets {
				t.Errorf("listeners %v, %d targets; want %v, %d (81, the denied member's, never)", got, len(lb.Targets), tt.ports, tt.targets)
			}
			ev := g.events()
			denials := slices.DeleteFunc(slices.Clone(ev), func(e string) bool { return !strings.HasPrefix(e, "Warning PolicyDenied") })
			switch {
			case !tt.wantErr && len(denials) != 0:
				t.Errorf("PolicyDenied %v on a sync that went through", denials)
			case tt.wantErr && len(denials) == 0:
				t.Errorf("events %v, want PolicyDenied on the denied sync", ev)
			}
			if tt.wantGroup != nil {
				got := map[string][]int{}
				for _, m := range g.lastGroup().Members {
					got[m.Name] = m.Ports
				}
				if !reflect.DeepEqual(got, tt.wantGroup) {
					t.Errorf("input.group members' ports %v, want %v (the left-out member with none)", got, tt.wantGroup)
				}
			}
		})
	}
}

// TestGroup_DeniedMemberDenialNamesEveryStep: when the acting member's own step is denied, its
// PolicyDenied names every denied step of the whole plan, as before members were left out.
func TestGroup_DeniedMemberDenialNamesEveryStep(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	b.Namespace = "other"
	g := newGroupEnv(t)
	g.decider.denyIf = crossNamespace
	g.add(a)
	g.mustEnsure(a)
	g.add(b)
	g.events()
	g.decider.set(false, lbplan.OpRemoveTarget)
	if err := g.lbs.UpdateLoadBalancer(context.Background(), clusterName, a, g.nodes[:1]); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("err = %v, want a denial", err)
	}
	for _, e := range g.events() {
		if strings.HasPrefix(e, "Warning PolicyDenied") && (!strings.Contains(e, "remove_target") || !strings.Contains(e, "add_service(81)")) {
			t.Errorf("PolicyDenied %q, want remove_target and add_service(81) named", e)
		}
	}
}

// TestGroup_DeniedMemberRetryCostsNothing (issue 29 item 4): a denied member's retries with
// nothing changed cost no request, no decision and no event, as for a Service of its own; a
// change of the member, of the group's members, a write to the group's load balancer by
// another member's sync, a new call kind and a new node set are decided again.
func TestGroup_DeniedMemberRetryCostsNothing(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	b.Namespace = "other"
	g := newGroupEnv(t)
	g.decider.denyIf = crossNamespace
	g.decider.revision = "r1"
	g.add(a)
	g.mustEnsure(a)
	g.add(b)
	ctx := context.Background()
	ensureB := func() error {
		_, err := g.lbs.EnsureLoadBalancer(ctx, clusterName, b, g.nodes)
		return err
	}
	updateB := func() error { return g.lbs.UpdateLoadBalancer(ctx, clusterName, b, g.nodes) }
	g.checkDeniedRetries(t, []deniedRetryStep{
		{"the first sync", nil, ensureB, true},
		{"an unchanged retry", nil, ensureB, false},
		{"another unchanged retry", nil, ensureB, false},
		{"an update, another call", nil, updateB, true},
		{"an unchanged update", nil, updateB, false},
		{"a member joins", func() { g.add(groupMember("c", 2, "web", []int32{82})) }, ensureB, true},
		{"unchanged since the join", nil, ensureB, false},
		{"another member's sync wrote the load balancer", func() {
			if err := g.lbs.UpdateLoadBalancer(ctx, clusterName, a, g.nodes[:1]); err != nil {
				t.Fatal(err)
			}
		}, ensureB, true},
		{"unchanged since that write", nil, ensureB, false},
		{"the member's own annotation changes", func() { b = b.DeepCopy(); b.Annotations["x"] = "y"; g.add(b) }, ensureB, true},
		{"a new policy revision", func() { g.decider.mu.Lock(); g.decider.revision = "r2"; g.decider.mu.Unlock() }, ensureB, true},
		{"unchanged at last", nil, ensureB, false},
	})
}

// deniedRetryStep is one call of a table of denied calls: a change before it (nil: none), the
// call, and whether it is decided again or answered from the denial cache.
type deniedRetryStep struct {
	name    string
	before  func()
	call    func() error
	decided bool
}

// checkDeniedRetries runs steps in order. Every call must be denied; decided again means new
// decisions and a PolicyDenied event (an update may read through the cache, without a request),
// answered from the cache means no request, no decision and no event.
func (g *groupEnv) checkDeniedRetries(t *testing.T, steps []deniedRetryStep) {
	t.Helper()
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		g.events()
		decisions := g.decider.decisions()
		g.emu.ResetRequests()
		if err := st.call(); !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("%s: err = %v, want the denial", st.name, err)
		}
		reqs, newDecisions, events := requests(g.emu.Counts()), g.decider.decisions()-decisions, g.events()
		if st.decided != (newDecisions > 0 && len(events) > 0) || !st.decided && (reqs > 0 || newDecisions > 0 || len(events) > 0) {
			t.Errorf("%s: %d requests, %d decisions, events %v; want decided again: %v", st.name, reqs, newDecisions, events, st.decided)
		}
	}
}

// TestGroup_DeniedLeaveRetryCostsNothing: a member's leave (EnsureLoadBalancerDeleted) that the
// policy denies (here: no listener may be removed) is remembered as a denied sync is: an
// unchanged retry sends no request, decides nothing and records no event; another member's write
// and a new policy revision decide it again.
func TestGroup_DeniedLeaveRetryCostsNothing(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	g := newGroupEnv(t)
	g.add(a)
	g.add(b)
	g.mustEnsure(a)
	g.mustEnsure(b)
	g.decider.denyIf = func(in input.Input) string {
		if in.Operation == "delete_service" {
			return "listeners stay"
		}
		return ""
	}
	g.decider.revision = "r1"
	ctx := context.Background()
	leave := func() error { return g.lbs.EnsureLoadBalancerDeleted(ctx, clusterName, b) }
	g.checkDeniedRetries(t, []deniedRetryStep{
		{"the first leave", nil, leave, true},
		{"an unchanged retry", nil, leave, false},
		{"another unchanged retry", nil, leave, false},
		{"another member's sync wrote the load balancer", func() {
			if err := g.lbs.UpdateLoadBalancer(ctx, clusterName, a, g.nodes[:1]); err != nil {
				t.Fatal(err)
			}
		}, leave, true},
		{"unchanged since that write", nil, leave, false},
		{"a new policy revision", func() { g.decider.mu.Lock(); g.decider.revision = "r2"; g.decider.mu.Unlock() }, leave, true},
		{"unchanged at last", nil, leave, false},
	})
}

// TestGroup_PreviewLeavesOutDeniedMembers: Preview (the admission webhook's plan) of a group
// member leaves out the members its DeniedSteps denies only for their listeners, as the CCM's
// sync does; without DeniedSteps it shows every member.
func TestGroup_PreviewLeavesOutDeniedMembers(t *testing.T) {
	a := groupMember("a", 0, "web", []int32{80})
	b := groupMember("b", 1, "web", []int32{81})
	b.Namespace = "other"
	g := newGroupEnv(t)
	g.add(a)
	g.mustEnsure(a)
	g.add(b)
	denied := func(p lbplan.Plan) []int {
		var out []int
		for i, st := range gate.Inputs(p, input.Cluster{}, gate.PolicyService(a, nil)) {
			if crossNamespace(st.Input) != "" {
				out = append(out, i)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		denied lbgroup.DeniedSteps
		want   []string
	}{
		{"with the webhook's decisions", denied, []string{"remove_target(server:2)"}},
		{"without decisions", nil, []string{"remove_target(server:2)", "add_service(81)"}},
	} {
		plan, err := g.lbs.Preview(context.Background(), clusterName, a, g.nodes[:1], tc.denied)
		if err != nil {
			t.Fatal(err)
		}
		if got := plan.Labels(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Preview() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
