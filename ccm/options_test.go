package ccm_test

import (
	"strings"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
)

func TestOptions_Validate(t *testing.T) {
	tests := []struct {
		name    string
		tweak   func(o *ccm.Options)
		wantErr []string
	}{
		{name: "the defaults are valid", tweak: func(*ccm.Options) {}},
		{
			name:  "a dry-run mode with a ConfigMap source is valid",
			tweak: func(o *ccm.Options) { o.PolicyMode = "dryrun"; o.PolicyConfigMap = "kube-system/policies" },
		},
		{
			name:    "an unknown policy mode names the flag and the accepted values",
			tweak:   func(o *ccm.Options) { o.PolicyMode = "audit" },
			wantErr: []string{`--policy-mode: "audit" (expect one of: enforce, dryrun)`},
		},
		{
			name:    "a ConfigMap without a namespace is rejected with an example",
			tweak:   func(o *ccm.Options) { o.PolicyConfigMap = "policies" },
			wantErr: []string{`--policy-configmap: "policies" (expect namespace/name`},
		},
		{
			name:    "a decision log level outside off, deny, all is rejected",
			tweak:   func(o *ccm.Options) { o.PolicyDecisionLog = "denied" },
			wantErr: []string{`--policy-decision-log: "denied" (expect one of: off, deny, all)`},
		},
		{
			name:    "an empty decision log file is rejected with the stdout hint",
			tweak:   func(o *ccm.Options) { o.PolicyDecisionLogFile = "" },
			wantErr: []string{"--policy-decision-log-file: empty (expect a file path, or - for stdout)"},
		},
		{
			name:    "a negative audit interval is rejected with the fix",
			tweak:   func(o *ccm.Options) { o.PolicyAuditInterval = -time.Minute },
			wantErr: []string{"invalid value for --policy-audit-interval: -1m0s (expect 0 or a positive duration such as 10m)"},
		},
		{name: "a plain class is valid", tweak: func(o *ccm.Options) { o.LoadBalancerClass = "hetzner" }},
		{name: "a prefixed class is valid", tweak: func(o *ccm.Options) { o.LoadBalancerClass = "example.com/hetzner" }},
		{
			name:    "a class with a space is rejected naming the flag",
			tweak:   func(o *ccm.Options) { o.LoadBalancerClass = "hetzner lb" },
			wantErr: []string{`invalid value for --load-balancer-class: "hetzner lb" (not a qualified name such as example.com/hetzner`},
		},
		{
			name:    "a class with two slashes is rejected",
			tweak:   func(o *ccm.Options) { o.LoadBalancerClass = "a.com/b/c" },
			wantErr: []string{`--load-balancer-class: "a.com/b/c"`},
		},
		{
			name:    "a class with an invalid prefix is rejected",
			tweak:   func(o *ccm.Options) { o.LoadBalancerClass = "Example_Com/hetzner" },
			wantErr: []string{`--load-balancer-class: "Example_Com/hetzner"`, "prefix part"},
		},
		{
			name:    "a class longer than 63 characters is rejected",
			tweak:   func(o *ccm.Options) { o.LoadBalancerClass = strings.Repeat("a", 64) },
			wantErr: []string{"--load-balancer-class", "63"},
		},
		{
			name: "every problem is reported at once",
			tweak: func(o *ccm.Options) {
				o.PolicyFailureMode = "maybe"
				o.PluginTimeout = 0
				o.NodeLabelResync = -time.Second
				o.LoadBalancerDriftInterval = -time.Second
			},
			wantErr: []string{"--policy-failure-mode", "--plugin-timeout", "--node-label-resync", "--load-balancer-drift-interval"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ccm.NewOptions()
			tc.tweak(o)
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestOptions_LoadBalancerClassFrom(t *testing.T) {
	tests := []struct {
		name      string
		flag      string
		only      bool
		env       string
		want      string
		wantErrIn string
	}{
		{name: "neither: no class", want: ""},
		{name: "the variable alone", env: "example.com/hetzner", want: "example.com/hetzner"},
		{name: "the flag alone", flag: "hetzner", want: "hetzner"},
		{name: "the flag wins over the variable", flag: "hetzner", env: "example.com/hetzner", want: "hetzner"},
		{name: "class-only with the variable's class", only: true, env: "hetzner", want: "hetzner"},
		{name: "class-only without a class is refused", only: true, wantErrIn: "--load-balancer-class-only is set without a class"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := ccm.NewOptions()
			o.LoadBalancerClass, o.LoadBalancerClassOnly = tc.flag, tc.only
			got, err := o.LoadBalancerClassFrom(tc.env)
			if tc.wantErrIn != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) {
					t.Fatalf("LoadBalancerClassFrom(%q) = %q, %v; want an error containing %q", tc.env, got, err, tc.wantErrIn)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("LoadBalancerClassFrom(%q) = %q, %v; want %q", tc.env, got, err, tc.want)
			}
		})
	}
}
