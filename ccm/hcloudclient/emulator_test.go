package hcloudclient_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

func emulatorConfig(endpoint, token string) config.HCloud {
	return config.HCloud{Endpoint: endpoint, Token: token, PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 5 * time.Second}
}

// TestTransport_emulator: against the emulator's token bucket (36000/h, i.e. 10 per second),
// with pacing from the 6th request on, 16 requests take at least 10 refill intervals of
// 100ms, and none is answered 429.
func TestTransport_emulator(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithRateLimit(36000))
	const free = 5
	conn, err := hcloudclient.New(hcloudclient.Options{Config: emulatorConfig(endpoint, emu.Token()), Reserve: 1 - float64(free)/36000})
	if err != nil {
		t.Fatal(err)
	}
	// Reads through the readers and requests of a client built from ClientOptions (as the
	// executor's writing client is) draw on one budget: 16 requests, 8 each, are paced as 16.
	writer := hcloud.NewClient(conn.ClientOptions()...)
	start := time.Now()
	for i := range 16 {
		if i%2 == 0 {
			_, err = conn.Servers().All(t.Context())
		} else {
			_, _, err = writer.Location.List(t.Context(), hcloud.LocationListOpts{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 900*time.Millisecond {
		t.Errorf("16 requests took %s, want at least 900ms of pacing", elapsed)
	}
	for _, r := range emu.Requests() {
		if r.Status == 429 {
			t.Fatalf("request %s %s was answered 429", r.Method, r.Path)
		}
	}
	remaining := testutil.Metric(t, "hcloud_ccm_api_ratelimit_remaining", nil)
	if remaining < 35980 || remaining > 36000 {
		t.Errorf("hcloud_ccm_api_ratelimit_remaining = %v, want about 35984", remaining)
	}
}

func TestCheck(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	good, err := hcloudclient.New(hcloudclient.Options{Config: emulatorConfig(endpoint, emu.Token())})
	if err != nil {
		t.Fatal(err)
	}
	if err := hcloudclient.Check(t.Context(), good, emulatorConfig(endpoint, emu.Token())); err != nil {
		t.Errorf("Check() with the right token = %v", err)
	}
	bad, err := hcloudclient.New(hcloudclient.Options{Config: emulatorConfig(endpoint, "wrong")})
	if err != nil {
		t.Fatal(err)
	}
	err = hcloudclient.Check(t.Context(), bad, emulatorConfig(endpoint, "wrong"))
	if err == nil || !strings.HasPrefix(err.Error(), "hcloudclient.Check: the API at "+endpoint+" rejected the token: check HCLOUD_TOKEN: ") {
		t.Errorf("Check() with a wrong token = %v", err)
	}
}

func TestNetwork(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	id, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := hcloudclient.New(hcloudclient.Options{Config: emulatorConfig(endpoint, emu.Token())})
	if err != nil {
		t.Fatal(err)
	}
	for _, nameOrID := range []string{"k8s", strconv.FormatInt(id, 10)} {
		n, err := hcloudclient.Network(t.Context(), client, nameOrID)
		if err != nil || n.ID != id {
			t.Errorf("Network(%q) = %v, %v, want network %d", nameOrID, n, err, id)
		}
	}
	if _, err := hcloudclient.Network(t.Context(), client, "other"); err == nil || err.Error() != `hcloudclient.Network: network "other" not found: check HCLOUD_NETWORK` {
		t.Errorf("Network(other) error = %v", err)
	}
}
