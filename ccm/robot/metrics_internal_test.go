package robot

import (
	"context"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
)

// TestRequestsMetric: every request is counted by path pattern and status, and a call refused
// during the rate-limit wait as "wait".
func TestRequestsMetric(t *testing.T) {
	emu, endpoint := robotemu.NewTestServer(t, robotemu.Seed{RateLimit: 1, Servers: []robotemu.Server{{Number: 1, Name: "bm-1"}}})
	c, err := New(Options{Config: config.Robot{User: emu.User(), Password: emu.Password(), CacheTimeout: time.Nanosecond, RateLimitWaitTime: time.Hour, Endpoint: endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	value := func(path, code string) float64 {
		v, err := testutil.GetCounterMetricValue(requests.WithLabelValues(path, code))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	labels := [][2]string{{"/server", "200"}, {"/server", "403"}, {"/server", "wait"}, {"/reset/{n}", "wait"}}
	before := make([]float64, len(labels))
	for i, l := range labels {
		before[i] = value(l[0], l[1])
	}
	_, _ = c.Servers(ctx)            // 200
	time.Sleep(time.Millisecond)     // the list is stale
	_, _ = c.Servers(ctx)            // 403 RATE_LIMIT_EXCEEDED
	_, _ = c.Servers(ctx)            // refused: wait
	_, _ = c.OperatingStatus(ctx, 1) // refused: wait
	for i, l := range labels {
		if got := value(l[0], l[1]) - before[i]; got != 1 {
			t.Errorf("hcloud_ccm_robot_requests_total{path=%q,code=%q} grew by %v, want 1", l[0], l[1], got)
		}
	}
}
