// Command hcloud-policy-ccm is a Kubernetes cloud-controller-manager for Hetzner Cloud in which
// every cloud mutation passes a Rego policy gate and wasm plugins compute node labels and load
// balancer names. It runs the upstream controllers of k8s.io/cloud-provider with the provider in
// package ccm, and is configured like the official hcloud-cloud-controller-manager (same env
// vars, same annotations).
//
// Subcommands (offline tools, each with its own --help):
//
//	hcloud-policy-ccm policy test [-v] DIR...                   # run Rego tests as the CCM does
//	hcloud-policy-ccm policy eval --policies DIR --input FILE   # print a decision
//	hcloud-policy-ccm policy capabilities                       # the sandbox, for opa --capabilities
//	hcloud-policy-ccm plugin run --module FILE --hook HOOK --input FILE
//	hcloud-policy-ccm version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	controllermanagerapp "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbclass"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// defaultGCPercent is the garbage collector's target heap growth when GOGC is not set: 15%
// instead of Go's 100%. The live heap is small (about 15 MiB at 500 nodes), so collecting
// earlier costs little CPU: at 500 nodes the peak anonymous memory was 47 MiB with 100, 36 with
// 50, 28.5-29.6 with 25 and 26.8 with 15, for 5.7, 6.2 (20) and 6.6-7.2 CPU seconds from start
// to all Services addressed at 25, 20 and 15 (once per start; the steady state allocates
// almost nothing); at 2,000 nodes 25 cost about 19% more CPU during initialisation than 50 for
// 9 MiB less (docs/performance.md § Memory). Below gcFloorBytes of memory the collector does
// not run for this target (gc.go). GOGC in the environment (including GOGC=100) wins.
const defaultGCPercent = 15

func main() {
	setGC(os.LookupEnv)
	if err := plugins.RegisterMetrics(legacyregistry.Registerer()); err != nil {
		klog.Fatalf("register plugin metrics: %v", err)
	}
	if tools := newToolsCommand(); isTool(tools, os.Args[1:]) {
		if err := runTool(tools, os.Args[1:], os.Stdout); err != nil {
			var exit *exitError
			if !errors.As(err, &exit) {
				exit = &exitError{code: 1, err: err}
			}
			if exit.err != nil {
				fmt.Fprintf(os.Stderr, "Error: %v\n", exit.err)
			}
			os.Exit(exit.code)
		}
		return
	}
	os.Exit(cli.Run(newCommand()))
}

// newToolsCommand returns the root of the offline tools (policy, plugin, version). It is a
// command of its own rather than subcommands of the CCM's root: the upstream root carries about
// 180 flags and its help function, and k8s.io/component-base/cli adds klog's flags (-v among
// them) to it as persistent flags, which cobra would pass down, so `policy eval --help` printed
// the CCM's flags and `policy test -v` parsed -v as a log level. TestToolHelp shows each tool's
// help lists its own flags only.
func newToolsCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hcloud-policy-ccm",
		Short:         "Offline tools of hcloud-policy-ccm",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	// cobra passes the flags of pflag.CommandLine down as global flags: the --version that
	// k8s.io/component-base/version/verflag registers there for the CCM. It means nothing to
	// the tools, so their usage leaves the global flags out.
	root.SetUsageFunc(toolUsage)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(newPolicyCommand(), newPluginCommand(), newPlanCommand(), newVersionCommand())
	return root
}

// toolUsage writes the usage of a tool as cobra's default does, without the "Global Flags"
// section. It is a function, not a usage template: a template would bring text/template's
// reflective method calls into the binary and turn off the linker's dead-code elimination of
// methods (make dce-check, TestLinkerDeadCodeElimination, fails then).
func toolUsage(c *cobra.Command) error {
	w := c.OutOrStderr()
	fmt.Fprint(w, "Usage:")
	if c.Runnable() {
		fmt.Fprintf(w, "\n  %s", c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n  %s [command]", c.CommandPath())
	}
	if c.HasExample() {
		fmt.Fprintf(w, "\n\nExamples:\n%s", c.Example)
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprint(w, "\n\nAvailable Commands:")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(w, "\n  %-*s %s", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(w, "\n\nFlags:\n%s", strings.TrimRight(c.LocalFlags().FlagUsages(), " \t\n"))
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\n\nUse \"%s [command] --help\" for more information about a command.", c.CommandPath())
	}
	fmt.Fprintln(w)
	return nil
}

// isTool reports whether args, the command line without the program name, call one of the
// tools of newToolsCommand (or ask for its help) rather than the CCM.
func isTool(tools *cobra.Command, args []string) bool {
	if len(args) > 1 && args[0] == "help" { // help policy test
		args = args[1:]
	}
	if len(args) == 0 {
		return false
	}
	for _, c := range tools.Commands() {
		if c.Name() == args[0] {
			return true
		}
	}
	return false
}

// runTool runs the tool that args name, writing its output to stdout.
func runTool(tools *cobra.Command, args []string, stdout io.Writer) error {
	tools.SetArgs(args)
	tools.SetOut(stdout)
	return tools.Execute()
}

// toolsHelp lists the tools for the CCM's own --help.
func toolsHelp(tools *cobra.Command) string {
	var b strings.Builder
	b.WriteString("Subcommands (offline tools; run hcloud-policy-ccm COMMAND --help for their flags):\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Runnable() {
				fmt.Fprintf(&b, "  %-40s %s\n", strings.TrimPrefix(sub.CommandPath(), tools.Name()+" "), sub.Short)
			}
			walk(sub)
		}
	}
	walk(tools)
	return b.String()
}

// newCommand builds the root command: the upstream cloud-controller-manager command with our
// flag set; its help lists the offline tools.
func newCommand() *cobra.Command {
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	ours := ccm.NewOptions()
	fss := cliflag.NamedFlagSets{}
	ours.AddFlags(fss.FlagSet("hcloud policy ccm"))
	webhook := &webhookOptions{}
	webhook.addFlags(fss.FlagSet("admission webhook"))
	registerWebhook()

	initCloud := func(c *cloudconfig.CompletedConfig) cloudprovider.Interface {
		cloud := mustNewCloud(c, ours)
		if err := serveWebhook(c, cloud, webhook, wait.NeverStop); err != nil {
			klog.Fatalf("hcloud-policy-ccm cannot start: %v", err)
		}
		return cloud
	}
	cmd := app.NewCloudControllerManagerCommand(ccmOptions, initCloud, controllerConstructors(),
		names.CCMControllerAliases(), fss, wait.NeverStop)
	cmd.Use = "hcloud-policy-ccm"
	// The tools run from main (see newToolsCommand); the CCM's help lists them.
	cmd.Long = strings.TrimSpace(cmd.Long) + "\n\n" + toolsHelp(newToolsCommand())
	return cmd
}

// newRecorder returns the recorder of the CCM's own events. It has its own broadcaster, started
// here, because the provider records events while it starts (the first policy revision's
// PolicyLoaded, plugin warnings), before the controller manager starts its broadcaster.
func newRecorder(c *cloudconfig.CompletedConfig) record.EventRecorder {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartStructuredLogging(0)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.Client.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: ccm.EventComponent})
}

// NodeLabelsController is the name of our controller that keeps plugin labels on nodes
// current; it runs under leader election like the upstream controllers and can be switched off
// with --controllers=*,-node-labels.
const NodeLabelsController = "node-labels"

// LoadBalancerClassController is the name of our controller that serves the Services of
// --load-balancer-class (ccm/lbclass); it runs under leader election like the upstream
// controllers, does nothing without a class, and can be switched off with
// --controllers=*,-load-balancer-class.
const LoadBalancerClassController = lbclass.Name

// controllerConstructors are the upstream controllers plus the node label and load balancer
// class controllers; the upstream service controller does not start with
// --load-balancer-class-only (classOnlyOff).
func controllerConstructors() map[string]app.ControllerInitFuncConstructor {
	constructors := maps.Clone(app.DefaultInitFuncConstructors)
	constructors[NodeLabelsController] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "hcloud-node-labels"},
		Constructor: func(_ app.ControllerInitContext, _ *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ controllermanagerapp.ControllerContext) (controller.Interface, bool, error) {
				c, ok := cloud.(*ccm.Cloud)
				if !ok {
					return nil, false, nil
				}
				return nil, c.RunNodeLabels(ctx), nil
			}
		},
	}
	constructors[LoadBalancerClassController] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: "hcloud-load-balancer-class"},
		Constructor: func(_ app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
			return func(ctx context.Context, _ controllermanagerapp.ControllerContext) (controller.Interface, bool, error) {
				c, ok := cloud.(*ccm.Cloud)
				if !ok {
					return nil, false, nil
				}
				return nil, c.RunLoadBalancerClass(ctx, int(cc.ComponentConfig.ServiceController.ConcurrentServiceSyncs)), nil
			}
		},
	}
	constructors[names.ServiceLBController] = classOnlyOff(constructors[names.ServiceLBController])
	return constructors
}

// classOnlyOff wraps the upstream service controller's constructor: with
// --load-balancer-class-only its init reports "not started" (logged), so class-less Services
// are left to another implementation whatever --controllers says; otherwise it is unchanged.
func classOnlyOff(upstream app.ControllerInitFuncConstructor) app.ControllerInitFuncConstructor {
	build := upstream.Constructor
	upstream.Constructor = func(ic app.ControllerInitContext, cc *cloudconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		initFunc := build(ic, cc, cloud)
		return func(ctx context.Context, cctx controllermanagerapp.ControllerContext) (controller.Interface, bool, error) {
			if c, ok := cloud.(*ccm.Cloud); ok && c.ServiceControllerOff() {
				klog.InfoS("The service controller does not run: --load-balancer-class-only leaves class-less Services to another implementation")
				return nil, false, nil
			}
			return initFunc(ctx, cctx)
		}
	}
	return upstream
}

// mustNewCloud validates the configuration and builds the provider. Bad configuration exits
// non-zero before any controller starts, with every problem listed.
func mustNewCloud(c *cloudconfig.CompletedConfig, o *ccm.Options) *ccm.Cloud {
	if !c.ComponentConfig.KubeCloudShared.AllowUntaggedCloud {
		klog.Fatalf("no ClusterID found: pass --allow-untagged-cloud (Hetzner Cloud has no cluster tags; the official CCM requires the same flag)")
	}
	if name := c.ComponentConfig.KubeCloudShared.CloudProvider.Name; name != ccm.ProviderName {
		klog.Fatalf("invalid value for --cloud-provider: %q (expect %q)", name, ccm.ProviderName)
	}
	c.SharedInformers = newInformerFactory(c)
	shared := c.ComponentConfig.KubeCloudShared
	dyn, err := dynamic.NewForConfig(c.Kubeconfig)
	if err != nil {
		klog.Fatalf("hcloud-policy-ccm cannot start: a client for PolicyReports: %v", err)
	}
	cloud, err := ccm.New(context.Background(), ccm.Deps{
		Dynamic:     dyn,
		Options:     o,
		Env:         os.LookupEnv,
		Kube:        c.Client,
		Informers:   c.SharedInformers,
		Recorder:    newRecorder(c),
		ClusterName: shared.ClusterName,
		ClusterCIDR: shared.ClusterCIDR,
		// A ClusterRole without namespaces (the official one, with rbac.create=false) is
		// named once at start instead of by the namespace informer every few seconds.
		CheckNamespaceAccess: true,
	})
	if err != nil {
		klog.Fatalf("hcloud-policy-ccm cannot start:\n%v", err)
	}
	return cloud
}

// newInformerFactory returns the controller manager's shared informer factory as upstream
// builds it (a resync period between MinResyncPeriod and twice that) with one change: the
// informers drop metadata.managedFields, which no controller of the CCM reads, so their caches
// of Nodes and Services hold less (server-side apply bookkeeping is often the largest part of
// a Node). Updates from cached objects keep the stored managedFields: the API server keeps them
// when an update omits them. It must run before any informer is requested.
func newInformerFactory(c *cloudconfig.CompletedConfig) informers.SharedInformerFactory {
	resync := time.Duration(float64(c.ComponentConfig.Generic.MinResyncPeriod.Nanoseconds()) * (rand.Float64() + 1)) //nolint:gosec // jitter of a resync period, not a secret
	return informers.NewSharedInformerFactoryWithOptions(c.VersionedClient, resync,
		informers.WithTransform(stripManagedFields))
}

// stripManagedFields is an informer transform that clears metadata.managedFields.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
