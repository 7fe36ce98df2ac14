package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
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
// Every value the official CCM accepts is accepted here with the official meaning; the table
// in TestRead_officialParity (one row per variable) enforces it and names each deliberate
// difference. In particular, as in the official CCM:
//   - an empty HCLOUD_INSTANCES_ADDRESS_FAMILY means ipv4, and an empty
//     HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL, _TIMEOUT, _RETRIES, ROBOT_CACHE_TIMEOUT or
//     ROBOT_RATE_LIMIT_WAIT_TIME means unset; other empty booleans and durations are errors;
//   - HCLOUD_NETWORK_ROUTES_ENABLED is read only when HCLOUD_NETWORK is set;
//   - negative durations and retries are kept, with a warning. The Robot client gives the
//     negative Robot durations the official meaning (no cache, no wait; ccm/robot
//     TestClient_negativeDurations); negative health check values fail when a load balancer
//     uses them, as there.
//
// A value of this CCM's own variables (those the official CCM does not have) that is malformed
// or out of range never stops the CCM: the default is used and a warning names the variable
// and the fix, because the official CCM ignores these variables. [Config.Warnings] returns the
// warnings.
//
// Read only parses: a value of the wrong type for a variable the official CCM has (a bool,
// duration, integer) is an error, a value outside the allowed set is left to
// [Config.Validate]. Every problem is reported, joined with [errors.Join]; on error the
// returned Config holds what could be parsed.
//
// HCLOUD_TOKEN falls back to the trimmed content of the file named by HCLOUD_TOKEN_FILE when
// it is unset; ROBOT_USER and ROBOT_PASSWORD likewise.
func Read(lookup func(string) (string, bool)) (Config, error) {
	r := reader{lookup: lookup}
	cfg := Default()

	cfg.HCloud.Token = r.secret(EnvHCloudToken, EnvHCloudTokenFile)
	r.string(EnvHCloudEndpoint, &cfg.HCloud.Endpoint)
	r.bool(EnvHCloudDebug, &cfg.HCloud.Debug)
	r.ownDuration(EnvHCloudPollInterval, &cfg.HCloud.PollInterval)
	r.ownDuration(EnvHCloudRetryInterval, &cfg.HCloud.RetryInterval)
	r.ownDuration(EnvHCloudHTTPTimeout, &cfg.HCloud.Timeout)

	r.string(EnvHCloudNetwork, &cfg.Network.NameOrID)
	r.bool(EnvHCloudNetworkDisableAttachedCheck, &cfg.Network.DisableAttachedCheck)
	r.ownURL(EnvHCloudMetadataEndpoint, &cfg.Network.MetadataEndpoint, "http://169.254.169.254/hetzner/v1/metadata")
	if cfg.Network.NameOrID != "" { // the official CCM does not read it without a network
		routes := true
		r.bool(EnvHCloudNetworkRoutesEnabled, &routes)
		cfg.Network.RoutesEnabled = routes
	}

	if family, _ := r.lookup(EnvHCloudInstancesAddressFamily); family != "" {
		cfg.Instances.AddressFamily = AddressFamily(family)
	}
	r.bool(EnvHCloudInstancesZoneLabelEnabled, &cfg.Instances.ZoneLabelEnabled)

	r.string(EnvHCloudServerCacheMode, &cfg.ServerCache.Mode)
	r.duration(EnvHCloudServerCacheMaxAge, &cfg.ServerCache.MaxAge)
	if cfg.ServerCache.MaxAge < 0 {
		r.warn("%s=%s is negative: taken as 0s, the shortest max age (the official CCM reads servers again on every lookup with it; "+
			"here %s still paces the full list in mode all); set 0s or more", EnvHCloudServerCacheMaxAge, cfg.ServerCache.MaxAge, EnvHCloudAPIBudgetPerHour)
		cfg.ServerCache.MaxAge = 0
	}
	r.ownBudget(&cfg.ServerCache.BudgetPerHour)

	r.bool(EnvHCloudMetricsEnabled, &cfg.Metrics.Enabled)
	r.string(EnvHCloudMetricsAddress, &cfg.Metrics.Address)

	lb := &cfg.LoadBalancer
	r.bool(EnvLoadBalancersEnabled, &lb.Enabled)
	r.string(EnvLoadBalancersLocation, &lb.Location)
	r.string(EnvLoadBalancersNetworkZone, &lb.NetworkZone)
	r.string(EnvLoadBalancersType, &lb.Type)
	r.string(EnvLoadBalancersAlgorithmType, &lb.AlgorithmType)
	if a := lb.AlgorithmType; a != "" && a != strings.ToLower(strings.TrimSpace(a)) && slices.Contains(algorithmTypes, strings.ToLower(strings.TrimSpace(a))) {
		r.warn("%s=%q is accepted as %q; write it in lower case (the official CCM accepts it too but sends it as written; the API's values are lower-case)",
			EnvLoadBalancersAlgorithmType, a, strings.ToLower(strings.TrimSpace(a)))
	}
	lb.DisablePublicNetwork = r.optionalBool(EnvLoadBalancersDisablePublicNetwork)
	r.bool(EnvLoadBalancersDisablePrivateIngress, &lb.DisablePrivateIngress)
	r.bool(EnvLoadBalancersUsePrivateIP, &lb.UsePrivateIP)
	r.bool(EnvLoadBalancersDisableIPv6, &lb.DisableIPv6)
	r.string(EnvLoadBalancersPrivateSubnetIPRange, &lb.PrivateSubnetIPRange)
	r.durationEmptyUnset(EnvLoadBalancersHealthCheckInterval, &lb.HealthCheckInterval)
	r.durationEmptyUnset(EnvLoadBalancersHealthCheckTimeout, &lb.HealthCheckTimeout)
	r.intEmptyUnset(EnvLoadBalancersHealthCheckRetries, &lb.HealthCheckRetries)
	for _, d := range []struct {
		name string
		neg  bool
		v    any
	}{
		{EnvLoadBalancersHealthCheckInterval, lb.HealthCheckInterval < 0, lb.HealthCheckInterval},
		{EnvLoadBalancersHealthCheckTimeout, lb.HealthCheckTimeout < 0, lb.HealthCheckTimeout},
		{EnvLoadBalancersHealthCheckRetries, lb.HealthCheckRetries < 0, lb.HealthCheckRetries},
	} {
		if d.neg {
			r.warn("%s=%v is negative: load balancers without the matching annotation will fail to reconcile, "+
				"as with the official CCM (the API refuses it); set a positive value or unset it", d.name, d.v)
		}
	}
	lb.UsesProxyProtocol = r.optionalBool(EnvLoadBalancersUsesProxyProtocol)
	if r.string(EnvLoadBalancersClass, &lb.Class) && lb.Class != "" {
		if err := ValidateLoadBalancerClass(lb.Class); err != nil {
			r.warn("%s=%q is ignored, no class is served: %v", EnvLoadBalancersClass, lb.Class, err)
			lb.Class = ""
		}
	}

	rb := &cfg.Robot
	r.bool(EnvRobotEnabled, &rb.Enabled)
	rb.User = r.secret(EnvRobotUser, EnvRobotUserFile)
	rb.Password = r.secret(EnvRobotPassword, EnvRobotPasswordFile)
	r.durationEmptyUnset(EnvRobotCacheTimeout, &rb.CacheTimeout)
	if rb.CacheTimeout == 0 {
		rb.CacheTimeout = DefaultRobotCache // the official CCM treats 0 as unset
	}
	if rb.CacheTimeout < 0 {
		r.warn("%s=%s is negative: the Robot server list is not cached and every Robot lookup reads it, as in the official CCM; "+
			"Robot allows few requests per hour, so set a positive duration such as 5m", EnvRobotCacheTimeout, rb.CacheTimeout)
	}
	r.durationEmptyUnset(EnvRobotRateLimitWaitTime, &rb.RateLimitWaitTime)
	if rb.RateLimitWaitTime < 0 {
		r.warn("%s=%s is negative: it disables the wait, as 0s does (and as in the official CCM); set 0s or more",
			EnvRobotRateLimitWaitTime, rb.RateLimitWaitTime)
	}
	forward := true
	r.bool(EnvRobotForwardInternalIPs, &forward)
	rb.ForwardInternalIPs = forward && rb.Enabled
	r.ownURL(EnvRobotEndpoint, &rb.Endpoint, "https://robot-ws.your-server.de")

	cfg.warnings = r.warnings
	return cfg, errors.Join(r.errs...)
}

// reader parses variables and collects every error and warning.
type reader struct {
	lookup   func(string) (string, bool)
	errs     []error
	warnings []string
}

func (r *reader) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
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

// durationEmptyUnset is duration, except that an empty value means unset (the official CCM
// reads these variables with os.Getenv).
func (r *reader) durationEmptyUnset(name string, dst *time.Duration) {
	if v, _ := r.lookup(name); v != "" {
		r.duration(name, dst)
	}
}

// intEmptyUnset parses an integer; an empty value means unset, as in the official CCM.
func (r *reader) intEmptyUnset(name string, dst *int) {
	v, _ := r.lookup(name)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.invalid(name, v, "an integer")
		return
	}
	*dst = n
}

// ownDuration reads a positive duration of a variable the official CCM does not have: a
// malformed or non-positive value keeps the default, with a warning. Empty means unset.
func (r *reader) ownDuration(name string, dst *time.Duration) {
	v, _ := r.lookup(name)
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.warn("ignoring %s=%q: expect a positive duration such as 500ms, 10s or 1m; using the default %s", name, v, *dst)
		return
	}
	*dst = d
}

// ownURL reads an http(s) URL of a variable the official CCM does not have: another value
// keeps the default (def, for the message), with a warning. Empty means unset.
func (r *reader) ownURL(name string, dst *string, def string) {
	v, _ := r.lookup(name)
	if v == "" {
		return
	}
	if !isHTTPURL(v) {
		r.warn("ignoring %s=%q: expect an http or https URL such as %s; using the default %s", name, v, def, def)
		return
	}
	*dst = v
}

// ownBudget reads HCLOUD_API_BUDGET_PER_HOUR: a malformed value keeps the default, one below
// MinAPIBudgetPerHour is raised to it, each with a warning. Empty means unset.
func (r *reader) ownBudget(dst *int) {
	v, _ := r.lookup(EnvHCloudAPIBudgetPerHour)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		r.warn("ignoring %s=%q: expect an integer of %d or more requests per hour; using the default %d", EnvHCloudAPIBudgetPerHour, v, MinAPIBudgetPerHour, *dst)
	case n < MinAPIBudgetPerHour:
		r.warn("%s=%d is below the minimum; using %d requests per hour", EnvHCloudAPIBudgetPerHour, n, MinAPIBudgetPerHour)
		*dst = MinAPIBudgetPerHour
	default:
		*dst = n
	}
}

// isHTTPURL reports whether s is an absolute http or https URL with a host.
func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
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
