package hcloudclient_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

func validHCloud() config.HCloud {
	return config.HCloud{Token: "secret", PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: time.Second}
}

func TestNew_errors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(*config.HCloud)
		reserve float64
		wantErr string
	}{
		{name: "an empty token is an error", cfg: func(c *config.HCloud) { c.Token = "" }, wantErr: "hcloudclient.New: empty token: set HCLOUD_TOKEN"},
		{name: "an endpoint without scheme is an error", cfg: func(c *config.HCloud) { c.Endpoint = "localhost:4000" }, wantErr: `invalid endpoint "localhost:4000"`},
		{name: "a zero timeout is an error", cfg: func(c *config.HCloud) { c.Timeout = 0 }, wantErr: "must be positive"},
		{name: "a reserve above 1 is an error", cfg: func(c *config.HCloud) {}, reserve: 2, wantErr: "rate limit reserve 2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validHCloud()
			tc.cfg(&cfg)
			_, err := hcloudclient.New(hcloudclient.Options{Config: cfg, Reserve: tc.reserve})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNew_requests(t *testing.T) {
	var mu sync.Mutex
	var gotUA, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotUA, gotAuth = r.UserAgent(), r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("RateLimit-Limit", "3600")
		w.Header().Set("RateLimit-Remaining", "3123")
		_, _ = w.Write([]byte(`{"server":{"id":42,"name":"node-1","status":"running"}}`))
	}))
	defer srv.Close()

	cfg := validHCloud()
	cfg.Endpoint = srv.URL + "/v1"
	reg := prometheus.NewRegistry()
	client, err := hcloudclient.New(hcloudclient.Options{Config: cfg, Registerer: reg, Version: "v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	before := testutil.Metric(t, "hcloud_ccm_api_requests_total", map[string]string{"method": "GET", "endpoint": "/v1/servers/{id}", "code": "200"})
	server, _, err := client.Servers().GetByID(t.Context(), 42)
	if err != nil || server == nil || server.Name != "node-1" {
		t.Fatalf("GetByID() = %v, %v", server, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.HasPrefix(gotUA, "hcloud-policy-ccm/v1.2.3 ") {
		t.Errorf("User-Agent = %q, want the prefix hcloud-policy-ccm/v1.2.3", gotUA)
	}
	if gotAuth != "Bearer secret" {
		t.Errorf("Authorization = %q", gotAuth)
	}
	after := testutil.Metric(t, "hcloud_ccm_api_requests_total", map[string]string{"method": "GET", "endpoint": "/v1/servers/{id}", "code": "200"})
	if after-before != 1 {
		t.Errorf("hcloud_ccm_api_requests_total grew by %v, want 1", after-before)
	}
	if got := testutil.Metric(t, "hcloud_ccm_api_ratelimit_remaining", nil); got != 3123 {
		t.Errorf("hcloud_ccm_api_ratelimit_remaining = %v, want 3123", got)
	}
	// hcloud-go's own instrumentation went to reg.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	if !strings.Contains(strings.Join(names, ","), "hcloud_api_requests_total") {
		t.Errorf("registry has %v, want hcloud_api_requests_total", names)
	}
	// A second client on the same registry does not panic.
	if _, err := hcloudclient.New(hcloudclient.Options{Config: cfg, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
}

// TestNew_pollBackoff checks that action polling is exponential: an action that takes about
// 300ms costs few polls with a 10ms base.
func TestNew_pollBackoff(t *testing.T) {
	start := time.Now()
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		polls.Add(1)
		status := "running"
		if time.Since(start) > 300*time.Millisecond {
			status = "success"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"actions":[{"id":1,"status":"` + status + `","command":"add_route"}]}`))
	}))
	defer srv.Close()
	cfg := validHCloud()
	cfg.Endpoint = srv.URL + "/v1"
	cfg.PollInterval = 10 * time.Millisecond
	conn, err := hcloudclient.New(hcloudclient.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	client := hcloud.NewClient(conn.ClientOptions()...) // as the executor's writeclient builds it
	if err := client.Action.WaitFor(t.Context(), &hcloud.Action{ID: 1, Status: hcloud.ActionStatusRunning}); err != nil {
		t.Fatal(err)
	}
	if n := polls.Load(); n > 7 {
		t.Errorf("polls = %d for a 300ms action, want at most 7 (exponential from 10ms)", n)
	}
}
