package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/metadata"
)

func TestRun_ServesTheExampleSeedOnLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-token", "t0k", "-seed", "../../examples/emulator/seed.yaml",
			"-metadata-server", "control-plane-1"}, &out, func(ep string) { ready <- ep })
	}()
	var endpoint string
	select {
	case endpoint = <-ready:
	case err := <-done:
		t.Fatalf("run ended early: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("emulator did not start")
	}
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") || !strings.HasSuffix(endpoint, "/v1") {
		t.Errorf("endpoint = %q", endpoint)
	}
	if !strings.Contains(out.String(), "HCLOUD_ENDPOINT="+endpoint) {
		t.Errorf("output does not print the endpoint: %q", out.String())
	}

	client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken("t0k"), hcloud.WithHTTPClient(&http.Client{Timeout: 2 * time.Second}))
	servers, err := client.Server.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 5 || servers[0].Name != "control-plane-1" || servers[0].PublicNet.IPv4.IP.String() != "203.0.113.11" {
		t.Errorf("servers = %d, first %+v", len(servers), servers[0])
	}
	if servers[4].Status != hcloud.ServerStatusOff || servers[3].PrivateNet[0].IP.String() != "10.0.0.5" {
		t.Errorf("worker-4 status %s, worker-3 private IP %v", servers[4].Status, servers[3].PrivateNet)
	}
	nw, _, err := client.Network.GetByName(ctx, "k8s")
	if err != nil || nw == nil || len(nw.Servers) != 5 {
		t.Errorf("network = %+v, %v", nw, err)
	}
	_, resp, err := client.Location.List(ctx, hcloud.LocationListOpts{})
	if err != nil || resp.Meta.Ratelimit.Limit != 3600 {
		t.Errorf("rate limit header = %+v, %v", resp.Meta.Ratelimit, err)
	}

	metadataEndpoint := strings.TrimSuffix(endpoint, "/v1") + "/hetzner/v1/metadata"
	if !strings.Contains(out.String(), "HCLOUD_METADATA_ENDPOINT="+metadataEndpoint) {
		t.Errorf("output does not print the metadata endpoint: %q", out.String())
	}
	mc := metadata.NewClient(metadata.WithEndpoint(metadataEndpoint), metadata.WithTimeout(2*time.Second))
	if id, err := mc.InstanceIDWithContext(ctx); err != nil || id != servers[0].ID {
		t.Errorf("metadata instance-id = %d, %v; want %d (-metadata-server control-plane-1)", id, err, servers[0].ID)
	}

	robotEndpoint := strings.TrimSuffix(endpoint, "/v1") + "/robot"
	if !strings.Contains(out.String(), "ROBOT_ENDPOINT="+robotEndpoint) || !strings.Contains(out.String(), "ROBOT_USER=robot-user") {
		t.Errorf("output does not print the Robot endpoint and user: %q", out.String())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, robotEndpoint+"/server/321", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("robot-user", "robot-password")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	_ = resp2.Body.Close()
	if resp2.StatusCode != 200 || !strings.Contains(string(body), `"server_name":"dedicated-1"`) {
		t.Errorf("GET %s/server/321 = %d %s, want the seeded dedicated-1", robotEndpoint, resp2.StatusCode, body)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel: %v", err)
	}
}

func TestRun_RejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"A missing seed file is an error", []string{"-seed", "does-not-exist.yaml"}},
		{"A malformed command delay is an error", []string{"-command-delay", "add_target"}},
		{"Positional arguments are an error", []string{"extra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := run(context.Background(), tc.args, &bytes.Buffer{}, nil); err == nil {
				t.Error("run succeeded")
			}
		})
	}
}
