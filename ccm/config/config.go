// Package config holds the CCM's configuration, read from the environment variables of the
// official hcloud-cloud-controller-manager (same names, same defaults).
package config

import (
	"fmt"
	"time"
)

// Config is the whole configuration of the CCM.
type Config struct {
	HCloud       HCloud
	Network      Network
	Instances    Instances
	ServerCache  ServerCache
	Metrics      Metrics
	LoadBalancer LoadBalancer
	Robot        Robot

	// warnings are Read's notes on values it accepted or replaced (see [Config.Warnings]).
	warnings []string
}

// Robot configures Robot (dedicated server) support.
type Robot struct {
	Enabled bool // ROBOT_ENABLED
	// User and Password are the webservice credentials (ROBOT_USER, ROBOT_PASSWORD or their
	// _FILE forms); both empty means no Robot API access. Never log them.
	User     string
	Password string
	// CacheTimeout is the lifetime of the cached server list (ROBOT_CACHE_TIMEOUT).
	CacheTimeout time.Duration
	// RateLimitWaitTime is how long calls are refused after a rate-limit error
	// (ROBOT_RATE_LIMIT_WAIT_TIME); 0 disables the wait.
	RateLimitWaitTime time.Duration
	// ForwardInternalIPs keeps kubelet InternalIPs on Robot nodes (ROBOT_FORWARD_INTERNAL_IPS);
	// false whenever Enabled is false.
	ForwardInternalIPs bool
	Endpoint           string // ROBOT_ENDPOINT; empty means the public webservice
}

// HasCredentials reports whether Robot API credentials are configured.
func (r Robot) HasCredentials() bool { return r.User != "" && r.Password != "" }

// String describes r without its credentials, so the struct is safe to log.
func (r Robot) String() string {
	return fmt.Sprintf("{Enabled:%t Credentials:%t CacheTimeout:%s RateLimitWaitTime:%s ForwardInternalIPs:%t Endpoint:%q}",
		r.Enabled, r.HasCredentials(), r.CacheTimeout, r.RateLimitWaitTime, r.ForwardInternalIPs, r.Endpoint)
}

// HCloud configures the Hetzner Cloud API client.
type HCloud struct {
	Token    string // HCLOUD_TOKEN or HCLOUD_TOKEN_FILE
	Endpoint string // HCLOUD_ENDPOINT; empty means the public API
	Debug    bool   // HCLOUD_DEBUG
	// PollInterval is the base of the exponential action-poll backoff.
	PollInterval time.Duration
	// RetryInterval is the base of the exponential retry backoff.
	RetryInterval time.Duration
	// Timeout is the HTTP client timeout of one request.
	Timeout time.Duration
}

// Network configures the private network.
type Network struct {
	NameOrID             string // HCLOUD_NETWORK; empty means no network
	RoutesEnabled        bool   // HCLOUD_NETWORK_ROUTES_ENABLED
	DisableAttachedCheck bool   // HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK
	MetadataEndpoint     string // HCLOUD_METADATA_ENDPOINT; empty means the Hetzner metadata service
}

// AddressFamily selects which public IPs become ExternalIP node addresses.
type AddressFamily string

// Address families of HCLOUD_INSTANCES_ADDRESS_FAMILY.
const (
	AddressFamilyIPv4      AddressFamily = "ipv4"
	AddressFamilyIPv6      AddressFamily = "ipv6"
	AddressFamilyDualStack AddressFamily = "dualstack"
)

// Instances configures node metadata.
type Instances struct {
	AddressFamily    AddressFamily // HCLOUD_INSTANCES_ADDRESS_FAMILY
	ZoneLabelEnabled bool          // HCLOUD_INSTANCES_ZONE_LABEL_ENABLED
}

// ServerCache configures the server cache.
type ServerCache struct {
	Mode   string        // HCLOUD_SERVER_CACHE_MODE: all|one|off
	MaxAge time.Duration // HCLOUD_SERVER_CACHE_MAX_AGE
	// BudgetPerHour is HCLOUD_API_BUDGET_PER_HOUR: the requests per hour the periodic refresh
	// of servers may spend (0, only outside Read: no budget, lists are kept for MaxAge).
	BudgetPerHour int
}

// Metrics configures the extra metrics endpoint.
type Metrics struct {
	Enabled bool   // HCLOUD_METRICS_ENABLED
	Address string // HCLOUD_METRICS_ADDRESS
}

// LoadBalancer holds the HCLOUD_LOAD_BALANCERS_* defaults; annotations override them per Service.
type LoadBalancer struct {
	Enabled               bool   // HCLOUD_LOAD_BALANCERS_ENABLED
	Location              string // HCLOUD_LOAD_BALANCERS_LOCATION
	NetworkZone           string // HCLOUD_LOAD_BALANCERS_NETWORK_ZONE
	Type                  string // HCLOUD_LOAD_BALANCERS_TYPE; empty means unset
	AlgorithmType         string // HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE; empty means unset
	DisablePublicNetwork  *bool  // HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK; nil means unset
	DisablePrivateIngress bool   // HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS
	UsePrivateIP          bool   // HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP
	DisableIPv6           bool   // HCLOUD_LOAD_BALANCERS_DISABLE_IPV6
	PrivateSubnetIPRange  string // HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE
	// Health check defaults; zero means unset (the API default applies).
	HealthCheckInterval time.Duration // HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL
	HealthCheckTimeout  time.Duration // HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT
	HealthCheckRetries  int           // HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES
	UsesProxyProtocol   *bool         // HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL; nil means unset
	// Class is HCLOUD_LOAD_BALANCERS_CLASS, a qualified name; empty means unset.
	Class string
}
