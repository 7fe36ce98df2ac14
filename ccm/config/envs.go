package config

//go:generate go run ./internal/gendoc

// Environment variables read by [Read]. The names and defaults are those of the official
// hcloud-cloud-controller-manager, so its manifests and Secrets work unchanged; the variables
// marked "this CCM only" are our own additions.
//
// Each constant's doc comment ends with trailers that docs/reference/env.md is generated from
// (make generate): "Type:" and "Default:". Keep them when editing.
const (
	// EnvHCloudToken is the Hetzner Cloud API token; it needs read and write access.
	// A token that is not 64 characters long is reported as a warning, not an error.
	// If it is unset, the file named by HCLOUD_TOKEN_FILE is read and trimmed.
	//
	// Type: string
	// Default: none (required)
	EnvHCloudToken = "HCLOUD_TOKEN"

	// EnvHCloudTokenFile names a file holding the API token (for example a mounted Secret).
	// It is read only when HCLOUD_TOKEN is unset; surrounding whitespace is trimmed.
	//
	// Type: path
	// Default: unset
	EnvHCloudTokenFile = "HCLOUD_TOKEN_FILE" //nolint:gosec // the variable's name, not a credential

	// EnvHCloudEndpoint overrides the base URL of the Hetzner Cloud API, for example
	// http://127.0.0.1:4000/v1 for the emulator.
	//
	// Type: URL
	// Default: https://api.hetzner.cloud/v1
	EnvHCloudEndpoint = "HCLOUD_ENDPOINT"

	// EnvHCloudDebug writes every API request and response to stderr (the token is redacted).
	//
	// Type: bool
	// Default: false
	EnvHCloudDebug = "HCLOUD_DEBUG"

	// EnvHCloudPollInterval is the first wait before an action's status is polled. Each later
	// wait doubles, up to 2s (or this value, if it is larger). The official CCM polls every
	// 500ms; the exponential wait needs fewer polls for actions that take seconds. This CCM only.
	// A malformed or non-positive value is ignored with a warning (the official CCM ignores the
	// variable, so it never stops the start).
	//
	// Type: duration
	// Default: 250ms
	EnvHCloudPollInterval = "HCLOUD_POLL_INTERVAL"

	// EnvHCloudRetryInterval is the first wait before a failed request is retried (conflict,
	// rate limit, gateway errors, timeouts). Each later wait doubles, with jitter, up to 1m;
	// at most 5 retries. This CCM only. A malformed or non-positive value is ignored with a
	// warning (the official CCM ignores the variable, so it never stops the start).
	//
	// Type: duration
	// Default: 1s
	EnvHCloudRetryInterval = "HCLOUD_RETRY_INTERVAL"

	// EnvHCloudHTTPTimeout is the timeout of one HTTP request to the API. This CCM only. A
	// malformed or non-positive value is ignored with a warning (the official CCM ignores the
	// variable, so it never stops the start).
	//
	// Type: duration
	// Default: 15s
	EnvHCloudHTTPTimeout = "HCLOUD_HTTP_TIMEOUT"

	// EnvHCloudNetwork is the name or ID of the private network. Nodes get their IP in this
	// network as InternalIP, load balancers can attach to it, and routes are written to it.
	//
	// Type: string (name or ID)
	// Default: unset (no network)
	EnvHCloudNetwork = "HCLOUD_NETWORK"

	// EnvHCloudNetworkDisableAttachedCheck skips the start-up check, through the metadata service,
	// that the server running the CCM is attached to HCLOUD_NETWORK. Without it the CCM does not
	// start on a server outside that network, or where the metadata service does not answer
	// within 5s (for example outside Hetzner Cloud), as the official CCM.
	//
	// Type: bool
	// Default: false
	EnvHCloudNetworkDisableAttachedCheck = "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"

	// EnvHCloudMetadataEndpoint overrides the base URL of the metadata service used by the
	// attached-network check, for example http://127.0.0.1:4000/hetzner/v1/metadata for the
	// emulator. The official CCM has no such variable. This CCM only. A value that is not an
	// http(s) URL is ignored with a warning.
	//
	// Type: URL
	// Default: http://169.254.169.254/hetzner/v1/metadata
	EnvHCloudMetadataEndpoint = "HCLOUD_METADATA_ENDPOINT"

	// EnvHCloudNetworkRoutesEnabled enables the route controller's cloud side. It is read only
	// when HCLOUD_NETWORK is set (without a network any value is ignored, as in the official
	// CCM). Routes also need --cluster-cidr to be one CIDR: an empty, malformed or dual-stack
	// list disables them with a logged error, as in the official CCM.
	//
	// Type: bool
	// Default: true
	EnvHCloudNetworkRoutesEnabled = "HCLOUD_NETWORK_ROUTES_ENABLED"

	// EnvHCloudInstancesAddressFamily selects which public IPs become ExternalIP node addresses:
	// ipv4 (the public IPv4), ipv6 (the first address of the server's /64) or dualstack (both,
	// IPv4 first). Empty means ipv4, as in the official CCM.
	//
	// Type: ipv4 | ipv6 | dualstack
	// Default: ipv4
	EnvHCloudInstancesAddressFamily = "HCLOUD_INSTANCES_ADDRESS_FAMILY"

	// EnvHCloudInstancesZoneLabelEnabled sets topology.kubernetes.io/zone on nodes, with the
	// legacy datacenter name of the server's location (fsn1 → fsn1-dc14).
	//
	// Type: bool
	// Default: true
	EnvHCloudInstancesZoneLabelEnabled = "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED"

	// EnvHCloudServerCacheMode is how servers are read: all (one paginated list of every server
	// in the project, shared by all lookups), one (one request per server) or off (no caching).
	//
	// Type: all | one | off
	// Default: all
	EnvHCloudServerCacheMode = "HCLOUD_SERVER_CACHE_MODE"

	// EnvHCloudServerCacheMaxAge is how long a cached server is served before it is read again,
	// at least: in mode all, HCLOUD_API_BUDGET_PER_HOUR keeps the server list longer in large
	// projects. A server missing from a fresh cache triggers at most one extra read per second.
	// A negative value is taken as 0s, the shortest max age, with a warning (the official CCM
	// reads again on every lookup with it).
	//
	// Type: duration
	// Default: 10s
	EnvHCloudServerCacheMaxAge = "HCLOUD_SERVER_CACHE_MAX_AGE"

	// EnvHCloudAPIBudgetPerHour is the number of API requests per hour that the periodic
	// refresh of servers may spend (cache mode all), so the steady cost does not grow with the
	// cluster. Half of it pays for the full server list, which is then kept for
	// max(HCLOUD_SERVER_CACHE_MAX_AGE, pages × 1h / (budget/2)) (pages of 50 servers; with
	// 60: 20 minutes at 500 servers, 80 at 2,000), the other half for liveness reads of single
	// servers (GET /servers/{id}) when the node lifecycle controller asks about a NotReady node:
	// its shutdown or deletion is then seen within HCLOUD_SERVER_CACHE_MAX_AGE while that half lasts (a bucket of
	// budget/2), within n × 1h / (budget/2) for n NotReady nodes once it is spent. Requests
	// caused by changes (new nodes, Services, routes) are not limited by it. At least 10. The
	// official CCM has no such variable. This CCM only. A malformed value keeps the default and
	// a smaller one is raised to 10, each with a warning. The default makes server data staler
	// than the official CCM's; 3600 restores its freshness (docs/reference/differences.md).
	//
	// Type: integer (requests per hour)
	// Default: 60
	EnvHCloudAPIBudgetPerHour = "HCLOUD_API_BUDGET_PER_HOUR"

	// EnvHCloudMetricsEnabled starts an extra HTTP server for Prometheus metrics, as the
	// official CCM does. It serves every metric without authentication on
	// HCLOUD_METRICS_ADDRESS; deploy/ sets it to false, and the same metrics are served on the
	// secure port's /metrics (10258, HTTPS, authorized by the cluster).
	//
	// Type: bool
	// Default: true
	EnvHCloudMetricsEnabled = "HCLOUD_METRICS_ENABLED"

	// EnvHCloudMetricsAddress is the listen address of the metrics server (path /metrics).
	// The default listens on every interface (node interfaces under hostNetwork); bind
	// 127.0.0.1:8233 to keep it inside the pod. An address that cannot be listened on (in use,
	// malformed) is logged and the CCM runs without the extra server, as the official CCM. An
	// empty value is logged and not served (the official CCM would listen on :80).
	//
	// Type: string (host:port)
	// Default: :8233
	EnvHCloudMetricsAddress = "HCLOUD_METRICS_ADDRESS"

	// EnvLoadBalancersEnabled runs the service (load balancer) controller's cloud side.
	//
	// Type: bool
	// Default: true
	EnvLoadBalancersEnabled = "HCLOUD_LOAD_BALANCERS_ENABLED"

	// EnvLoadBalancersLocation is the default location of new load balancers. It excludes
	// HCLOUD_LOAD_BALANCERS_NETWORK_ZONE.
	//
	// Type: string
	// Default: unset
	EnvLoadBalancersLocation = "HCLOUD_LOAD_BALANCERS_LOCATION"

	// EnvLoadBalancersNetworkZone is the default network zone of new load balancers. It excludes
	// HCLOUD_LOAD_BALANCERS_LOCATION.
	//
	// Type: string
	// Default: unset
	EnvLoadBalancersNetworkZone = "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE"

	// EnvLoadBalancersType is the default load balancer type. When neither this variable nor the
	// annotation is set, lb11 is used and a LoadBalancerTypeUnconfigured warning is emitted.
	//
	// Type: string
	// Default: lb11
	EnvLoadBalancersType = "HCLOUD_LOAD_BALANCERS_TYPE"

	// EnvLoadBalancersAlgorithmType is the default load balancing algorithm. Any case is
	// accepted, as in the official CCM, and sent in lower case (with a warning); empty means
	// unset.
	//
	// Type: round_robin | least_connections
	// Default: round_robin
	EnvLoadBalancersAlgorithmType = "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE"

	// EnvLoadBalancersDisablePublicNetwork is the default of the disable-public-network
	// annotation. Unset differs from false: unset leaves the public interface as it is.
	//
	// Type: bool
	// Default: false
	EnvLoadBalancersDisablePublicNetwork = "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK"

	// EnvLoadBalancersDisablePrivateIngress is the default of the disable-private-ingress
	// annotation: leave the load balancer's private IPs out of the Service status.
	//
	// Type: bool
	// Default: false
	EnvLoadBalancersDisablePrivateIngress = "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS"

	// EnvLoadBalancersUsePrivateIP is the default of the use-private-ip annotation: targets are
	// reached through their private IP.
	//
	// Type: bool
	// Default: false
	EnvLoadBalancersUsePrivateIP = "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"

	// EnvLoadBalancersDisableIPv6 is the default of the ipv6-disabled annotation: leave the load
	// balancer's IPv6 out of the Service status.
	//
	// Type: bool
	// Default: false
	EnvLoadBalancersDisableIPv6 = "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6"

	// EnvLoadBalancersPrivateSubnetIPRange is the default subnet of HCLOUD_NETWORK that load
	// balancers attach to.
	//
	// Type: CIDR
	// Default: unset
	EnvLoadBalancersPrivateSubnetIPRange = "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE"

	// EnvLoadBalancersHealthCheckInterval is the default health check interval; sent only when
	// set, otherwise the API default applies. Empty means unset, as in the official CCM; a
	// negative value is accepted with a warning (the API refuses it when it is sent).
	//
	// Type: duration
	// Default: 10s
	EnvLoadBalancersHealthCheckInterval = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL"

	// EnvLoadBalancersHealthCheckTimeout is the default health check timeout; sent only when
	// set, otherwise the API default applies. Empty means unset, as in the official CCM; a
	// negative value is accepted with a warning (the API refuses it when it is sent).
	//
	// Type: duration
	// Default: 15s
	EnvLoadBalancersHealthCheckTimeout = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT"

	// EnvLoadBalancersHealthCheckRetries is the default number of health check retries; sent
	// only when set and not zero, otherwise the API default applies. Empty means unset, as in
	// the official CCM; a negative value is accepted with a warning, and load balancers that
	// would use it fail to reconcile.
	//
	// Type: int
	// Default: 3
	EnvLoadBalancersHealthCheckRetries = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES"

	// EnvLoadBalancersUsesProxyProtocol is the default of the uses-proxyprotocol annotation.
	// Unset differs from false: unset leaves the setting to the API default.
	//
	// Type: bool
	// Default: false
	EnvLoadBalancersUsesProxyProtocol = "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL"

	// EnvLoadBalancersClass is the load balancer class this CCM also serves: Services of type
	// LoadBalancer whose spec.loadBalancerClass equals it get a Hetzner load balancer as
	// class-less ones do; Services of any other class are never touched. The flag
	// --load-balancer-class wins when both are set. A value that is not a qualified name
	// (an optional DNS subdomain prefix and "/", then a name of at most 63 characters, as
	// Kubernetes validates spec.loadBalancerClass; for example example.com/hetzner) is
	// ignored with a warning: no Service can carry it. This CCM only.
	//
	// Type: string
	// Default: unset (no class served)
	EnvLoadBalancersClass = "HCLOUD_LOAD_BALANCERS_CLASS"

	// EnvRobotEnabled enables Robot (dedicated server) support: nodes with hrobot:// provider
	// IDs (or the legacy hcloud://bm-) get their metadata from the Robot webservice and become
	// IP targets of load balancers. It cannot be combined with routes (HCLOUD_NETWORK with
	// HCLOUD_NETWORK_ROUTES_ENABLED), as in the official CCM.
	//
	// Type: bool
	// Default: false
	EnvRobotEnabled = "ROBOT_ENABLED"

	// EnvRobotUser is the Robot webservice user. Set both ROBOT_USER and ROBOT_PASSWORD, or
	// neither: without credentials Robot nodes still become load balancer IP targets through
	// their InternalIP (use-private-ip), but node metadata is not available. If it is unset,
	// the file named by ROBOT_USER_FILE is read and trimmed. Never logged.
	//
	// Type: string
	// Default: unset
	EnvRobotUser = "ROBOT_USER"

	// EnvRobotUserFile names a file holding the Robot webservice user; read only when
	// ROBOT_USER is unset; surrounding whitespace is trimmed.
	//
	// Type: path
	// Default: unset
	EnvRobotUserFile = "ROBOT_USER_FILE"

	// EnvRobotPassword is the Robot webservice password (see ROBOT_USER). If it is unset, the
	// file named by ROBOT_PASSWORD_FILE is read and trimmed. Never logged.
	//
	// Type: string
	// Default: unset
	EnvRobotPassword = "ROBOT_PASSWORD"

	// EnvRobotPasswordFile names a file holding the Robot webservice password; read only when
	// ROBOT_PASSWORD is unset; surrounding whitespace is trimmed.
	//
	// Type: path
	// Default: unset
	EnvRobotPasswordFile = "ROBOT_PASSWORD_FILE"

	// EnvRobotCacheTimeout is how long the Robot server list is cached; every Robot lookup
	// (by number or by name) is served from it. Robot allows few requests per hour, so keep it
	// long. Empty or 0 means the default, as in the official CCM; a negative value disables
	// the cache, as there, with a warning.
	//
	// Type: duration
	// Default: 5m
	EnvRobotCacheTimeout = "ROBOT_CACHE_TIMEOUT"

	// EnvRobotRateLimitWaitTime is how long Robot calls are refused after Robot answered with
	// a rate-limit error (RATE_LIMIT_EXCEEDED or HTTP 403), so the CCM does not extend the
	// lockout. 0 disables the wait; empty means 0 and a negative value acts as 0, as in the
	// official CCM (with a warning).
	//
	// Type: duration
	// Default: 0
	EnvRobotRateLimitWaitTime = "ROBOT_RATE_LIMIT_WAIT_TIME"

	// EnvRobotForwardInternalIPs keeps the InternalIP addresses the kubelet reported
	// (--node-ip) on Robot nodes, dropping those of the wrong address family or equal to an
	// ExternalIP (MisconfiguredInternalIP event). Effective only with ROBOT_ENABLED.
	//
	// Type: bool
	// Default: true
	EnvRobotForwardInternalIPs = "ROBOT_FORWARD_INTERNAL_IPS"

	// EnvRobotEndpoint overrides the base URL of the Robot webservice, for example
	// http://127.0.0.1:4000/robot for the emulator. The official CCM has no such variable
	// (its tests set the URL in code). This CCM only. A value that is not an http(s) URL is
	// ignored with a warning.
	//
	// Type: URL
	// Default: https://robot-ws.your-server.de
	EnvRobotEndpoint = "ROBOT_ENDPOINT"
)
