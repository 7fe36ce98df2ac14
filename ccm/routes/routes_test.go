package routes_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routes"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// deciderFunc is a policy.Decider.
type deciderFunc func(input.Input) policy.Decision

func (f deciderFunc) Decide(_ context.Context, in input.Input) policy.Decision { return f(in) }

func allowAll(input.Input) policy.Decision { return policy.Decision{Allowed: true} }

func denyAll(input.Input) policy.Decision {
	return policy.Decision{Deny: []policy.Message{{Msg: "frozen"}}}
}

func denyCreate(in input.Input) policy.Decision {
	if in.Action == input.ActionRouteCreate {
		return policy.Decision{Deny: []policy.Message{{Msg: "no new routes"}}}
	}
	return policy.Decision{Allowed: true}
}

type env struct {
	emu      *hcloudemu.Emulator
	client   *hcloud.Client
	conn     *hcloudclient.Conn
	network  *hcloud.Network
	servers  map[string]int64
	indexer  cache.Indexer
	recorder *record.FakeRecorder // events of Routes
	decide   func(input.Input) policy.Decision
	routes   *routes.Routes
}

// newEnv seeds a network 10.0.0.0/8 with servers node-1 (10.0.0.2), node-2 (10.0.0.3) and
// outside (not in the network), and nodes node-1 (with provider ID, PodCIDR 10.244.1.0/24),
// node-2 (without provider ID, PodCIDR 10.244.2.0/24) and outside. Routes run their plans
// through the executor, whose policy is e.decide (allow all until changed).
func newEnv(t *testing.T) *env {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t)
	networkID, err := emu.AddNetwork(hcloudemu.NetworkSpec{
		Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/24", NetworkZone: "eu-central"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{emu: emu, servers: map[string]int64{}, recorder: record.NewFakeRecorder(10), decide: allowAll}
	for name, ip := range map[string]string{"node-1": "10.0.0.2", "node-2": "10.0.0.3", "outside": ""} {
		spec := hcloudemu.ServerSpec{Name: name}
		if ip != "" {
			spec.Networks = []hcloudemu.ServerNetwork{{NetworkID: networkID, IP: ip}}
		}
		if e.servers[name], err = emu.AddServer(spec); err != nil {
			t.Fatal(err)
		}
	}
	clientOpts := []hcloud.ClientOption{hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)})}
	e.client = hcloud.NewClient(clientOpts...)
	if e.conn, err = hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}, ClientOptions: clientOpts}); err != nil {
		t.Fatal(err)
	}
	if e.network, _, err = e.client.Network.GetByID(t.Context(), networkID); err != nil {
		t.Fatal(err)
	}
	e.indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.addNode(t, "node-1", fmt.Sprintf("hcloud://%d", e.servers["node-1"]), "10.244.1.0/24")
	e.addNode(t, "node-2", "", "10.244.2.0/24")
	e.addNode(t, "outside", "", "")
	e.routes = e.newRoutes(t, "10.244.0.0/16")
	emu.ResetRequests()
	return e
}

// newRoutes returns Routes with a fresh server cache and the executor as runner.
func (e *env) newRoutes(t *testing.T, clusterCIDR string) *routes.Routes {
	t.Helper()
	servers, err := servercache.New(servercache.Options{Servers: e.conn.Servers(), Config: config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	decider := deciderFunc(func(in input.Input) policy.Decision { return e.decide(in) })
	exec, err := executor.New(executor.Options{Conn: e.conn, Decider: decider, Recorder: record.NewFakeRecorder(100), Cluster: input.Cluster{Name: "c"}, ActionPollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r, err := routes.New(routes.Options{
		Networks: e.conn.Networks(), Network: e.network, ClusterCIDR: clusterCIDR, Servers: servers,
		Runner: exec, Nodes: corelisters.NewNodeLister(e.indexer), Recorder: e.recorder,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) addNode(t *testing.T, name, providerID, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if podCIDR != "" {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDR, []string{podCIDR}
	}
	if err := e.indexer.Add(n); err != nil {
		t.Fatal(err)
	}
}

// seedRoute adds a route directly, bypassing Routes and the policy.
func (e *env) seedRoute(t *testing.T, dest, gateway string) {
	t.Helper()
	_, cidr, _ := net.ParseCIDR(dest)
	a, _, err := e.client.Network.AddRoute(t.Context(), e.network, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{Destination: cidr, Gateway: net.ParseIP(gateway)}})
	if err == nil {
		err = e.client.Action.WaitFor(t.Context(), a)
	}
	if err != nil {
		t.Fatal(err)
	}
	e.emu.ResetRequests()
}

// networkRoutes returns the network's routes in the emulator as "dest via gateway".
func (e *env) networkRoutes(t *testing.T) []string {
	t.Helper()
	n, ok := e.emu.Network(e.network.ID)
	if !ok {
		t.Fatal("network gone")
	}
	var out []string
	for _, r := range n.Routes {
		out = append(out, r.Destination+" via "+r.Gateway)
	}
	return out
}

func internalIP(ip string) []corev1.NodeAddress {
	return []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "x"}, {Type: corev1.NodeInternalIP, Address: ip}}
}

func TestRoutes_ListRoutes(t *testing.T) {
	e := newEnv(t)
	e.seedRoute(t, "10.244.1.0/24", "10.0.0.2")
	e.seedRoute(t, "10.244.9.0/24", "10.0.0.99")

	got, err := e.routes.ListRoutes(t.Context(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	want := []*cloudprovider.Route{
		{Name: "10.0.0.2-10.244.1.0/24", DestinationCIDR: "10.244.1.0/24", TargetNode: "node-1"},
		{Name: "10.0.0.99-10.244.9.0/24", DestinationCIDR: "10.244.9.0/24", Blackhole: true},
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b *cloudprovider.Route) bool { return a.Name < b.Name })); diff != "" {
		t.Errorf("ListRoutes() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"GET /v1/networks/{id}": 1, "GET /v1/servers": 1}, e.emu.Counts()); diff != "" {
		t.Errorf("requests mismatch (-want +got):\n%s", diff)
	}
}

func TestRoutes_CreateRoute(t *testing.T) {
	tests := []struct {
		name          string
		seed          [][2]string
		route         cloudprovider.Route
		wantRoutes    []string
		wantErr       string
		wantMutations int
		wantEvent     string
	}{
		{
			name:          "a new route goes via the node's IP in the network",
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")},
			wantRoutes:    []string{"10.244.1.0/24 via 10.0.0.2"},
			wantMutations: 1,
		},
		{
			name:          "a node without provider ID is found by name",
			route:         cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24", TargetNodeAddresses: internalIP("10.0.0.3")},
			wantRoutes:    []string{"10.244.2.0/24 via 10.0.0.3"},
			wantMutations: 1,
		},
		{
			// As the official CCM (its CreateRoute: "IP ... not part of routes target addresses"):
			// the route controller retries once the node has its InternalIP.
			name: "a node without InternalIP yet gets no route",
			route: cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24",
				TargetNodeAddresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"}}},
			wantErr: `routes.CreateRoute: node "node-1" has no InternalIP yet; its route via 10.0.0.2 (the server's IP in network 1) is created once the node is initialised with it`,
		},
		{
			name:          "an identical route is left alone",
			seed:          [][2]string{{"10.244.1.0/24", "10.0.0.2"}},
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")},
			wantRoutes:    []string{"10.244.1.0/24 via 10.0.0.2"},
			wantMutations: 0,
		},
		{
			name:          "a route via another gateway is replaced",
			seed:          [][2]string{{"10.244.1.0/24", "10.0.0.3"}},
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")},
			wantRoutes:    []string{"10.244.1.0/24 via 10.0.0.2"},
			wantMutations: 2,
		},
		{
			name:          "a destination outside the cluster CIDR is created with a warning",
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.245.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")},
			wantRoutes:    []string{"10.245.1.0/24 via 10.0.0.2"},
			wantMutations: 1,
			wantEvent:     "Warning ClusterCIDRMisconfigured route CIDR 10.245.1.0/24 is not contained within cluster CIDR 10.244.0.0/16",
		},
		{
			name:    "an IPv6 destination is rejected",
			route:   cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00::/64", TargetNodeAddresses: internalIP("10.0.0.2")},
			wantErr: "routes.CreateRoute: destination fd00::/64 is IPv6: Hetzner Cloud private networks route IPv4 only",
		},
		{
			name:    "a malformed destination is rejected",
			route:   cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0", TargetNodeAddresses: internalIP("10.0.0.2")},
			wantErr: `routes.CreateRoute: invalid destination "10.244.1.0": expect an IPv4 CIDR`,
		},
		{
			name:    "a gateway that is not an InternalIP of the node is rejected",
			route:   cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("192.168.0.1")},
			wantErr: `gateway 10.0.0.2 (the server's IP in network 1) is not an InternalIP of the node (192.168.0.1): check the node's addresses and HCLOUD_NETWORK`,
		},
		{
			name:    "a server outside the network is rejected",
			route:   cloudprovider.Route{TargetNode: "outside", DestinationCIDR: "10.244.3.0/24"},
			wantErr: `server "outside"`,
		},
		{
			name:    "an unknown node is rejected",
			route:   cloudprovider.Route{TargetNode: "ghost", DestinationCIDR: "10.244.3.0/24"},
			wantErr: `routes.CreateRoute: node "ghost": node "ghost" not found`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for _, s := range tc.seed {
				e.seedRoute(t, s[0], s[1])
			}
			err := e.routes.CreateRoute(t.Context(), "cluster", "hint", &tc.route)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("CreateRoute() error = %v, want %q", err, tc.wantErr)
				}
				// Rejected before the network is read: at most the server list.
				if counts := e.emu.Counts(); e.emu.MutatingRequests() != 0 || counts["GET /v1/networks/{id}"] != 0 {
					t.Errorf("a rejected route made requests beyond the server list: %v", counts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRoutes, e.networkRoutes(t)); diff != "" {
				t.Errorf("network routes mismatch (-want +got):\n%s", diff)
			}
			if n := e.emu.MutatingRequests(); n != tc.wantMutations {
				t.Errorf("writes = %d, want %d", n, tc.wantMutations)
			}
			var event string
			select {
			case event = <-e.recorder.Events:
			default:
			}
			if event != tc.wantEvent {
				t.Errorf("event = %q, want %q", event, tc.wantEvent)
			}
		})
	}
}

func TestRoutes_CreateRouteIPv6CostsNothing(t *testing.T) {
	e := newEnv(t)
	_ = e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00::/64", TargetNodeAddresses: internalIP("10.0.0.2")})
	if n := len(e.emu.Requests()); n != 0 {
		t.Errorf("an IPv6 route made %d requests, want 0", n)
	}
}

func TestRoutes_DeleteRoute(t *testing.T) {
	e := newEnv(t)
	e.seedRoute(t, "10.244.1.0/24", "10.0.0.2")
	e.seedRoute(t, "10.244.7.0/24", "10.0.0.3")
	listed, err := e.routes.ListRoutes(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		if r.DestinationCIDR == "10.244.7.0/24" {
			if err := e.routes.DeleteRoute(t.Context(), "c", r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if diff := cmp.Diff([]string{"10.244.1.0/24 via 10.0.0.2"}, e.networkRoutes(t)); diff != "" {
		t.Errorf("network routes mismatch (-want +got):\n%s", diff)
	}
	// Deleting it again is a no-op: it is gone from the cached network.
	e.emu.ResetRequests()
	if err := e.routes.DeleteRoute(t.Context(), "c", &cloudprovider.Route{DestinationCIDR: "10.244.7.0/24"}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.emu.Requests()); n != 0 {
		t.Errorf("deleting a deleted route made %d requests, want 0", n)
	}
}

// TestRoutes_gatewayChange is issue 10's half-applied route replacement, as the route
// controller calls it: a route to node-2's PodCIDR leads to node-1 (for example after the
// CIDR moved). Upstream deletes it (DeleteRoute with target node-1) and creates node-2's
// (CreateRoute). The delete is left to the create, which replaces the route in one plan: with
// the delete allowed and the add denied, nothing runs and the old route stays.
func TestRoutes_gatewayChange(t *testing.T) {
	tests := []struct {
		name       string
		decide     func(input.Input) policy.Decision
		wantDenied bool
		wantRoutes []string
		wantWrites int
	}{
		{name: "delete allowed, add denied: the old route stays", decide: denyCreate, wantDenied: true,
			wantRoutes: []string{"10.244.2.0/24 via 10.0.0.2"}, wantWrites: 0},
		{name: "both allowed: the route is replaced", decide: allowAll,
			wantRoutes: []string{"10.244.2.0/24 via 10.0.0.3"}, wantWrites: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.seedRoute(t, "10.244.2.0/24", "10.0.0.2")
			e.decide = tc.decide
			listed, err := e.routes.ListRoutes(t.Context(), "c")
			if err != nil {
				t.Fatal(err)
			}
			if len(listed) != 1 || listed[0].TargetNode != "node-1" {
				t.Fatalf("ListRoutes() = %+v, want the route to lead to node-1", listed)
			}
			if err := e.routes.DeleteRoute(t.Context(), "c", listed[0]); err != nil {
				t.Fatalf("DeleteRoute() = %v, want nil (left to node-2's CreateRoute)", err)
			}
			err = e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24", TargetNodeAddresses: internalIP("10.0.0.3")})
			if denied := errors.Is(err, policy.ErrDenied); denied != tc.wantDenied || (err != nil && !denied) {
				t.Fatalf("CreateRoute() error = %v, want denied %v", err, tc.wantDenied)
			}
			if diff := cmp.Diff(tc.wantRoutes, e.networkRoutes(t)); diff != "" {
				t.Errorf("network routes mismatch (-want +got):\n%s", diff)
			}
			if n := e.emu.MutatingRequests(); n != tc.wantWrites {
				t.Errorf("writes = %d, want %d (%v)", n, tc.wantWrites, e.emu.Counts())
			}
		})
	}
}

// TestRoutes_deleteUnclaimed: a route whose destination no node claims is deleted on its own.
func TestRoutes_deleteUnclaimed(t *testing.T) {
	e := newEnv(t)
	e.seedRoute(t, "10.244.9.0/24", "10.0.0.99")
	if err := e.routes.DeleteRoute(t.Context(), "c", &cloudprovider.Route{DestinationCIDR: "10.244.9.0/24", Blackhole: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.networkRoutes(t); len(got) != 0 {
		t.Errorf("routes = %v, want none", got)
	}
}

func TestRoutes_denied(t *testing.T) {
	e := newEnv(t)
	e.seedRoute(t, "10.244.7.0/24", "10.0.0.3")
	e.decide = denyAll
	err := e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")})
	if !errors.Is(err, policy.ErrDenied) || !strings.HasPrefix(err.Error(), "routes.CreateRoute: route 10.244.1.0/24 via 10.0.0.2: ") {
		t.Errorf("CreateRoute() error = %v, want a wrapped policy.ErrDenied", err)
	}
	err = e.routes.DeleteRoute(t.Context(), "c", &cloudprovider.Route{DestinationCIDR: "10.244.7.0/24", TargetNode: types.NodeName("node-2")})
	if !errors.Is(err, policy.ErrDenied) {
		t.Errorf("DeleteRoute() error = %v, want a wrapped policy.ErrDenied", err)
	}
	if n := e.emu.MutatingRequests(); n != 0 {
		t.Errorf("denied writes made %d requests", n)
	}
	// A denial changed nothing: the cached network still serves without a read.
	e.emu.ResetRequests()
	if _, err := e.routes.ListRoutes(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}
	if n := e.emu.Counts()["GET /v1/networks/{id}"]; n != 0 {
		t.Errorf("network reads after a denial = %d, want 0", n)
	}
}

// TestRoutes_staleCache: a route added by someone else after the network was read makes the
// add invalid (overlap); CreateRoute reads the network again and replaces it.
func TestRoutes_staleCache(t *testing.T) {
	e := newEnv(t)
	if _, err := e.routes.ListRoutes(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}
	e.seedRoute(t, "10.244.1.0/24", "10.0.0.3")
	if err := e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.244.1.0/24 via 10.0.0.2"}, e.networkRoutes(t)); diff != "" {
		t.Errorf("network routes mismatch (-want +got):\n%s", diff)
	}
	counts := e.emu.Counts()
	if counts["GET /v1/networks/{id}"] != 1 || counts["POST /v1/networks/{id}/actions/add_route"] != 2 || counts["POST /v1/networks/{id}/actions/delete_route"] != 1 {
		t.Errorf("requests = %v, want one re-read, the refused add, the delete and the add", counts)
	}
}

func TestNew_errors(t *testing.T) {
	e := newEnv(t)
	lister := corelisters.NewNodeLister(e.indexer)
	runner, err := executor.New(executor.Options{Conn: e.conn, Decider: policy.AllowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    routes.Options
		wantErr string
	}{
		{name: "missing dependencies are an error", opts: routes.Options{ClusterCIDR: "10.244.0.0/16"}, wantErr: "routes.New: network reader, network, server cache, route runner and node lister are required"},
		{name: "a malformed cluster CIDR is an error", opts: routes.Options{Networks: e.conn.Networks(), Network: e.network, Servers: &servercache.Cache{}, Runner: runner, Nodes: lister, ClusterCIDR: "10.244.0.0"},
			wantErr: `routes.New: invalid cluster CIDR "10.244.0.0": set --cluster-cidr to a CIDR such as 10.244.0.0/16, or two separated by a comma`},
		{name: "a list with a malformed CIDR is an error", opts: routes.Options{Networks: e.conn.Networks(), Network: e.network, Servers: &servercache.Cache{}, Runner: runner, Nodes: lister, ClusterCIDR: "10.244.0.0/16,fd00::"},
			wantErr: `invalid cluster CIDR "10.244.0.0/16,fd00::"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := routes.New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestRoutes_requestBudget: repeated reconciles within the network max age cost one network
// read and one server list, however many run at once; a created route costs its write (plus
// the action poll) and no read, and is visible to the next ListRoutes without a read.
func TestRoutes_requestBudget(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := e.routes.ListRoutes(t.Context(), "c"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff(map[string]int{"GET /v1/networks/{id}": 1, "GET /v1/servers": 1}, e.emu.Counts()); diff != "" {
		t.Errorf("20 concurrent ListRoutes: requests mismatch (-want +got):\n%s", diff)
	}
	e.emu.ResetRequests()
	if err := e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	listed, err := e.routes.ListRoutes(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].TargetNode != "node-1" {
		t.Errorf("ListRoutes() after create = %v", listed)
	}
	if diff := cmp.Diff(map[string]int{"POST /v1/networks/{id}/actions/add_route": 1, "GET /v1/actions": 1}, e.emu.Counts()); diff != "" {
		t.Errorf("create + list: requests mismatch (-want +got):\n%s", diff)
	}
}

// TestNew_clusterCIDR: an empty or dual-stack cluster CIDR is accepted; the warning uses the
// IPv4 CIDR, and without one there is no warning.
func TestNew_clusterCIDR(t *testing.T) {
	tests := []struct {
		name        string
		clusterCIDR string
		wantEvent   bool
	}{
		{name: "a dual-stack pair warns about routes outside its IPv4 CIDR", clusterCIDR: "fd00::/48,10.244.0.0/16", wantEvent: true},
		{name: "an empty cluster CIDR warns about nothing", clusterCIDR: ""},
		{name: "an IPv6-only cluster CIDR warns about nothing", clusterCIDR: "fd00::/48"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.newRoutes(t, tc.clusterCIDR)
			if err := r.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.245.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")}); err != nil {
				t.Fatal(err)
			}
			if got := len(e.recorder.Events) == 1; got != tc.wantEvent {
				t.Errorf("warning event = %v, want %v", got, tc.wantEvent)
			}
		})
	}
}

// TestRoutes_operationsCounted: each route method counts one call in the official
// cloud_controller_manager_operations_total series, under the official operation name, also
// when it fails or costs no request.
func TestRoutes_operationsCounted(t *testing.T) {
	const series = "cloud_controller_manager_operations_total"
	e := newEnv(t)
	tests := []struct {
		name string
		op   string
		call func() error
	}{
		{"ListRoutes", "hcloud/ListRoutes", func() error {
			_, err := e.routes.ListRoutes(t.Context(), "c")
			return err
		}},
		{"CreateRoute", "hcloud/CreateRoute", func() error {
			return e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")})
		}},
		{"CreateRoute refused before any request", "hcloud/CreateRoute", func() error {
			err := e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00::/64", TargetNodeAddresses: internalIP("10.0.0.2")})
			if err == nil {
				return errors.New("an IPv6 route was accepted")
			}
			return nil
		}},
		{"DeleteRoute", "hcloud/DeleteRoute", func() error {
			return e.routes.DeleteRoute(t.Context(), "c", &cloudprovider.Route{DestinationCIDR: "10.244.1.0/24", TargetNode: "node-1"})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			labels := map[string]string{"op": tc.op}
			before := testutil.Metric(t, series, labels)
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			if got := testutil.Metric(t, series, labels); got != before+1 {
				t.Errorf("%s{op=%q} = %v, want %v", series, tc.op, got, before+1)
			}
		})
	}
}

// TestRoutes_AuditPlans: an existing route is judged as the add_route CreateRoute decides for
// its node (the same input), a blackhole is not judged, and after ListRoutes the audit costs
// no request.
func TestRoutes_AuditPlans(t *testing.T) {
	e := newEnv(t)
	var created []input.Input
	e.decide = func(in input.Input) policy.Decision {
		created = append(created, in)
		return policy.Decision{Allowed: true}
	}
	route := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("10.0.0.2")}
	if err := e.routes.CreateRoute(t.Context(), "c", "", route); err != nil {
		t.Fatal(err)
	}
	e.seedRoute(t, "10.244.9.0/24", "10.0.0.99")
	fresh := e.newRoutes(t, "10.244.0.0/16")
	if _, err := fresh.ListRoutes(t.Context(), "c"); err != nil {
		t.Fatal(err)
	}
	e.emu.ResetRequests()
	plans, err := fresh.AuditPlans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || len(created) != 1 {
		t.Fatalf("AuditPlans() = %v (CreateRoute decided %d inputs), want the one route to node-1", plans, len(created))
	}
	got := gate.RouteInputs(plans[0], input.Cluster{Name: "c"})
	if diff := cmp.Diff([]input.Input{created[0]}, []input.Input{got[0].Input}); diff != "" {
		t.Errorf("audit input differs from CreateRoute's (-create +audit):\n%s", diff)
	}
	if n := len(e.emu.Counts()); n != 0 {
		t.Errorf("AuditPlans after ListRoutes sent requests %v, want none", e.emu.Counts())
	}
}
