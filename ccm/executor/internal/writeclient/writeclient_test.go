package writeclient_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor/internal/writeclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// TestNew_sharesTheConn: a write of the client goes to conn's endpoint with conn's token, and
// through conn's transport (its request counter grows); conn's reader then sees it.
func TestNew_sharesTheConn(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	cfg := config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 5 * time.Second}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	id, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"method": http.MethodPost, "endpoint": "/v1/networks/{id}/actions/add_route", "code": "201"}
	before := testutil.Metric(t, "hcloud_ccm_api_requests_total", labels)
	client := writeclient.New(conn)
	route := hcloud.NetworkRoute{Destination: mustCIDR(t, "10.244.0.0/24"), Gateway: net.ParseIP("10.0.0.2")}
	if _, _, err := client.Network.AddRoute(t.Context(), &hcloud.Network{ID: id}, hcloud.NetworkAddRouteOpts{Route: route}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.Metric(t, "hcloud_ccm_api_requests_total", labels) - before; got != 1 {
		t.Errorf("hcloud_ccm_api_requests_total{POST add_route} grew by %v, want 1: the write went around the conn's transport", got)
	}
	n, err := hcloudclient.Network(t.Context(), conn, "k8s")
	if err != nil || len(n.Routes) != 1 {
		t.Fatalf("reading the network back through the conn = %+v, %v, want one route", n, err)
	}
}

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
