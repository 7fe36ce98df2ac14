package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// env returns a lookup function over m.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func ptr[T any](v T) *T { return &v }

// valid is a Config that passes Validate: the defaults plus a token.
func valid(tweaks ...func(*config.Config)) config.Config {
	c := config.Default()
	c.HCloud.Token = strings.Repeat("t", 64)
	for _, tweak := range tweaks {
		tweak(&c)
	}
	return c
}

func TestRead(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingFile := filepath.Join(t.TempDir(), "missing")
	robotUserFile := filepath.Join(t.TempDir(), "robot-user")
	robotPasswordFile := filepath.Join(t.TempDir(), "robot-password")
	for f, v := range map[string]string{robotUserFile: " file-user\n", robotPasswordFile: "file-password\n"} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name    string
		env     map[string]string
		want    func(*config.Config)
		wantErr []string
		// wantWarn are substrings of Warnings(), one each.
		wantWarn []string
	}{
		{
			name: "no variables give the official defaults",
			env:  map[string]string{},
			want: func(c *config.Config) {},
		},
		{
			name: "HCLOUD_TOKEN is read as is",
			env:  map[string]string{"HCLOUD_TOKEN": "abc"},
			want: func(c *config.Config) { c.HCloud.Token = "abc" },
		},
		{
			name: "HCLOUD_TOKEN_FILE is read and trimmed when HCLOUD_TOKEN is unset",
			env:  map[string]string{"HCLOUD_TOKEN_FILE": tokenFile},
			want: func(c *config.Config) { c.HCloud.Token = "file-token" },
		},
		{
			name: "HCLOUD_TOKEN wins over HCLOUD_TOKEN_FILE",
			env:  map[string]string{"HCLOUD_TOKEN": "plain", "HCLOUD_TOKEN_FILE": missingFile},
			want: func(c *config.Config) { c.HCloud.Token = "plain" },
		},
		{
			name:    "an unreadable HCLOUD_TOKEN_FILE is an error naming the variable",
			env:     map[string]string{"HCLOUD_TOKEN_FILE": missingFile},
			want:    func(c *config.Config) {},
			wantErr: []string{`reading the file named by "HCLOUD_TOKEN_FILE": open ` + missingFile + `: no such file or directory (mount the file or set HCLOUD_TOKEN instead)`},
		},
		{
			name: "HCLOUD_ENDPOINT is read",
			env:  map[string]string{"HCLOUD_ENDPOINT": "http://127.0.0.1:4000/v1"},
			want: func(c *config.Config) { c.HCloud.Endpoint = "http://127.0.0.1:4000/v1" },
		},
		{
			name: "HCLOUD_DEBUG is a bool",
			env:  map[string]string{"HCLOUD_DEBUG": "true"},
			want: func(c *config.Config) { c.HCloud.Debug = true },
		},
		{
			name:    "HCLOUD_DEBUG that is no bool is an error",
			env:     map[string]string{"HCLOUD_DEBUG": "yes"},
			want:    func(c *config.Config) {},
			wantErr: []string{`invalid value for "HCLOUD_DEBUG": "yes" (expect a boolean: true or false)`},
		},
		{
			name: "HCLOUD_POLL_INTERVAL, HCLOUD_RETRY_INTERVAL and HCLOUD_HTTP_TIMEOUT are durations",
			env:  map[string]string{"HCLOUD_POLL_INTERVAL": "50ms", "HCLOUD_RETRY_INTERVAL": "2s", "HCLOUD_HTTP_TIMEOUT": "1m"},
			want: func(c *config.Config) {
				c.HCloud.PollInterval = 50 * time.Millisecond
				c.HCloud.RetryInterval = 2 * time.Second
				c.HCloud.Timeout = time.Minute
			},
		},
		{
			name: "every malformed duration is reported at once",
			env: map[string]string{
				"HCLOUD_SERVER_CACHE_MAX_AGE": "old", "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL": "often",
				"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT": "long",
			},
			want: func(c *config.Config) {},
			wantErr: []string{
				`invalid value for "HCLOUD_SERVER_CACHE_MAX_AGE": "old" (expect a duration such as 500ms, 10s or 1m)`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL": "often"`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT": "long"`,
			},
		},
		{
			name: "HCLOUD_NETWORK enables routes by default",
			env:  map[string]string{"HCLOUD_NETWORK": "k8s"},
			want: func(c *config.Config) { c.Network.NameOrID = "k8s"; c.Network.RoutesEnabled = true },
		},
		{
			name: "HCLOUD_NETWORK_ROUTES_ENABLED=false disables routes",
			env:  map[string]string{"HCLOUD_NETWORK": "1", "HCLOUD_NETWORK_ROUTES_ENABLED": "false"},
			want: func(c *config.Config) { c.Network.NameOrID = "1" },
		},
		{
			name: "HCLOUD_NETWORK_ROUTES_ENABLED has no effect without HCLOUD_NETWORK",
			env:  map[string]string{"HCLOUD_NETWORK_ROUTES_ENABLED": "true"},
			want: func(c *config.Config) {},
		},
		{
			name: "malformed or non-positive durations of this CCM's own variables keep the default, with a warning",
			env:  map[string]string{"HCLOUD_POLL_INTERVAL": "fast", "HCLOUD_RETRY_INTERVAL": "1", "HCLOUD_HTTP_TIMEOUT": "-1s"},
			want: func(c *config.Config) {},
			wantWarn: []string{
				`ignoring HCLOUD_POLL_INTERVAL="fast": expect a positive duration such as 500ms, 10s or 1m; using the default 250ms`,
				`ignoring HCLOUD_RETRY_INTERVAL="1"`, `ignoring HCLOUD_HTTP_TIMEOUT="-1s"`,
			},
		},
		{
			name:    "HCLOUD_NETWORK_ROUTES_ENABLED that is no bool is an error with a network",
			env:     map[string]string{"HCLOUD_NETWORK": "k8s", "HCLOUD_NETWORK_ROUTES_ENABLED": "on"},
			want:    func(c *config.Config) { c.Network.NameOrID = "k8s"; c.Network.RoutesEnabled = true },
			wantErr: []string{`invalid value for "HCLOUD_NETWORK_ROUTES_ENABLED": "on"`},
		},
		{
			name: "HCLOUD_NETWORK_ROUTES_ENABLED is not read without a network, as in the official CCM",
			env:  map[string]string{"HCLOUD_NETWORK_ROUTES_ENABLED": "on"},
			want: func(c *config.Config) {},
		},
		{
			name: "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK is a bool",
			env:  map[string]string{"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK": "1"},
			want: func(c *config.Config) { c.Network.DisableAttachedCheck = true },
		},
		{
			name:    "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK that is no bool is an error",
			env:     map[string]string{"HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK": "maybe"},
			want:    func(c *config.Config) {},
			wantErr: []string{`invalid value for "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK": "maybe"`},
		},
		{
			name: "HCLOUD_INSTANCES_ADDRESS_FAMILY is read as is (Validate checks it)",
			env:  map[string]string{"HCLOUD_INSTANCES_ADDRESS_FAMILY": "ipv5"},
			want: func(c *config.Config) { c.Instances.AddressFamily = "ipv5" },
		},
		{
			name: "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED=false turns the zone off",
			env:  map[string]string{"HCLOUD_INSTANCES_ZONE_LABEL_ENABLED": "false"},
			want: func(c *config.Config) { c.Instances.ZoneLabelEnabled = false },
		},
		{
			name:    "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED that is no bool is an error",
			env:     map[string]string{"HCLOUD_INSTANCES_ZONE_LABEL_ENABLED": "no way"},
			want:    func(c *config.Config) {},
			wantErr: []string{`invalid value for "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED": "no way"`},
		},
		{
			name: "HCLOUD_SERVER_CACHE_MODE and HCLOUD_SERVER_CACHE_MAX_AGE are read",
			env:  map[string]string{"HCLOUD_SERVER_CACHE_MODE": "one", "HCLOUD_SERVER_CACHE_MAX_AGE": "1m"},
			want: func(c *config.Config) { c.ServerCache.Mode = "one"; c.ServerCache.MaxAge = time.Minute },
		},
		{
			name: "HCLOUD_API_BUDGET_PER_HOUR is read",
			env:  map[string]string{"HCLOUD_API_BUDGET_PER_HOUR": "120"},
			want: func(c *config.Config) { c.ServerCache.BudgetPerHour = 120 },
		},
		{
			name:     "HCLOUD_API_BUDGET_PER_HOUR that is no integer keeps the default, with a warning",
			env:      map[string]string{"HCLOUD_API_BUDGET_PER_HOUR": "60/h"},
			want:     func(c *config.Config) {},
			wantWarn: []string{`ignoring HCLOUD_API_BUDGET_PER_HOUR="60/h": expect an integer of 10 or more requests per hour; using the default 60`},
		},
		{
			name:     "HCLOUD_API_BUDGET_PER_HOUR below the minimum is raised to it, with a warning",
			env:      map[string]string{"HCLOUD_API_BUDGET_PER_HOUR": "3"},
			want:     func(c *config.Config) { c.ServerCache.BudgetPerHour = config.MinAPIBudgetPerHour },
			wantWarn: []string{`HCLOUD_API_BUDGET_PER_HOUR=3 is below the minimum; using 10 requests per hour`},
		},
		{
			name: "HCLOUD_METRICS_ENABLED and HCLOUD_METRICS_ADDRESS are read",
			env:  map[string]string{"HCLOUD_METRICS_ENABLED": "false", "HCLOUD_METRICS_ADDRESS": "127.0.0.1:9000"},
			want: func(c *config.Config) { c.Metrics.Enabled = false; c.Metrics.Address = "127.0.0.1:9000" },
		},
		{
			name:    "HCLOUD_METRICS_ENABLED that is no bool is an error",
			env:     map[string]string{"HCLOUD_METRICS_ENABLED": "enabled"},
			want:    func(c *config.Config) {},
			wantErr: []string{`invalid value for "HCLOUD_METRICS_ENABLED": "enabled"`},
		},
		{
			name: "every HCLOUD_LOAD_BALANCERS_ variable is read",
			env: map[string]string{
				"HCLOUD_LOAD_BALANCERS_ENABLED":                 "false",
				"HCLOUD_LOAD_BALANCERS_LOCATION":                "fsn1",
				"HCLOUD_LOAD_BALANCERS_NETWORK_ZONE":            "eu-central",
				"HCLOUD_LOAD_BALANCERS_TYPE":                    "lb21",
				"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE":          "least_connections",
				"HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK":  "false",
				"HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS": "true",
				"HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP":          "true",
				"HCLOUD_LOAD_BALANCERS_DISABLE_IPV6":            "true",
				"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE": "10.0.0.0/24",
				"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL":   "5s",
				"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT":    "3s",
				"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES":    "7",
				"HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL":      "true",
			},
			want: func(c *config.Config) {
				c.LoadBalancer = config.LoadBalancer{
					Enabled:               false,
					Location:              "fsn1",
					NetworkZone:           "eu-central",
					Type:                  "lb21",
					AlgorithmType:         "least_connections",
					DisablePublicNetwork:  ptr(false),
					DisablePrivateIngress: true,
					UsePrivateIP:          true,
					DisableIPv6:           true,
					PrivateSubnetIPRange:  "10.0.0.0/24",
					HealthCheckInterval:   5 * time.Second,
					HealthCheckTimeout:    3 * time.Second,
					HealthCheckRetries:    7,
					UsesProxyProtocol:     ptr(true),
				}
			},
		},
		{
			name: "every malformed HCLOUD_LOAD_BALANCERS_ bool and int is reported at once",
			env: map[string]string{
				"HCLOUD_LOAD_BALANCERS_ENABLED":                 "y",
				"HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK":  "y",
				"HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS": "y",
				"HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP":          "y",
				"HCLOUD_LOAD_BALANCERS_DISABLE_IPV6":            "y",
				"HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES":    "three",
				"HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL":      "y",
			},
			want: func(c *config.Config) {},
			wantErr: []string{
				`invalid value for "HCLOUD_LOAD_BALANCERS_ENABLED": "y"`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK": "y"`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS": "y"`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP": "y"`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6": "y"`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES": "three" (expect an integer)`,
				`invalid value for "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL": "y"`,
			},
		},
		{
			name: "ROBOT_ENABLED alone enables Robot with the official defaults",
			env:  map[string]string{"ROBOT_ENABLED": "true"},
			want: func(c *config.Config) { c.Robot.Enabled = true; c.Robot.ForwardInternalIPs = true },
		},
		{
			name: "every Robot variable is read",
			env: map[string]string{
				"ROBOT_ENABLED": "true", "ROBOT_USER": "u", "ROBOT_PASSWORD": "p",
				"ROBOT_CACHE_TIMEOUT": "1m", "ROBOT_RATE_LIMIT_WAIT_TIME": "30s",
				"ROBOT_FORWARD_INTERNAL_IPS": "false", "ROBOT_ENDPOINT": "http://127.0.0.1:1/robot",
			},
			want: func(c *config.Config) {
				c.Robot = config.Robot{Enabled: true, User: "u", Password: "p", CacheTimeout: time.Minute,
					RateLimitWaitTime: 30 * time.Second, Endpoint: "http://127.0.0.1:1/robot"}
			},
		},
		{
			name: "ROBOT_USER_FILE and ROBOT_PASSWORD_FILE are read and trimmed",
			env:  map[string]string{"ROBOT_ENABLED": "1", "ROBOT_USER_FILE": robotUserFile, "ROBOT_PASSWORD_FILE": robotPasswordFile},
			want: func(c *config.Config) {
				c.Robot.Enabled, c.Robot.ForwardInternalIPs = true, true
				c.Robot.User, c.Robot.Password = "file-user", "file-password"
			},
		},
		{
			name: "ROBOT_USER wins over ROBOT_USER_FILE",
			env:  map[string]string{"ROBOT_USER": "env-user", "ROBOT_USER_FILE": robotUserFile},
			want: func(c *config.Config) { c.Robot.User = "env-user" },
		},
		{
			name:    "an unreadable ROBOT_PASSWORD_FILE is an error naming both variables",
			env:     map[string]string{"ROBOT_PASSWORD_FILE": missingFile},
			want:    func(c *config.Config) {},
			wantErr: []string{`reading the file named by "ROBOT_PASSWORD_FILE"`},
		},
		{
			name: "ROBOT_CACHE_TIMEOUT=0 keeps the default, as in the official CCM",
			env:  map[string]string{"ROBOT_CACHE_TIMEOUT": "0s"},
			want: func(c *config.Config) {},
		},
		{
			name: "ROBOT_FORWARD_INTERNAL_IPS is off while Robot is off",
			env:  map[string]string{"ROBOT_FORWARD_INTERNAL_IPS": "true"},
			want: func(c *config.Config) {},
		},
		{
			name:    "Robot durations that are no durations are errors",
			env:     map[string]string{"ROBOT_CACHE_TIMEOUT": "5", "ROBOT_RATE_LIMIT_WAIT_TIME": "soon"},
			want:    func(c *config.Config) {},
			wantErr: []string{`"ROBOT_CACHE_TIMEOUT": "5"`, `"ROBOT_RATE_LIMIT_WAIT_TIME": "soon"`},
		},
		{
			name:    "ROBOT_ENABLED that is no bool is an error",
			env:     map[string]string{"ROBOT_ENABLED": "robots"},
			want:    func(c *config.Config) {},
			wantErr: []string{`invalid value for "ROBOT_ENABLED": "robots"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := config.Read(env(tc.env))
			checkErrors(t, err, tc.wantErr)
			want := config.Default()
			tc.want(&want)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(config.Config{})); diff != "" {
				t.Errorf("Read() mismatch (-want +got):\n%s", diff)
			}
			warnings := strings.Join(got.Warnings(), "\n")
			for _, w := range tc.wantWarn {
				if !strings.Contains(warnings, w) {
					t.Errorf("Warnings() = %q, want one containing %q", got.Warnings(), w)
				}
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     config.Config
		wantErr []string
	}{
		{
			name: "the defaults with a token are valid",
			cfg:  valid(),
		},
		{
			name: "every allowed enum value is valid",
			cfg: valid(func(c *config.Config) {
				c.Instances.AddressFamily = config.AddressFamilyDualStack
				c.ServerCache.Mode = "off"
				c.LoadBalancer.AlgorithmType = "least_connections"
				c.LoadBalancer.PrivateSubnetIPRange = "10.0.1.0/24"
				c.HCloud.Endpoint = "http://127.0.0.1:4000/v1"
			}),
		},
		{
			name:    "a missing token is an error naming both variables",
			cfg:     valid(func(c *config.Config) { c.HCloud.Token = "" }),
			wantErr: []string{`"HCLOUD_TOKEN" is required: set it, or HCLOUD_TOKEN_FILE, to an API token`},
		},
		{
			name:    "an endpoint that is no http URL is an error",
			cfg:     valid(func(c *config.Config) { c.HCloud.Endpoint = "api.hetzner.cloud" }),
			wantErr: []string{`invalid value for "HCLOUD_ENDPOINT": "api.hetzner.cloud" (expect an http or https URL`},
		},
		{
			name: "zero poll and retry intervals and timeout are errors",
			cfg: valid(func(c *config.Config) {
				c.HCloud.PollInterval = 0
				c.HCloud.RetryInterval = -time.Second
				c.HCloud.Timeout = 0
			}),
			wantErr: []string{
				`invalid value for "HCLOUD_POLL_INTERVAL": "0s" (expect a positive duration such as 1s)`,
				`invalid value for "HCLOUD_RETRY_INTERVAL": "-1s"`,
				`invalid value for "HCLOUD_HTTP_TIMEOUT": "0s"`,
			},
		},
		{
			name:    "an unknown address family is an error listing the allowed values",
			cfg:     valid(func(c *config.Config) { c.Instances.AddressFamily = "ipv5" }),
			wantErr: []string{`invalid value for "HCLOUD_INSTANCES_ADDRESS_FAMILY": "ipv5" (expect one of: ipv4, ipv6, dualstack)`},
		},
		{
			name:    "an unknown cache mode is an error listing the allowed values",
			cfg:     valid(func(c *config.Config) { c.ServerCache.Mode = "some" }),
			wantErr: []string{`invalid value for "HCLOUD_SERVER_CACHE_MODE": "some" (expect one of: all, one, off)`},
		},
		{
			name:    "a negative cache max age is an error",
			cfg:     valid(func(c *config.Config) { c.ServerCache.MaxAge = -time.Second }),
			wantErr: []string{`invalid value for "HCLOUD_SERVER_CACHE_MAX_AGE": "-1s" (expect a duration of 0s or more)`},
		},
		{
			name:    "an API budget under 10 is an error",
			cfg:     valid(func(c *config.Config) { c.ServerCache.BudgetPerHour = 9 }),
			wantErr: []string{`invalid value for "HCLOUD_API_BUDGET_PER_HOUR": "9" (expect an integer of 10 or more requests per hour, such as the default 60)`},
		},
		{
			name: "an API budget of 10 is valid",
			cfg:  valid(func(c *config.Config) { c.ServerCache.BudgetPerHour = 10 }),
		},
		{
			name: "an empty metrics address with metrics enabled is valid: the server is not started, as the official CCM starts anyway",
			cfg:  valid(func(c *config.Config) { c.Metrics.Address = "" }),
		},
		{
			name: "an empty metrics address with metrics disabled is valid",
			cfg:  valid(func(c *config.Config) { c.Metrics.Address = ""; c.Metrics.Enabled = false }),
		},
		{
			name: "location and network zone together are an error",
			cfg: valid(func(c *config.Config) {
				c.LoadBalancer.Location = "fsn1"
				c.LoadBalancer.NetworkZone = "eu-central"
			}),
			wantErr: []string{`"HCLOUD_LOAD_BALANCERS_LOCATION" and "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE" exclude each other: set only one of them`},
		},
		{
			name:    "an unknown algorithm is an error listing the allowed values",
			cfg:     valid(func(c *config.Config) { c.LoadBalancer.AlgorithmType = "random" }),
			wantErr: []string{`invalid value for "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE": "random" (expect one of: round_robin, least_connections)`},
		},
		{
			name:    "a private subnet that is no CIDR is an error",
			cfg:     valid(func(c *config.Config) { c.LoadBalancer.PrivateSubnetIPRange = "10.0.0.0" }),
			wantErr: []string{`invalid value for "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE": "10.0.0.0" (expect a CIDR such as 10.0.0.0/24)`},
		},
		{
			name: "negative health check values are valid, as in the official CCM (the API refuses them later)",
			cfg: valid(func(c *config.Config) {
				c.LoadBalancer.HealthCheckInterval = -time.Second
				c.LoadBalancer.HealthCheckTimeout = -time.Second
				c.LoadBalancer.HealthCheckRetries = -1
			}),
		},
		{
			name: "an algorithm in upper case is valid, as in the official CCM",
			cfg:  valid(func(c *config.Config) { c.LoadBalancer.AlgorithmType = " Least_Connections " }),
		},
		{
			name: "Robot with both credentials is valid",
			cfg: valid(func(c *config.Config) {
				c.Robot = config.Robot{Enabled: true, User: "u", Password: "p", CacheTimeout: time.Minute}
			}),
		},
		{
			name: "Robot without credentials is valid (load balancer targets only), as in the official CCM",
			cfg:  valid(func(c *config.Config) { c.Robot.Enabled = true }),
		},
		{
			name:    "Robot with a user but no password names ROBOT_PASSWORD",
			cfg:     valid(func(c *config.Config) { c.Robot = config.Robot{Enabled: true, User: "u"} }),
			wantErr: []string{`"ROBOT_PASSWORD" is required when "ROBOT_USER" is set`},
		},
		{
			name:    "Robot with a password but no user names ROBOT_USER",
			cfg:     valid(func(c *config.Config) { c.Robot = config.Robot{Enabled: true, Password: "secret-pw"} }),
			wantErr: []string{`"ROBOT_USER" is required when "ROBOT_PASSWORD" is set`},
		},
		{
			name: "Robot with routes is an error, as in the official CCM",
			cfg: valid(func(c *config.Config) {
				c.Robot = config.Robot{Enabled: true, User: "u", Password: "p"}
				c.Network = config.Network{NameOrID: "k8s", RoutesEnabled: true}
			}),
			wantErr: []string{"using routes with Robot is not supported: set HCLOUD_NETWORK_ROUTES_ENABLED=false or unset ROBOT_ENABLED"},
		},
		{
			name: "negative Robot durations are valid, as in the official CCM; a bad endpoint is an error",
			cfg: valid(func(c *config.Config) {
				c.Robot = config.Robot{Enabled: true, CacheTimeout: -time.Second, RateLimitWaitTime: -time.Second, Endpoint: "robot"}
			}),
			wantErr: []string{`invalid value for "ROBOT_ENDPOINT": "robot"`},
		},
		{
			name: "Robot settings are not checked while Robot is off",
			cfg:  valid(func(c *config.Config) { c.Robot = config.Robot{User: "u", Endpoint: "robot"} }),
		},
		{
			name: "every broken rule is reported at once",
			cfg: valid(func(c *config.Config) {
				c.HCloud.Token = ""
				c.Instances.AddressFamily = "ipv5"
				c.ServerCache.Mode = "some"
				c.Robot = config.Robot{Enabled: true, User: "u"}
			}),
			wantErr: []string{`"HCLOUD_TOKEN" is required`, `"HCLOUD_INSTANCES_ADDRESS_FAMILY"`, `"HCLOUD_SERVER_CACHE_MODE"`, `"ROBOT_PASSWORD"`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrors(t, tc.cfg.Validate(), tc.wantErr)
		})
	}
}

func TestConfig_Warnings(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Config
		want []string
	}{
		{name: "the defaults with a 64 character token give no warning", cfg: valid()},
		{
			name: "a short token and cache mode one give a warning each",
			cfg:  valid(func(c *config.Config) { c.HCloud.Token = "short"; c.ServerCache.Mode = "one" }),
			want: []string{
				"HCLOUD_TOKEN is 5 characters long; Hetzner Cloud API tokens have 64",
				"HCLOUD_SERVER_CACHE_MODE=one reads servers one by one; mode all costs one paginated list per refresh",
			},
		},
		{
			name: "Robot without credentials gives a warning",
			cfg:  valid(func(c *config.Config) { c.Robot.Enabled = true }),
			want: []string{"ROBOT_ENABLED=true without ROBOT_USER and ROBOT_PASSWORD: Robot nodes are served as load balancer IP targets through their InternalIP only; node metadata needs the credentials"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.cfg.Warnings()); diff != "" {
				t.Errorf("Warnings() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefault_matchesOfficialCCM pins the defaults that make this CCM a drop-in replacement.
func TestDefault_matchesOfficialCCM(t *testing.T) {
	c := config.Default()
	got := []any{c.Instances.AddressFamily, c.Instances.ZoneLabelEnabled, c.ServerCache.Mode, c.ServerCache.MaxAge,
		c.Metrics.Enabled, c.Metrics.Address, c.LoadBalancer.Enabled, c.HCloud.Timeout, c.Robot.Enabled, c.Robot.CacheTimeout, c.Robot.RateLimitWaitTime}
	want := []any{config.AddressFamilyIPv4, true, "all", 10 * time.Second, true, ":8233", true, 15 * time.Second, false, 5 * time.Minute, time.Duration(0)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Default() mismatch (-want +got):\n%s", diff)
	}
}

// checkErrors fails unless err contains every string of want, or err is nil and want is empty.
func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("error = nil, want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("error has %d lines, want %d:\n%s", n, len(want), err)
	}
}

// TestRobot_String proves the Robot settings can be logged without their credentials.
func TestRobot_String(t *testing.T) {
	r := config.Robot{Enabled: true, User: "robot-user-name", Password: "robot-secret", CacheTimeout: time.Minute}
	for _, s := range []string{r.String(), fmt.Sprintf("%v", r), fmt.Sprintf("%+v", config.Config{Robot: r})} {
		if strings.Contains(s, "robot-secret") || strings.Contains(s, "robot-user-name") {
			t.Errorf("formatted Robot config contains a credential: %s", s)
		}
		if !strings.Contains(s, "Credentials:true") {
			t.Errorf("formatted Robot config %q does not say credentials are set", s)
		}
	}
}
