package hcloudemu_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

func TestAdmin_EndpointsControlTheEmulatorOutOfProcess(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	base := strings.TrimSuffix(endpoint, "/v1")
	c := newClient(endpoint, emu.Token())
	admin := func(method, path, body string, wantStatus int) string {
		t.Helper()
		status, out, h := rawRequest(t, emu, method, base+path, body)
		if status != wantStatus || h.Get("Content-Type") != "application/json" {
			t.Fatalf("%s %s = %d %s (%s), want %d", method, path, status, out, h.Get("Content-Type"), wantStatus)
		}
		return out
	}

	admin("POST", "/_emu/networks", `{"id":7,"name":"net","ip_range":"10.0.0.0/8","subnets":[{"ip_range":"10.0.0.0/16","network_zone":"eu-central"}]}`, 200)
	out := admin("POST", "/_emu/servers", `{"name":"n1","location":"nbg1","labels":{"a":"b"},"networks":[{"network_id":7}]}`, 200)
	var created struct{ ID int64 }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.ID == 0 {
		t.Fatalf("create server reply %s: %v", out, err)
	}
	id := "/_emu/servers/" + itoa(created.ID)
	admin("PUT", id+"/status", `{"status":"off"}`, 200)
	admin("PUT", id+"/labels", `{"labels":{"x":"y"}}`, 200)
	srv, _, err := c.Server.GetByID(ctx(t), created.ID)
	if err != nil || srv.Status != hcloud.ServerStatusOff || !cmp.Equal(srv.Labels, map[string]string{"x": "y"}) || srv.PrivateNet[0].IP.String() != "10.0.0.2" {
		t.Fatalf("server after admin changes = %+v, %v", srv, err)
	}
	admin("PUT", id+"/status", `{"status":"sleeping"}`, 422)
	admin("POST", "/_emu/servers", `{"name":"n1"}`, 422)
	admin("POST", "/_emu/servers", `{"name":`, 400)

	admin("POST", "/_emu/load_balancers", `{"name":"pre","labels":{"hcloud-ccm/service-uid":"u"}}`, 200)
	admin("POST", "/_emu/faults", `{"method":"GET","pattern":"/v1/locations","code":"maintenance","times":1,"delay":"1ms"}`, 200)
	if _, err := c.Location.All(ctx(t)); !hcloud.IsError(err, hcloud.ErrorCodeMaintenance) {
		t.Errorf("fault set over HTTP: err = %v", err)
	}
	admin("POST", "/_emu/faults", `{"pattern":"/v1/locations","code":"maintenance"}`, 200)
	admin("DELETE", "/_emu/faults", "", 200)
	if _, err := c.Location.All(ctx(t)); err != nil {
		t.Errorf("after clearing faults: %v", err)
	}

	var counts struct {
		Counts   map[string]int `json:"counts"`
		Mutating int            `json:"mutating"`
	}
	if err := json.Unmarshal([]byte(admin("GET", "/_emu/counts", "", 200)), &counts); err != nil {
		t.Fatal(err)
	}
	if counts.Counts["GET /v1/locations"] != 2 || counts.Counts["GET /v1/servers/{id}"] != 1 || counts.Mutating != 0 {
		t.Errorf("counts = %+v", counts)
	}
	var log struct{ Requests []hcloudemu.Request }
	if err := json.Unmarshal([]byte(admin("GET", "/_emu/requests", "", 200)), &log); err != nil || len(log.Requests) != 3 {
		t.Errorf("request log = %+v, %v", log, err)
	}
	admin("DELETE", "/_emu/requests", "", 200)
	if len(emu.Requests()) != 0 {
		t.Errorf("requests after clearing = %d", len(emu.Requests()))
	}

	before := emu.Now()
	admin("POST", "/_emu/clock/advance", `{"duration":"90s"}`, 200)
	if d := emu.Now().Sub(before); d < 90*time.Second || d > 95*time.Second {
		t.Errorf("clock advanced by %v", d)
	}
	admin("PUT", "/_emu/rate_limit", `{"per_hour":1}`, 200)
	if _, _, err := c.Location.List(ctx(t), hcloud.LocationListOpts{}); err != nil {
		t.Errorf("first request under limit 1: %v", err)
	}
	if _, _, err := c.Location.List(ctx(t), hcloud.LocationListOpts{}); !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
		t.Errorf("second request under limit 1: %v", err)
	}
	admin("PUT", "/_emu/rate_limit", `{"per_hour":0}`, 200)

	admin("DELETE", id, "", 200)
	admin("POST", "/_emu/reset", "", 200)
	if lbs := emu.LoadBalancers(); len(lbs) != 0 {
		t.Errorf("load balancers after reset = %d", len(lbs))
	}
	admin("GET", "/_emu/nope", "", 404)

	status, _, _ := rawRequestAs(t, "wrong", "GET", base+"/_emu/counts", "")
	if status != 401 {
		t.Errorf("admin without token = %d, want 401", status)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestSeed_ExampleFileLoadsAndBadSeedsAreReported(t *testing.T) {
	s, err := hcloudemu.LoadSeedFile("../../examples/emulator/seed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	emu := hcloudemu.New(hcloudemu.WithSeed(s))
	if err := emu.SeedError(); err != nil {
		t.Fatal(err)
	}
	nw, ok := emu.Network(1)
	if !ok || len(nw.Servers) != 5 || nw.Subnets[0].NetworkZone != "eu-central" {
		t.Errorf("seeded network = %+v", nw)
	}
	srv, ok := emu.Server(105)
	if !ok || srv.Status != "off" || srv.Location.Name != "hel1" {
		t.Errorf("seeded server 105 = %+v", srv)
	}
	if id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "later"}); err != nil || id != 106 {
		t.Errorf("next server ID = %d, %v; want 106", id, err)
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
	}{
		{"An unknown field is rejected", "servers:\n  - name: a\n    colour: red\n"},
		{"Malformed YAML is rejected", "servers: [\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "seed.yaml")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := hcloudemu.LoadSeedFile(p); err == nil {
				t.Error("LoadSeedFile succeeded")
			}
		})
	}
	bad := hcloudemu.New(hcloudemu.WithSeed(hcloudemu.Seed{Servers: []hcloudemu.ServerSpec{{Name: "x", Location: "mars1"}}}), hcloudemu.WithLogf(func(string, ...any) {}))
	if err := bad.SeedError(); err == nil || !strings.Contains(err.Error(), "mars1") {
		t.Errorf("SeedError = %v", err)
	}
}
