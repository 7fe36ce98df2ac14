package hcloudemu_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

func TestCertificates_UploadedAndManagedServeHTTPS(t *testing.T) {
	w := newWorld(t)
	c := w.client
	certPEM, keyPEM := testutil.SelfSignedPEM(t, "app.example.com")
	up, _, err := c.Certificate.Create(ctx(t), hcloud.CertificateCreateOpts{Name: "uploaded", Certificate: certPEM, PrivateKey: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	if up.Type != hcloud.CertificateTypeUploaded || !cmp.Equal(up.DomainNames, []string{"app.example.com"}) || up.Fingerprint == "" {
		t.Errorf("uploaded certificate = %+v", up)
	}
	if byName, _, err := c.Certificate.GetByName(ctx(t), "uploaded"); err != nil || byName == nil || byName.ID != up.ID {
		t.Errorf("GetByName = %v, %v", byName, err)
	}

	res, _, err := c.Certificate.CreateCertificate(ctx(t), hcloud.CertificateCreateOpts{
		Name: "managed", Type: hcloud.CertificateTypeManaged, DomainNames: []string{"svc.example.com"},
		Labels: map[string]string{"hcloud-ccm/service-uid": "uid-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Action == nil || res.Certificate.Status.Issuance != hcloud.CertificateStatusTypePending {
		t.Fatalf("managed create = %+v / %+v", res.Certificate.Status, res.Action)
	}
	mustWait(t, c, res.Action, nil, nil)
	managed, err := c.Certificate.AllWithOpts(ctx(t), hcloud.CertificateListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "hcloud-ccm/service-uid=uid-1"}})
	if err != nil || len(managed) != 1 || managed[0].Status.Issuance != hcloud.CertificateStatusTypeCompleted {
		t.Fatalf("managed by label = %+v, %v", managed, err)
	}
	_, _, err = c.Certificate.Create(ctx(t), hcloud.CertificateCreateOpts{Name: "uploaded", Certificate: certPEM, PrivateKey: keyPEM})
	if !hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		t.Errorf("duplicate name: err = %v", err)
	}

	lb := createLB(t, w, "https")
	a, resp, err := c.LoadBalancer.AddService(ctx(t), lb, hcloud.LoadBalancerAddServiceOpts{
		Protocol: hcloud.LoadBalancerServiceProtocolHTTPS, ListenPort: hcloud.Ptr(443), DestinationPort: hcloud.Ptr(30443),
		HTTP: &hcloud.LoadBalancerAddServiceOptsHTTP{Certificates: []*hcloud.Certificate{up, managed[0]}, RedirectHTTP: hcloud.Ptr(true)},
	})
	mustWait(t, c, a, resp, err)
	got, _, err := c.Certificate.GetByID(ctx(t), up.ID)
	if err != nil || len(got.UsedBy) != 1 || got.UsedBy[0].ID != lb.ID {
		t.Errorf("used_by = %+v, %v", got.UsedBy, err)
	}
	if _, err := c.Certificate.Delete(ctx(t), up); !hcloud.IsError(err, hcloud.ErrorCodeInvalidInput) {
		t.Errorf("delete of a used certificate: err = %v", err)
	}
	a, resp, err = c.LoadBalancer.DeleteService(ctx(t), lb, 443)
	mustWait(t, c, a, resp, err)
	if _, err := c.Certificate.Delete(ctx(t), up); err != nil {
		t.Errorf("delete: %v", err)
	}
	if gone, _, err := c.Certificate.GetByID(ctx(t), up.ID); err != nil || gone != nil {
		t.Errorf("after delete = %v, %v", gone, err)
	}
}

func TestLists_FilterByNameLabelSelectorAndStatus(t *testing.T) {
	w := newWorld(t)
	if err := w.emu.SetServerStatus(w.servers[1], "off"); err != nil {
		t.Fatal(err)
	}
	names := func(servers []*hcloud.Server) []string {
		var out []string
		for _, s := range servers {
			out = append(out, s.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		opts hcloud.ServerListOpts
		want []string
	}{
		{"No filter lists every server", hcloud.ServerListOpts{}, []string{"node-1", "node-2", "node-3"}},
		{"A name filter matches exactly", hcloud.ServerListOpts{Name: "node-2"}, []string{"node-2"}},
		{"A name filter does not match prefixes", hcloud.ServerListOpts{Name: "node"}, nil},
		{"A label selector with equality", hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "role=worker"}}, []string{"node-1", "node-2"}},
		{"A label selector with in", hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "role in (control-plane)"}}, []string{"node-3"}},
		{"A label selector with notin", hcloud.ServerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "role notin (worker)"}}, []string{"node-3"}},
		{"A status filter", hcloud.ServerListOpts{Status: []hcloud.ServerStatus{hcloud.ServerStatusOff}}, []string{"node-2"}},
		{"Sorting by name descending", hcloud.ServerListOpts{Sort: []string{"name:desc"}}, []string{"node-3", "node-2", "node-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := w.client.Server.AllWithOpts(ctx(t), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, names(got)); diff != "" {
				t.Errorf("servers (-want +got):\n%s", diff)
			}
		})
	}
	nw, _, err := w.client.Network.Get(ctx(t), "k8s")
	if err != nil || nw == nil || nw.ID != w.network || len(nw.Subnets) != 1 || nw.Subnets[0].Gateway.String() != "10.0.0.1" {
		t.Errorf("Network.Get(k8s) = %+v, %v", nw, err)
	}
}

func TestLoadBalancers_LabelSelectorTargetsResolveAndCount(t *testing.T) {
	w := newWorld(t)
	lb := createLB(t, w, "selector")
	a, resp, err := w.client.LoadBalancer.AddLabelSelectorTarget(ctx(t), lb, hcloud.LoadBalancerAddLabelSelectorTargetOpts{Selector: "role=worker", UsePrivateIP: hcloud.Ptr(true)})
	mustWait(t, w.client, a, resp, err)
	got, _, err := w.client.LoadBalancer.GetByID(ctx(t), lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Targets) != 1 || len(got.Targets[0].Targets) != 2 || got.Targets[0].Targets[0].Server.Server.ID != w.servers[0] {
		t.Errorf("targets = %+v", got.Targets)
	}
	srv, _ := w.emu.Server(w.servers[1])
	if !cmp.Equal(srv.LoadBalancers, []int64{lb.ID}) {
		t.Errorf("server load_balancers = %v", srv.LoadBalancers)
	}
}

func TestServers_DeleteRemovesTargets(t *testing.T) {
	w := newWorld(t)
	lb := createLB(t, w, "gone")
	a, resp, err := w.client.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}})
	mustWait(t, w.client, a, resp, err)
	if err := w.emu.DeleteServer(w.servers[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.emu.LoadBalancer(lb.ID); len(got.Targets) != 0 {
		t.Errorf("targets after server delete = %+v", got.Targets)
	}
	if _, ok := w.emu.Server(w.servers[0]); ok {
		t.Error("server still present")
	}
	if err := w.emu.DeleteServer(w.servers[0]); err == nil {
		t.Error("deleting twice succeeded")
	}
}

func TestLoadBalancers_DeleteKeepsItVisibleUntilTheActionEnds(t *testing.T) {
	clock := hcloudemu.NewFakeClock(epoch)
	w := newWorld(t, hcloudemu.WithClock(clock), hcloudemu.WithCommandDelay("delete_load_balancer", 5*time.Second))
	id, err := w.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "adopt-me", Labels: map[string]string{"hcloud-ccm/service-uid": "u1"}, NetworkID: w.network, PrivateIP: "10.0.0.100"})
	if err != nil {
		t.Fatal(err)
	}
	lb, _, err := w.client.LoadBalancer.GetByName(ctx(t), "adopt-me")
	if err != nil || lb == nil || lb.ID != id || lb.PrivateNet[0].IP.String() != "10.0.0.100" {
		t.Fatalf("pre-created lb = %+v, %v", lb, err)
	}
	res, _, err := w.client.LoadBalancer.DeleteWithResult(ctx(t), lb)
	if err != nil || res.Action.Command != "delete_load_balancer" {
		t.Fatalf("DeleteWithResult = %+v, %v", res, err)
	}
	if still, _, err := w.client.LoadBalancer.GetByID(ctx(t), id); err != nil || still == nil {
		t.Errorf("during delete GetByID = %v, %v; want still there", still, err)
	}
	if _, _, err := w.client.LoadBalancer.AddService(ctx(t), lb, hcloud.LoadBalancerAddServiceOpts{Protocol: "http"}); !hcloud.IsError(err, hcloud.ErrorCodeLocked) {
		t.Errorf("mutation during delete: err = %v, want locked", err)
	}
	clock.Advance(5 * time.Second)
	if gone, _, err := w.client.LoadBalancer.GetByID(ctx(t), id); err != nil || gone != nil {
		t.Errorf("after delete GetByID = %v, %v; want nil, nil", gone, err)
	}
	if len(w.emu.LoadBalancers()) != 0 {
		t.Errorf("LoadBalancers() = %+v", w.emu.LoadBalancers())
	}
}
