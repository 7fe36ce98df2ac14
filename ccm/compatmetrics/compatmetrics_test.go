package compatmetrics_test

import (
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// TestOfficialSeriesNames: the series carry the official names and labels.
func TestOfficialSeriesNames(t *testing.T) {
	tests := []struct {
		name   string
		count  func()
		metric string
		labels map[string]string
	}{
		{"operations", func() { compatmetrics.Operation(compatmetrics.OpEnsureLoadBalancer) },
			"cloud_controller_manager_operations_total", map[string]string{"op": "hcloud/loadBalancers.EnsureLoadBalancer"}},
		{"server cache", func() { compatmetrics.ServerCache(compatmetrics.SubsystemUnknown, "all", compatmetrics.ResultHit) },
			"cloud_controller_manager_server_cache_requests_total", map[string]string{"subsystem": "none", "mode": "all", "result": "hit"}},
		{"load balancer type cache", func() { compatmetrics.LoadBalancerTypeCache("all", compatmetrics.ResultMiss) },
			"cloud_controller_manager_load_balancer_type_cache_requests_total", map[string]string{"subsystem": "load_balancer", "mode": "all", "result": "miss"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.Metric(t, tc.metric, tc.labels)
			tc.count()
			if got := testutil.Metric(t, tc.metric, tc.labels); got != before+1 {
				t.Errorf("%s%v = %v, want %v", tc.metric, tc.labels, got, before+1)
			}
		})
	}
}
