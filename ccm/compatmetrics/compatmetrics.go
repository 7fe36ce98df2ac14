// Package compatmetrics exports the official hcloud CCM's metric series under their official
// names, so that dashboards and alerts built for it keep working after the swap:
//
//   - cloud_controller_manager_operations_total{op}: one per call of a cloudprovider method,
//     labelled with the official operation name (e.g. hcloud/loadBalancers.EnsureLoadBalancer);
//   - cloud_controller_manager_server_cache_requests_total{subsystem,mode,result};
//   - cloud_controller_manager_load_balancer_type_cache_requests_total{subsystem,mode,result}.
//
// Our own, more detailed series (hcloud_ccm_*) are registered next to them. The official CCM
// counts operations at the top of nearly every internal function; we count the entry points
// (the cloudprovider methods it counts: all but GetLoadBalancerName), which is what dashboards
// plot.
package compatmetrics

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Operation names of the official CCM. They MUST not change: dashboards match on them.
const (
	OpGetLoadBalancer           = "hcloud/loadBalancers.GetLoadBalancer"
	OpEnsureLoadBalancer        = "hcloud/loadBalancers.EnsureLoadBalancer"
	OpUpdateLoadBalancer        = "hcloud/loadBalancers.UpdateLoadBalancer"
	OpEnsureLoadBalancerDeleted = "hcloud/loadBalancers.EnsureLoadBalancerDeleted"
	OpInstanceExists            = "hcloud/instancesv2.InstanceExists"
	OpInstanceShutdown          = "hcloud/instancesv2.InstanceShutdown"
	OpInstanceMetadata          = "hcloud/instancesv2.InstanceMetadata"
	// The official route operations have no "routes." part (its hcloud/routes.go).
	OpListRoutes  = "hcloud/ListRoutes"
	OpCreateRoute = "hcloud/CreateRoute"
	OpDeleteRoute = "hcloud/DeleteRoute"
)

// Cache results and subsystems, as the official CCM labels them.
const (
	ResultHit           = "hit"
	ResultMiss          = "miss"
	SubsystemInstances  = "instances_v2"
	SubsystemRoutes     = "routes"
	SubsystemLB         = "load_balancer"
	SubsystemUnknown    = "none"
	cacheLabelSubsystem = "subsystem"
)

var (
	operations = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "cloud_controller_manager_operations_total",
		Help:           "The total number of operation was called (official hcloud CCM series).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"op"})
	serverCache = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "cloud_controller_manager_server_cache_requests_total",
		Help:           "Server cache requests by subsystem, mode and result (official hcloud CCM series).",
		StabilityLevel: metrics.ALPHA,
	}, []string{cacheLabelSubsystem, "mode", "result"})
	lbTypeCache = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "cloud_controller_manager_load_balancer_type_cache_requests_total",
		Help:           "Load balancer type cache requests by subsystem, mode and result (official hcloud CCM series).",
		StabilityLevel: metrics.ALPHA,
	}, []string{cacheLabelSubsystem, "mode", "result"})
)

func init() { legacyregistry.MustRegister(operations, serverCache, lbTypeCache) }

// Operation counts one call of the official operation op.
func Operation(op string) { operations.WithLabelValues(op).Inc() }

// ServerCache counts one server cache lookup.
func ServerCache(subsystem, mode, result string) {
	serverCache.WithLabelValues(subsystem, mode, result).Inc()
}

// LoadBalancerTypeCache counts one load balancer type cache lookup.
func LoadBalancerTypeCache(mode, result string) {
	lbTypeCache.WithLabelValues(SubsystemLB, mode, result).Inc()
}
