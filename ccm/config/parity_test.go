package config_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// refused is the outcome of a start that fails on the configuration.
const refused = "refused"

// ignored is the official CCM's outcome for a variable it does not have.
const ignored = "ignored (no such variable)"

// tok64 is a token of the length Hetzner Cloud tokens have.
var tok64 = strings.Repeat("t", 64)

// parityRow is one input of the start-up table: what the official CCM's internal/config
// (Read, then Validate, at commit 6485324f) and this CCM's Read and Validate make of it.
type parityRow struct {
	// variable is the variable of envs.go the row is about.
	variable string
	// env is the input. A 64-character HCLOUD_TOKEN is added unless the row is about the
	// token itself.
	env map[string]string
	// official is the official CCM's outcome: the value it goes on with, or refused.
	official string
	// ours is this CCM's outcome, in the same terms (see parityValue).
	ours string
	// warns: this CCM logs a warning that names the variable.
	warns bool
	// deliberate is the reason ours differs from official; empty means they are equal.
	deliberate string
}

// Reasons of the deliberate differences; docs/reference/differences.md ("Start-up and
// environment") lists them.
const (
	whyOwnVariable = "this CCM only: the official CCM ignores it, so a bad value is replaced by the default with a warning, never refused"
	whyNegativeAge = "the official CCM reads again on every lookup with a negative age; this CCM's cache takes the shortest age it has, 0s " +
		"(in mode all HCLOUD_API_BUDGET_PER_HOUR still paces the list)"
	whyMetricsAddr = "an empty address makes the official CCM listen on :80 (net/http's default), which under hostNetwork takes the node's HTTP port; " +
		"this CCM logs an error and serves the metrics on the secure port only"
)

// parityValue renders the setting a variable controls, as the outcome of a row.
var parityValue = map[string]func(config.Config) string{
	config.EnvHCloudToken:                       func(c config.Config) string { return c.HCloud.Token },
	config.EnvHCloudTokenFile:                   func(c config.Config) string { return c.HCloud.Token },
	config.EnvHCloudEndpoint:                    func(c config.Config) string { return strconv.Quote(c.HCloud.Endpoint) },
	config.EnvHCloudDebug:                       func(c config.Config) string { return strconv.FormatBool(c.HCloud.Debug) },
	config.EnvHCloudPollInterval:                func(c config.Config) string { return c.HCloud.PollInterval.String() },
	config.EnvHCloudRetryInterval:               func(c config.Config) string { return c.HCloud.RetryInterval.String() },
	config.EnvHCloudHTTPTimeout:                 func(c config.Config) string { return c.HCloud.Timeout.String() },
	config.EnvHCloudNetwork:                     func(c config.Config) string { return strconv.Quote(c.Network.NameOrID) },
	config.EnvHCloudNetworkDisableAttachedCheck: func(c config.Config) string { return strconv.FormatBool(c.Network.DisableAttachedCheck) },
	config.EnvHCloudMetadataEndpoint:            func(c config.Config) string { return strconv.Quote(c.Network.MetadataEndpoint) },
	config.EnvHCloudNetworkRoutesEnabled:        func(c config.Config) string { return strconv.FormatBool(c.Network.RoutesEnabled) },
	config.EnvHCloudInstancesAddressFamily:      func(c config.Config) string { return string(c.Instances.AddressFamily) },
	config.EnvHCloudInstancesZoneLabelEnabled:   func(c config.Config) string { return strconv.FormatBool(c.Instances.ZoneLabelEnabled) },
	config.EnvHCloudServerCacheMode:             func(c config.Config) string { return c.ServerCache.Mode },
	config.EnvHCloudServerCacheMaxAge:           func(c config.Config) string { return c.ServerCache.MaxAge.String() },
	config.EnvHCloudAPIBudgetPerHour:            func(c config.Config) string { return strconv.Itoa(c.ServerCache.BudgetPerHour) },
	config.EnvHCloudMetricsEnabled:              func(c config.Config) string { return strconv.FormatBool(c.Metrics.Enabled) },
	config.EnvHCloudMetricsAddress:              func(c config.Config) string { return strconv.Quote(c.Metrics.Address) },
	config.EnvLoadBalancersEnabled:              func(c config.Config) string { return strconv.FormatBool(c.LoadBalancer.Enabled) },
	config.EnvLoadBalancersLocation:             func(c config.Config) string { return strconv.Quote(c.LoadBalancer.Location) },
	config.EnvLoadBalancersNetworkZone:          func(c config.Config) string { return strconv.Quote(c.LoadBalancer.NetworkZone) },
	config.EnvLoadBalancersType:                 func(c config.Config) string { return strconv.Quote(c.LoadBalancer.Type) },
	config.EnvLoadBalancersAlgorithmType:        func(c config.Config) string { return strconv.Quote(c.LoadBalancer.AlgorithmType) },
	config.EnvLoadBalancersDisablePublicNetwork: func(c config.Config) string { return optionalBool(c.LoadBalancer.DisablePublicNetwork) },
	config.EnvLoadBalancersDisablePrivateIngress: func(c config.Config) string {
		return strconv.FormatBool(c.LoadBalancer.DisablePrivateIngress)
	},
	config.EnvLoadBalancersUsePrivateIP:         func(c config.Config) string { return strconv.FormatBool(c.LoadBalancer.UsePrivateIP) },
	config.EnvLoadBalancersDisableIPv6:          func(c config.Config) string { return strconv.FormatBool(c.LoadBalancer.DisableIPv6) },
	config.EnvLoadBalancersPrivateSubnetIPRange: func(c config.Config) string { return strconv.Quote(c.LoadBalancer.PrivateSubnetIPRange) },
	config.EnvLoadBalancersHealthCheckInterval:  func(c config.Config) string { return c.LoadBalancer.HealthCheckInterval.String() },
	config.EnvLoadBalancersHealthCheckTimeout:   func(c config.Config) string { return c.LoadBalancer.HealthCheckTimeout.String() },
	config.EnvLoadBalancersHealthCheckRetries:   func(c config.Config) string { return strconv.Itoa(c.LoadBalancer.HealthCheckRetries) },
	config.EnvLoadBalancersUsesProxyProtocol:    func(c config.Config) string { return optionalBool(c.LoadBalancer.UsesProxyProtocol) },
	config.EnvLoadBalancersClass:                func(c config.Config) string { return strconv.Quote(c.LoadBalancer.Class) },
	config.EnvRobotEnabled:                      func(c config.Config) string { return strconv.FormatBool(c.Robot.Enabled) },
	config.EnvRobotUser:                         func(c config.Config) string { return strconv.Quote(c.Robot.User) },
	config.EnvRobotUserFile:                     func(c config.Config) string { return strconv.Quote(c.Robot.User) },
	config.EnvRobotPassword:                     func(c config.Config) string { return strconv.Quote(c.Robot.Password) },
	config.EnvRobotPasswordFile:                 func(c config.Config) string { return strconv.Quote(c.Robot.Password) },
	config.EnvRobotCacheTimeout:                 func(c config.Config) string { return c.Robot.CacheTimeout.String() },
	config.EnvRobotRateLimitWaitTime:            func(c config.Config) string { return c.Robot.RateLimitWaitTime.String() },
	config.EnvRobotForwardInternalIPs:           func(c config.Config) string { return strconv.FormatBool(c.Robot.ForwardInternalIPs) },
	config.EnvRobotEndpoint:                     func(c config.Config) string { return strconv.Quote(c.Robot.Endpoint) },
}

func optionalBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}

// parityRows is the start-up table. The official outcomes are read from the official CCM's
// internal/config/config.go: booleans go through strconv.ParseBool when the variable is set
// (so empty is an error); HEALTH_CHECK_INTERVAL/_TIMEOUT, ROBOT_CACHE_TIMEOUT and
// ROBOT_RATE_LIMIT_WAIT_TIME through os.Getenv (empty is unset); HCLOUD_SERVER_CACHE_MAX_AGE
// through os.LookupEnv (empty is an error); HEALTH_CHECK_RETRIES is parsed only when not empty;
// an empty address family is ipv4; HCLOUD_NETWORK_ROUTES_ENABLED is read only with a network;
// the algorithm is validated lower-cased and trimmed but kept as written.
func parityRows(t *testing.T) []parityRow {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := file("token", "  "+tok64+"\n")
	userFile, passwordFile := file("user", " file-user\n"), file("password", "file-password\n")
	missing := filepath.Join(dir, "missing")
	robot := func(kv ...string) map[string]string {
		m := map[string]string{config.EnvRobotEnabled: "true", config.EnvRobotUser: "u", config.EnvRobotPassword: "p"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	one := func(k, v string) map[string]string { return map[string]string{k: v} }
	network := func(k, v string) map[string]string { return map[string]string{config.EnvHCloudNetwork: "k8s", k: v} }

	return []parityRow{
		{variable: config.EnvHCloudToken, env: nil, official: refused, ours: refused},
		{variable: config.EnvHCloudToken, env: one(config.EnvHCloudToken, ""), official: refused, ours: refused},
		{variable: config.EnvHCloudToken, env: one(config.EnvHCloudToken, "short"), official: "short", ours: "short", warns: true},
		{variable: config.EnvHCloudToken, env: one(config.EnvHCloudToken, tok64), official: tok64, ours: tok64},

		{variable: config.EnvHCloudTokenFile, env: one(config.EnvHCloudTokenFile, tokenFile), official: tok64, ours: tok64},
		{variable: config.EnvHCloudTokenFile, env: one(config.EnvHCloudTokenFile, missing), official: refused, ours: refused},
		{variable: config.EnvHCloudTokenFile, env: one(config.EnvHCloudTokenFile, ""), official: refused, ours: refused},
		{variable: config.EnvHCloudTokenFile, env: map[string]string{config.EnvHCloudToken: tok64, config.EnvHCloudTokenFile: missing}, official: tok64, ours: tok64},

		{variable: config.EnvHCloudEndpoint, env: one(config.EnvHCloudEndpoint, ""), official: `""`, ours: `""`},
		{variable: config.EnvHCloudEndpoint, env: one(config.EnvHCloudEndpoint, "http://127.0.0.1:4000/v1"), official: `"http://127.0.0.1:4000/v1"`, ours: `"http://127.0.0.1:4000/v1"`},
		// The official CCM accepts any string here, then fails its start-up GET /locations.
		{variable: config.EnvHCloudEndpoint, env: one(config.EnvHCloudEndpoint, "api.hetzner.cloud/v1"), official: refused, ours: refused},

		{variable: config.EnvHCloudDebug, env: nil, official: "false", ours: "false"},
		{variable: config.EnvHCloudDebug, env: one(config.EnvHCloudDebug, ""), official: refused, ours: refused},
		{variable: config.EnvHCloudDebug, env: one(config.EnvHCloudDebug, "TRUE"), official: "true", ours: "true"},
		{variable: config.EnvHCloudDebug, env: one(config.EnvHCloudDebug, "yes"), official: refused, ours: refused},

		{variable: config.EnvHCloudPollInterval, env: nil, official: ignored, ours: "250ms", deliberate: whyOwnVariable},
		{variable: config.EnvHCloudPollInterval, env: one(config.EnvHCloudPollInterval, ""), official: ignored, ours: "250ms", deliberate: whyOwnVariable},
		{variable: config.EnvHCloudPollInterval, env: one(config.EnvHCloudPollInterval, "1s"), official: ignored, ours: "1s", deliberate: whyOwnVariable},
		{variable: config.EnvHCloudPollInterval, env: one(config.EnvHCloudPollInterval, "fast"), official: ignored, ours: "250ms", warns: true, deliberate: whyOwnVariable},
		{variable: config.EnvHCloudPollInterval, env: one(config.EnvHCloudPollInterval, "-1s"), official: ignored, ours: "250ms", warns: true, deliberate: whyOwnVariable},
		{variable: config.EnvHCloudRetryInterval, env: one(config.EnvHCloudRetryInterval, "2s"), official: ignored, ours: "2s", deliberate: whyOwnVariable},
		{variable: config.EnvHCloudRetryInterval, env: one(config.EnvHCloudRetryInterval, "often"), official: ignored, ours: "1s", warns: true, deliberate: whyOwnVariable},
		{variable: config.EnvHCloudHTTPTimeout, env: one(config.EnvHCloudHTTPTimeout, "30s"), official: ignored, ours: "30s", deliberate: whyOwnVariable},
		{variable: config.EnvLoadBalancersClass, env: nil, official: ignored, ours: `""`, deliberate: whyOwnVariable},
		{variable: config.EnvLoadBalancersClass, env: one(config.EnvLoadBalancersClass, "example.com/hetzner"), official: ignored, ours: `"example.com/hetzner"`, deliberate: whyOwnVariable},
		{variable: config.EnvLoadBalancersClass, env: one(config.EnvLoadBalancersClass, "Hetzner LB"), official: ignored, ours: `""`, warns: true, deliberate: whyOwnVariable},
		{variable: config.EnvHCloudHTTPTimeout, env: one(config.EnvHCloudHTTPTimeout, "0s"), official: ignored, ours: "15s", warns: true, deliberate: whyOwnVariable},

		{variable: config.EnvHCloudNetwork, env: one(config.EnvHCloudNetwork, ""), official: `""`, ours: `""`},
		{variable: config.EnvHCloudNetwork, env: one(config.EnvHCloudNetwork, "k8s"), official: `"k8s"`, ours: `"k8s"`},

		{variable: config.EnvHCloudNetworkDisableAttachedCheck, env: one(config.EnvHCloudNetworkDisableAttachedCheck, "true"), official: "true", ours: "true"},
		{variable: config.EnvHCloudNetworkDisableAttachedCheck, env: one(config.EnvHCloudNetworkDisableAttachedCheck, ""), official: refused, ours: refused},

		{variable: config.EnvHCloudMetadataEndpoint, env: one(config.EnvHCloudMetadataEndpoint, "http://127.0.0.1:4000/hetzner/v1/metadata"), official: ignored, ours: `"http://127.0.0.1:4000/hetzner/v1/metadata"`, deliberate: whyOwnVariable},
		{variable: config.EnvHCloudMetadataEndpoint, env: one(config.EnvHCloudMetadataEndpoint, "metadata"), official: ignored, ours: `""`, warns: true, deliberate: whyOwnVariable},

		{variable: config.EnvHCloudNetworkRoutesEnabled, env: one(config.EnvHCloudNetworkRoutesEnabled, "junk"), official: "false", ours: "false"},
		{variable: config.EnvHCloudNetworkRoutesEnabled, env: one(config.EnvHCloudNetworkRoutesEnabled, "true"), official: "false", ours: "false"},
		{variable: config.EnvHCloudNetworkRoutesEnabled, env: network(config.EnvHCloudNetworkRoutesEnabled, ""), official: refused, ours: refused},
		{variable: config.EnvHCloudNetworkRoutesEnabled, env: network(config.EnvHCloudNetworkRoutesEnabled, "junk"), official: refused, ours: refused},
		{variable: config.EnvHCloudNetworkRoutesEnabled, env: network(config.EnvHCloudNetworkRoutesEnabled, "false"), official: "false", ours: "false"},
		{variable: config.EnvHCloudNetworkRoutesEnabled, env: one(config.EnvHCloudNetwork, "k8s"), official: "true", ours: "true"},

		{variable: config.EnvHCloudInstancesAddressFamily, env: nil, official: "ipv4", ours: "ipv4"},
		{variable: config.EnvHCloudInstancesAddressFamily, env: one(config.EnvHCloudInstancesAddressFamily, ""), official: "ipv4", ours: "ipv4"},
		{variable: config.EnvHCloudInstancesAddressFamily, env: one(config.EnvHCloudInstancesAddressFamily, "dualstack"), official: "dualstack", ours: "dualstack"},
		{variable: config.EnvHCloudInstancesAddressFamily, env: one(config.EnvHCloudInstancesAddressFamily, "IPv6"), official: refused, ours: refused},

		{variable: config.EnvHCloudInstancesZoneLabelEnabled, env: one(config.EnvHCloudInstancesZoneLabelEnabled, "false"), official: "false", ours: "false"},
		{variable: config.EnvHCloudInstancesZoneLabelEnabled, env: one(config.EnvHCloudInstancesZoneLabelEnabled, ""), official: refused, ours: refused},

		{variable: config.EnvHCloudServerCacheMode, env: one(config.EnvHCloudServerCacheMode, ""), official: refused, ours: refused},
		{variable: config.EnvHCloudServerCacheMode, env: one(config.EnvHCloudServerCacheMode, "ALL"), official: refused, ours: refused},
		{variable: config.EnvHCloudServerCacheMode, env: one(config.EnvHCloudServerCacheMode, "one"), official: "one", ours: "one", warns: true},

		{variable: config.EnvHCloudServerCacheMaxAge, env: one(config.EnvHCloudServerCacheMaxAge, ""), official: refused, ours: refused},
		{variable: config.EnvHCloudServerCacheMaxAge, env: one(config.EnvHCloudServerCacheMaxAge, "1m"), official: "1m0s", ours: "1m0s"},
		{variable: config.EnvHCloudServerCacheMaxAge, env: one(config.EnvHCloudServerCacheMaxAge, "-1s"), official: "-1s", ours: "0s", warns: true, deliberate: whyNegativeAge},

		{variable: config.EnvHCloudAPIBudgetPerHour, env: nil, official: ignored, ours: "60", deliberate: whyOwnVariable},
		{variable: config.EnvHCloudAPIBudgetPerHour, env: one(config.EnvHCloudAPIBudgetPerHour, "3600"), official: ignored, ours: "3600", deliberate: whyOwnVariable},
		{variable: config.EnvHCloudAPIBudgetPerHour, env: one(config.EnvHCloudAPIBudgetPerHour, "60/h"), official: ignored, ours: "60", warns: true, deliberate: whyOwnVariable},
		{variable: config.EnvHCloudAPIBudgetPerHour, env: one(config.EnvHCloudAPIBudgetPerHour, "5"), official: ignored, ours: "10", warns: true, deliberate: whyOwnVariable},

		{variable: config.EnvHCloudMetricsEnabled, env: one(config.EnvHCloudMetricsEnabled, "false"), official: "false", ours: "false"},
		{variable: config.EnvHCloudMetricsEnabled, env: one(config.EnvHCloudMetricsEnabled, ""), official: refused, ours: refused},

		{variable: config.EnvHCloudMetricsAddress, env: nil, official: `":8233"`, ours: `":8233"`},
		{variable: config.EnvHCloudMetricsAddress, env: one(config.EnvHCloudMetricsAddress, ""), official: `"" (listens on :80)`, ours: `""`, deliberate: whyMetricsAddr},
		// A port in use or a malformed address is logged by both when listening fails; the
		// start goes on (TestServeMetrics in ccm).
		{variable: config.EnvHCloudMetricsAddress, env: one(config.EnvHCloudMetricsAddress, "junk"), official: `"junk"`, ours: `"junk"`},

		{variable: config.EnvLoadBalancersEnabled, env: one(config.EnvLoadBalancersEnabled, "false"), official: "false", ours: "false"},
		{variable: config.EnvLoadBalancersEnabled, env: one(config.EnvLoadBalancersEnabled, ""), official: refused, ours: refused},

		{variable: config.EnvLoadBalancersLocation, env: one(config.EnvLoadBalancersLocation, ""), official: `""`, ours: `""`},
		{variable: config.EnvLoadBalancersLocation, env: one(config.EnvLoadBalancersLocation, "fsn1"), official: `"fsn1"`, ours: `"fsn1"`},
		{variable: config.EnvLoadBalancersLocation, env: map[string]string{config.EnvLoadBalancersLocation: "fsn1", config.EnvLoadBalancersNetworkZone: "eu-central"}, official: refused, ours: refused},
		{variable: config.EnvLoadBalancersNetworkZone, env: one(config.EnvLoadBalancersNetworkZone, "eu-central"), official: `"eu-central"`, ours: `"eu-central"`},
		{variable: config.EnvLoadBalancersNetworkZone, env: one(config.EnvLoadBalancersNetworkZone, ""), official: `""`, ours: `""`},

		{variable: config.EnvLoadBalancersType, env: one(config.EnvLoadBalancersType, ""), official: `""`, ours: `""`},
		{variable: config.EnvLoadBalancersType, env: one(config.EnvLoadBalancersType, "lb21"), official: `"lb21"`, ours: `"lb21"`},

		{variable: config.EnvLoadBalancersAlgorithmType, env: one(config.EnvLoadBalancersAlgorithmType, ""), official: `""`, ours: `""`},
		{variable: config.EnvLoadBalancersAlgorithmType, env: one(config.EnvLoadBalancersAlgorithmType, "least_connections"), official: `"least_connections"`, ours: `"least_connections"`},
		{variable: config.EnvLoadBalancersAlgorithmType, env: one(config.EnvLoadBalancersAlgorithmType, "ROUND_ROBIN"), official: `"ROUND_ROBIN"`, ours: `"ROUND_ROBIN"`, warns: true},
		{variable: config.EnvLoadBalancersAlgorithmType, env: one(config.EnvLoadBalancersAlgorithmType, "random"), official: refused, ours: refused},

		{variable: config.EnvLoadBalancersDisablePublicNetwork, env: nil, official: "unset", ours: "unset"},
		{variable: config.EnvLoadBalancersDisablePublicNetwork, env: one(config.EnvLoadBalancersDisablePublicNetwork, ""), official: refused, ours: refused},
		{variable: config.EnvLoadBalancersDisablePublicNetwork, env: one(config.EnvLoadBalancersDisablePublicNetwork, "true"), official: "true", ours: "true"},
		{variable: config.EnvLoadBalancersDisablePrivateIngress, env: one(config.EnvLoadBalancersDisablePrivateIngress, "true"), official: "true", ours: "true"},
		{variable: config.EnvLoadBalancersDisablePrivateIngress, env: one(config.EnvLoadBalancersDisablePrivateIngress, ""), official: refused, ours: refused},
		{variable: config.EnvLoadBalancersUsePrivateIP, env: one(config.EnvLoadBalancersUsePrivateIP, "true"), official: "true", ours: "true"},
		{variable: config.EnvLoadBalancersUsePrivateIP, env: one(config.EnvLoadBalancersUsePrivateIP, "junk"), official: refused, ours: refused},
		{variable: config.EnvLoadBalancersDisableIPv6, env: one(config.EnvLoadBalancersDisableIPv6, "1"), official: "true", ours: "true"},
		{variable: config.EnvLoadBalancersDisableIPv6, env: one(config.EnvLoadBalancersDisableIPv6, ""), official: refused, ours: refused},

		{variable: config.EnvLoadBalancersPrivateSubnetIPRange, env: one(config.EnvLoadBalancersPrivateSubnetIPRange, ""), official: `""`, ours: `""`},
		{variable: config.EnvLoadBalancersPrivateSubnetIPRange, env: one(config.EnvLoadBalancersPrivateSubnetIPRange, "10.0.1.0/24"), official: `"10.0.1.0/24"`, ours: `"10.0.1.0/24"`},
		{variable: config.EnvLoadBalancersPrivateSubnetIPRange, env: one(config.EnvLoadBalancersPrivateSubnetIPRange, "10.0.1.0"), official: refused, ours: refused},

		{variable: config.EnvLoadBalancersHealthCheckInterval, env: one(config.EnvLoadBalancersHealthCheckInterval, ""), official: "0s", ours: "0s"},
		{variable: config.EnvLoadBalancersHealthCheckInterval, env: one(config.EnvLoadBalancersHealthCheckInterval, "5s"), official: "5s", ours: "5s"},
		{variable: config.EnvLoadBalancersHealthCheckInterval, env: one(config.EnvLoadBalancersHealthCheckInterval, "-5s"), official: "-5s", ours: "-5s", warns: true},
		{variable: config.EnvLoadBalancersHealthCheckInterval, env: one(config.EnvLoadBalancersHealthCheckInterval, "5"), official: refused, ours: refused},
		{variable: config.EnvLoadBalancersHealthCheckTimeout, env: one(config.EnvLoadBalancersHealthCheckTimeout, ""), official: "0s", ours: "0s"},
		{variable: config.EnvLoadBalancersHealthCheckTimeout, env: one(config.EnvLoadBalancersHealthCheckTimeout, "-1s"), official: "-1s", ours: "-1s", warns: true},
		{variable: config.EnvLoadBalancersHealthCheckTimeout, env: one(config.EnvLoadBalancersHealthCheckTimeout, "long"), official: refused, ours: refused},
		{variable: config.EnvLoadBalancersHealthCheckRetries, env: one(config.EnvLoadBalancersHealthCheckRetries, ""), official: "0", ours: "0"},
		{variable: config.EnvLoadBalancersHealthCheckRetries, env: one(config.EnvLoadBalancersHealthCheckRetries, "5"), official: "5", ours: "5"},
		{variable: config.EnvLoadBalancersHealthCheckRetries, env: one(config.EnvLoadBalancersHealthCheckRetries, "-1"), official: "-1", ours: "-1", warns: true},
		{variable: config.EnvLoadBalancersHealthCheckRetries, env: one(config.EnvLoadBalancersHealthCheckRetries, "x"), official: refused, ours: refused},

		{variable: config.EnvLoadBalancersUsesProxyProtocol, env: one(config.EnvLoadBalancersUsesProxyProtocol, "false"), official: "false", ours: "false"},
		{variable: config.EnvLoadBalancersUsesProxyProtocol, env: one(config.EnvLoadBalancersUsesProxyProtocol, ""), official: refused, ours: refused},

		{variable: config.EnvRobotEnabled, env: one(config.EnvRobotEnabled, "true"), official: "true", ours: "true", warns: true},
		{variable: config.EnvRobotEnabled, env: one(config.EnvRobotEnabled, ""), official: refused, ours: refused},
		{variable: config.EnvRobotEnabled, env: map[string]string{config.EnvRobotEnabled: "true", config.EnvHCloudNetwork: "k8s"}, official: refused, ours: refused},
		{variable: config.EnvRobotEnabled, env: map[string]string{config.EnvRobotEnabled: "true", config.EnvHCloudNetwork: "k8s", config.EnvHCloudNetworkRoutesEnabled: "false"}, official: "true", ours: "true", warns: true},

		{variable: config.EnvRobotUser, env: robot(), official: `"u"`, ours: `"u"`},
		{variable: config.EnvRobotUser, env: robot(config.EnvRobotPassword, ""), official: refused, ours: refused},
		{variable: config.EnvRobotUser, env: one(config.EnvRobotUser, "u"), official: `"u"`, ours: `"u"`},
		{variable: config.EnvRobotUserFile, env: map[string]string{config.EnvRobotEnabled: "true", config.EnvRobotUserFile: userFile, config.EnvRobotPassword: "p"}, official: `"file-user"`, ours: `"file-user"`},
		{variable: config.EnvRobotUserFile, env: one(config.EnvRobotUserFile, missing), official: refused, ours: refused},
		{variable: config.EnvRobotPassword, env: robot(), official: `"p"`, ours: `"p"`},
		{variable: config.EnvRobotPassword, env: robot(config.EnvRobotUser, ""), official: refused, ours: refused},
		{variable: config.EnvRobotPasswordFile, env: map[string]string{config.EnvRobotEnabled: "true", config.EnvRobotUser: "u", config.EnvRobotPasswordFile: passwordFile}, official: `"file-password"`, ours: `"file-password"`},
		{variable: config.EnvRobotPasswordFile, env: one(config.EnvRobotPasswordFile, missing), official: refused, ours: refused},

		{variable: config.EnvRobotCacheTimeout, env: one(config.EnvRobotCacheTimeout, ""), official: "5m0s", ours: "5m0s"},
		{variable: config.EnvRobotCacheTimeout, env: one(config.EnvRobotCacheTimeout, "0s"), official: "5m0s", ours: "5m0s"},
		{variable: config.EnvRobotCacheTimeout, env: one(config.EnvRobotCacheTimeout, "10m"), official: "10m0s", ours: "10m0s"},
		{variable: config.EnvRobotCacheTimeout, env: robot(config.EnvRobotCacheTimeout, "-1s"), official: "-1s", ours: "-1s", warns: true},
		{variable: config.EnvRobotCacheTimeout, env: one(config.EnvRobotCacheTimeout, "5"), official: refused, ours: refused},
		{variable: config.EnvRobotRateLimitWaitTime, env: one(config.EnvRobotRateLimitWaitTime, ""), official: "0s", ours: "0s"},
		{variable: config.EnvRobotRateLimitWaitTime, env: one(config.EnvRobotRateLimitWaitTime, "1h"), official: "1h0m0s", ours: "1h0m0s"},
		{variable: config.EnvRobotRateLimitWaitTime, env: robot(config.EnvRobotRateLimitWaitTime, "-1s"), official: "-1s", ours: "-1s", warns: true},
		{variable: config.EnvRobotRateLimitWaitTime, env: one(config.EnvRobotRateLimitWaitTime, "soon"), official: refused, ours: refused},

		{variable: config.EnvRobotForwardInternalIPs, env: robot(), official: "true", ours: "true"},
		{variable: config.EnvRobotForwardInternalIPs, env: one(config.EnvRobotForwardInternalIPs, "true"), official: "false", ours: "false"},
		{variable: config.EnvRobotForwardInternalIPs, env: robot(config.EnvRobotForwardInternalIPs, "false"), official: "false", ours: "false"},
		{variable: config.EnvRobotForwardInternalIPs, env: one(config.EnvRobotForwardInternalIPs, ""), official: refused, ours: refused},

		{variable: config.EnvRobotEndpoint, env: nil, official: ignored, ours: `""`, deliberate: whyOwnVariable},
		{variable: config.EnvRobotEndpoint, env: one(config.EnvRobotEndpoint, "http://127.0.0.1:4000/robot"), official: ignored, ours: `"http://127.0.0.1:4000/robot"`, deliberate: whyOwnVariable},
		{variable: config.EnvRobotEndpoint, env: robot(config.EnvRobotEndpoint, "robot"), official: ignored, ours: `""`, warns: true, deliberate: whyOwnVariable},
	}
}

// TestRead_officialParity is the start-up table: for each input, this CCM's outcome (Read,
// then Validate) is the one in the row, and equals the official CCM's unless the row gives
// the reason it differs. Even then, a value the official CCM starts with never stops this
// CCM. Every variable of envs.go has at least one row.
func TestRead_officialParity(t *testing.T) {
	rows := parityRows(t)
	covered := map[string]bool{}
	for _, row := range rows {
		covered[row.variable] = true
	}
	for _, name := range envNames(t) {
		if !covered[name] {
			t.Errorf("%s has no row in the start-up table: add one with the official CCM's outcome", name)
		}
	}
	for _, row := range rows {
		t.Run(fmt.Sprintf("%s=%v", row.variable, row.env), func(t *testing.T) {
			value, ok := parityValue[row.variable]
			if !ok {
				t.Fatalf("no parityValue for %s", row.variable)
			}
			vars := map[string]string{}
			if row.variable != config.EnvHCloudToken && row.variable != config.EnvHCloudTokenFile {
				vars[config.EnvHCloudToken] = tok64
			}
			for k, v := range row.env {
				vars[k] = v
			}
			cfg, err := config.Read(env(vars))
			if err == nil {
				err = cfg.Validate()
			}
			got := refused
			if err == nil {
				got = value(cfg)
			}
			if got != row.ours {
				t.Errorf("ours = %q (error: %v), the table says %q", got, err, row.ours)
			}
			switch {
			case row.deliberate == "" && row.ours != row.official:
				t.Errorf("ours %q differs from the official CCM's %q and the row gives no reason", row.ours, row.official)
			case row.deliberate != "" && row.ours == row.official:
				t.Errorf("the row gives a reason for a difference, but ours equals the official CCM's %q", row.official)
			case row.official != refused && row.ours == refused:
				t.Errorf("the official CCM starts with %q, this CCM must not refuse it (warn and go on)", row.official)
			}
			if err != nil {
				return
			}
			var named []string
			for _, w := range cfg.Warnings() {
				if strings.Contains(w, row.variable) {
					named = append(named, w)
				}
			}
			if row.warns != (len(named) > 0) {
				t.Errorf("warnings naming %s = %q, want a warning: %v", row.variable, named, row.warns)
			}
		})
	}
}

// envNames returns the values of the Env* constants of envs.go.
func envNames(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "envs.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !strings.HasPrefix(id.Name, "Env") || !ok {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, v)
			}
		}
	}
	if len(names) < 40 {
		t.Fatalf("found %d variables in envs.go, want every Env constant", len(names))
	}
	return names
}
