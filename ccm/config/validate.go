package config

import (
	"errors"
	"fmt"
	"net"
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
// The rules are the official CCM's (it refuses to start on them too): the token is set; the
// address family and cache mode are known values; the algorithm is known, in any case;
// location and network zone exclude each other; the private subnet is a CIDR; with Robot
// enabled, see [Robot.validate]. The other rules check this CCM's own fields (endpoints,
// intervals, the API budget) and the cache max age; on a Config from [Read] they never fail,
// because Read replaces such values by the default with a warning, but they guard Configs
// built in code. The API endpoint is one exception: the official CCM fails its start-up API
// call on a value that is not an http(s) URL, so refusing it early changes only the message.
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
		if !isHTTPURL(c.HCloud.Endpoint) {
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

	lb := c.LoadBalancer
	if lb.Location != "" && lb.NetworkZone != "" {
		add("%q and %q exclude each other: set only one of them", EnvLoadBalancersLocation, EnvLoadBalancersNetworkZone)
	}
	if lb.AlgorithmType != "" { // any case and surrounding space, as in the official CCM
		oneOf(EnvLoadBalancersAlgorithmType, strings.ToLower(strings.TrimSpace(lb.AlgorithmType)), algorithmTypes)
	}
	if lb.PrivateSubnetIPRange != "" {
		if _, _, err := net.ParseCIDR(lb.PrivateSubnetIPRange); err != nil {
			add("invalid value for %q: %q (expect a CIDR such as 10.0.0.0/24)", EnvLoadBalancersPrivateSubnetIPRange, lb.PrivateSubnetIPRange)
		}
	}
	if c.Robot.Enabled {
		errs = append(errs, c.Robot.validate(c.Network.RoutesEnabled)...)
	}

	return errors.Join(errs...)
}

// Warnings returns problems that do not stop the CCM, for the caller to log: Read's notes on
// values it accepted or replaced (each names the variable and the fix), a token that is not
// 64 characters long, and server cache settings that differ from the defaults (the official
// CCM calls them experimental).
func (c Config) Warnings() []string {
	w := slices.Clone(c.warnings)
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

// validate checks the Robot rules of the official CCM: the credentials are both set or both
// unset (a missing one is named); Robot and routes exclude each other; plus ours: the endpoint
// is an http(s) URL. Negative durations are accepted, as in the official CCM (Read warns).
// Messages never contain the credentials.
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
	if r.Endpoint != "" {
		if !isHTTPURL(r.Endpoint) {
			errs = append(errs, fmt.Errorf("invalid value for %q: %q (expect an http or https URL such as https://robot-ws.your-server.de)", EnvRobotEndpoint, r.Endpoint))
		}
	}
	return errs
}
