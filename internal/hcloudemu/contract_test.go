package hcloudemu_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

func TestContract_StartupAndCatalog(t *testing.T) {
	w := newWorld(t)
	locs, err := w.client.Location.All(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range locs {
		names = append(names, l.Name+"/"+string(l.NetworkZone))
	}
	want := []string{"fsn1/eu-central", "nbg1/eu-central", "hel1/eu-central", "ash/us-east", "hil/us-west", "sin/ap-southeast"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("locations (-want +got):\n%s", diff)
	}
	types, err := w.client.LoadBalancerType.All(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 3 || types[0].Name != "lb11" || types[0].MaxTargets != 25 || types[2].MaxServices != 30 {
		t.Errorf("load balancer types = %+v", types)
	}
	lt, _, err := w.client.LoadBalancerType.GetByName(ctx(t), "lb21")
	if err != nil || lt == nil || lt.MaxTargets != 75 {
		t.Errorf("GetByName(lb21) = %+v, %v", lt, err)
	}
	st, _, err := w.client.ServerType.GetByName(ctx(t), "cx22")
	if err != nil || st == nil || st.Cores != 2 {
		t.Errorf("server type cx22 = %+v, %v", st, err)
	}
}

func TestContract_WrongTokenIsUnauthorized(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	_, err := newClient(endpoint, "wrong").Location.All(ctx(t))
	if !hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
		t.Fatalf("err = %v, want unauthorized", err)
	}
	if got := emu.Counts()["GET /v1/locations"]; got != 1 {
		t.Errorf("requests counted = %d, want 1", got)
	}
}

func TestContract_Servers(t *testing.T) {
	w := newWorld(t)
	srv, _, err := w.client.Server.GetByID(ctx(t), w.servers[1])
	if err != nil || srv == nil {
		t.Fatalf("GetByID = %v, %v", srv, err)
	}
	if srv.Name != "node-2" || srv.Location.Name != "nbg1" || srv.ServerType.Name != "cx22" || srv.Status != hcloud.ServerStatusRunning {
		t.Errorf("server = %+v", srv)
	}
	if srv.PublicNet.IPv4.IP == nil || srv.PublicNet.IPv6.Network == nil || len(srv.PrivateNet) != 1 || srv.PrivateNet[0].IP.String() != "10.0.0.3" {
		t.Errorf("server networks = %+v / %+v", srv.PublicNet, srv.PrivateNet)
	}
	missing, _, err := w.client.Server.GetByID(ctx(t), 999)
	if err != nil || missing != nil {
		t.Errorf("GetByID(999) = %v, %v; want nil, nil", missing, err)
	}
	byName, _, err := w.client.Server.GetByName(ctx(t), "node-3")
	if err != nil || byName == nil || byName.ID != w.servers[2] {
		t.Errorf("GetByName(node-3) = %v, %v", byName, err)
	}
	if err := w.emu.SetServerStatus(w.servers[0], "off"); err != nil {
		t.Fatal(err)
	}
	off, _, err := w.client.Server.GetByID(ctx(t), w.servers[0])
	if err != nil || off.Status != hcloud.ServerStatusOff {
		t.Errorf("status after SetServerStatus = %v, %v", off.Status, err)
	}
}

func TestContract_ServerPaginationFollowsNextPage(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	for i := range 120 {
		if _, err := emu.AddServer(hcloudemu.ServerSpec{Name: "s" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := newClient(endpoint, emu.Token()).Server.All(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 120 || all[0].Name != "s0" || all[119].Name != "s119" {
		t.Fatalf("got %d servers", len(all))
	}
	if got := emu.Counts()["GET /v1/servers"]; got != 3 {
		t.Errorf("list requests = %d, want 3 pages of 50", got)
	}
	for _, r := range emu.Requests() {
		if r.Route == "GET /v1/servers" && r.Query == "page=3&per_page=50" {
			return
		}
	}
	t.Errorf("no request for page 3: %+v", emu.Requests())
}

func TestContract_LoadBalancerLifecycle(t *testing.T) {
	w := newWorld(t)
	c := w.client
	lb := createLB(t, w, "svc-a")
	if lb.PublicNet.IPv4.IP == nil || len(lb.PrivateNet) != 1 || lb.PrivateNet[0].IP.String() != "10.0.0.5" {
		t.Errorf("created lb nets = %+v / %+v", lb.PublicNet, lb.PrivateNet)
	}
	if lb.LoadBalancerType.MaxTargets != 25 {
		t.Errorf("max_targets = %d", lb.LoadBalancerType.MaxTargets)
	}

	a, resp, err := c.LoadBalancer.AddService(ctx(t), lb, hcloud.LoadBalancerAddServiceOpts{
		Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: hcloud.Ptr(80), DestinationPort: hcloud.Ptr(30080),
	})
	mustWait(t, c, a, resp, err)
	for _, id := range w.servers {
		a, resp, err := c.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{
			Server: &hcloud.Server{ID: id}, UsePrivateIP: hcloud.Ptr(true),
		})
		mustWait(t, c, a, resp, err)
	}
	a, resp, err = c.LoadBalancer.AddIPTarget(ctx(t), lb, hcloud.LoadBalancerAddIPTargetOpts{IP: net.ParseIP("192.0.2.77")})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.UpdateService(ctx(t), lb, 80, hcloud.LoadBalancerUpdateServiceOpts{DestinationPort: hcloud.Ptr(30081)})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.ChangeAlgorithm(ctx(t), lb, hcloud.LoadBalancerChangeAlgorithmOpts{Type: hcloud.LoadBalancerAlgorithmTypeLeastConnections})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.ChangeType(ctx(t), lb, hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb21"}})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.ChangeDNSPtr(ctx(t), lb, lb.PublicNet.IPv4.IP.String(), hcloud.Ptr("lb.example.com"))
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.RemoveServerTarget(ctx(t), lb, &hcloud.Server{ID: w.servers[2]})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.RemoveIPTarget(ctx(t), lb, net.ParseIP("192.0.2.77"))
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.DisablePublicInterface(ctx(t), lb)
	mustWait(t, c, a, resp, err)
	updated, _, err := c.LoadBalancer.Update(ctx(t), lb, hcloud.LoadBalancerUpdateOpts{Name: "svc-a-renamed", Labels: map[string]string{"hcloud-ccm/service-uid": "svc-a", "extra": "x"}})
	if err != nil {
		t.Fatal(err)
	}

	got, _, err := c.LoadBalancer.GetByID(ctx(t), lb.ID)
	if err != nil || got == nil {
		t.Fatalf("GetByID = %v, %v", got, err)
	}
	if got.Name != "svc-a-renamed" || updated.Name != got.Name || got.Labels["extra"] != "x" {
		t.Errorf("name/labels = %q %v", got.Name, got.Labels)
	}
	if got.Algorithm.Type != hcloud.LoadBalancerAlgorithmTypeLeastConnections || got.LoadBalancerType.Name != "lb21" || got.PublicNet.Enabled {
		t.Errorf("algorithm %s type %s public %v", got.Algorithm.Type, got.LoadBalancerType.Name, got.PublicNet.Enabled)
	}
	if got.PublicNet.IPv4.DNSPtr != "lb.example.com" {
		t.Errorf("dns ptr = %q", got.PublicNet.IPv4.DNSPtr)
	}
	if len(got.Services) != 1 || got.Services[0].DestinationPort != 30081 || got.Services[0].HealthCheck.Port != 30080 {
		t.Errorf("services = %+v", got.Services)
	}
	var targets []int64
	for _, tg := range got.Targets {
		targets = append(targets, tg.Server.Server.ID)
		if len(tg.HealthStatus) != 1 || tg.HealthStatus[0].Status != hcloud.LoadBalancerTargetHealthStatusStatusHealthy {
			t.Errorf("health = %+v", tg.HealthStatus)
		}
	}
	if diff := cmp.Diff(w.servers[:2], targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	srv, _ := w.emu.Server(w.servers[0])
	if diff := cmp.Diff([]int64{lb.ID}, srv.LoadBalancers); diff != "" {
		t.Errorf("server back-reference (-want +got):\n%s", diff)
	}
	nw, _, err := c.Network.GetByID(ctx(t), w.network)
	if err != nil || len(nw.LoadBalancers) != 1 || nw.LoadBalancers[0].ID != lb.ID {
		t.Errorf("network load balancers = %+v, %v", nw, err)
	}

	bySel, err := c.LoadBalancer.AllWithOpts(ctx(t), hcloud.LoadBalancerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "hcloud-ccm/service-uid=svc-a"}})
	if err != nil || len(bySel) != 1 {
		t.Errorf("list by label selector = %d, %v", len(bySel), err)
	}
	a, resp, err = c.LoadBalancer.EnablePublicInterface(ctx(t), lb)
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.DeleteService(ctx(t), lb, 80)
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.DetachFromNetwork(ctx(t), lb, hcloud.LoadBalancerDetachFromNetworkOpts{Network: &hcloud.Network{ID: w.network}})
	mustWait(t, c, a, resp, err)
	if got, _ := w.emu.LoadBalancer(lb.ID); len(got.PrivateNet) != 0 {
		t.Errorf("private nets after detach = %+v", got.PrivateNet)
	}

	res, _, err := c.LoadBalancer.DeleteWithResult(ctx(t), lb)
	if err != nil {
		t.Fatalf("DeleteWithResult: %v", err)
	}
	if err := c.Action.WaitFor(ctx(t), res.Action); err != nil {
		t.Fatal(err)
	}
	gone, _, err := c.LoadBalancer.GetByID(ctx(t), lb.ID)
	if err != nil || gone != nil {
		t.Errorf("after delete GetByID = %v, %v; want nil, nil", gone, err)
	}
}

func TestContract_CreateByNetworkZoneAndTypeIDThenAttach(t *testing.T) {
	w := newWorld(t)
	c := w.client
	lt, _, err := c.LoadBalancerType.GetByID(ctx(t), 3)
	if err != nil || lt == nil || lt.Name != "lb31" {
		t.Fatalf("LoadBalancerType.GetByID(3) = %+v, %v", lt, err)
	}
	lb := createLB(t, w, "by-zone", func(o *hcloud.LoadBalancerCreateOpts) {
		o.Location = nil
		o.NetworkZone = hcloud.NetworkZoneEUCentral
		o.LoadBalancerType = &hcloud.LoadBalancerType{ID: lt.ID}
		o.Network = nil
		o.Algorithm = &hcloud.LoadBalancerAlgorithm{Type: hcloud.LoadBalancerAlgorithmTypeLeastConnections}
	})
	if lb.Location.NetworkZone != hcloud.NetworkZoneEUCentral || lb.LoadBalancerType.Name != "lb31" || lb.Algorithm.Type != hcloud.LoadBalancerAlgorithmTypeLeastConnections {
		t.Errorf("created = location %s type %s algorithm %s", lb.Location.Name, lb.LoadBalancerType.Name, lb.Algorithm.Type)
	}
	a, resp, err := c.LoadBalancer.AttachToNetwork(ctx(t), lb, hcloud.LoadBalancerAttachToNetworkOpts{Network: &hcloud.Network{ID: w.network}, IP: net.ParseIP("10.0.0.200")})
	mustWait(t, c, a, resp, err)
	a, resp, err = c.LoadBalancer.ChangeProtection(ctx(t), lb, hcloud.LoadBalancerChangeProtectionOpts{Delete: hcloud.Ptr(true)})
	mustWait(t, c, a, resp, err)
	got, _, err := c.LoadBalancer.Get(ctx(t), "by-zone")
	if err != nil || got == nil {
		t.Fatalf("Get(by-zone) = %v, %v", got, err)
	}
	if len(got.PrivateNet) != 1 || got.PrivateNet[0].IP.String() != "10.0.0.200" || !got.Protection.Delete {
		t.Errorf("after attach and protection: %+v, protection %+v", got.PrivateNet, got.Protection)
	}
	if w.emu.MutatingRequests() != 3 {
		t.Errorf("mutating requests = %d, want create, attach, protection", w.emu.MutatingRequests())
	}
}
