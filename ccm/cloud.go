// Package ccm implements k8s.io/cloud-provider for Hetzner Cloud: a drop-in replacement for the
// official hcloud-cloud-controller-manager in which every cloud mutation passes a policy gate.
//
// New wires the parts, each a package of its own:
//   - input: configuration from the environment (ccm/config), the official annotations
//     (ccm/annotation), provider IDs (ccm/providerid);
//   - reads: the API connection and its read-only wrappers (ccm/hcloudclient), the server cache
//     (ccm/servercache), the load balancer cache (ccm/lbcache), the Robot client (ccm/robot);
//     the caches' max age, single flight and metrics are internal/cache's;
//   - nodes: node metadata (ccm/instances, with ccm/metadata for the attached-network check) and
//     the plugin labels kept current (ccm/nodelabels);
//   - load balancers: the cloudprovider.LoadBalancer (ccm/loadbalancer), planned by the pure
//     planners: a Service read into its desired state (ccm/lbservice), the plan and its kinds
//     (ccm/lbplan), groups (ccm/lbgroup); priced by the inventory (ccm/inventory); the Services of another
//     LoadBalancerClass (ccm/lbclass); the requeue of denied and failed Services (ccm/requeue);
//     the same planning for manifests in CI (ccm/ciplan, the `plan` command) and at admission
//     (ccm/admission); the policy audit (ccm/audit);
//   - routes: the cloudprovider.Routes (ccm/routes), planned by ccm/routeplan;
//   - decisions: the gate (ccm/gate, pure: the policy input of every step, the verdict, the
//     messages), through which the executor, `plan`, the webhook and the audit all decide, with
//     the policy engine (policy/);
//   - writes: the executor (ccm/executor), the only code that writes to Hetzner, which decides
//     every plan through the gate before its first request and sends only the requests of its
//     endpoint table (ccm/apireq);
//   - the official CCM's metric names (ccm/compatmetrics).
//
// Plugins (plugins/) compute node labels and load balancer names. The loops that write (group
// sweep, drift repair, requeue, audit) run only on the leader (Initialize). docs/rationale.md
// says what keeps the executor the only writer.
package ccm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/instances"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbclass"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/metadata"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/nodelabels"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/requeue"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routes"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// ProviderName is the value of --cloud-provider.
//
// It MUST not change: it is the official CCM's name, and operators' manifests pass it.
const ProviderName = "hcloud"

// EventComponent is the source component of the events this CCM emits: the official CCM's, so
// that event filters and alerts keep working after the swap.
const EventComponent = "hcloud-cloud-controller-manager"

// Version is the build version, set with -ldflags "-X .../ccm.Version=v1.2.3".
var Version = "dev"

// Deps are what New needs from the controller manager.
type Deps struct {
	// Options are the policy and plugin flags.
	Options *Options
	// Env looks up environment variables (os.LookupEnv in production).
	Env func(string) (string, bool)
	// Kube is a Kubernetes client for the policy ConfigMap watch.
	Kube kubernetes.Interface
	// Informers is the controller manager's shared informer factory; New registers the node
	// and namespace informers it needs, which start with the controllers.
	Informers informers.SharedInformerFactory
	// Recorder receives the events of every part.
	Recorder record.EventRecorder
	// ClusterName is --cluster-name; ClusterCIDR is --cluster-cidr (may be empty).
	ClusterName, ClusterCIDR string
	// Dynamic writes the policy audit's PolicyReports (ccm/audit); nil writes none.
	Dynamic dynamic.Interface
	// CheckNamespaceAccess: ask the API server once at start whether the CCM may list and
	// watch namespaces (the binary sets it; fake clients in tests cannot answer). If not, the
	// missing permission is logged once and put in one Warning event NamespacesForbidden on the
	// policy ConfigMap, and no namespace informer runs (its refusals would log every few
	// seconds); namespace lookups are then evaluation errors.
	CheckNamespaceAccess bool
}

// Cloud implements cloudprovider.Interface for Hetzner Cloud.
type Cloud struct {
	cfg       config.Config
	conn      *hcloudclient.Conn // reads; the executor builds the one writing client from it
	instances *instances.Instances
	lbs       *loadbalancer.LoadBalancers
	// lbsReady is lbs once its inventory was started (StartInventory): policy reloads, on
	// another goroutine, ask it whether the inventory's reads are needed now.
	lbsReady atomic.Pointer[loadbalancer.LoadBalancers]
	routes   *routes.Routes
	// robot reads Robot servers; nil unless ROBOT_ENABLED with credentials.
	robot   *robot.Client
	decider policy.Decider
	plugins []*plugins.Watched
	// requeue retries denied Services when the policy input changes; nil without a Kubernetes
	// client and informers.
	requeue *requeue.Requeuer
	// nodeLabels re-applies plugin labels; nil without a node label plugin. Atomic because
	// plugin reloads (another goroutine) trigger it.
	nodeLabels atomic.Pointer[nodelabels.Controller]
	// admission are the parts AdmissionConfig hands the admission webhook.
	admission admissionParts
	// namespacesForbidden: the RBAC lets the CCM not list and watch namespaces (checked once at
	// start); no namespace informer runs and every namespace lookup is an error.
	namespacesForbidden bool
	// classLBs serves the Services of the load balancer class (ccm/lbclass); nil without
	// --load-balancer-class (or HCLOUD_LOAD_BALANCERS_CLASS), with load balancers disabled, or
	// without a Kubernetes client and informers.
	classLBs *lbclass.Controller
	// classOnly: --load-balancer-class-only with a class; the upstream service controller does
	// not run (ServiceControllerOff).
	classOnly bool
	// lead starts the loops only the leader runs (leaderLoops); Initialize calls it once.
	lead     func(ctx context.Context)
	leadOnce sync.Once
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// New reads and validates the configuration, checks the token with one API call, loads the
// policies and plugins and builds the provider.
//
// # Errors
//
// Every configuration problem is reported at once (errors.Join), naming the variable or flag
// and the fix. A failed token check, an unknown HCLOUD_NETWORK, a host not attached to
// HCLOUD_NETWORK (unless HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true), a policy revision that does not
// compile and a plugin that does not load (unless --plugins-optional) are errors too.
func New(ctx context.Context, d Deps) (*Cloud, error) {
	cfg, err := readConfig(d)
	if err != nil {
		return nil, err
	}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: cfg.HCloud, Registerer: legacyregistry.Registerer(), Version: Version})
	if err != nil {
		return nil, fmt.Errorf("ccm.New: %w", err)
	}
	if err := hcloudclient.Check(ctx, conn, cfg.HCloud); err != nil {
		return nil, fmt.Errorf("ccm.New: %w", err)
	}
	var network *hcloud.Network
	if cfg.Network.NameOrID != "" {
		if network, err = hcloudclient.Network(ctx, conn, cfg.Network.NameOrID); err != nil {
			return nil, fmt.Errorf("ccm.New: %w", err)
		}
	}
	if err := metadata.CheckAttached(ctx, cfg.Network, network); err != nil {
		return nil, fmt.Errorf("ccm.New: %w", err)
	}
	if cfg.Metrics.Enabled {
		serveMetrics(cfg.Metrics.Address) // a failure is logged; the CCM runs on, as the official
	}
	c := &Cloud{cfg: cfg, conn: conn}
	if d.CheckNamespaceAccess && d.Kube != nil && d.Informers != nil {
		if denied := namespacesReadable(ctx, d.Kube); len(denied) > 0 {
			c.namespacesForbidden = true
			reportNamespacesForbidden(d.Recorder, d.Options.PolicyConfigMap, denied)
		}
	}
	var onLoad func(string)
	if d.Kube != nil && d.Informers != nil {
		c.requeue = requeue.New(d.Kube)
		onLoad = c.requeue.PolicyLoaded
	}
	onLoad = c.inventoryNeeded(onLoad)
	auditNow, onLoad := auditTrigger(onLoad)
	if c.decider, err = startPolicy(ctx, d, onLoad); err != nil {
		return nil, err
	}
	labeler, namer, err := c.loadPlugins(ctx, d.Options)
	if err != nil {
		return nil, err
	}
	if err := c.build(d, network, labeler, namer); err != nil {
		return nil, err
	}
	if c.requeue != nil && !c.namespacesForbidden {
		if err := c.requeue.WatchNamespaces(d.Informers.Core().V1().Namespaces().Informer()); err != nil {
			return nil, fmt.Errorf("ccm.New: %w", err)
		}
	}
	if c.requeue != nil {
		// Reads only: the inventory's reads start once a policy in force reads it
		// (inventoryNeeded) and the informers have synced, which happens on the leader and on a
		// replica that serves the admission webhook (it decides with the same inventory).
		c.lbs.StartInventory(ctx, d.Informers.Core().V1().Services().Informer().HasSynced, d.ClusterName, c.admission.exec.Gate().ReadsInventory)
		c.lbsReady.Store(c.lbs)
	}
	run, err := c.leaderLoops(d, auditNow)
	if err != nil {
		return nil, err
	}
	c.lead = run
	c.logStart(network)
	return c, nil
}

// leaderLoops returns what only the leader runs, built now and started by Initialize: the loops
// that write to Hetzner (group watch and sweep, drift repair), to Services (the requeuer's
// annotation and status patches) and to reports (the policy audit: PolicyReports,
// PolicyViolation events, its gauges). A replica that does not lead, for example one that only
// serves the admission webhook, reads and answers reviews and runs none of them
// (TestCCMOnlyTheLeaderWrites in test/e2e).
func (c *Cloud) leaderLoops(d Deps, auditNow <-chan struct{}) (func(ctx context.Context), error) {
	audit, err := c.newAudit(d)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		klog.InfoS("Leading: starting the loops that write", "groupSweep", d.Options.LoadBalancerGroupSweepInterval,
			"drift", d.Options.LoadBalancerDriftInterval, "audit", audit != nil)
		if c.requeue != nil {
			// Members leaving a load balancer group resync the others at once.
			services := d.Informers.Core().V1().Services().Informer()
			if err := c.lbs.WatchGroups(ctx, services, d.ClusterName, c.requeue.Requeue); err != nil {
				klog.ErrorS(err, "Load balancer groups are not watched: members that leave are seen at their next sync")
			}
			// Groups whose last member left while no CCM ran are deleted once the Services are
			// known, then every sweep interval.
			if d.Options.LoadBalancerGroupSweepInterval > 0 {
				go c.lbs.SweepGroups(ctx, services.HasSynced, d.ClusterName, d.Options.LoadBalancerGroupSweepInterval)
			}
			// Load balancers changed or deleted by hand are repaired within one drift period.
			go c.lbs.RepairDrift(ctx, services.HasSynced, d.Options.LoadBalancerDriftInterval, c.cfg.ServerCache.BudgetPerHour)
			go c.requeue.Run(ctx)
		}
		if audit != nil {
			go audit(ctx, auditNow)
		}
	}, nil
}

// inventoryNeeded returns onLoad that also starts the inventory's reads when the revision put
// in force reads the inventory (loadbalancer.StartInventory): a revision may come after start.
func (c *Cloud) inventoryNeeded(onLoad func(string)) func(string) {
	return func(rev string) {
		if onLoad != nil {
			onLoad(rev)
		}
		if lbs := c.lbsReady.Load(); lbs != nil {
			lbs.InventoryNeeded()
		}
	}
}

// readConfig reads the environment and validates it together with the flags. The Config's
// LoadBalancer.Class is the class served: --load-balancer-class, else the variable's.
func readConfig(d Deps) (config.Config, error) {
	cfg, readErr := config.Read(d.Env)
	var errs []error
	if readErr != nil {
		errs = append(errs, readErr)
	} else if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := d.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	class, err := d.Options.LoadBalancerClassFrom(cfg.LoadBalancer.Class)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.LoadBalancer.Class = class // the flag's, else the variable's
	if err := errors.Join(errs...); err != nil {
		return config.Config{}, fmt.Errorf("invalid configuration:\n%w", err)
	}
	for _, w := range cfg.Warnings() {
		klog.Warning(w)
	}
	return cfg, nil
}

// build constructs the provider's parts.
func (c *Cloud) build(d Deps, network *hcloud.Network, labeler instances.NodeLabeler, namer loadbalancer.Namer) error {
	cache, err := servercache.New(servercache.Options{Servers: c.conn.Servers(), Config: c.cfg.ServerCache})
	if err != nil {
		return fmt.Errorf("ccm.New: %w", err)
	}
	var networkID int64
	if network != nil {
		networkID = network.ID
	}
	if c.cfg.Robot.Enabled && c.cfg.Robot.HasCredentials() {
		// No request at start: Robot allows few per hour, and a rate limit must not stop the CCM.
		if c.robot, err = robot.New(robot.Options{Config: c.cfg.Robot}); err != nil {
			return fmt.Errorf("ccm.New: %w", err)
		}
	}
	c.instances, err = instances.New(instances.Options{
		Cache: cache, Config: c.cfg.Instances, NetworkID: networkID, Recorder: d.Recorder, Labeler: labeler,
		Robot: c.robot, ForwardInternalIPs: c.cfg.Robot.ForwardInternalIPs,
	})
	if err != nil {
		return fmt.Errorf("ccm.New: %w", err)
	}
	if labeler != nil && d.Informers != nil && d.Kube != nil {
		nl, err := nodelabels.New(nodelabels.Options{
			Client:   d.Kube,
			Nodes:    d.Informers.Core().V1().Nodes(),
			Servers:  cache,
			Labeler:  labeler,
			Recorder: d.Recorder,
			Resync:   d.Options.NodeLabelResync,
		})
		if err != nil {
			return fmt.Errorf("ccm.New: %w", err)
		}
		c.nodeLabels.Store(nl)
	}

	execOpts := executor.Options{
		Conn: c.conn, Decider: c.decider, Recorder: d.Recorder, Cluster: clusterView(d, network),
		ActionPollInterval: c.cfg.HCloud.PollInterval,
	}
	switch {
	case c.namespacesForbidden:
		execOpts.Namespaces = forbiddenNamespaces{}
	case d.Informers != nil:
		execOpts.Namespaces = d.Informers.Core().V1().Namespaces().Lister()
	}
	exec, err := executor.New(execOpts)
	if err != nil {
		return fmt.Errorf("ccm.New: %w", err)
	}
	lbOpts := loadbalancer.Options{
		Readers: loadbalancer.Readers{
			LoadBalancers: c.conn.LoadBalancers(), Networks: c.conn.Networks(), Certificates: c.conn.Certificates(), Types: c.conn.LoadBalancerTypes(),
		},
		Executor: exec, Config: c.cfg.LoadBalancer, Network: network, Recorder: d.Recorder, Namer: namer,
		Robot: c.cfg.Robot.Enabled, RobotClient: c.robot, // RobotClient is nil without credentials
		ClassOnly: c.cfg.LoadBalancer.Class != "" && d.Options.LoadBalancerClassOnly,
	}
	c.admission = admissionParts{exec: exec, cluster: clusterView(d, network), informers: d.Informers, clusterName: d.ClusterName, namespacesForbidden: c.namespacesForbidden}
	if c.requeue != nil {
		lbOpts.DenialTracker = c.requeue // also retries failed detached updates (below)
	}
	if d.Informers != nil { // the members of load balancer groups (the service controller's informer)
		lbOpts.Services = d.Informers.Core().V1().Services().Lister()
	}
	if c.lbs, err = loadbalancer.New(lbOpts); err != nil {
		return fmt.Errorf("ccm.New: %w", err)
	}
	if err := c.buildClass(d); err != nil {
		return err
	}

	if network != nil && c.cfg.Network.RoutesEnabled && d.Informers != nil && routesClusterCIDR(d.ClusterCIDR) {
		r, err := routes.New(routes.Options{
			Networks:    c.conn.Networks(),
			Network:     network,
			ClusterCIDR: d.ClusterCIDR,
			Servers:     cache,
			Runner:      exec,
			Nodes:       d.Informers.Core().V1().Nodes().Lister(),
			Recorder:    d.Recorder,
		})
		if err != nil {
			return fmt.Errorf("ccm.New: %w", err)
		}
		c.routes = r
	}
	return nil
}

// buildClass builds the controller of the load balancer class, when a class is served.
func (c *Cloud) buildClass(d Deps) error {
	class := c.cfg.LoadBalancer.Class
	c.classOnly = class != "" && d.Options.LoadBalancerClassOnly
	if class == "" || !c.cfg.LoadBalancer.Enabled || d.Kube == nil || d.Informers == nil {
		return nil
	}
	ctl, err := lbclass.New(lbclass.Options{
		Class: class, ClassOnly: c.classOnly, ClusterName: d.ClusterName, Client: d.Kube,
		Services: d.Informers.Core().V1().Services(), Nodes: d.Informers.Core().V1().Nodes(),
		Balancer: c.lbs, Recorder: d.Recorder,
	})
	if err != nil {
		return fmt.Errorf("ccm.New: %w", err)
	}
	c.classLBs = ctl
	return nil
}

// routesClusterCIDR reports whether --cluster-cidr lets routes run, and logs why not. The rule
// is the official CCM's: routes run only when the whole value parses as one CIDR (IPv4 or
// IPv6, net.ParseCIDR); an empty, malformed or dual-stack ("a,b") value disables them, and the
// CCM starts without routes instead of failing (the official logs "create routes provider",
// and upstream's route controller then reports that the provider does not support routes).
// TestNew covers each case.
func routesClusterCIDR(cidr string) bool {
	if cidr == "" {
		klog.Warning("Routes disabled: HCLOUD_NETWORK is set but --cluster-cidr is empty (pass --cluster-cidr, " +
			"usually with --allocate-node-cidrs, to route pod CIDRs through the network, or set HCLOUD_NETWORK_ROUTES_ENABLED=false to silence this)")
		return false
	}
	if _, _, err := net.ParseCIDR(cidr); err != nil {
		klog.ErrorS(err, "Routes disabled: --cluster-cidr is not one CIDR, as the official CCM requires for routes "+
			"(a dual-stack list such as 10.244.0.0/16,fd00::/56 disables them there too). Pass the IPv4 pod CIDR alone "+
			"to route it through the network, or set HCLOUD_NETWORK_ROUTES_ENABLED=false to silence this", "clusterCIDR", cidr)
		return false
	}
	return true
}

// clusterView is the cluster as policies see it.
func clusterView(d Deps, network *hcloud.Network) input.Cluster {
	cl := input.Cluster{Name: d.ClusterName, ClusterCIDR: d.ClusterCIDR}
	if network != nil {
		cl.Network = &input.Network{ID: network.ID, Name: network.Name}
		if network.IPRange != nil {
			cl.Network.IPRange = network.IPRange.String()
		}
	}
	return cl
}

// Initialize is called by the controller manager when this replica starts its controllers: once
// it holds the leader Lease (at once with --leader-elect=false), with a stop channel that closes
// when leadership ends (the controller manager then exits). It starts the loops only the leader
// runs (leaderLoops), once; a replica that never leads never starts them.
func (c *Cloud) Initialize(_ cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.leadOnce.Do(func() {
		if c.lead != nil {
			c.lead(wait.ContextForChannel(stop))
		}
	})
}

// LoadBalancer returns the load balancer implementation unless HCLOUD_LOAD_BALANCERS_ENABLED
// is false.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if !c.cfg.LoadBalancer.Enabled {
		return nil, false
	}
	return c.lbs, true
}

// Instances is not implemented: InstancesV2 is.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 returns the node metadata implementation.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.instances, true }

// Zones is not implemented: InstancesV2 provides zones.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not implemented.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes returns the routes implementation when HCLOUD_NETWORK is set,
// HCLOUD_NETWORK_ROUTES_ENABLED is not false and --cluster-cidr is one CIDR (see
// routesClusterCIDR).
func (c *Cloud) Routes() (cloudprovider.Routes, bool) {
	if c.routes == nil {
		return nil, false
	}
	return c.routes, true
}

// RunNodeLabels starts the node label controller, which keeps plugin labels current after
// initialisation, until ctx ends. It returns false when no node label plugin is configured.
func (c *Cloud) RunNodeLabels(ctx context.Context) bool {
	nl := c.nodeLabels.Load()
	if nl == nil {
		return false
	}
	go nl.Run(ctx, 1)
	return true
}

// RunLoadBalancerClass starts the controller of the load balancer class (ccm/lbclass) with
// workers goroutines until ctx ends. It returns false when no class is served (or load
// balancers are disabled). The controller manager calls it on the leader only.
func (c *Cloud) RunLoadBalancerClass(ctx context.Context, workers int) bool {
	if c.classLBs == nil {
		return false
	}
	go c.classLBs.Run(ctx, max(workers, 1))
	return true
}

// ServiceControllerOff reports whether the upstream service controller must not run:
// --load-balancer-class-only, so class-less Services are left to another implementation.
func (c *Cloud) ServiceControllerOff() bool { return c.classOnly }

// ProviderName returns "hcloud".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID is false: Hetzner Cloud resources carry no cluster tag (run with
// --allow-untagged-cloud, as the official CCM).
func (c *Cloud) HasClusterID() bool { return false }

// networkLabel formats a network for logs.
func networkLabel(n *hcloud.Network) string {
	if n == nil {
		return "none"
	}
	return n.Name + " (" + strconv.FormatInt(n.ID, 10) + ")"
}

// logStart logs the effective configuration once.
func (c *Cloud) logStart(network *hcloud.Network) {
	klog.InfoS("hcloud-policy-ccm configured", "version", Version, "network", networkLabel(network),
		"loadBalancers", c.cfg.LoadBalancer.Enabled, "loadBalancerClass", c.cfg.LoadBalancer.Class, "classOnly", c.classOnly, "routes", c.routes != nil, "plugins", len(c.plugins),
		"robot", c.cfg.Robot.String()) // String leaves the credentials out
}

// The requeuer retries a Service whose detached update failed (loadbalancer.runDetached finds
// the method by this interface); the compiler keeps the method set matching.
var _ loadbalancer.ActionFailureTracker = (*requeue.Requeuer)(nil)
var _ loadbalancer.ActionRetryTracker = (*requeue.Requeuer)(nil)
var _ loadbalancer.RoomTracker = (*requeue.Requeuer)(nil)
