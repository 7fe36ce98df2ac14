package hcloudemu_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// newClient returns an hcloud-go client for endpoint with fast polling and
// retries, as the reference recommends for tests.
func newClient(endpoint, token string) *hcloud.Client {
	return hcloud.NewClient(
		hcloud.WithEndpoint(endpoint),
		hcloud.WithToken(token),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(2 * time.Millisecond)}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
		hcloud.WithHTTPClient(&http.Client{Timeout: 2 * time.Second}),
	)
}

// world is a seeded emulator: network 10.0.0.0/8 with subnet 10.0.0.0/16 in
// eu-central, and three servers attached to it.
type world struct {
	emu      *hcloudemu.Emulator
	client   *hcloud.Client
	endpoint string
	network  int64
	servers  []int64
}

func newWorld(t *testing.T, opts ...hcloudemu.Option) world {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t, opts...)
	nw, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatal(err)
	}
	w := world{emu: emu, client: newClient(endpoint, emu.Token()), endpoint: endpoint, network: nw}
	for _, s := range []hcloudemu.ServerSpec{
		{Name: "node-1", Location: "fsn1", Labels: map[string]string{"role": "worker"}, Networks: []hcloudemu.ServerNetwork{{NetworkID: nw}}},
		{Name: "node-2", Location: "nbg1", Labels: map[string]string{"role": "worker"}, Networks: []hcloudemu.ServerNetwork{{NetworkID: nw}}},
		{Name: "node-3", Location: "hel1", Labels: map[string]string{"role": "control-plane"}, Networks: []hcloudemu.ServerNetwork{{NetworkID: nw}}},
	} {
		id, err := emu.AddServer(s)
		if err != nil {
			t.Fatal(err)
		}
		w.servers = append(w.servers, id)
	}
	return w
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// createLB creates a load balancer the way the official CCM does and waits
// for the action.
func createLB(t *testing.T, w world, name string, opts ...func(*hcloud.LoadBalancerCreateOpts)) *hcloud.LoadBalancer {
	t.Helper()
	o := hcloud.LoadBalancerCreateOpts{
		Name:             name,
		LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"},
		Location:         &hcloud.Location{Name: "fsn1"},
		Labels:           map[string]string{"hcloud-ccm/service-uid": name},
		Network:          &hcloud.Network{ID: w.network},
		PublicInterface:  hcloud.Ptr(true),
	}
	for _, f := range opts {
		f(&o)
	}
	res, _, err := w.client.LoadBalancer.Create(ctx(t), o)
	if err != nil {
		t.Fatalf("create load balancer %s: %v", name, err)
	}
	if err := w.client.Action.WaitFor(ctx(t), res.Action); err != nil {
		t.Fatalf("wait for create of %s: %v", name, err)
	}
	return res.LoadBalancer
}

func mustWait(t *testing.T, c *hcloud.Client, a *hcloud.Action, _ *hcloud.Response, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Action.WaitFor(ctx(t), a); err != nil {
		t.Fatal(err)
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

func mustIP(t *testing.T, s string) net.IP {
	t.Helper()
	ip := net.ParseIP(s)
	if ip == nil {
		t.Fatalf("bad IP %q", s)
	}
	return ip
}

// rawGet returns the body of an authenticated GET of path.
func rawGet(t *testing.T, w world, path string) string {
	t.Helper()
	req, err := http.NewRequest("GET", strings.TrimSuffix(w.endpoint, "/v1")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.emu.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d %s (%v)", path, resp.StatusCode, b, err)
	}
	return string(b)
}

// jsonNumber formats an ID for a path.
func jsonNumber(id int64) string { return strconv.FormatInt(id, 10) }

// hcloudAddTCPService is a tcp service on port, forwarding to 30000+port.
func hcloudAddTCPService(port int) hcloud.LoadBalancerAddServiceOpts {
	return hcloud.LoadBalancerAddServiceOpts{Protocol: hcloud.LoadBalancerServiceProtocolTCP, ListenPort: hcloud.Ptr(port), DestinationPort: hcloud.Ptr(30000 + port)}
}
