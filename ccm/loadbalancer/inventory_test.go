package loadbalancer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// quota denies a create in a namespace that already has limit load balancers in the input's
// inventory (a load balancer quota rule, in Go).
func quota(limit int) func(input.Input) string {
	return func(in input.Input) string {
		if in.Action != input.ActionLoadBalancerCreate || in.Inventory == nil || in.Service == nil {
			return ""
		}
		if n := in.Inventory.Namespaces[in.Service.Namespace].LoadBalancers; n >= limit {
			return fmt.Sprintf("namespace %s has %d load balancers, quota %d", in.Service.Namespace, n, limit)
		}
		return ""
	}
}

// quotaService is a Service of its own named name in namespace ns, known to the lister of g.
func (g *groupEnv) quotaService(ns, name string) *corev1.Service {
	g.t.Helper()
	svc := newService(name, withPorts(80))
	svc.Namespace, svc.UID = ns, types.UID("uid-"+ns+"-"+name)
	if err := g.idx.Add(svc); err != nil {
		g.t.Fatal(err)
	}
	return svc
}

// TestInventory_decisionsAddNoRequest: with a policy in force, a create's input carries the
// inventory (the other Service's load balancer, owned and priced with the emulator's
// placeholder prices; not another cluster's) and its cost; with none, no inventory is built. Either way the create costs the same requests:
// the inventory comes from the caches (TestInventory_decisionsAddNoRequest's measure).
func TestInventory_decisionsAddNoRequest(t *testing.T) {
	counts := map[string]map[string]int{}
	for _, revision := range []string{"", "r1"} {
		g := newGroupEnv(t)
		g.decider.revision = revision
		// Another cluster's load balancer in the project: the official label, a UID no
		// Service of this cluster has. It is not in the inventory.
		if _, err := g.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "other-cluster", Labels: map[string]string{"hcloud-ccm/service-uid": "not-ours"}}); err != nil {
			t.Fatal(err)
		}
		first := g.quotaService("team-a", "first")
		g.mustEnsure(first)
		if err := g.lbs.PrimeInventory(context.Background(), clusterName); err != nil {
			t.Fatal(err)
		}
		before := g.emu.Counts()
		decided := g.decider.decisions()
		g.mustEnsure(g.quotaService("team-a", "second"))
		counts[revision] = diffCounts(before, g.emu.Counts())

		create := g.decider.inputs[decided]
		if revision == "" {
			if create.Inventory != nil || create.Cost != nil {
				t.Errorf("without a policy revision the input carries inventory %+v and cost %+v, want neither", create.Inventory, create.Cost)
			}
			continue
		}
		if create.Action != input.ActionLoadBalancerCreate || create.Inventory == nil || create.Cost == nil {
			t.Fatalf("input %s with inventory %v and cost %v, want a create with both", create.Action, create.Inventory != nil, create.Cost != nil)
		}
		inv := create.Inventory
		if len(inv.LoadBalancers) != 1 || inv.LoadBalancers[0].Owner != (input.Owner{Kind: "service", Namespace: "team-a", Name: "first"}) {
			t.Fatalf("inventory load balancers = %+v, want the one of team-a/first", inv.LoadBalancers)
		}
		if p := inv.LoadBalancers[0].Price; !p.Known || p.MonthlyNet != 5 || p.MonthlyGross != 5.95 {
			t.Errorf("price of lb11 in fsn1 = %+v, want the placeholder 5 / 5.95", p)
		}
		if ns := inv.Namespaces["team-a"]; ns.LoadBalancers != 1 || ns.ByType["lb11"] != 1 || inv.Cluster.MonthlyGross != 5.95 {
			t.Errorf("totals: team-a %+v, cluster %+v", ns, inv.Cluster)
		}
		if c := create.Cost; c.Before != (input.Amount{}) || c.After != (input.Amount{MonthlyNet: 5, MonthlyGross: 5.95}) || c.Delta != c.After {
			t.Errorf("cost of the create = %+v, want 0 -> 5 / 5.95", c)
		}
	}
	if fmt.Sprint(counts[""]) != fmt.Sprint(counts["r1"]) {
		t.Errorf("requests of a create: without inventory %v, with it %v; want the same (a decision adds no request)", counts[""], counts["r1"])
	}
}

// diffCounts is after - before, per endpoint, without zeros.
func diffCounts(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// TestQuota_concurrentCreatesSerialised: two Services created at once in a namespace with one
// slot left (quota 2, one load balancer) never both pass: the creates are decided one after
// the other, each on an inventory that holds the result of the one before (costLock). Ten
// rounds, each in a namespace of its own.
func TestQuota_concurrentCreatesSerialised(t *testing.T) {
	g := newGroupEnv(t)
	g.decider.revision = "r1"
	g.decider.denyIf = quota(2)
	for round := range 10 {
		ns := fmt.Sprintf("round-%d", round)
		g.mustEnsure(g.quotaService(ns, "existing"))
		if round == 0 {
			if err := g.lbs.PrimeInventory(context.Background(), clusterName); err != nil {
				t.Fatal(err)
			}
		}
		svcs := []*corev1.Service{g.quotaService(ns, "a"), g.quotaService(ns, "b")}
		errs := make([]error, len(svcs))
		var wg sync.WaitGroup
		for i, svc := range svcs {
			wg.Go(func() { _, errs[i] = g.lbs.EnsureLoadBalancer(context.Background(), clusterName, svc, g.nodes) })
		}
		wg.Wait()
		created, denied := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				created++
			case errors.Is(err, policy.ErrDenied):
				denied++
			default:
				t.Fatalf("round %d: EnsureLoadBalancer: %v", round, err)
			}
		}
		if created != 1 || denied != 1 {
			t.Errorf("round %d: %d created, %d denied; want exactly one of the two created", round, created, denied)
		}
	}
}

// roomTracker is a DenialTracker and RoomTracker that records what it is told.
type roomTracker struct {
	mu     sync.Mutex
	denied map[string]bool
	rooms  []string
}

func (r *roomTracker) Denied(svc *corev1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denied[svc.Name] = true
}

func (r *roomTracker) Settled(svc *corev1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.denied, svc.Name)
}

func (r *roomTracker) RoomAppeared(text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rooms = append(r.rooms, text)
}

// TestQuota_roomAppearsOnDelete: a create denied by a quota is answered again without a request
// while nothing changes (the denial cache: the inventory is in its digest); deleting a load
// balancer of the namespace tells the tracker that room appeared, and the denied Service's next
// sync is decided on the new inventory and passes.
func TestQuota_roomAppearsOnDelete(t *testing.T) {
	tracker := &roomTracker{denied: map[string]bool{}}
	g := newGroupEnv(t, withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
	g.decider.revision = "r1"
	g.decider.denyIf = quota(1)
	first := g.quotaService("team-a", "first")
	g.mustEnsure(first)
	if err := g.lbs.PrimeInventory(context.Background(), clusterName); err != nil {
		t.Fatal(err)
	}
	second := g.quotaService("team-a", "second")
	if _, err := g.ensure(second); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("EnsureLoadBalancer over the quota = %v, want a denial", err)
	}
	before := len(g.emu.Requests())
	if _, err := g.ensure(second); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("unchanged retry = %v, want the same denial", err)
	}
	if n := len(g.emu.Requests()) - before; n != 0 {
		t.Errorf("the unchanged retry of a denied Service sent %d requests, want 0", n)
	}
	if len(tracker.rooms) != 0 || !tracker.denied["second"] {
		t.Fatalf("before the delete: rooms %v, denied %v; want no room and second denied", tracker.rooms, tracker.denied)
	}
	if err := g.lbs.EnsureLoadBalancerDeleted(context.Background(), clusterName, first); err != nil {
		t.Fatal(err)
	}
	if len(tracker.rooms) != 1 {
		t.Fatalf("room appeared %v after the delete, want once", tracker.rooms)
	}
	if _, err := g.ensure(second); err != nil {
		t.Fatalf("EnsureLoadBalancer after room appeared = %v, want the create", err)
	}
	if tracker.denied["second"] {
		t.Error("second is still tracked as denied after its create")
	}
}

// TestPreview_priced: under a policy, the plan Preview returns (the admission webhook's)
// carries the gate's Pricing, so the webhook decides on the same inventory; without one it
// carries none.
func TestPreview_priced(t *testing.T) {
	for _, revision := range []string{"", "r1"} {
		g := newGroupEnv(t)
		g.decider.revision = revision
		g.mustEnsure(g.quotaService("team-a", "first"))
		plan, err := g.lbs.Preview(context.Background(), clusterName, g.quotaService("team-a", "second"), g.nodes, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case revision == "" && plan.Pricing != nil:
			t.Errorf("without a policy revision Preview's plan is priced: %+v", plan.Pricing.Inventory)
		case revision != "" && (plan.Pricing == nil || plan.Pricing.Inventory.Namespaces["team-a"].LoadBalancers != 1):
			t.Errorf("under a policy Preview's plan has Pricing %+v, want the inventory with team-a/first", plan.Pricing)
		}
	}
}

// TestAuditPlans_pricedWithTheOlder: the audit shows each existing load balancer as the create
// that would build it today, on the inventory it met when it was created: the load balancers
// older than it. With three in team-a, the first is judged on none, the second on the first,
// the third on both, so a limit of 2 reports the third alone.
func TestAuditPlans_pricedWithTheOlder(t *testing.T) {
	g := newGroupEnv(t)
	g.decider.revision = "r1"
	names := []string{"first", "second", "third"}
	for _, name := range names {
		svc := g.quotaService("team-a", name)
		g.add(svc)
		g.mustEnsure(svc)
	}
	plans, err := g.lbs.AuditPlans(context.Background(), clusterName, g.nodes, func(context.Context, *corev1.Service, lbplan.Plan) []int { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != len(names) {
		t.Fatalf("%d audit plans, want %d", len(plans), len(names))
	}
	want := map[string][]string{"first": nil, "second": {"first"}, "third": {"first", "second"}}
	for _, p := range plans {
		if p.Err != nil || p.Plan.Pricing == nil {
			t.Fatalf("audit plan of %s: err %v, pricing %v; want a priced plan", p.Service.Name, p.Err, p.Plan.Pricing)
		}
		inv := p.Plan.Pricing.Inventory
		var got []string
		for _, lb := range inv.LoadBalancers {
			got = append(got, lb.Owner.Name)
		}
		if !slices.Equal(got, want[p.Service.Name]) || inv.Namespaces["team-a"].LoadBalancers != len(want[p.Service.Name]) {
			t.Errorf("audit inventory of %s = %v (team-a counts %d), want %v", p.Service.Name, got, inv.Namespaces["team-a"].LoadBalancers, want[p.Service.Name])
		}
	}
}

// TestInventory_completeBeforeTheFirstList: a decision made before the start-up list of the
// load balancers has ended (a restart: the service controller syncs the Services in any order)
// waits for it, so a quota counts the load balancers of Services not read yet.
func TestInventory_completeBeforeTheFirstList(t *testing.T) {
	g := newGroupEnv(t)
	g.decider.revision = "r1"
	g.decider.denyIf = quota(1)
	first := g.quotaService("team-a", "first")
	if _, err := g.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "first", Labels: map[string]string{"hcloud-ccm/service-uid": string(first.UID)}}); err != nil {
		t.Fatal(err)
	}
	// The informer "syncs" once the Ensure below has read the type list, its last read before
	// the gate: the start-up list runs while the gate waits for it (or, without the wait, after
	// the gate decided on an inventory without first's load balancer).
	g.lbs.StartInventory(t.Context(), func() bool { return g.emu.Counts()["GET /v1/load_balancer_types"] > 0 }, clusterName, func() bool { return true })
	if _, err := g.ensure(g.quotaService("team-a", "second")); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("EnsureLoadBalancer of a second Service in team-a (quota 1, first's load balancer not read yet) = %v, want a denial", err)
	}
}
