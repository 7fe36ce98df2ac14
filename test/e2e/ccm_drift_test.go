//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// Issue 34 §4: drift is repaired within a stated bound. The CCM checks every load balancer
// against the state it left it in every drift period (--load-balancer-drift-interval, paced by
// HCLOUD_API_BUDGET_PER_HOUR: max(interval, pages × 2h / budget)); here 2 s with a budget of
// 3600 (1 page × 2h / 3600 = 2 s), so the bound of docs/reliability.md is one period plus one
// sync of the Service. The waits allow 45 s, over twenty periods, for a loaded machine.

// driftPeriod is the drift period of driftRun.
const driftPeriod = 2 * time.Second

// driftRepairTimeout bounds every repair: one period plus one sync, with a wide margin.
const driftRepairTimeout = 45 * time.Second

// driftRun runs the CCM with the load balancer settings of lbEnv and a drift period of 2 s.
var driftRun = ccmRun{
	env:  append(slices.Clone(lbEnv), "HCLOUD_API_BUDGET_PER_HOUR=3600"),
	args: []string{"--load-balancer-drift-interval=" + driftPeriod.String()},
}

// handClient is a Hetzner API client for the test's own hand edits, as an operator's hcloud
// CLI would send them.
func handClient(emu *hcloudemu.Emulator, endpoint string) *hcloud.Client {
	return hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()), hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(50 * time.Millisecond)}))
}

// handEdit runs one hand edit (an action) and waits for it, failing the test on error.
func handEdit(t *testing.T, client *hcloud.Client, what string, run func(context.Context) (*hcloud.Action, *hcloud.Response, error)) {
	t.Helper()
	ctx := context.Background()
	a, _, err := run(ctx)
	if err == nil && a != nil {
		err = client.Action.WaitFor(ctx, a)
	}
	if err != nil {
		t.Fatalf("hand edit %s: %v", what, err)
	}
}

// wantLBState accepts a load balancer with exactly the target servers ids and the listeners.
func wantLBState(listenersWant []string, ids ...int64) func(schema.LoadBalancer) error {
	return func(lb schema.LoadBalancer) error {
		if got := targetServers(lb); !slices.Equal(got, ids) {
			return fmt.Errorf("target servers %v, want %v", got, ids)
		}
		if got := listeners(lb); !slices.Equal(got, listenersWant) {
			return fmt.Errorf("listeners %v, want %v", got, listenersWant)
		}
		return nil
	}
}

// driftService creates the Service default/web and waits for its load balancer (target id,
// its listener) and its address.
func driftService(t *testing.T, c *harness.Cluster, ccm *harness.Process, emu *hcloudemu.Emulator, id int64) (types.UID, []string, schema.LoadBalancer) {
	t.Helper()
	createService(t, c, loadBalancerService("default", "web"))
	waitIngress(t, c, ccm, "default", "web")
	svc := getService(t, c, "default", "web")
	want := wantListeners(svc)
	lb := waitLB(t, ccm, emu, svc.UID, time.Minute, wantLBState(want, id))
	return svc.UID, want, lb
}

// TestCCMDriftRepairedWhileIdle: a target and a listener removed by hand while nothing in the
// cluster changes are put back within the bound, by exactly one add_service and one add_target
// (the Service's EnsureLoadBalancer, synced by the drift check), and nothing is sent after that
// for three more periods.
func TestCCMDriftRepairedWhileIdle(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), driftRun)
	waitInitialised(t, c, ccm, "worker-1", id1)
	uid, want, lb := driftService(t, c, ccm, emu, id1)

	client := handClient(emu, endpoint)
	hlb := &hcloud.LoadBalancer{ID: lb.ID}
	handEdit(t, client, "remove target", func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
		return client.LoadBalancer.RemoveServerTarget(ctx, hlb, &hcloud.Server{ID: id1})
	})
	handEdit(t, client, "delete listener", func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
		return client.LoadBalancer.DeleteService(ctx, hlb, 80)
	})
	emu.ResetRequests()

	waitLB(t, ccm, emu, uid, driftRepairTimeout, wantLBState(want, id1))
	time.Sleep(3 * driftPeriod) // three more checks: the repair holds and nothing else is sent
	counts := emu.Counts()
	for route, n := range map[string]int{
		"POST /v1/load_balancers/{id}/actions/add_service": 1,
		"POST /v1/load_balancers/{id}/actions/add_target":  1,
	} {
		if counts[route] != n {
			t.Errorf("%d %s requests after the hand edit, want %d; all: %v", counts[route], route, n, counts)
		}
	}
	if n := emu.MutatingRequests(); n != 2 {
		t.Errorf("%d mutating requests after the hand edit, want 2 (add_service, add_target); all: %v", n, counts)
	}
}

// TestCCMDriftRepairedAfterFreshEdit: a target removed by hand, followed at once by a node join,
// whose UpdateLoadBalancer reads the cache entry that still shows the removed target. Both
// targets are on the load balancer within the bound, nothing was removed by the CCM, and once
// repaired nothing is sent for three more periods.
func TestCCMDriftRepairedAfterFreshEdit(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), driftRun)
	waitInitialised(t, c, ccm, "worker-1", id1)
	uid, want, lb := driftService(t, c, ccm, emu, id1)

	client := handClient(emu, endpoint)
	handEdit(t, client, "remove target", func(ctx context.Context) (*hcloud.Action, *hcloud.Response, error) {
		return client.LoadBalancer.RemoveServerTarget(ctx, &hcloud.LoadBalancer{ID: lb.ID}, &hcloud.Server{ID: id1})
	})
	emu.ResetRequests()
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)

	waitLB(t, ccm, emu, uid, driftRepairTimeout, wantLBState(want, id1, id2))
	before := emu.MutatingRequests()
	time.Sleep(3 * driftPeriod)
	counts := emu.Counts()
	if n := counts["POST /v1/load_balancers/{id}/actions/remove_target"]; n != 0 {
		t.Errorf("%d remove_target requests, want none; all: %v", n, counts)
	}
	if n := counts["POST /v1/load_balancers/{id}/actions/add_target"]; n < 2 {
		t.Errorf("%d add_target requests, want at least 2 (the joined node's and the repair's); all: %v", n, counts)
	}
	if n := emu.MutatingRequests() - before; n != 0 {
		t.Errorf("%d mutating requests in the three periods after the repair, want none; all: %v", n, counts)
	}
}

// TestCCMDeletedLoadBalancerRecreated: a load balancer deleted by hand, then a node joins. The
// CCM recreates it (exactly one create) with both targets, and the Service's status shows the
// new load balancer's address.
func TestCCMDeletedLoadBalancerRecreated(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id1 := oneWorker(t, "10.244.1.0/24")
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), driftRun)
	waitInitialised(t, c, ccm, "worker-1", id1)
	uid, want, old := driftService(t, c, ccm, emu, id1)

	client := handClient(emu, endpoint)
	if _, _, err := client.LoadBalancer.DeleteWithResult(context.Background(), &hcloud.LoadBalancer{ID: old.ID}); err != nil {
		t.Fatalf("hand delete of load balancer %d: %v", old.ID, err)
	}
	emu.ResetRequests()
	createNodeLive(t, c, "worker-2", "10.244.2.0/24", "worker-1")
	waitInitialised(t, c, ccm, "worker-2", id2)

	lb := waitLB(t, ccm, emu, uid, driftRepairTimeout, func(lb schema.LoadBalancer) error {
		if lb.ID == old.ID {
			return fmt.Errorf("still the deleted load balancer %d", old.ID)
		}
		return wantLBState(want, id1, id2)(lb)
	})
	newIP := lb.PublicNet.IPv4.IP
	waitCCM(t, ccm, driftRepairTimeout, func() (bool, error) {
		got := ingressIPs(getService(t, c, "default", "web").Status.LoadBalancer.Ingress)
		return slices.Contains(got, newIP), fmt.Errorf("ingress IPs %v, want the new load balancer's %s", got, newIP)
	})
	time.Sleep(3 * driftPeriod)
	if n := emu.Counts()["POST /v1/load_balancers"]; n != 1 {
		t.Errorf("%d load balancer creates after the hand delete, want 1; all: %v", n, emu.Counts())
	}
}
