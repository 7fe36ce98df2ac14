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
