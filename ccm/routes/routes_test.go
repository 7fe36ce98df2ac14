package routes_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
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
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routes"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// hcloudWriter is a RouteWriter that writes with hcloud-go and waits for the action, like
// the executor without the policy gate.
type hcloudWriter struct {
	client *hcloud.Client
	deny   bool
}

var _ routes.RouteWriter = (*hcloudWriter)(nil)

func (w *hcloudWriter) AddRoute(ctx context.Context, n *hcloud.Network, r hcloud.NetworkRoute, _ string) error {
	if w.deny {
		return fmt.Errorf("add_route(%s via %s): %w", r.Destination, r.Gateway, policy.ErrDenied)
	}
	a, _, err := w.client.Network.AddRoute(ctx, n, hcloud.NetworkAddRouteOpts{Route: r})
	if err != nil {
		return err
	}
	return w.client.Action.WaitFor(ctx, a)
}

func (w *hcloudWriter) DeleteRoute(ctx context.Context, n *hcloud.Network, r hcloud.NetworkRoute, _ string) error {
	if w.deny {
		return fmt.Errorf("delete_route(%s via %s): %w", r.Destination, r.Gateway, policy.ErrDenied)
	}
	a, _, err := w.client.Network.DeleteRoute(ctx, n, hcloud.NetworkDeleteRouteOpts{Route: r})
	if err != nil {
		return err
	}
	return w.client.Action.WaitFor(ctx, a)
}

type env struct {
	emu      *hcloudemu.Emulator
	client   *hcloud.Client
	network  *hcloud.Network
	servers  map[string]int64
	indexer  cache.Indexer
	recorder *record.FakeRecorder
	writer   *hcloudWriter
	routes   *routes.Routes
}

// newEnv seeds a network 10.0.0.0/8 with servers node-1 (10.0.0.2), node-2 (10.0.0.3) and
// outside (not in the network), and nodes node-1 (with provider ID), node-2 (without) and
// outside.
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
	e := &env{emu: emu, servers: map[string]int64{}, recorder: record.NewFakeRecorder(10)}
	for name, ip := range map[string]string{"node-1": "10.0.0.2", "node-2": "10.0.0.3", "outside": ""} {
		spec := hcloudemu.ServerSpec{Name: name}
		if ip != "" {
			spec.Networks = []hcloudemu.ServerNetwork{{NetworkID: networkID, IP: ip}}
		}
		if e.servers[name], err = emu.AddServer(spec); err != nil {
			t.Fatal(err)
		}
	}
	e.client = hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}))
	if e.network, _, err = e.client.Network.GetByID(t.Context(), networkID); err != nil {
		t.Fatal(err)
	}
	e.indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e.addNode(t, "node-1", fmt.Sprintf("hcloud://%d", e.servers["node-1"]))
	e.addNode(t, "node-2", "")
	e.addNode(t, "outside", "")
	servers, err := servercache.New(e.client, config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e.writer = &hcloudWriter{client: e.client}
	e.routes, err = routes.New(routes.Options{
		Client: e.client, Network: e.network, ClusterCIDR: "10.244.0.0/16", Servers: servers,
		Writer: e.writer, Nodes: corelisters.NewNodeLister(e.indexer), Recorder: e.recorder,
	})
	if err != nil {
		t.Fatal(err)
	}
	emu.ResetRequests()
	return e
}

func (e *env) addNode(t *testing.T, name, providerID string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := e.indexer.Add(n); err != nil {
		t.Fatal(err)
	}
}

// seedRoute adds a route directly, bypassing Routes.
func (e *env) seedRoute(t *testing.T, dest, gateway string) {
	t.Helper()
	_, cidr, _ := net.ParseCIDR(dest)
	if err := (&hcloudWriter{client: e.client}).AddRoute(t.Context(), e.network, hcloud.NetworkRoute{Destination: cidr, Gateway: net.ParseIP(gateway)}, ""); err != nil {
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
			route:         cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24"},
			wantRoutes:    []string{"10.244.2.0/24 via 10.0.0.3"},
			wantMutations: 1,
		},
		{
			name:          "an identical route is left alone",
			seed:          [][2]string{{"10.244.1.0/24", "10.0.0.2"}},
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"},
			wantRoutes:    []string{"10.244.1.0/24 via 10.0.0.2"},
			wantMutations: 0,
		},
		{
			name:          "a route via another gateway is replaced",
			seed:          [][2]string{{"10.244.1.0/24", "10.0.0.3"}},
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"},
			wantRoutes:    []string{"10.244.1.0/24 via 10.0.0.2"},
			wantMutations: 2,
		},
		{
			name:          "a destination outside the cluster CIDR is created with a warning",
			route:         cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.245.1.0/24"},
			wantRoutes:    []string{"10.245.1.0/24 via 10.0.0.2"},
			wantMutations: 1,
			wantEvent:     "Warning ClusterCIDRMisconfigured route CIDR 10.245.1.0/24 is not contained within cluster CIDR 10.244.0.0/16",
		},
		{
			name:    "an IPv6 destination is rejected",
			route:   cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00::/64"},
			wantErr: "routes.CreateRoute: destination fd00::/64 is IPv6: Hetzner Cloud private networks route IPv4 only",
		},
		{
			name:    "a malformed destination is rejected",
			route:   cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0"},
			wantErr: `routes.CreateRoute: invalid destination "10.244.1.0": expect an IPv4 CIDR`,
		},
		{
			name:    "a gateway that is not an InternalIP of the node is rejected",
			route:   cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24", TargetNodeAddresses: internalIP("192.168.0.1")},
			wantErr: `gateway 10.0.0.2 (the server's IP in network`,
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
				if n := e.emu.MutatingRequests(); n != 0 {
					t.Errorf("a rejected route made %d writes", n)
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
	_ = e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "fd00::/64"})
	if n := len(e.emu.Requests()); n != 0 {
		t.Errorf("an IPv6 route made %d requests, want 0", n)
	}
}

func TestRoutes_DeleteRoute(t *testing.T) {
	e := newEnv(t)
	e.seedRoute(t, "10.244.1.0/24", "10.0.0.2")
	e.seedRoute(t, "10.244.2.0/24", "10.0.0.3")
	listed, err := e.routes.ListRoutes(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		if r.DestinationCIDR == "10.244.1.0/24" {
			if err := e.routes.DeleteRoute(t.Context(), "c", r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if diff := cmp.Diff([]string{"10.244.2.0/24 via 10.0.0.3"}, e.networkRoutes(t)); diff != "" {
		t.Errorf("network routes mismatch (-want +got):\n%s", diff)
	}
	// Deleting it again is a no-op: it is gone from the cached network.
	e.emu.ResetRequests()
	if err := e.routes.DeleteRoute(t.Context(), "c", &cloudprovider.Route{DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.emu.Requests()); n != 0 {
		t.Errorf("deleting a deleted route made %d requests, want 0", n)
	}
}

func TestRoutes_denied(t *testing.T) {
	e := newEnv(t)
	e.seedRoute(t, "10.244.2.0/24", "10.0.0.3")
	e.writer.deny = true
	err := e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"})
	if !errors.Is(err, policy.ErrDenied) || !strings.HasPrefix(err.Error(), "routes.CreateRoute: route 10.244.1.0/24 via 10.0.0.2: ") {
		t.Errorf("CreateRoute() error = %v, want a wrapped policy.ErrDenied", err)
	}
	err = e.routes.DeleteRoute(t.Context(), "c", &cloudprovider.Route{DestinationCIDR: "10.244.2.0/24", TargetNode: types.NodeName("node-2")})
	if !errors.Is(err, policy.ErrDenied) {
		t.Errorf("DeleteRoute() error = %v, want a wrapped policy.ErrDenied", err)
	}
	if n := e.emu.MutatingRequests(); n != 0 {
		t.Errorf("denied writes made %d requests", n)
	}
}

func TestNew_errors(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name    string
		opts    routes.Options
		wantErr string
	}{
		{name: "missing dependencies are an error", opts: routes.Options{ClusterCIDR: "10.244.0.0/16"}, wantErr: "routes.New: client, network, server cache, route writer and node lister are required"},
		{name: "a malformed cluster CIDR is an error", opts: routes.Options{Client: e.client, Network: e.network, Servers: &servercache.Cache{}, Writer: e.writer, Nodes: corelisters.NewNodeLister(e.indexer), ClusterCIDR: "10.244.0.0"},
			wantErr: `routes.New: invalid cluster CIDR "10.244.0.0": set --cluster-cidr to a CIDR such as 10.244.0.0/16, or two separated by a comma`},
		{name: "a list with a malformed CIDR is an error", opts: routes.Options{Client: e.client, Network: e.network, Servers: &servercache.Cache{}, Writer: e.writer, Nodes: corelisters.NewNodeLister(e.indexer), ClusterCIDR: "10.244.0.0/16,fd00::"},
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
// read and one server list; a created route costs one network read and one write (plus the
// action poll).
func TestRoutes_requestBudget(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		if _, err := e.routes.ListRoutes(t.Context(), "c"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[string]int{"GET /v1/networks/{id}": 1, "GET /v1/servers": 1}, e.emu.Counts()); diff != "" {
		t.Errorf("three ListRoutes: requests mismatch (-want +got):\n%s", diff)
	}
	e.emu.ResetRequests()
	if err := e.routes.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	// The new route is visible to ListRoutes without another read.
	listed, err := e.routes.ListRoutes(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].TargetNode != "node-1" {
		t.Errorf("ListRoutes() after create = %v", listed)
	}
	counts := e.emu.Counts()
	delete(counts, "GET /v1/actions") // polls depend on timing
	if diff := cmp.Diff(map[string]int{"GET /v1/networks/{id}": 1, "POST /v1/networks/{id}/actions/add_route": 1}, counts); diff != "" {
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
			servers, err := servercache.New(e.client, config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			r, err := routes.New(routes.Options{
				Client: e.client, Network: e.network, ClusterCIDR: tc.clusterCIDR, Servers: servers,
				Writer: e.writer, Nodes: corelisters.NewNodeLister(e.indexer), Recorder: e.recorder,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.CreateRoute(t.Context(), "c", "", &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.245.1.0/24"}); err != nil {
				t.Fatal(err)
			}
			if got := len(e.recorder.Events) == 1; got != tc.wantEvent {
				t.Errorf("warning event = %v, want %v", got, tc.wantEvent)
			}
		})
	}
}
