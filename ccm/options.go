package ccm

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/audit"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
)

// Options are the CCM's own command-line flags, next to the upstream cloud-provider flags.
// Everything Hetzner-specific is configured by environment variables (see ccm/config), as in
// the official CCM; these flags configure the policy gate and the plugins.
type Options struct {
	// PolicyDir is a directory of Rego policies and data files (for example a mounted ConfigMap).
	PolicyDir string
	// PolicyConfigMap is "namespace/name" of a ConfigMap holding policies, watched through the API.
	PolicyConfigMap string
	// PolicyMode is "enforce" (a deny blocks the mutation) or "dryrun" (a deny is only reported).
	PolicyMode string
	// PolicyFailureMode is "closed" (an evaluation error denies) or "open" (it allows).
	PolicyFailureMode string
	// PolicyDecisionLog is "off", "deny" (default: denials, dry-run denials and failed
	// evaluations) or "all": which decisions are written as OPA decision log lines.
	PolicyDecisionLog string
	// PolicyDecisionLogFile is where decision log lines go: "-" (default) is stdout.
	PolicyDecisionLogFile string
	// NodeLabelsPlugin is the path of a .wasm or .wasm.gz module implementing node_labels.
	NodeLabelsPlugin string
	// LoadBalancerNamePlugin is the path of a module implementing load_balancer_name.
	LoadBalancerNamePlugin string
	// PluginsOptional makes a plugin that fails to load a Warning instead of a startup error.
	PluginsOptional bool
	// PluginTimeout is the deadline of one plugin call.
	PluginTimeout time.Duration
	// NodeLabelResync is how often plugin labels are re-applied to every node (0 disables the
	// periodic pass; changes to nodes still trigger it).
	NodeLabelResync time.Duration
	// LoadBalancerDriftInterval is the shortest time between two checks of every load balancer
	// against the state the CCM left it in (loadbalancer.RepairDrift; 0 disables them).
	LoadBalancerDriftInterval time.Duration
	// LoadBalancerGroupSweepInterval is how often the load balancers of groups without members
	// are deleted (loadbalancer.SweepGroups; also once at start); 0 disables the sweep, at start
	// too.
	LoadBalancerGroupSweepInterval time.Duration
	// PolicyAuditInterval is how often the policy audit judges every load balancer and route
	// (ccm/audit; also after every policy revision put in force); 0 disables the audit.
	PolicyAuditInterval time.Duration
	// LoadBalancerClass is the spec.loadBalancerClass whose Services this CCM also serves, with
	// its own controller (ccm/lbclass); empty: HCLOUD_LOAD_BALANCERS_CLASS, else none.
	LoadBalancerClass string
	// LoadBalancerClassOnly leaves class-less Services to another implementation: the
	// upstream service controller does not run. It needs a class.
	LoadBalancerClassOnly bool
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		PolicyMode:            "enforce",
		PolicyFailureMode:     "closed",
		PolicyDecisionLog:     "deny",
		PolicyDecisionLogFile: "-",
		PluginTimeout:         500 * time.Millisecond,
		NodeLabelResync:       5 * time.Minute,

		LoadBalancerDriftInterval:      loadbalancer.DefaultDriftInterval,
		LoadBalancerGroupSweepInterval: loadbalancer.GroupSweepInterval,
		PolicyAuditInterval:            audit.DefaultInterval,
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PolicyDir, "policy-dir", o.PolicyDir, "Directory of Rego policies (*.rego) and data files (*.json, *.yaml), reloaded on change. Empty: no directory source.")
	fs.StringVar(&o.PolicyConfigMap, "policy-configmap", o.PolicyConfigMap, "ConfigMap \"namespace/name\" holding Rego policies and data files, watched through the API and reloaded within a second. Empty: no ConfigMap source.")
	fs.StringVar(&o.PolicyMode, "policy-mode", o.PolicyMode, "\"enforce\": a deny blocks the mutation; \"dryrun\": a deny, or an evaluation error the failure mode would block, is reported (event, metric, log) but the mutation runs: dry run never blocks.")
	fs.StringVar(&o.PolicyFailureMode, "policy-failure-mode", o.PolicyFailureMode, "What a policy evaluation error means: \"closed\" denies the mutation, \"open\" allows it. In --policy-mode=dryrun nothing is denied: \"closed\" reports the error as a dry-run denial.")
	fs.StringVar(&o.PolicyDecisionLog, "policy-decision-log", o.PolicyDecisionLog, "Which policy decisions are written as JSON lines in OPA's decision log format: \"off\", \"deny\" (denied, dry-run denied and failed ones) or \"all\".")
	fs.StringVar(&o.PolicyDecisionLogFile, "policy-decision-log-file", o.PolicyDecisionLogFile, "File the decision log lines are appended to; \"-\" is stdout.")
	fs.StringVar(&o.NodeLabelsPlugin, "plugin-node-labels", o.NodeLabelsPlugin, "Path of a wasm module (.wasm or .wasm.gz) implementing the node_labels hook.")
	fs.StringVar(&o.LoadBalancerNamePlugin, "plugin-load-balancer-name", o.LoadBalancerNamePlugin, "Path of a wasm module (.wasm or .wasm.gz) implementing the load_balancer_name hook.")
	fs.BoolVar(&o.PluginsOptional, "plugins-optional", o.PluginsOptional, "Start without a plugin that fails to load (logged as a warning) instead of exiting.")
	fs.DurationVar(&o.PluginTimeout, "plugin-timeout", o.PluginTimeout, "Deadline of one plugin call; a plugin that takes longer falls back to the built-in behaviour.")
	fs.DurationVar(&o.NodeLabelResync, "node-label-resync", o.NodeLabelResync, "How often the node label plugin is re-applied to every node; 0 disables the periodic pass.")
	fs.DurationVar(&o.LoadBalancerDriftInterval, "load-balancer-drift-interval", o.LoadBalancerDriftInterval, "Shortest time between two checks of every load balancer against the state the CCM left it in (one list request per 50 load balancers; longer when that would spend more than half of HCLOUD_API_BUDGET_PER_HOUR); a load balancer changed or deleted by hand is repaired within one period. 0 disables the checks.")
	fs.DurationVar(&o.PolicyAuditInterval, "policy-audit-interval", o.PolicyAuditInterval, "How often the policy audit judges every existing load balancer and route and reports what enforcing would refuse (PolicyReport, PolicyViolation events, metrics; never enforced); it also runs after every policy revision put in force. Reads the caches the CCM keeps. 0 disables the audit.")
	fs.StringVar(&o.LoadBalancerClass, "load-balancer-class", o.LoadBalancerClass, "Also serve Services of type LoadBalancer whose spec.loadBalancerClass is this name (a qualified name such as example.com/hetzner), with everything a class-less Service gets; Services of any other class are never touched. Empty: HCLOUD_LOAD_BALANCERS_CLASS, else no class is served.")
	fs.BoolVar(&o.LoadBalancerClassOnly, "load-balancer-class-only", o.LoadBalancerClassOnly, "Serve only Services of --load-balancer-class: the upstream service controller does not run, so class-less Services are left to another implementation (for example Cilium's). Needs a class.")
	fs.DurationVar(&o.LoadBalancerGroupSweepInterval, "load-balancer-group-sweep-interval", o.LoadBalancerGroupSweepInterval, "How often the load balancers of groups without members (the last member left while no CCM ran) are deleted, through the policy gate; the sweep also runs once at start (one list request per 50 group load balancers). 0 disables the sweep.")
}

// Validate reports every problem at once, naming the flag and the fix.
func (o *Options) Validate() error {
	var errs []error
	switch o.PolicyMode {
	case "enforce", "dryrun":
	default:
		errs = append(errs, fmt.Errorf("invalid value for --policy-mode: %q (expect one of: enforce, dryrun)", o.PolicyMode))
	}
	switch o.PolicyFailureMode {
	case "closed", "open":
	default:
		errs = append(errs, fmt.Errorf("invalid value for --policy-failure-mode: %q (expect one of: closed, open)", o.PolicyFailureMode))
	}
	switch o.PolicyDecisionLog {
	case "off", "deny", "all":
	default:
		errs = append(errs, fmt.Errorf("invalid value for --policy-decision-log: %q (expect one of: off, deny, all)", o.PolicyDecisionLog))
	}
	if o.PolicyDecisionLogFile == "" {
		errs = append(errs, errors.New("invalid value for --policy-decision-log-file: empty (expect a file path, or - for stdout)"))
	}
	if o.PolicyDir != "" && o.PolicyConfigMap != "" {
		errs = append(errs, errors.New("--policy-dir and --policy-configmap are both set: set only one policy source (a mounted ConfigMap works with --policy-dir)"))
	}
	if o.PolicyConfigMap != "" {
		if _, _, err := o.PolicyConfigMapRef(); err != nil {
			errs = append(errs, err)
		}
	}
	if o.PluginTimeout <= 0 {
		errs = append(errs, fmt.Errorf("invalid value for --plugin-timeout: %s (expect a positive duration such as 500ms)", o.PluginTimeout))
	}
	if o.NodeLabelResync < 0 {
		errs = append(errs, fmt.Errorf("invalid value for --node-label-resync: %s (expect 0 or a positive duration such as 5m)", o.NodeLabelResync))
	}
	if o.LoadBalancerGroupSweepInterval < 0 {
		errs = append(errs, fmt.Errorf("invalid value for --load-balancer-group-sweep-interval: %s (expect 0 or a positive duration such as 10m)", o.LoadBalancerGroupSweepInterval))
	}
	if o.PolicyAuditInterval < 0 {
		errs = append(errs, fmt.Errorf("invalid value for --policy-audit-interval: %s (expect 0 or a positive duration such as 10m)", o.PolicyAuditInterval))
	}
	if o.LoadBalancerDriftInterval < 0 {
		errs = append(errs, fmt.Errorf("invalid value for --load-balancer-drift-interval: %s (expect 0 or a positive duration such as 10m)", o.LoadBalancerDriftInterval))
	}
	if o.LoadBalancerClass != "" {
		if err := config.ValidateLoadBalancerClass(o.LoadBalancerClass); err != nil {
			errs = append(errs, fmt.Errorf("invalid value for --load-balancer-class: %q (%w)", o.LoadBalancerClass, err))
		}
	}
	return errors.Join(errs...)
}

// LoadBalancerClassFrom returns the class the CCM serves: --load-balancer-class, else
// envClass (HCLOUD_LOAD_BALANCERS_CLASS, already validated by config.Read); empty serves none.
//
// # Errors
//
// --load-balancer-class-only without a class from either source.
func (o *Options) LoadBalancerClassFrom(envClass string) (string, error) {
	class := o.LoadBalancerClass
	if class == "" {
		class = envClass
	}
	if o.LoadBalancerClassOnly && class == "" {
		return "", errors.New("--load-balancer-class-only is set without a class: set --load-balancer-class (or HCLOUD_LOAD_BALANCERS_CLASS), or drop --load-balancer-class-only")
	}
	return class, nil
}

// PolicyConfigMapRef splits PolicyConfigMap into namespace and name.
func (o *Options) PolicyConfigMapRef() (namespace, name string, err error) {
	ns, n, ok := strings.Cut(o.PolicyConfigMap, "/")
	if !ok || ns == "" || n == "" || strings.Contains(n, "/") {
		return "", "", fmt.Errorf("invalid value for --policy-configmap: %q (expect namespace/name, for example kube-system/hcloud-ccm-policies)", o.PolicyConfigMap)
	}
	return ns, n, nil
}
