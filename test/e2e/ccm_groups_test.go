//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// Shared load balancers (issue 22, docs/shared-load-balancers.md) end to end: the CCM binary
// against a real kube-apiserver and the emulator.

const (
	// annotationGroup is the opt-in annotation of a Service to a load balancer group.
	annotationGroup = "service.hcloud-policy-ccm.io/load-balancer-group"
	// labelGroup and labelCluster identify a group's load balancer (in place of labelServiceUID).
	labelGroup   = "hcloud-policy-ccm.io/load-balancer-group"
	labelCluster = "hcloud-policy-ccm.io/cluster"
	// clusterName is the cluster name the cloud-provider passes by default (deploy/ sets none).
	clusterName = "kubernetes"
)

// groupService returns a Service of type LoadBalancer in group (none if "") with one TCP port per
// entry of ports.
func groupService(namespace, name, group string, ports ...int32) *corev1.Service {
	svc := loadBalancerService(namespace, name)
	svc.Spec.Ports = nil
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", p), Port: p})
	}
	if group != "" {
		svc.Annotations = map[string]string{annotationGroup: group}
	}
	return svc
}

// groupLBs returns the load balancers in the emulator labelled as group's in this cluster.
func groupLBs(emu *hcloudemu.Emulator, group string) []schema.LoadBalancer {
	var out []schema.LoadBalancer
	for _, lb := range emu.LoadBalancers() {
		if lb.Labels[labelGroup] == group && lb.Labels[labelCluster] == clusterName {
			out = append(out, lb)
		}
	}
	return out
}

// waitGroupLB waits until the emulator holds exactly one load balancer of group and cond (nil:
// none) accepts it, and returns it. A second load balancer of the group (a duplicate), or one
// that also carries labelServiceUID (a group load balancer must not look like one Service's),
// fails the test at once.
func waitGroupLB(t *testing.T, ccm *harness.Process, emu *hcloudemu.Emulator, group string, cond func(schema.LoadBalancer) error) schema.LoadBalancer {
	t.Helper()
	var lb schema.LoadBalancer
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		lbs := groupLBs(emu, group)
		switch len(lbs) {
		case 0:
			return false, fmt.Errorf("no load balancer labelled %s=%s yet", labelGroup, group)
		case 1:
		default:
			t.Fatalf("duplicate: %d load balancers of group %s: %v", len(lbs), group, lbNames(lbs))
		}
		lb = lbs[0]
		if uid, ok := lb.Labels[labelServiceUID]; ok {
			t.Fatalf("group load balancer %d carries %s=%s", lb.ID, labelServiceUID, uid)
		}
		if cond == nil {
			return true, nil
		}
		if err := cond(lb); err != nil {
			return false, fmt.Errorf("load balancer %d (%s): %w", lb.ID, lb.Name, err)
		}
		return true, nil
	})
	return lb
}

// wantGroupListeners returns the listeners the members' ports give, sorted: the union.
func wantGroupListeners(members ...*corev1.Service) []string {
	var out []string
	for _, svc := range members {
		out = append(out, wantListeners(svc)...)
	}
	slices.Sort(out)
	return out
}

// hasListeners is a waitGroupLB condition: the listeners are exactly want.
func hasListeners(want []string) func(schema.LoadBalancer) error {
	return func(lb schema.LoadBalancer) error {
		if got := listeners(lb); !slices.Equal(got, want) {
			return fmt.Errorf("listeners %v, want %v", got, want)
		}
		return nil
	}
}

// waitServedBy waits until each Service's status carries the load balancer's IPv4.
func waitServedBy(t *testing.T, c *harness.Cluster, ccm *harness.Process, lb schema.LoadBalancer, members ...*corev1.Service) {
	t.Helper()
	for _, svc := range members {
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			cur := getService(t, c, svc.Namespace, svc.Name)
			ips := ingressIPs(cur.Status.LoadBalancer.Ingress)
			return slices.Contains(ips, lb.PublicNet.IPv4.IP), fmt.Errorf("service %s/%s ingress %v, want load balancer %d's %s",
				svc.Namespace, svc.Name, ips, lb.ID, lb.PublicNet.IPv4.IP)
		})
	}
}

// noOwnLB fails the test if a member has a load balancer of its own (labelled with its UID).
func noOwnLB(t *testing.T, emu *hcloudemu.Emulator, members ...*corev1.Service) {
	t.Helper()
	for _, svc := range members {
		if lbs := serviceLBs(emu, svc.UID); len(lbs) != 0 {
			t.Errorf("member %s/%s has load balancers of its own: %v", svc.Namespace, svc.Name, lbNames(lbs))
		}
	}
}

// deleteServiceAndWait deletes the Service and waits until it is gone (the CCM removed its
// finalizer, so its part of the load balancer is cleaned up).
func deleteServiceAndWait(t *testing.T, c *harness.Cluster, ccm *harness.Process, namespace, name string) {
	t.Helper()
	services := c.Client().CoreV1().Services(namespace)
	if err := services.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service %s/%s: %v", namespace, name, err)
	}
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		_, err := services.Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Errorf("service %s/%s not gone yet (finalizer): %w", namespace, name, err)
	})
}

// TestCCMLoadBalancerGroups runs one CCM as deployed (policies in dry run, so the example
// policies' port rule does not stand in the way of the ports used here) and walks a group
// through its life, each step a subtest that builds on the previous one:
//
//   - three Services of group "shop" share one load balancer: one load balancer labelled with
//     the group and the cluster (not with a Service UID), named kubernetes-group-shop, whose
//     listeners are the union of the members' ports, and every member's status has its address;
//   - a fourth member claims a port of an older member: Warning LoadBalancerGroupPortConflict
//     naming both Services and the port, its other port is served;
//   - a fifth member asks for another type: Warning LoadBalancerGroupSettingConflict naming the
//     annotation and both values, the leader's type stays in force, its port is served (the
//     lb11 is now full: 5 listeners);
//   - a sixth member needs 2 more listeners: Warning LoadBalancerGroupCapacityExceeded naming
//     the type, its limit and lb21, none of its ports added, no address;
//   - a Service outside the group, and one of another group, that name the load balancer get
//     LoadBalancerNameConflict, and the load balancer is untouched;
//   - the members are deleted one by one (the leader among the first): after each the listeners
//     are the union of the rest; after the last the load balancer is gone;
//   - a member of another group leaves (annotation removed: a load balancer of its own, the
//     group's drops its port) and joins again (its own load balancer deleted, the group's
//     serves its port and address).
func TestCCMLoadBalancerGroups(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv})
	waitInitialised(t, c, ccm, "worker-1", id)

	const ns, group = "default", "shop"
	member := func(name string, ports ...int32) *corev1.Service {
		return groupService(ns, name, group, ports...)
	}
	// The members are named in creation order, so the order by (creationTimestamp, namespace/
	// name) is the creation order even within one second.
	leaderSvc := member("a-web", 80)
	leaderSvc.Annotations[annotationPrefix+"type"] = "lb11"
	var (
		leader, b, cc, d, e *corev1.Service
		lbID                int64
	)

	ok := t.Run("three Services share one load balancer", func(t *testing.T) {
		leader = createService(t, c, leaderSvc)
		b = createService(t, c, member("b-api", 8080))
		cc = createService(t, c, member("c-admin", 9000))
		lb := waitGroupLB(t, ccm, emu, group, hasListeners(wantGroupListeners(leader, b, cc)))
		lbID = lb.ID
		if want := clusterName + "-group-" + group; lb.Name != want {
			t.Errorf("group load balancer name %q, want %q", lb.Name, want)
		}
		if lb.LoadBalancerType.Name != "lb11" {
			t.Errorf("group load balancer type %q, want lb11", lb.LoadBalancerType.Name)
		}
		if got, want := targetServers(lb), []int64{id}; !slices.Equal(got, want) {
			t.Errorf("targets %v, want %v", got, want)
		}
		waitServedBy(t, c, ccm, lb, leader, b, cc)
		noOwnLB(t, emu, leader, b, cc)
		if n := len(emu.LoadBalancers()); n != 1 {
			t.Errorf("%d load balancers for three members, want 1: %v", n, lbNames(emu.LoadBalancers()))
		}
	})
	if !ok {
		t.FailNow()
	}

	t.Run("port conflict", func(t *testing.T) {
		d = createService(t, c, member("d-dup", 8080, 9100))
		waitEvent(t, c, ccm, ns, d.Name, corev1.EventTypeWarning, "LoadBalancerGroupPortConflict",
			"port 8080 is already served by default/b-api in load balancer group shop; default/d-dup's other ports are served")
		// 8080 still goes to b-api's node port; d-dup's 9100 is served.
		want := append(wantGroupListeners(leader, b, cc), fmt.Sprintf("tcp/9100->%d", d.Spec.Ports[1].NodePort))
		slices.Sort(want)
		lb := waitGroupLB(t, ccm, emu, group, hasListeners(want))
		waitServedBy(t, c, ccm, lb, d)
	})

	t.Run("settings conflict", func(t *testing.T) {
		svc := member("e-big", 9200)
		svc.Annotations[annotationPrefix+"type"] = "lb21"
		e = createService(t, c, svc)
		waitEvent(t, c, ccm, ns, e.Name, corev1.EventTypeWarning, "LoadBalancerGroupSettingConflict",
			`load-balancer.hetzner.cloud/type: "lb21" here, "lb11" on the leader default/a-web (in force)`)
		lb := waitGroupLB(t, ccm, emu, group, func(lb schema.LoadBalancer) error {
			if !slices.Contains(listeners(lb), fmt.Sprintf("tcp/9200->%d", e.Spec.Ports[0].NodePort)) {
				return fmt.Errorf("listeners %v, no 9200 for e-big", listeners(lb))
			}
			return nil
		})
		if lb.LoadBalancerType.Name != "lb11" || lb.ID != lbID {
			t.Errorf("group load balancer %d of type %s, want %d of type lb11 (the leader's)", lb.ID, lb.LoadBalancerType.Name, lbID)
		}
		if n := len(lb.Services); n != 5 {
			t.Errorf("%d listeners, want 5 (80, 8080, 9000, 9100, 9200)", n)
		}
		waitServedBy(t, c, ccm, lb, e)
	})

	t.Run("capacity exceeded", func(t *testing.T) {
		before := waitGroupLB(t, ccm, emu, group, nil)
		f := createService(t, c, member("f-more", 9300, 9301))
		waitEvent(t, c, ccm, ns, f.Name, corev1.EventTypeWarning, "LoadBalancerGroupCapacityExceeded",
			"load balancer group shop (type lb11) serves at most 5 listeners; default/f-more needs 2 more (7 in all). Type lb21 (15) would fit: set load-balancer.hetzner.cloud/type on the leader default/a-web.")
		after := waitGroupLB(t, ccm, emu, group, nil)
		if got, want := listeners(after), listeners(before); !slices.Equal(got, want) {
			t.Errorf("listeners after the refusal %v, want unchanged %v", got, want)
		}
		if ing := getService(t, c, ns, f.Name).Status.LoadBalancer.Ingress; len(ing) != 0 {
			t.Errorf("refused member f-more has ingress %v, want none", ingressIPs(ing))
		}
		noOwnLB(t, emu, f)
		deleteServiceAndWait(t, c, ccm, ns, f.Name)
		waitGroupLB(t, ccm, emu, group, hasListeners(listeners(before)))
	})

	t.Run("non-member naming the load balancer is refused", func(t *testing.T) {
		before := waitGroupLB(t, ccm, emu, group, nil)
		outsider := groupService(ns, "x-outsider", "", 7000)
		outsider.Annotations = map[string]string{annotationPrefix + "name": before.Name}
		other := groupService(ns, "y-other", "other", 7001)
		other.Annotations[annotationPrefix+"name"] = before.Name
		for _, tc := range []struct {
			svc  *corev1.Service
			says string
		}{
			// The group's name is reserved for it (issue 40 §6): refused before any read.
			{outsider, fmt.Sprintf("load balancer name %q is reserved for load balancer group shop", before.Name)},
			// Another group naming it is outside group shop too: the message names the owner group.
			{other, fmt.Sprintf("load balancer name %q is reserved for load balancer group shop", before.Name)},
		} {
			created := createService(t, c, tc.svc)
			waitEvent(t, c, ccm, ns, tc.svc.Name, corev1.EventTypeWarning, "LoadBalancerNameConflict", tc.says)
			noOwnLB(t, emu, created)
		}
		if lbs := groupLBs(emu, "other"); len(lbs) != 0 {
			t.Errorf("group other has load balancers %v, want none (its name is taken)", lbNames(lbs))
		}
		after := waitGroupLB(t, ccm, emu, group, nil)
		if after.ID != before.ID || !slices.Equal(listeners(after), listeners(before)) || !slices.Equal(targetServers(after), targetServers(before)) {
			t.Errorf("group load balancer changed: %d %v %v, want %d %v %v", after.ID, listeners(after), targetServers(after),
				before.ID, listeners(before), targetServers(before))
		}
		for _, name := range []string{outsider.Name, other.Name} {
			deleteServiceAndWait(t, c, ccm, ns, name)
		}
	})

	t.Run("members deleted one by one", func(t *testing.T) {
		// e-big's and d-dup's listeners go with them; then the leader goes (b-api leads); then
		// the rest.
		steps := []struct {
			gone *corev1.Service
			rest []*corev1.Service
		}{
			{e, []*corev1.Service{leader, b, cc}}, // d-dup's 9100 is checked below
			{d, []*corev1.Service{leader, b, cc}},
			{leader, []*corev1.Service{b, cc}},
			{b, []*corev1.Service{cc}},
		}
		for _, step := range steps {
			deleteServiceAndWait(t, c, ccm, ns, step.gone.Name)
			want := wantGroupListeners(step.rest...)
			if step.gone == e {
				want = append(want, fmt.Sprintf("tcp/9100->%d", d.Spec.Ports[1].NodePort))
				slices.Sort(want)
			}
			lb := waitGroupLB(t, ccm, emu, group, hasListeners(want))
			if lb.ID != lbID {
				t.Errorf("after deleting %s: group load balancer %d, want the same %d", step.gone.Name, lb.ID, lbID)
			}
		}
		deleteServiceAndWait(t, c, ccm, ns, cc.Name)
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			lbs := groupLBs(emu, group)
			return len(lbs) == 0, fmt.Errorf("group load balancer still there after the last member: %v", lbNames(lbs))
		})
		if lbs := emu.LoadBalancers(); len(lbs) != 0 {
			t.Errorf("load balancers left: %v, want none", lbNames(lbs))
		}
	})

	t.Run("leave and join", func(t *testing.T) {
		const blog = "blog"
		g := createService(t, c, groupService(ns, "g-blog", blog, 80))
		h := createService(t, c, groupService(ns, "h-feed", blog, 8080))
		groupLB := waitGroupLB(t, ccm, emu, blog, hasListeners(wantGroupListeners(g, h)))
		waitServedBy(t, c, ccm, groupLB, g, h)

		// Leave: h-feed gets a load balancer of its own, the group's drops its port.
		updateService(t, c, ns, h.Name, func(s *corev1.Service) { delete(s.Annotations, annotationGroup) })
		own := waitLB(t, ccm, emu, h.UID, time.Minute, hasListeners(wantListeners(h)))
		if own.ID == groupLB.ID {
			t.Fatalf("h-feed left the group but is served by the group's load balancer %d", own.ID)
		}
		waitServedBy(t, c, ccm, own, h)
		waitGroupLB(t, ccm, emu, blog, hasListeners(wantGroupListeners(g)))

		// Join again: the group serves its port and address, its own load balancer is deleted.
		updateService(t, c, ns, h.Name, func(s *corev1.Service) { s.Annotations[annotationGroup] = blog })
		joined := waitGroupLB(t, ccm, emu, blog, hasListeners(wantGroupListeners(g, h)))
		if joined.ID != groupLB.ID {
			t.Errorf("group load balancer %d after the join, want the same %d", joined.ID, groupLB.ID)
		}
		waitServedBy(t, c, ccm, joined, h)
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			lbs := serviceLBs(emu, h.UID)
			return len(lbs) == 0, fmt.Errorf("h-feed's own load balancer still there after the join: %v", lbNames(lbs))
		})

		for _, name := range []string{g.Name, h.Name} {
			deleteServiceAndWait(t, c, ccm, ns, name)
		}
		if lbs := emu.LoadBalancers(); len(lbs) != 0 {
			t.Errorf("load balancers left: %v, want none", lbNames(lbs))
		}
	})
}

// TestCCMLoadBalancerGroupAcrossNamespaces runs the CCM with the example policies enforced: a
// Service in namespace shop that joins group "web" of namespace default is denied by
// groups.rego (Warning PolicyDenied naming the data key to change; the group's load balancer
// does not get its port, and default/web keeps being served, a node joining reaches its
// targets while shop/api is denied), and allowed without a restart
// once the policy data lists the group in config.cross_namespace_groups (the service
// controller's retry meets the new revision).
func TestCCMLoadBalancerGroupAcrossNamespaces(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce}})
	waitInitialised(t, c, ccm, "worker-1", id)

	ctx := context.Background()
	// The namespace may expose load balancers (exposure.rego), so the group rule alone decides.
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "shop", Labels: map[string]string{"hcloud-ccm/public": "true"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// Ports 80 and 443: the only listen ports the example policies allow.
	web := createService(t, c, groupService("default", "web", "web", 80))
	lb := waitGroupLB(t, ccm, emu, "web", hasListeners(wantGroupListeners(web)))
	waitServedBy(t, c, ccm, lb, web)

	api := createService(t, c, groupService("shop", "api", "web", 443))
	waitEvent(t, c, ccm, "shop", "api", corev1.EventTypeWarning, "PolicyDenied",
		`Service shop/api may not join load balancer group "web": the group lives in namespace "default"`)
	denied := waitGroupLB(t, ccm, emu, "web", hasListeners(wantGroupListeners(web)))
	if denied.ID != lb.ID {
		t.Errorf("group load balancer %d after the deny, want the same %d", denied.ID, lb.ID)
	}
	noOwnLB(t, emu, api)
	// The leader is not held up by the denied member: a node joining reaches the group's
	// targets (the leader's plan is made again without shop/api), and port 443 is still not
	// added through the leader's sync.
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)
	waitGroupLB(t, ccm, emu, "web", func(lb schema.LoadBalancer) error {
		if got, want := targetServers(lb), []int64{id, id2}; !slices.Equal(got, want) {
			return fmt.Errorf("targets %v, want %v", got, want)
		}
		if got, want := listeners(lb), wantGroupListeners(web); !slices.Equal(got, want) {
			return fmt.Errorf("listeners %v, want %v (shop/api's 443 never added while it is denied)", got, want)
		}
		return nil
	})

	applyPolicyData(t, c, ccm, func(config map[string]any) {
		if _, ok := config["cross_namespace_groups"]; !ok {
			t.Fatalf("data.json of the policy ConfigMap has no config.cross_namespace_groups: %v", config)
		}
		config["cross_namespace_groups"] = []string{"web"}
	})
	allowed := waitGroupLB(t, ccm, emu, "web", hasListeners(wantGroupListeners(web, api)))
	waitServedBy(t, c, ccm, allowed, web, api)
	noOwnLB(t, emu, web, api)
}

// TestCCMLoadBalancerGroupLeaderFailover runs two CCMs with fast leader election. The group
// "web" has one member; a second member joins, and the request that adds its listener is
// committed by the emulator but its reply held back; the leader is killed with SIGKILL in that
// moment. The standby takes over and converges: exactly one load balancer of the group (0
// duplicates), with both members' listeners and addresses, and no load balancer of a Service of
// its own (0 orphans). Then the same in the middle of a join of a Service with a load balancer
// of its own (a third CCM is the next standby): the next leader adds the port once and deletes
// the own load balancer. Deleting all members leaves no load balancer at all.
func TestCCMLoadBalancerGroupLeaderFailover(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	a, _ := startCCM(t, c, "ccm-a", endpoint, emu.Token(), ccmRun{env: lbEnv, args: fastElection})
	b, _ := startCCM(t, c, "ccm-b", endpoint, emu.Token(), ccmRun{env: lbEnv, args: fastElection})
	leader, standby := electedLeader(t, a, b)
	waitInitialised(t, c, leader, "worker-1", id)

	const ns, group = "default", "web"
	first := createService(t, c, groupService(ns, "a-web", group, 80))
	lb := waitGroupLB(t, leader, emu, group, hasListeners(wantGroupListeners(first)))
	waitServedBy(t, c, leader, lb, first)

	const addService = "POST /v1/load_balancers/{id}/actions/add_service"
	before := emu.Counts()[addService]
	emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_service", Delay: 30 * time.Second, AfterCommit: true, Times: 1})
	second := createService(t, c, groupService(ns, "b-api", group, 8080))
	waitCCM(t, leader, time.Minute, func() (bool, error) {
		return emu.Counts()[addService] > before, fmt.Errorf("no %s for the joining member yet", addService)
	})
	leader.Kill()
	t.Logf("killed the leader %s with SIGKILL while the group's add_service was pending", leader.Name)
	emu.ClearFaults()
	waitCCM(t, standby, time.Minute, func() (bool, error) {
		return strings.Contains(standby.Logs(), acquired), fmt.Errorf("%s has not taken the Lease", standby.Name)
	})

	after := waitGroupLB(t, standby, emu, group, hasListeners(wantGroupListeners(first, second)))
	if after.ID != lb.ID {
		t.Errorf("group load balancer %d after the failover, want the same %d", after.ID, lb.ID)
	}
	waitServedBy(t, c, standby, after, first, second)
	if lbs := emu.LoadBalancers(); len(lbs) != 1 {
		t.Errorf("load balancers after the failover: %v, want only the group's %d (0 duplicates, 0 orphans)", lbNames(lbs), lb.ID)
	}
	noOwnLB(t, emu, first, second)

	// A second failover, in the middle of a join: a Service with a load balancer of its own
	// joins; the request that adds its port to the group's load balancer is committed, its
	// reply held back, and the leader dies before it could delete the Service's own load
	// balancer. The next leader must finish the join: the port on the group's load balancer
	// once, and the own load balancer deleted (else an orphan nobody would remove).
	third, _ := startCCM(t, c, "ccm-c", endpoint, emu.Token(), ccmRun{env: lbEnv, args: fastElection})
	leader, standby = standby, third
	own := createService(t, c, groupService(ns, "c-admin", "", 9000))
	ownLB := waitLB(t, leader, emu, own.UID, time.Minute, hasListeners(wantListeners(own)))
	waitServedBy(t, c, leader, ownLB, own)
	before = emu.Counts()[addService]
	emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_service", Delay: 30 * time.Second, AfterCommit: true, Times: 1})
	updateService(t, c, ns, own.Name, func(s *corev1.Service) { s.Annotations[annotationGroup] = group })
	waitCCM(t, leader, time.Minute, func() (bool, error) {
		return emu.Counts()[addService] > before, fmt.Errorf("no %s for the joining Service yet", addService)
	})
	leader.Kill()
	t.Logf("killed the leader %s with SIGKILL while the join's add_service was pending", leader.Name)
	emu.ClearFaults()
	waitCCM(t, standby, time.Minute, func() (bool, error) {
		return strings.Contains(standby.Logs(), acquired), fmt.Errorf("%s has not taken the Lease", standby.Name)
	})
	joined := waitGroupLB(t, standby, emu, group, hasListeners(wantGroupListeners(first, second, own)))
	if joined.ID != lb.ID {
		t.Errorf("group load balancer %d after the second failover, want the same %d", joined.ID, lb.ID)
	}
	waitServedBy(t, c, standby, joined, own)
	waitCCM(t, standby, time.Minute, func() (bool, error) {
		lbs := serviceLBs(emu, own.UID)
		return len(lbs) == 0, fmt.Errorf("c-admin's own load balancer still there after the join: %v (an orphan)", lbNames(lbs))
	})
	if lbs := emu.LoadBalancers(); len(lbs) != 1 {
		t.Errorf("load balancers after the second failover: %v, want only the group's %d (0 duplicates, 0 orphans)", lbNames(lbs), lb.ID)
	}

	for _, name := range []string{first.Name, second.Name, own.Name} {
		deleteServiceAndWait(t, c, standby, ns, name)
	}
	if lbs := emu.LoadBalancers(); len(lbs) != 0 {
		t.Errorf("load balancers left after the last member: %v, want none (0 orphans)", lbNames(lbs))
	}
}

// lbMutating counts the mutating requests about load balancers (lbRequests counts them all).
func lbMutating(counts map[string]int) int {
	n := 0
	for route, c := range counts {
		if strings.Contains(route, " /v1/load_balancer") && !strings.HasPrefix(route, "GET ") {
			n += c
		}
	}
	return n
}

// settledCounts waits until the emulator has seen no request for 2 s (the CCM is done with
// what it was asked), and returns the counts since the last ResetRequests.
func settledCounts(t *testing.T, ccm *harness.Process, emu *hcloudemu.Emulator) map[string]int {
	t.Helper()
	last, since := -1, time.Now()
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		n := len(emu.Requests())
		if n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= 2*time.Second, fmt.Errorf("requests still coming (%d so far)", n)
	})
	return emu.Counts()
}

// syncEvents are the Event reasons the upstream service controller logs once per sync of a
// Service's load balancer (k8s.io/cloud-provider controllers/service): an Ensure starts with
// EnsuringLoadBalancer, a node change ends with UpdatedLoadBalancer or UpdateLoadBalancerFailed,
// a delete with DeletedLoadBalancer or a failure.
var syncEvents = []string{"EnsuringLoadBalancer", "UpdatedLoadBalancer", "UpdateLoadBalancerFailed",
	"DeletedLoadBalancer", "DeleteLoadBalancerFailed"}

// syncs counts the syncs of load balancers of Services in namespace ns that log (a part of the
// CCM's log) shows, by event reason.
func syncs(log, ns string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `object="`+ns+`/`) || !strings.Contains(line, `kind="Service"`) {
			continue
		}
		for _, r := range syncEvents {
			if strings.Contains(line, `reason="`+r+`"`) {
				out[r]++
			}
		}
	}
	return out
}

// TestCCMLoadBalancerGroupRequestBudget measures issue 22's budget rule, a group of n Services
// costs no more Hetzner requests than n separate Services for the same listeners, on what is
// deterministic (issue 33). One CCM, n = 3 Services with one port each (80, 8080, 9000), first
// without the annotation (3 load balancers), then as one group; each phase counts the load
// balancer requests and the syncs the service controller ran until the CCM is quiet: create the
// Services one by one (each served before the next), a node joins (every load balancer gets the
// target), delete them one by one (every load balancer gone).
//
// What is asserted:
//   - mutating requests exactly, per phase: they follow from the plans alone;
//   - reads per sync, from the algorithm, however many syncs the service controller ran (a
//     loaded machine runs more): an Ensure reads the load balancer by its identity labels
//     and, when none carries them, by name (2); an UpdateLoadBalancer reads through the cache
//     (at most 1, when the entry is too old); a delete reads in GetLoadBalancer and in
//     EnsureLoadBalancerDeleted (2); the type list is read once per hour (1 in all);
//   - the group's delete runs no Ensure of the remaining members: their ports are distinct and
//     the members set no setting, so a leave changes nothing for them (no requeue).
//
// The figures are logged for docs/performance.md; no two timing-dependent totals are compared.
func TestCCMLoadBalancerGroupRequestBudget(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv})
	waitInitialised(t, c, ccm, "worker-1", id)
	const ns = "default"
	ports := []int32{80, 8080, 9000}
	phases := []string{"create", "node joins", "delete"}
	readsPerSync := map[string]int{"EnsuringLoadBalancer": 2, "UpdatedLoadBalancer": 1, "UpdateLoadBalancerFailed": 1,
		"DeletedLoadBalancer": 2, "DeleteLoadBalancerFailed": 2}
	wantMutating := map[string][]int{"": {3, 3, 3}, "budget": {3, 1, 3}} // create, add_target, delete
	typeReads := 1
	type cost struct {
		reads, mutating int
		syncs           map[string]int
	}
	measure := func(t *testing.T, group string, node int) []cost {
		var out []cost
		logAt := 0
		start := func() {
			settledCounts(t, ccm, emu)
			emu.ResetRequests()
			logAt = len(ccm.Logs())
		}
		record := func() {
			counts := settledCounts(t, ccm, emu)
			phase := phases[len(out)]
			got := cost{lbRequests(counts) - lbMutating(counts), lbMutating(counts), syncs(ccm.Logs()[logAt:], ns)}
			out = append(out, got)
			bound := 0
			for r, n := range got.syncs {
				bound += readsPerSync[r] * n
			}
			if counts["GET /v1/load_balancer_types"] > 0 {
				bound += typeReads
				typeReads = 0
			}
			t.Logf("%s, %s: %d reads (at most %d for the syncs %v), %d mutating: %v", cmp.Or(group, "separate"), phase,
				got.reads, bound, got.syncs, got.mutating, counts)
			if got.reads > bound {
				t.Errorf("%s, %s: %d load balancer reads, more than %d for the syncs %v: %v", cmp.Or(group, "separate"), phase, got.reads, bound, got.syncs, counts)
			}
			if want := wantMutating[group][len(out)-1]; got.mutating != want {
				t.Errorf("%s, %s: %d mutating load balancer requests, want %d: %v", cmp.Or(group, "separate"), phase, got.mutating, want, counts)
			}
		}
		start()
		var svcs []*corev1.Service
		for i, p := range ports {
			svc := createService(t, c, groupService(ns, fmt.Sprintf("%s-%d", strings.TrimPrefix(group+"-svc", "-"), i), group, p))
			svcs = append(svcs, svc)
			if group == "" {
				waitLB(t, ccm, emu, svc.UID, time.Minute, hasListeners(wantListeners(svc)))
			} else {
				waitGroupLB(t, ccm, emu, group, hasListeners(wantGroupListeners(svcs...)))
			}
			waitIngress(t, c, ccm, ns, svc.Name)
		}
		record()

		start()
		name := fmt.Sprintf("worker-%d", node)
		nodeID := addServer(t, emu, hcloudemu.ServerSpec{Name: name})
		createNodeLive(t, c, name, fmt.Sprintf("10.244.%d.0/24", node), "worker-1")
		waitInitialised(t, c, ccm, name, nodeID)
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			for _, lb := range emu.LoadBalancers() {
				if !slices.Contains(targetServers(lb), nodeID) {
					return false, fmt.Errorf("load balancer %d has targets %v, not yet %d", lb.ID, targetServers(lb), nodeID)
				}
			}
			return true, nil
		})
		record()
		// The node goes again, outside the measurement, so the next phase starts alike.
		if err := c.Client().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete node %s: %v", name, err)
		}
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			for _, lb := range emu.LoadBalancers() {
				if slices.Contains(targetServers(lb), nodeID) {
					return false, fmt.Errorf("load balancer %d still targets %d", lb.ID, nodeID)
				}
			}
			return true, nil
		})
		start()
		for _, svc := range svcs {
			deleteServiceAndWait(t, c, ccm, ns, svc.Name)
		}
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			lbs := emu.LoadBalancers()
			return len(lbs) == 0, fmt.Errorf("load balancers left: %v", lbNames(lbs))
		})
		record()
		return out
	}

	separate := measure(t, "", 2)
	grouped := measure(t, "budget", 3)
	if n := grouped[2].syncs["EnsuringLoadBalancer"]; n != 0 {
		t.Errorf("the group's delete ran %d Ensures of remaining members, want 0: a leave that changes nothing for them requeues nobody", n)
	}
	for i, phase := range phases {
		t.Logf("%-10s separate: %3d load balancer requests (%2d mutating)   group: %3d (%2d mutating)",
			phase, separate[i].reads+separate[i].mutating, separate[i].mutating, grouped[i].reads+grouped[i].mutating, grouped[i].mutating)
	}
}
