package hcloudemu_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

func TestNetworks_UpdateProtectAndDelete(t *testing.T) {
	w := newWorld(t)
	c := w.client
	lb := createLB(t, w, "attached")
	nw := &hcloud.Network{ID: w.network}
	updated, _, err := c.Network.Update(ctx(t), nw, hcloud.NetworkUpdateOpts{Name: "renamed", Labels: map[string]string{"env": "test"}})
	if err != nil || updated.Name != "renamed" || !cmp.Equal(updated.Labels, map[string]string{"env": "test"}) {
		t.Fatalf("Update = %+v, %v", updated, err)
	}
	if got, err := c.Network.AllWithOpts(ctx(t), hcloud.NetworkListOpts{ListOpts: hcloud.ListOpts{LabelSelector: "env=test"}}); err != nil || len(got) != 1 {
		t.Errorf("networks by label = %d, %v", len(got), err)
	}
	a, resp, err := c.Network.ChangeProtection(ctx(t), nw, hcloud.NetworkChangeProtectionOpts{Delete: hcloud.Ptr(true)})
	mustWait(t, c, a, resp, err)
	if _, err := c.Network.Delete(ctx(t), nw); !hcloud.IsError(err, hcloud.ErrorCodeProtected) {
		t.Errorf("delete of a protected network: err = %v", err)
	}
	a, resp, err = c.Network.ChangeProtection(ctx(t), nw, hcloud.NetworkChangeProtectionOpts{Delete: hcloud.Ptr(false)})
	mustWait(t, c, a, resp, err)
	if _, err := c.Network.Delete(ctx(t), nw); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got, _, err := c.Network.GetByID(ctx(t), w.network); err != nil || got != nil {
		t.Errorf("after delete = %v, %v", got, err)
	}
	srv, _ := w.emu.Server(w.servers[0])
	gotLB, _ := w.emu.LoadBalancer(lb.ID)
	if len(srv.PrivateNet) != 0 || len(gotLB.PrivateNet) != 0 {
		t.Errorf("attachments left after network delete: server %+v, lb %+v", srv.PrivateNet, gotLB.PrivateNet)
	}
}

func TestCatalogAndActions_GetByID(t *testing.T) {
	w := newWorld(t)
	c := w.client
	loc, _, err := c.Location.GetByID(ctx(t), 3)
	if err != nil || loc == nil || loc.Name != "hel1" || loc.Country != "FI" {
		t.Errorf("Location.GetByID(3) = %+v, %v", loc, err)
	}
	if missing, _, err := c.Location.GetByID(ctx(t), 99); err != nil || missing != nil {
		t.Errorf("Location.GetByID(99) = %v, %v", missing, err)
	}
	st, _, err := c.ServerType.GetByID(ctx(t), 22)
	if err != nil || st == nil || st.Name != "cx22" {
		t.Errorf("ServerType.GetByID(22) = %+v, %v", st, err)
	}
	res, _, err := c.LoadBalancer.Create(ctx(t), hcloud.LoadBalancerCreateOpts{
		Name: "with-everything", LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "hel1"},
		Network:  &hcloud.Network{ID: w.network},
		Services: []hcloud.LoadBalancerCreateOptsService{{Protocol: "http", ListenPort: hcloud.Ptr(8080), DestinationPort: hcloud.Ptr(30080)}},
		Targets: []hcloud.LoadBalancerCreateOptsTarget{
			{Type: "server", Server: hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: w.servers[0]}}, UsePrivateIP: hcloud.Ptr(true)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := c.Action.GetByID(ctx(t), res.Action.ID)
	if err != nil || a == nil || a.Status != hcloud.ActionStatusSuccess || a.Command != "create_load_balancer" || a.Resources[0].ID != res.LoadBalancer.ID {
		t.Errorf("Action.GetByID = %+v, %v", a, err)
	}
	lb := res.LoadBalancer
	if len(lb.Services) != 1 || lb.Services[0].HTTP.CookieName != "HCLBSTICKY" || len(lb.Targets) != 1 || !lb.Targets[0].UsePrivateIP {
		t.Errorf("create with services and targets = %+v / %+v", lb.Services, lb.Targets)
	}
	a, resp, err := c.LoadBalancer.UpdateService(ctx(t), lb, 8080, hcloud.LoadBalancerUpdateServiceOpts{
		HTTP: &hcloud.LoadBalancerUpdateServiceOptsHTTP{StickySessions: hcloud.Ptr(true)},
		HealthCheck: &hcloud.LoadBalancerUpdateServiceOptsHealthCheck{Protocol: hcloud.LoadBalancerServiceProtocolHTTP,
			HTTP: &hcloud.LoadBalancerUpdateServiceOptsHealthCheckHTTP{Path: hcloud.Ptr("/healthz")}},
	})
	mustWait(t, c, a, resp, err)
	got, _ := w.emu.LoadBalancer(lb.ID)
	svc := got.Services[0]
	if !svc.HTTP.StickySessions || svc.HealthCheck.Protocol != "http" || svc.HealthCheck.HTTP.Path != "/healthz" || svc.DestinationPort != 30080 {
		t.Errorf("updated service = %+v, http %+v, health %+v", svc, svc.HTTP, svc.HealthCheck)
	}
}

func TestCertificates_UpdateNameAndLabels(t *testing.T) {
	w := newWorld(t)
	certPEM, keyPEM := testutil.SelfSignedPEM(t, "a.example.com")
	cert, _, err := w.client.Certificate.Create(ctx(t), hcloud.CertificateCreateOpts{Name: "c1", Certificate: certPEM, PrivateKey: keyPEM})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := w.client.Certificate.Update(ctx(t), cert, hcloud.CertificateUpdateOpts{Name: "c2", Labels: map[string]string{"k": "v"}})
	if err != nil || got.Name != "c2" || got.Labels["k"] != "v" {
		t.Errorf("Update = %+v, %v", got, err)
	}
}

func TestFaults_StatusAloneGetsItsUsualCode(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithRandSeed(7))
	emu.AddFault(hcloudemu.Fault{Pattern: "/v1/locations", Status: 423})
	_, err := newClient(endpoint, emu.Token()).Location.All(ctx(t))
	if !hcloud.IsError(err, hcloud.ErrorCodeLocked) {
		t.Errorf("err = %v, want locked", err)
	}
}
