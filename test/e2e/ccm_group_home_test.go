//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// labelGroupNamespace is lbplan.LabelGroupNamespace: the group's home namespace, recorded on its
// load balancer when it is created.
const labelGroupNamespace = "hcloud-policy-ccm.io/group-namespace"

// TestCCMLoadBalancerGroupHomeSurvivesSuccession (issue 34 §2) runs the CCM with the example
// policies enforced. Group "shop" is created by grp/v1 (port 80), so it lives in namespace grp,
// recorded on its load balancer. evil/a1 (443) joins later and is denied as cross-namespace;
// grp/v2 (80, held by v1 until it leaves) joins after it. When grp/v1 is deleted, evil/a1 is
// the oldest member, but the group still lives in grp: grp/v2 leads and is served on 80, a1's
// 443 is never added and a1 gets no address, and a1's node selector (matching no node) removes
// no target. Before, a1 became the leader and the group moved to namespace evil: its 443 was
// added, it got the address, grp/v2 was refused as cross-namespace, and its node selector
// removed every target.
func TestCCMLoadBalancerGroupHomeSurvivesSuccession(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce}})
	waitInitialised(t, c, ccm, "worker-1", id)

	ctx := context.Background()
	// Both namespaces may expose load balancers (exposure.rego), so the group rule alone decides.
	for _, ns := range []string{"grp", "evil"} {
		if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{"hcloud-ccm/public": "true"},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	// Members are ordered by creationTimestamp (seconds), then namespace/name, and "evil/a1"
	// sorts before "grp/…": each member is created in a later second than the one before.
	nextSecond := func() { time.Sleep(1100 * time.Millisecond) }

	v1 := createService(t, c, groupService("grp", "v1", "shop", 80))
	lb := waitGroupLB(t, ccm, emu, "shop", hasListeners(wantGroupListeners(v1)))
	waitServedBy(t, c, ccm, lb, v1)
	if got := lb.Labels[labelGroupNamespace]; got != "grp" {
		t.Errorf("label %s = %q on the group's load balancer, want its home grp", labelGroupNamespace, got)
	}

	nextSecond()
	a1 := createService(t, c, groupService("evil", "a1", "shop", 443))
	waitEvent(t, c, ccm, "evil", "a1", corev1.EventTypeWarning, "PolicyDenied",
		`Service evil/a1 may not join load balancer group "shop": the group lives in namespace "grp"`)
	nextSecond()
	v2 := createService(t, c, groupService("grp", "v2", "shop", 80))
	waitGroupLB(t, ccm, emu, "shop", hasListeners(wantGroupListeners(v1)))

	deleteServiceAndWait(t, c, ccm, "grp", "v1")
	after := waitGroupLB(t, ccm, emu, "shop", hasListeners(wantGroupListeners(v2)))
	if after.ID != lb.ID {
		t.Errorf("group load balancer %d after the leader left, want the same %d", after.ID, lb.ID)
	}
	waitServedBy(t, c, ccm, after, v2)
	if got := after.Labels[labelGroupNamespace]; got != "grp" {
		t.Errorf("label %s = %q after the leader left, want grp (leadership never moves the home)", labelGroupNamespace, got)
	}

	// a1, the oldest member now, restricts the targets to nodes that do not exist. It is not the
	// leader: its settings are not in force. v2 is touched so that the leader's sync runs after
	// a1's change; its EnsuredLoadBalancer events say when it did.
	ensured := func() int {
		evs, err := events(c, "grp", "v2", "EnsuredLoadBalancer")
		if err != nil {
			t.Fatalf("events of grp/v2: %v", err)
		}
		n := 0
		for _, e := range evs {
			n += max(int(e.Count), 1)
		}
		return n
	}
	updateService(t, c, "evil", "a1", func(s *corev1.Service) {
		s.Annotations["load-balancer.hetzner.cloud/node-selector"] = "pool=none"
	})
	before := ensured()
	updateService(t, c, "grp", "v2", func(s *corev1.Service) { s.Spec.Ports[0].Name = "http" })
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		return ensured() > before, fmt.Errorf("grp/v2 not synced after its update yet")
	})

	final := waitGroupLB(t, ccm, emu, "shop", nil)
	if got := listeners(final); !slices.Equal(got, wantGroupListeners(v2)) {
		t.Errorf("listeners %v, want %v: evil/a1's 443 is never added", got, wantGroupListeners(v2))
	}
	if got := targetServers(final); !slices.Equal(got, []int64{id}) {
		t.Errorf("targets %v, want [%d]: evil/a1's node selector is not in force", got, id)
	}
	if ips := ingressIPs(getService(t, c, "evil", "a1").Status.LoadBalancer.Ingress); len(ips) != 0 {
		t.Errorf("evil/a1 has the group's address %v, want none", ips)
	}
	noOwnLB(t, emu, a1, v2)
}

// TestCCMLoadBalancerGroupHomeNeverMoves (issue 40 §3, §4) runs the CCM with the example
// policies enforced and a 5 s group sweep. Group "shop" is created by grp/v1, so it lives in
// namespace grp. evil/a1, created before v1 as a ClusterIP Service, becomes a LoadBalancer
// member of shop later: the oldest member, refused as cross-namespace. The group's load
// balancer is deleted by hand: a1's syncs create nothing (LoadBalancerGroupHome), the sweep
// syncs v1, which creates it again with home grp, and a1 stays without an address. Then v1 is
// deleted: the group's load balancer goes although a1 remains, and a1 is told why. Before, a1's
// sync created kubernetes-group-shop again, labelled group-namespace evil, and the home's own
// Service was refused; and the load balancer stayed, empty, while a1 remained.
func TestCCMLoadBalancerGroupHomeNeverMoves(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce, "--load-balancer-group-sweep-interval=5s"}})
	waitInitialised(t, c, ccm, "worker-1", id)
	ctx := context.Background()
	for _, ns := range []string{"grp", "evil"} {
		if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{"hcloud-ccm/public": "true"},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	a1 := groupService("evil", "a1", "shop", 443)
	a1.Spec.Type = corev1.ServiceTypeClusterIP
	delete(a1.Annotations, annotationGroup)
	createService(t, c, a1)
	time.Sleep(1100 * time.Millisecond) // a1 is older by creationTimestamp (seconds)
	v1 := createService(t, c, groupService("grp", "v1", "shop", 80))
	lb := waitGroupLB(t, ccm, emu, "shop", hasListeners(wantGroupListeners(v1)))
	waitServedBy(t, c, ccm, lb, v1)
	updateService(t, c, "evil", "a1", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Annotations = map[string]string{annotationGroup: "shop"}
	})
	waitEvent(t, c, ccm, "evil", "a1", corev1.EventTypeWarning, "PolicyDenied", `the group lives in namespace "grp"`)

	if _, _, err := handClient(emu, endpoint).LoadBalancer.DeleteWithResult(ctx, &hcloud.LoadBalancer{ID: lb.ID}); err != nil {
		t.Fatalf("hand delete of load balancer %d: %v", lb.ID, err)
	}
	t.Logf("deleted the group's load balancer %d by hand", lb.ID)
	// a1 is retried by the service controller (it was denied); v1 by the sweep.
	updateService(t, c, "evil", "a1", func(s *corev1.Service) { s.Annotations["golden.example/touch"] = "1" })
	recreated := waitGroupLB(t, ccm, emu, "shop", hasListeners(wantGroupListeners(v1)))
	if recreated.ID == lb.ID {
		t.Fatalf("group load balancer %d still there", lb.ID)
	}
	if got := recreated.Labels[labelGroupNamespace]; got != "grp" {
		t.Errorf("re-created with %s=%q, want grp: the home never moves", labelGroupNamespace, got)
	}
	waitServedBy(t, c, ccm, recreated, v1)
	if ips := ingressIPs(getService(t, c, "evil", "a1").Status.LoadBalancer.Ingress); len(ips) != 0 {
		t.Errorf("evil/a1 has the address %v, want none", ips)
	}

	deleteServiceAndWait(t, c, ccm, "grp", "v1")
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		lbs := groupLBs(emu, "shop")
		return len(lbs) == 0, fmt.Errorf("group shop's load balancers %v still there after its home's last member left", lbNames(lbs))
	})
	waitEvent(t, c, ccm, "evil", "a1", corev1.EventTypeWarning, "LoadBalancerGroupHome", "which has no member left")
	if lbs := groupLBs(emu, "shop"); len(lbs) != 0 {
		t.Errorf("evil/a1's sync created %v, want nothing", lbNames(lbs))
	}
	noOwnLB(t, emu, getService(t, c, "evil", "a1"))
}
