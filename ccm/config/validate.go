package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// Allowed values of the enumerated variables, in the order the error messages list them.
var (
	addressFamilies  = []string{string(AddressFamilyIPv4), string(AddressFamilyIPv6), string(AddressFamilyDualStack)}
	serverCacheModes = []string{ServerCacheModeAll, ServerCacheModeOne, ServerCacheModeOff}
	algorithmTypes   = []string{"round_robin", "least_connections"}
)

// Validate checks the rules between and within values. Every violated rule is reported,
// joined with [errors.Join]; each message names the variable and the fix.
//
// Rules: the token is set; the endpoint is an http(s) URL; the address family, cache mode and
// algorithm are known values; durations that pace API calls are positive and the cache max
// age and health check values are not negative; the API budget is at least
// MinAPIBudgetPerHour; the metrics address is set when metrics are
// enabled; location and network zone exclude each other; the private subnet is a CIDR; with
// Robot enabled, see [Robot.validate].
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	oneOf := func(name, value string, allowed []string) {
		if !slices.Contains(allowed, value) {
			add("invalid value for %q: %q (expect one of: %s)", name, value, strings.Join(allowed, ", "))
		}
	}

	if c.HCloud.Token == "" {
		add("%q is required: set it, or %s, to an API token with read and write access", EnvHCloudToken, EnvHCloudTokenFile)
	}
	if c.HCloud.Endpoint != "" {
		u, err := url.Parse(c.HCloud.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("invalid value for %q: %q (expect an http or https URL such as https://api.hetzner.cloud/v1)", EnvHCloudEndpoint, c.HCloud.Endpoint)
		}
	}
	positive := []struct {
		name  string
		value fmt.Stringer
		ok    bool
	}{
		{EnvHCloudPollInterval, c.HCloud.PollInterval, c.HCloud.PollInterval > 0},
		{EnvHCloudRetryInterval, c.HCloud.RetryInterval, c.HCloud.RetryInterval > 0},
		{EnvHCloudHTTPTimeout, c.HCloud.Timeout, c.HCloud.Timeout > 0},
	}
	for _, p := range positive {
		if !p.ok {
			add("invalid value for %q: %q (expect a positive duration such as 1s)", p.name, p.value)
		}
	}

	oneOf(EnvHCloudInstancesAddressFamily, string(c.Instances.AddressFamily), addressFamilies)
	oneOf(EnvHCloudServerCacheMode, c.ServerCache.Mode, serverCacheModes)
	if c.ServerCache.MaxAge < 0 {
		add("invalid value for %q: %q (expect a duration of 0s or more)", EnvHCloudServerCacheMaxAge, c.ServerCache.MaxAge)
	}
	if c.ServerCache.BudgetPerHour < MinAPIBudgetPerHour {
		add("invalid value for %q: \"%d\" (expect an integer of %d or more requests per hour, such as the default %d)", EnvHCloudAPIBudgetPerHour, c.ServerCache.BudgetPerHour, MinAPIBudgetPerHour, DefaultAPIBudgetPerHour)
	}

	if c.Metrics.Enabled && c.Metrics.Address == "" {
		add("%q is empty while metrics are enabled: set it to a listen address such as :8233, or set %s=false", EnvHCloudMetricsAddress, EnvHCloudMetricsEnabled)
	}

	lb := c.LoadBalancer
	if lb.Location != "" && lb.NetworkZone != "" {
		add("%q and %q exclude each other: set only one of them", EnvLoadBalancersLocation, EnvLoadBalancersNetworkZone)
	}
	if lb.AlgorithmType != "" {
		oneOf(EnvLoadBalancersAlgorithmType, lb.AlgorithmType, algorithmTypes)
	}
	if lb.PrivateSubnetIPRange != "" {
		if _, _, err := net.ParseCIDR(lb.PrivateSubnetIPRange); err != nil {
			add("invalid value for %q: %q (expect a CIDR such as 10.0.0.0/24)", EnvLoadBalancersPrivateSubnetIPRange, lb.PrivateSubnetIPRange)
		}
	}
	if lb.HealthCheckInterval < 0 {
		add("invalid value for %q: %q (expect a duration of 0s or more)", EnvLoadBalancersHealthCheckInterval, lb.HealthCheckInterval)
	}
	if lb.HealthCheckTimeout < 0 {
		add("invalid value for %q: %q (expect a duration of 0s or more)", EnvLoadBalancersHealthCheckTimeout, lb.HealthCheckTimeout)
	}
	if lb.HealthCheckRetries < 0 {
		add("invalid value for %q: \"%d\" (expect an integer of 0 or more)", EnvLoadBalancersHealthCheckRetries, lb.HealthCheckRetries)
	}

	if c.Robot.Enabled {
		errs = append(errs, c.Robot.validate(c.Network.RoutesEnabled)...)
	}

	return errors.Join(errs...)
}

// Warnings returns problems that do not stop the CCM, for the caller to log: a token that is
// not 64 characters long, and server cache settings that differ from the defaults (the
// official CCM calls them experimental).
func (c Config) Warnings() []string {
	var w []string
	if c.HCloud.Token != "" && len(c.HCloud.Token) != 64 {
		w = append(w, fmt.Sprintf("%s is %d characters long; Hetzner Cloud API tokens have 64", EnvHCloudToken, len(c.HCloud.Token)))
	}
	if c.ServerCache.Mode != ServerCacheModeAll {
		w = append(w, fmt.Sprintf("%s=%s reads servers one by one; mode all costs one paginated list per refresh", EnvHCloudServerCacheMode, c.ServerCache.Mode))
	}
	if c.Robot.Enabled && !c.Robot.HasCredentials() {
		w = append(w, fmt.Sprintf("%s=true without %s and %s: Robot nodes are served as load balancer IP targets through their InternalIP only; node metadata needs the credentials", EnvRobotEnabled, EnvRobotUser, EnvRobotPassword))
	}
	return w
}

// validate checks the Robot rules of the official CCM, plus ours: the credentials are both set
// or both unset (a missing one is named); Robot and routes exclude each other; the durations
// are not negative; the endpoint is an http(s) URL. Messages never contain the credentials.
func (r Robot) validate(routesEnabled bool) []error {
	var errs []error
	switch {
	case r.User != "" && r.Password == "":
		errs = append(errs, fmt.Errorf("%q is required when %q is set: set it, or %s, to the Robot webservice password (or unset both for Robot without API access)", EnvRobotPassword, EnvRobotUser, EnvRobotPasswordFile))
	case r.User == "" && r.Password != "":
		errs = append(errs, fmt.Errorf("%q is required when %q is set: set it, or %s, to the Robot webservice user (or unset both for Robot without API access)", EnvRobotUser, EnvRobotPassword, EnvRobotUserFile))
	}
	if routesEnabled {
		errs = append(errs, fmt.Errorf("using routes with Robot is not supported: set %s=false or unset %s", EnvHCloudNetworkRoutesEnabled, EnvRobotEnabled))
	}
	if r.CacheTimeout < 0 {
		errs = append(errs, fmt.Errorf("invalid value for %q: %q (expect a duration of 0s or more)", EnvRobotCacheTimeout, r.CacheTimeout))
	}
	if r.RateLimitWaitTime < 0 {
		errs = append(errs, fmt.Errorf("invalid value for %q: %q (expect a duration of 0s or more)", EnvRobotRateLimitWaitTime, r.RateLimitWaitTime))
	}
	if r.Endpoint != "" {
		u, err := url.Parse(r.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("invalid value for %q: %q (expect an http or https URL such as https://robot-ws.your-server.de)", EnvRobotEndpoint, r.Endpoint))
		}
	}
	return errs
}
