package ccm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/instances"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// startPolicy builds the policy engine and loads its source, or returns policy.AllowAll when
// no source is configured. The watch runs until ctx ends.
//
// # Errors
//
// A first revision that does not compile is an error: the CCM does not start with a policy it
// cannot enforce. Later bad revisions are rejected and the last good one stays in force.
//
// onLoad, if not nil, is called with each revision put in force.
func startPolicy(ctx context.Context, d Deps, onLoad func(revision string)) (policy.Decider, error) {
	o := d.Options
	if o.PolicyDir == "" && o.PolicyConfigMap == "" {
		klog.InfoS("No policy source configured: every mutation is allowed (set --policy-dir or --policy-configmap to enable the gate)")
		return policy.AllowAll{}, nil
	}
	declog, err := openDecisionLog(o)
	if err != nil {
		return nil, err
	}
	engine := policy.NewEngine(policy.Options{
		Mode:        policy.Mode(o.PolicyMode),
		FailureMode: policy.FailureMode(o.PolicyFailureMode),
		Recorder:    d.Recorder,
		OnLoad:      onLoad,
		DecisionLog: declog,
	})
	if o.PolicyDir != "" {
		if err := policy.WatchDir(ctx, engine, o.PolicyDir); err != nil {
			return nil, fmt.Errorf("loading policies from --policy-dir %s: %w", o.PolicyDir, err)
		}
	} else {
		ns, name, err := o.PolicyConfigMapRef()
		if err != nil {
			return nil, err
		}
		if d.Kube == nil {
			return nil, errors.New("--policy-configmap needs a Kubernetes client (run with --kubeconfig or in a cluster)")
		}
		if err := policy.WatchConfigMap(ctx, engine, d.Kube, ns, name); err != nil {
			return nil, fmt.Errorf("loading policies from --policy-configmap %s/%s: %w", ns, name, err)
		}
	}
	klog.InfoS("Policy gate enabled", "mode", o.PolicyMode, "failureMode", o.PolicyFailureMode, "revision", engine.Revision())
	return engine, nil
}

// loadPlugins loads the configured plugin modules. A module that fails to load is an error,
// or a warning with --plugins-optional; a module without the hook it is configured for is an
// error either way.
func (c *Cloud) loadPlugins(ctx context.Context, o *Options) (instances.NodeLabeler, loadbalancer.Namer, error) {
	var labeler instances.NodeLabeler
	var namer loadbalancer.Namer
	p, err := c.loadPlugin(ctx, "--plugin-node-labels", o.NodeLabelsPlugin, plugins.HookNodeLabels, o)
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		labeler = p
	}
	p, err = c.loadPlugin(ctx, "--plugin-load-balancer-name", o.LoadBalancerNamePlugin, plugins.HookLoadBalancerName, o)
	if err != nil {
		return nil, nil, err
	}
	if p != nil {
		namer = p
	}
	return labeler, namer, nil
}

// loadPlugin loads one module and watches its file for changes (a new revision replaces the
// old one only when it loads completely); it returns nil when path is empty or an optional
// module failed to load.
func (c *Cloud) loadPlugin(ctx context.Context, flag, path, hook string, o *Options) (*plugins.Watched, error) {
	if path == "" {
		return nil, nil
	}
	notify := func(err error) {
		if err != nil {
			klog.ErrorS(err, "Plugin reload refused; the previous revision stays in force", "flag", flag, "path", path)
			return
		}
		klog.InfoS("Plugin reloaded", "flag", flag, "path", path)
		c.pluginReloaded(hook)
	}
	p, err := plugins.Watch(ctx, path, plugins.Options{CallTimeout: o.PluginTimeout}, 0, notify)
	if err != nil {
		if o.PluginsOptional {
			klog.ErrorS(err, "Plugin not loaded; using the built-in behaviour (--plugins-optional)", "flag", flag, "path", path)
			return nil, nil
		}
		return nil, fmt.Errorf("loading %s %s: %w (fix the module or pass --plugins-optional to start without it)", flag, path, err)
	}
	if !slices.Contains(p.Hooks(), hook) {
		_ = p.Close(ctx) // the hook error is the one to report
		return nil, fmt.Errorf("invalid value for %s: %s does not implement the %s hook (it exports: %v)", flag, path, hook, p.Hooks())
	}
	c.plugins = append(c.plugins, p)
	klog.InfoS("Plugin loaded", "flag", flag, "path", path, "hooks", p.Hooks(), "revision", p.Revision())
	return p, nil
}

// pluginReloaded reacts to a new plugin revision. Node labels are re-applied by the node label
// controller; load balancer names follow on the next sync of each Service.
func (c *Cloud) pluginReloaded(hook string) {
	if hook != plugins.HookNodeLabels {
		return
	}
	if nl := c.nodeLabels.Load(); nl != nil {
		nl.Trigger()
	}
}

// serveMetrics serves the metrics registry on addr (HCLOUD_METRICS_ADDRESS), as the official
// CCM does on :8233, and returns the address it listens on, or nil.
//
// As in the official CCM, an address it cannot listen on (in use, malformed) is logged and the
// CCM runs on without the extra server; the same metrics stay on the secure port. An empty
// address is logged and not served: the official CCM would listen on :80 (net/http's default
// for an empty address), which under hostNetwork takes the node's HTTP port; that difference
// is deliberate and listed in docs/reference/differences.md. TestServeMetrics enforces both.
func serveMetrics(addr string) net.Addr {
	if addr == "" {
		klog.ErrorS(nil, "Metrics server not started: "+config.EnvHCloudMetricsAddress+" is empty (the official CCM would listen on :80). "+
			"Set it to a listen address such as :8233, or set "+config.EnvHCloudMetricsEnabled+"=false; the secure port's /metrics serves the same metrics")
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		klog.ErrorS(err, "Metrics server not started: cannot listen on "+config.EnvHCloudMetricsAddress+"; running on without it "+
			"(pick a free address, or set "+config.EnvHCloudMetricsEnabled+"=false; the secure port's /metrics serves the same metrics)", "address", addr)
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	srv := &http.Server{Handler: mux, ReadTimeout: 5 * time.Second, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 20 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Metrics server stopped", "address", addr)
		}
	}()
	klog.InfoS("Serving metrics", "address", ln.Addr().String(), "path", "/metrics")
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		klog.InfoS("The metrics server has no authentication and listens beyond loopback: anyone who reaches it reads every metric. Set HCLOUD_METRICS_ENABLED=false and scrape the secure port's /metrics, or bind HCLOUD_METRICS_ADDRESS to 127.0.0.1",
			"address", ln.Addr().String())
	}
	return ln.Addr()
}

// openDecisionLog returns the decision log of --policy-decision-log and
// --policy-decision-log-file (nil when off). The file is opened for appending and stays open
// for the life of the process.
func openDecisionLog(o *Options) (*policy.DecisionLog, error) {
	if o.PolicyDecisionLog == policy.DecisionLogOff || o.PolicyDecisionLog == "" {
		return nil, nil
	}
	w := io.Writer(os.Stdout)
	if f := o.PolicyDecisionLogFile; f != "" && f != "-" {
		file, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening --policy-decision-log-file: %w", err)
		}
		w = file
	}
	l, err := policy.NewDecisionLog(o.PolicyDecisionLog, w, map[string]string{
		"app": "hcloud-policy-ccm", "version": Version,
		"policy_mode": o.PolicyMode, "failure_mode": o.PolicyFailureMode,
	})
	if err != nil {
		return nil, fmt.Errorf("--policy-decision-log: %w", err)
	}
	return l, nil
}
