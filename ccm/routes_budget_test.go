package ccm_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// routeCloud is a provider with routes on: n servers in the network "k8s" (10.0.0.0/8) and n
// nodes (node-i, provider ID, PodCIDR 10.(244+i/256).(i%256).0/24 in the cluster CIDR
// 10.244.0.0/14), with the example policies and the default action poll interval.
type routeCloud struct {
	cloud *ccm.Cloud
	emu   *hcloudemu.Emulator
	nodes []*corev1.Node
}

func newRouteCloud(tb testing.TB, n int) *routeCloud {
	tb.Helper()
	emu, endpoint := hcloudemu.NewTestServer(tb)
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		tb.Fatal(err)
	}
	rc := &routeCloud{emu: emu}
	for i := range n {
		ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250+2)
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i), Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: ip}}})
		if err != nil {
			tb.Fatal(err)
		}
		cidr := fmt.Sprintf("10.%d.%d.0/24", 244+i/256, i%256)
		rc.nodes = append(rc.nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id), PodCIDR: cidr, PodCIDRs: []string{cidr}},
		})
	}
	vars := baseEnv(emu, endpoint)
	vars["HCLOUD_NETWORK"] = "k8s"
	vars["HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"] = "true" // a simulation: this process is no server
	o := ccm.NewOptions()
	// The start-up sweep of group load balancers (one list) would race the counts.
	o.LoadBalancerGroupSweepInterval = 0
	o.PolicyDir = budgetPolicies(tb)
	kube := fake.NewClientset()
	inf := informers.NewSharedInformerFactory(kube, 0)
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	rc.cloud, err = ccm.New(ctx, ccm.Deps{Options: o, Env: env(vars), Kube: kube, Informers: inf,
		Recorder: record.NewFakeRecorder(10000), ClusterName: "budget", ClusterCIDR: "10.244.0.0/14"})
	if err != nil {
		tb.Fatal(err)
	}
	indexer := inf.Core().V1().Nodes().Informer().GetIndexer()
	for _, node := range rc.nodes {
		if err := indexer.Add(node); err != nil {
			tb.Fatal(err)
		}
	}
	emu.ResetRequests()
	return rc
}

// reconcileRoutes does what one pass of the upstream route controller (k8s.io/cloud-provider
// v0.36, controllers/route) does for nodes: ListRoutes, then CreateRoute for every PodCIDR
// without a route to its node, at most 200 at once, with the node's addresses as they are. A
// node without its InternalIP yet gets no route (as with the official CCM) and is retried by the
// next pass, which the node's address update triggers; that refusal is not a test failure.
func reconcileRoutes(tb testing.TB, r cloudprovider.Routes, nodes []*corev1.Node) {
	tb.Helper()
	listed, err := r.ListRoutes(context.Background(), "budget")
	if err != nil {
		tb.Fatal(err)
	}
	have := map[string]string{}
	for _, rt := range listed {
		have[rt.DestinationCIDR] = string(rt.TargetNode)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 200)
	errs := make(chan error, len(nodes))
	for _, node := range nodes {
		for _, cidr := range node.Spec.PodCIDRs {
			if have[cidr] == node.Name {
				continue
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				route := &cloudprovider.Route{TargetNode: types.NodeName(node.Name), DestinationCIDR: cidr, TargetNodeAddresses: node.Status.Addresses}
				if err := r.CreateRoute(context.Background(), "budget", string(node.UID), route); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !strings.Contains(err.Error(), "has no InternalIP yet") {
			tb.Error(err)
		}
	}
}

// initialiseWithRoutes brings the nodes up in waves of 50, as kubelets register: the cloud-node
// controller initialises a wave (InstanceMetadata) while the route controller reconciles, so
// the new nodes have no InternalIP yet when their routes are first attempted (and refused
// without a request); the next pass, here with the next wave and once more at the end (the
// address updates trigger it), creates them.
func (rc *routeCloud) initialiseWithRoutes(tb testing.TB) {
	tb.Helper()
	inst, _ := rc.cloud.InstancesV2()
	routes, ok := rc.cloud.Routes()
	if !ok {
		tb.Fatal("routes are off")
	}
	const wave = 50
	for start := 0; start < len(rc.nodes); start += wave {
		batch := rc.nodes[start:min(start+wave, len(rc.nodes))]
		var wg sync.WaitGroup
		meta := make([]*cloudprovider.InstanceMetadata, len(batch))
		wg.Go(func() { reconcileRoutes(tb, routes, rc.nodes[:start+len(batch)]) })
		for i, node := range batch {
			wg.Go(func() {
				m, err := inst.InstanceMetadata(context.Background(), node)
				if err != nil {
					tb.Error(err)
				}
				meta[i] = m
			})
		}
		wg.Wait()
		for i, node := range batch {
			if meta[i] != nil {
				node.Status.Addresses = meta[i].NodeAddresses
			}
		}
	}
	reconcileRoutes(tb, routes, rc.nodes)
}

// TestAPIBudget_routes is issue 11's route budget: 500 nodes initialised with routes cost at
// most 600 Hetzner requests, 500 of them the add_routes (no network read per route, action
// polls shared, no request for a node without InternalIP), and a route reconcile that
// finds nothing changed costs no request.
func TestAPIBudget_routes(t *testing.T) {
	const n = 500
	rc := newRouteCloud(t, n)
	rc.initialiseWithRoutes(t)
	counts := rc.emu.Counts()
	t.Logf("500 nodes initialised with routes: %d requests: %v", total(counts), counts)
	if got := counts["POST /v1/networks/{id}/actions/add_route"]; got != n {
		t.Errorf("add_route requests = %d, want %d (one per node)", got, n)
	}
	if got := rc.emu.MutatingRequests(); got != n {
		t.Errorf("mutating requests = %d, want %d", got, n)
	}
	if got := total(counts); got > 600 {
		t.Errorf("requests = %d, want at most 600: %v", got, counts)
	}
	if got := counts["GET /v1/networks/{id}"]; got > 1 {
		t.Errorf("network reads = %d, want 1 (one read serves every route decision)", got)
	}
	if network, _ := rc.emu.Network(1); len(network.Routes) != n {
		t.Errorf("routes in the network = %d, want %d", len(network.Routes), n)
	}

	rc.emu.ResetRequests()
	routes, _ := rc.cloud.Routes()
	for range 10 {
		reconcileRoutes(t, routes, rc.nodes)
	}
	if got := rc.emu.Counts(); len(got) != 0 {
		t.Errorf("10 route reconciles with nothing changed made requests: %v, want none", got)
	}
}

// BenchmarkInitialiseNodesWithRoutes reports the Hetzner requests per node of initialising 500
// nodes with routes (TestAPIBudget_routes's scenario) with the example policies.
func BenchmarkInitialiseNodesWithRoutes(b *testing.B) {
	const n = 500
	var requests, polls int
	for b.Loop() {
		b.StopTimer()
		rc := newRouteCloud(b, n)
		b.StartTimer()
		rc.initialiseWithRoutes(b)
		counts := rc.emu.Counts()
		requests += total(counts)
		polls += counts["GET /v1/actions"]
	}
	b.ReportMetric(float64(requests)/float64(b.N*n), "requests/node")
	b.ReportMetric(float64(polls)/float64(b.N), "action-polls/op")
}
