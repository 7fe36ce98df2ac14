package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults of the variables that have one. They equal the official CCM's where it has the
// variable.
const (
	DefaultPollInterval   = 250 * time.Millisecond
	DefaultRetryInterval  = time.Second
	DefaultHTTPTimeout    = 15 * time.Second
	DefaultServerCacheAge = 10 * time.Second
	DefaultMetricsAddress = ":8233"
	// DefaultAPIBudgetPerHour is the default of HCLOUD_API_BUDGET_PER_HOUR: 1/60 of the
	// Hetzner Cloud API's default limit of 3,600 requests per hour.
	DefaultAPIBudgetPerHour = 60
	// MinAPIBudgetPerHour is the smallest HCLOUD_API_BUDGET_PER_HOUR: below it the liveness
	// share (half) would allow a read less often than every 12 minutes.
	MinAPIBudgetPerHour = 10
	DefaultRobotCache   = 5 * time.Minute
)

// Server cache modes of HCLOUD_SERVER_CACHE_MODE.
const (
	ServerCacheModeAll = "all"
	ServerCacheModeOne = "one"
	ServerCacheModeOff = "off"
)

// Default returns the configuration when no variable is set. Its token is empty, so it does
// not pass [Config.Validate].
func Default() Config {
	return Config{
		HCloud: HCloud{
			PollInterval:  DefaultPollInterval,
			RetryInterval: DefaultRetryInterval,
			Timeout:       DefaultHTTPTimeout,
		},
		Network:     Network{RoutesEnabled: false},
		Instances:   Instances{AddressFamily: AddressFamilyIPv4, ZoneLabelEnabled: true},
		ServerCache: ServerCache{Mode: ServerCacheModeAll, MaxAge: DefaultServerCacheAge, BudgetPerHour: DefaultAPIBudgetPerHour},
		Metrics:     Metrics{Enabled: true, Address: DefaultMetricsAddress},
		LoadBalancer: LoadBalancer{
			Enabled: true,
		},
		Robot: Robot{CacheTimeout: DefaultRobotCache},
	}
}

// Read parses the environment through lookup (use [os.LookupEnv] in production) into a
// Config. Unset variables keep their default (see [Default]).
//
// Read only parses: a value of the wrong type (a bool, duration, integer) is an error, a
// value outside the allowed set is left to [Config.Validate]. Every problem is reported,
// joined with [errors.Join]; on error the returned Config holds what could be parsed.
//
// HCLOUD_TOKEN falls back to the trimmed content of the file named by HCLOUD_TOKEN_FILE when
// it is unset; ROBOT_USER and ROBOT_PASSWORD likewise. HCLOUD_NETWORK_ROUTES_ENABLED counts only when HCLOUD_NETWORK is set.
func Read(lookup func(string) (string, bool)) (Config, error) {
	r := reader{lookup: lookup}
	cfg := Default()

	cfg.HCloud.Token = r.secret(EnvHCloudToken, EnvHCloudTokenFile)
	r.string(EnvHCloudEndpoint, &cfg.HCloud.Endpoint)
	r.bool(EnvHCloudDebug, &cfg.HCloud.Debug)
	r.duration(EnvHCloudPollInterval, &cfg.HCloud.PollInterval)
	r.duration(EnvHCloudRetryInterval, &cfg.HCloud.RetryInterval)
	r.duration(EnvHCloudHTTPTimeout, &cfg.HCloud.Timeout)

	r.string(EnvHCloudNetwork, &cfg.Network.NameOrID)
	r.bool(EnvHCloudNetworkDisableAttachedCheck, &cfg.Network.DisableAttachedCheck)
	r.string(EnvHCloudMetadataEndpoint, &cfg.Network.MetadataEndpoint)
	routes := true
	r.bool(EnvHCloudNetworkRoutesEnabled, &routes)
	cfg.Network.RoutesEnabled = routes && cfg.Network.NameOrID != ""

	var family string
	if r.string(EnvHCloudInstancesAddressFamily, &family) {
		cfg.Instances.AddressFamily = AddressFamily(family)
	}
	r.bool(EnvHCloudInstancesZoneLabelEnabled, &cfg.Instances.ZoneLabelEnabled)

	r.string(EnvHCloudServerCacheMode, &cfg.ServerCache.Mode)
	r.duration(EnvHCloudServerCacheMaxAge, &cfg.ServerCache.MaxAge)
	r.int(EnvHCloudAPIBudgetPerHour, &cfg.ServerCache.BudgetPerHour)

	r.bool(EnvHCloudMetricsEnabled, &cfg.Metrics.Enabled)
	r.string(EnvHCloudMetricsAddress, &cfg.Metrics.Address)

	lb := &cfg.LoadBalancer
	r.bool(EnvLoadBalancersEnabled, &lb.Enabled)
	r.string(EnvLoadBalancersLocation, &lb.Location)
	r.string(EnvLoadBalancersNetworkZone, &lb.NetworkZone)
	r.string(EnvLoadBalancersType, &lb.Type)
	r.string(EnvLoadBalancersAlgorithmType, &lb.AlgorithmType)
	lb.DisablePublicNetwork = r.optionalBool(EnvLoadBalancersDisablePublicNetwork)
	r.bool(EnvLoadBalancersDisablePrivateIngress, &lb.DisablePrivateIngress)
	r.bool(EnvLoadBalancersUsePrivateIP, &lb.UsePrivateIP)
	r.bool(EnvLoadBalancersDisableIPv6, &lb.DisableIPv6)
	r.string(EnvLoadBalancersPrivateSubnetIPRange, &lb.PrivateSubnetIPRange)
	r.duration(EnvLoadBalancersHealthCheckInterval, &lb.HealthCheckInterval)
	r.duration(EnvLoadBalancersHealthCheckTimeout, &lb.HealthCheckTimeout)
	r.int(EnvLoadBalancersHealthCheckRetries, &lb.HealthCheckRetries)
	lb.UsesProxyProtocol = r.optionalBool(EnvLoadBalancersUsesProxyProtocol)

	rb := &cfg.Robot
	r.bool(EnvRobotEnabled, &rb.Enabled)
	rb.User = r.secret(EnvRobotUser, EnvRobotUserFile)
	rb.Password = r.secret(EnvRobotPassword, EnvRobotPasswordFile)
	r.duration(EnvRobotCacheTimeout, &rb.CacheTimeout)
	if rb.CacheTimeout == 0 {
		rb.CacheTimeout = DefaultRobotCache // the official CCM treats 0 as unset
	}
	r.duration(EnvRobotRateLimitWaitTime, &rb.RateLimitWaitTime)
	forward := true
	r.bool(EnvRobotForwardInternalIPs, &forward)
	rb.ForwardInternalIPs = forward && rb.Enabled
	r.string(EnvRobotEndpoint, &rb.Endpoint)

	return cfg, errors.Join(r.errs...)
}

// reader parses variables and collects every error.
type reader struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (r *reader) invalid(name, value, expect string) {
	r.errs = append(r.errs, fmt.Errorf("invalid value for %q: %q (expect %s)", name, value, expect))
}

// string stores a set variable in dst and reports whether it was set.
func (r *reader) string(name string, dst *string) bool {
	v, ok := r.lookup(name)
	if ok {
		*dst = v
	}
	return ok
}

func (r *reader) bool(name string, dst *bool) {
	v, ok := r.lookup(name)
	if !ok {
		return
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.invalid(name, v, "a boolean: true or false")
		return
	}
	*dst = b
}

func (r *reader) optionalBool(name string) *bool {
	v, ok := r.lookup(name)
	if !ok {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.invalid(name, v, "a boolean: true or false")
		return nil
	}
	return &b
}

func (r *reader) duration(name string, dst *time.Duration) {
	v, ok := r.lookup(name)
	if !ok {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.invalid(name, v, "a duration such as 500ms, 10s or 1m")
		return
	}
	*dst = d
}

func (r *reader) int(name string, dst *int) {
	v, ok := r.lookup(name)
	if !ok {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.invalid(name, v, "an integer")
		return
	}
	*dst = n
}

// secret returns name's value or, when name is unset, the trimmed content of the file that
// fileName names.
func (r *reader) secret(name, fileName string) string {
	if v, ok := r.lookup(name); ok {
		return v
	}
	path, ok := r.lookup(fileName)
	if !ok {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("reading the file named by %q: %w (mount the file or set %s instead)", fileName, err, name))
		return ""
	}
	return strings.TrimSpace(string(b))
}
