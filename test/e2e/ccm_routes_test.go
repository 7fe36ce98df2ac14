//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMNetworkRoutes runs the CCM with the args of deploy/networks (--allocate-node-cidrs,
// --cluster-cidr=10.244.0.0/16, watch-based routes) and HCLOUD_NETWORK: a node's pod CIDR
// becomes a route in the network via the server's private IP and the node's NetworkUnavailable
// condition turns False; a pod CIDR outside the cluster CIDR is denied by the example policy
// (Warning event PolicyDenied on the Node, no route).
//
// Issue 10's half-applied route replacement: worker-3's pod CIDR already has a route via
// worker-1's IP, and a policy denies route.create for it but allows route.delete. Upstream
// deletes the misrouted route and creates worker-3's; the CCM decides the pair as one plan, so
// nothing runs: the old route stays (no delete_route request), and worker-3 gets a
// PolicyDenied event naming the add.
func TestCCMNetworkRoutes(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir+"/networks")
	emu, endpoint := hcloudemu.NewTestServer(t)
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{
		Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}},
	})
	if err != nil {
		t.Fatalf("add network: %v", err)
	}
	servers := map[string]string{"worker-1": "10.0.0.2", "worker-2": "10.0.0.3", "worker-3": "10.0.0.4"}
	ids := map[string]int64{}
	for name, ip := range servers {
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: name, Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: ip}}})
		if err != nil {
			t.Fatalf("add server %s: %v", name, err)
		}
		ids[name] = id
	}
	c.CreateNode(t, "worker-1", "10.244.1.0/24", harness.WithInternalIP(servers["worker-1"]))
	c.CreateNode(t, "worker-2", "192.168.7.0/24", harness.WithInternalIP(servers["worker-2"]))
	c.CreateNode(t, "worker-3", "10.244.3.0/24", harness.WithInternalIP(servers["worker-3"]))
	seedRoute(t, emu, endpoint, netID, "10.244.3.0/24", servers["worker-1"])
	cm := getConfigMap(t, c)
	cm.Data["freeze_worker3.rego"] = `package ccm

deny contains "worker-3's route is frozen" if {
	input.action == "route.create"
	input.route.destination == "10.244.3.0/24"
}
`
	if _, err := c.Client().CoreV1().ConfigMaps(ccmNamespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("add the freeze policy: %v", err)
	}
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		deploy: deployDir + "/networks",
		args:   []string{enforce},
		env:    []string{"HCLOUD_NETWORK=k8s"},
	})
	waitInitialised(t, c, ccm, "worker-1", ids["worker-1"])
	waitInitialised(t, c, ccm, "worker-2", ids["worker-2"])

	harness.WaitFor(t, 2*time.Minute, func() (bool, error) {
		network, ok := emu.Network(netID)
		if !ok {
			t.Fatalf("network %d is gone", netID)
		}
		for _, r := range network.Routes {
			if r.Destination == "10.244.1.0/24" && r.Gateway == servers["worker-1"] {
				return true, nil
			}
		}
		return false, fmt.Errorf("no route 10.244.1.0/24 via %s yet; routes: %+v", servers["worker-1"], network.Routes)
	})

	ctx := context.Background()
	admin := c.Client()
	harness.WaitFor(t, time.Minute, func() (bool, error) {
		node, err := admin.CoreV1().Nodes().Get(ctx, "worker-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(node.Status.Conditions, func(cond corev1.NodeCondition) bool {
			return cond.Type == corev1.NodeNetworkUnavailable
		})
		if i < 0 || node.Status.Conditions[i].Status != corev1.ConditionFalse {
			return false, fmt.Errorf("worker-1 conditions: %+v", node.Status.Conditions)
		}
		return true, nil
	})

	harness.WaitFor(t, time.Minute, func() (bool, error) {
		events, err := admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "worker-2", "reason": "PolicyDenied",
		}.String()})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, "outside the cluster CIDR") {
				return true, nil
			}
		}
		return false, fmt.Errorf("no PolicyDenied event about the cluster CIDR on worker-2 yet (%d events)", len(events.Items))
	})
	network, _ := emu.Network(netID)
	for _, r := range network.Routes {
		if r.Destination == "192.168.7.0/24" {
			t.Errorf("route %+v exists, want it denied by policy", r)
		}
	}

	waitEvent(t, c, ccm, "", "worker-3", corev1.EventTypeWarning, "PolicyDenied", "worker-3's route is frozen: for add_route(10.244.3.0/24 via "+servers["worker-3"]+")")
	network, _ = emu.Network(netID)
	if !slices.ContainsFunc(network.Routes, func(r schema.NetworkRoute) bool {
		return r.Destination == "10.244.3.0/24" && r.Gateway == servers["worker-1"]
	}) {
		t.Errorf("routes = %+v, want the old route 10.244.3.0/24 via %s kept (its replacement is denied)", network.Routes, servers["worker-1"])
	}
	if n := emu.Counts()["POST /v1/networks/{id}/actions/delete_route"]; n != 0 {
		t.Errorf("%d delete_route requests, want none: the delete is half of a denied replacement", n)
	}
}

// seedRoute adds a route to the network through the emulator's API.
func seedRoute(t *testing.T, emu *hcloudemu.Emulator, endpoint string, netID int64, dest, gateway string) {
	t.Helper()
	client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()))
	_, cidr, err := net.ParseCIDR(dest)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := client.Network.AddRoute(context.Background(), &hcloud.Network{ID: netID},
		hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{Destination: cidr, Gateway: net.ParseIP(gateway)}})
	if err == nil {
		err = client.Action.WaitFor(context.Background(), a)
	}
	if err != nil {
		t.Fatalf("seed route %s via %s: %v", dest, gateway, err)
	}
}

// TestCCMClusterCIDRNotOneDisablesRoutes is issue 19's item 3: with HCLOUD_NETWORK, a
// --cluster-cidr that is not one CIDR (a dual-stack list, a malformed value) disables routes,
// as in the official CCM, instead of stopping the CCM or starting a route controller whose
// IPv6 routes fail. The CCM initialises nodes, logs why routes are off, upstream starts no
// route controller, and no route is written within two route reconcile periods.
func TestCCMClusterCIDRNotOneDisablesRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cidr string
	}{
		{"dual-stack", "10.244.0.0/16,fd00::/56"},
		{"malformed", "10.244.0.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := harness.Start(t)
			c.ApplyKustomize(t, deployDir+"/networks")
			emu, endpoint := hcloudemu.NewTestServer(t)
			netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{
				Name: "k8s", IPRange: "10.0.0.0/8",
				Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}},
			})
			if err != nil {
				t.Fatalf("add network: %v", err)
			}
			id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "worker-1", Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: "10.0.0.2"}}})
			if err != nil {
				t.Fatalf("add server: %v", err)
			}
			c.CreateNode(t, "worker-1", "10.244.1.0/24", harness.WithInternalIP("10.0.0.2"))
			ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
				deploy: deployDir + "/networks",
				env:    []string{"HCLOUD_NETWORK=k8s"},
				args:   []string{"--cluster-cidr=" + tc.cidr},
			})
			waitInitialised(t, c, ccm, "worker-1", id)
			for _, want := range []string{"Routes disabled: --cluster-cidr is not one CIDR", "cloud provider does not support routes"} {
				harness.WaitFor(t, 30*time.Second, func() (bool, error) {
					if strings.Contains(ccm.Logs(), want) {
						return true, nil
					}
					return false, fmt.Errorf("no %q in the CCM's log yet", want)
				})
			}
			time.Sleep(20 * time.Second) // two route reconcile periods (10 s)
			if exited, err := ccm.Exited(); exited {
				t.Fatalf("the CCM exited (%v); want it running without routes:\n%s", err, ccm.Tail(30))
			}
			network, _ := emu.Network(netID)
			if len(network.Routes) != 0 || emu.Counts()["POST /v1/networks/{id}/actions/add_route"] != 0 {
				t.Errorf("routes = %+v, add_route requests = %d; want none: routes are disabled",
					network.Routes, emu.Counts()["POST /v1/networks/{id}/actions/add_route"])
			}
		})
	}
}
