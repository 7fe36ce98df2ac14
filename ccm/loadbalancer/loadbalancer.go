// Package loadbalancer implements cloudprovider.LoadBalancer for Hetzner Cloud: it finds the
// load balancer of a Service by the hcloud-ccm/service-uid label, builds the desired state
// (ccm/lbservice), plans (ccm/lbplan) and hands the plan, priced, to the executor, the only code
// that writes to the API, which decides it through the gate (ccm/gate).
//
// UpdateLoadBalancer, called for every Service on each node change, reads the load balancer
// through ccm/lbcache (one list shared by all Services, at most Options.CacheMaxAge old, kept
// current by the executor's results); the other calls read it fresh by its UID label.
//
// A Service with the annotation service.hcloud-policy-ccm.io/load-balancer-group shares the
// load balancer of its group instead (group.go, docs/shared-load-balancers.md): found by the
// group and cluster labels, planned from every member (the Service lister, Options.Services)
// by ccm/lbgroup; a member's UpdateLoadBalancer reads it through the cache
// (one entry per group) and sends target-only changes detached, as for one Service, the other
// calls read it fresh. WatchGroups (group_watch.go) resyncs the members left when one leaves.
// Every write of a group is a plan the executor gates too, with input.group set. A Service of
// its own and a group are both a subject (subject.go): finding, running, storing and the status
// are written once; what differs is a method of the subject (ownSubject in subject_own.go,
// groupSubject in subject_group.go). Planning is silent: it returns its Warning events as notes
// (notes.go), which the sync records and Preview, the audit and a denial's replay drop.
//
// A denied call is remembered (denials.go): an unchanged retry returns the same denial without a
// request. "Unchanged" is derived from the policy inputs the gate decided, never from a list of
// fields: each call records the answers of its Hetzner reads (reads.go), and a retry plans again
// from them to compare its inputs' digest with the denial's.
//
// RepairDrift (drift.go) checks every Service's load balancer against the state the CCM's last
// successful plan left it in, with one labelled list per period, and syncs the Services whose
// load balancer was changed or deleted by hand, so drift is repaired while the cluster is idle.
//
// Start with New.
package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbcache"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Event reasons. They MUST not change: operators alert on them.
const (
	ReasonInvalidAnnotation             = "InvalidAnnotation"
	ReasonPluginFailed                  = "PluginFailed"
	ReasonUnsupportedProtocolConfigured = "UnsupportedProtocolConfigured"
	ReasonLoadBalancerTypeUnconfigured  = "LoadBalancerTypeUnconfigured"
	ReasonLoadBalancerTypeDeprecated    = "LoadBalancerTypeDeprecated"
	ReasonUnknownProviderIDPrefix       = "UnknownProviderIDPrefix"
	ReasonLoadBalancerNameConflict      = "LoadBalancerNameConflict"
	ReasonMaxTargetsReached             = executor.ReasonMaxTargetsReached
	ReasonDeleteProtected               = executor.ReasonDeleteProtected
)

// ErrNonUniqueResult is returned when more than one load balancer carries a Service's UID label.
var ErrNonUniqueResult = errors.New("more than one load balancer carries the service's UID label")

// Namer is the naming plugin as this package uses it (consumer-side interface).
type Namer interface {
	LoadBalancerName(ctx context.Context, in plugins.LoadBalancerNameInput) (string, error)
}

// Readers are the reads of the Hetzner API the load balancer code makes: wrappers of
// ccm/hcloudclient with only Get/List/All methods, so this package cannot write to Hetzner and
// no type assertion of a reader finds a write method (the compiler keeps that: a reader is a
// struct, and its method set has no write). Every write is a plan the executor runs.
type Readers struct {
	LoadBalancers *hcloudclient.LoadBalancerReader
	Networks      *hcloudclient.NetworkReader
	Certificates  *hcloudclient.CertificateReader
	Types         *hcloudclient.LoadBalancerTypeReader
}

// LoadBalancers implements cloudprovider.LoadBalancer.
type LoadBalancers struct {
	read Readers
	// classOnly: Options.ClassOnly (see Serves).
	classOnly bool
	// cache holds the load balancers carrying the UID label; UpdateLoadBalancer reads through
	// it, the other calls read fresh and keep what they read (see labelled).
	cache *lbcache.Cache
	robot *robotTargets // nil without ROBOT_ENABLED (Options.Robot)
	exec  *executor.Executor
	// gate is the executor's gate (executor.Executor.Gate): the decisions of plans that do not
	// run (group members' denied steps, denial digests) and whether plans are priced (priced).
	gate gate.Gate
	cfg  config.LoadBalancer
	// network is the cluster network (nil: none), re-read when a subnet is not found in it.
	network  atomic.Pointer[hcloud.Network]
	recorder record.EventRecorder
	namer    Namer
	types    *typeCache
	denials  DenialTracker
	// denied answers unchanged retries of denied Services without a request (denials.go).
	denied *denialCache
	// services lists the cluster's Services, the members of load balancer groups (group.go);
	// nil: groups are refused.
	services corelisters.ServiceLister
	// locks serialise the reconciles of each subject: a Service of its own, or a load balancer
	// group (group_watch.go).
	locks *subjectLocks
	// homes are the home namespaces this CCM read on the groups' load balancers (groupHome).
	homes *groupHomes
	// groupsConverged is the state each group's last successful plan left its load balancer
	// in, which the group sweep compares with its list (requeueDriftedGroups).
	groupsConverged *groupStates
	// costMu serialises the runs of plans that add cost (costLock, inventory.go).
	costMu *sync.Mutex
	// converged is the state each Service's last successful plan left its load balancer in,
	// which CheckDrift compares with a fresh list (drift.go).
	converged converged
	// start is the inventory's start-up list, which Pricing waits for (inventory.go).
	start *inventoryStart
}

// DenialTracker learns which Services the policy denied, to retry them when the policy input
// changes (ccm/requeue).
type DenialTracker interface {
	// Denied records that the last plan of svc was denied.
	Denied(svc *corev1.Service)
	// Settled records that the last plan of svc was not denied.
	Settled(svc *corev1.Service)
}

var _ cloudprovider.LoadBalancer = (*LoadBalancers)(nil)

// Options configure [New]. Readers and Executor are required.
type Options struct {
	// Readers are the reads of the API (from hcloudclient.Conn).
	Readers Readers
	// Executor runs the plans: the only writes.
	Executor *executor.Executor
	// Config is the HCLOUD_LOAD_BALANCERS_* configuration.
	Config config.LoadBalancer
	// Network is the cluster network (nil if none), read again when a subnet is not found in it.
	Network *hcloud.Network
	// Recorder receives the events; nil drops them.
	Recorder record.EventRecorder
	// Namer is the naming plugin (nil if none).
	Namer Namer
	// DenialTracker, if not nil, learns of each denied plan (and each Ensure that was not
	// denied).
	DenialTracker DenialTracker
	// Robot makes the Service's Robot nodes (provider ID hrobot://<n> or hcloud://bm-<n>) IP
	// targets of its load balancer, as the official CCM does with ROBOT_ENABLED. Without it
	// Robot nodes are no targets and IP targets are removed.
	Robot bool
	// RobotClient is the Robot API when Robot is set; nil without credentials (then only
	// use-private-ip with the node's InternalIP works).
	RobotClient *robot.Client
	// TypeCacheMaxAge is how long the load balancer type list is cached: 0 means 1 h, a
	// negative value reads it on every use.
	TypeCacheMaxAge time.Duration
	// DenialMaxAge is how long a remembered denial answers the retries of an unchanged Service
	// without reading Hetzner; it bounds how late a change made to a denied Service's load
	// balancer behind the CCM's back is seen. 0 means DefaultDenialMaxAge; a negative value
	// remembers nothing.
	DenialMaxAge time.Duration
	// CacheMaxAge is how old the load balancer data an UpdateLoadBalancer plans from may be
	// (ccm/lbcache): the bound within which it sees a change made behind the CCM's back. 0
	// means lbcache.DefaultMaxAge; a negative value reads the load balancer on every call.
	CacheMaxAge time.Duration
	// Services lists the cluster's Services (the informer's lister): the members of load
	// balancer groups are computed from it. Nil refuses Services with the load-balancer-group
	// annotation.
	Services corelisters.ServiceLister
	// ClassOnly: --load-balancer-class-only; class-less Services are another implementation's,
	// so drift repair and the audit leave them out (Serves). Config.Class is the class served.
	ClassOnly bool
}

// New returns the load balancer implementation.
//
// # Errors
//
// A nil Executor or reader is an error.
func New(o Options) (*LoadBalancers, error) {
	r := o.Readers
	if o.Executor == nil || r.LoadBalancers == nil || r.Networks == nil || r.Certificates == nil || r.Types == nil {
		return nil, errors.New("loadbalancer.New: Options.Executor and the four Options.Readers are required: pass the executor of executor.New and the readers of hcloudclient.Conn")
	}
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{}
	}
	typeMaxAge, denialMaxAge := time.Hour, DefaultDenialMaxAge
	if o.TypeCacheMaxAge != 0 {
		typeMaxAge = o.TypeCacheMaxAge
	}
	if o.DenialMaxAge != 0 {
		denialMaxAge = o.DenialMaxAge
	}
	cache, err := lbcache.New(lbcache.Options{LoadBalancers: r.LoadBalancers, MaxAge: o.CacheMaxAge})
	if err != nil {
		return nil, fmt.Errorf("loadbalancer.New: %w", err)
	}
	l := &LoadBalancers{
		read: o.Readers, cache: cache, exec: o.Executor, gate: o.Executor.Gate(), cfg: o.Config, recorder: o.Recorder, namer: o.Namer, denials: o.DenialTracker,
		types:  newTypeCache(o.Readers.Types, typeMaxAge),
		denied: newDenialCache(denialMaxAge), services: o.Services, locks: &subjectLocks{}, costMu: &sync.Mutex{},
		start: newInventoryStart(), homes: &groupHomes{}, groupsConverged: &groupStates{},
	}
	l.classOnly = o.ClassOnly
	if o.Robot {
		l.robot = &robotTargets{servers: o.RobotClient}
	}
	l.network.Store(o.Network)
	return l, nil
}

// GetLoadBalancer returns the status of the Service's load balancer, found by its UID label
// only (a group member's: the group's, found by the group's labels), and whether it exists.
// Implementations must treat the *v1.Service parameter as read-only and not modify it.
func (l *LoadBalancers) GetLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	compatmetrics.Operation(compatmetrics.OpGetLoadBalancer)
	s, err := l.subjectOf(ctx, clusterName, svc)
	if err != nil {
		return nil, false, err
	}
	return l.status(ctx, s)
}

// GetLoadBalancerName returns the load balancer name of svc: the name annotation, else the
// naming plugin's name, else cloudprovider.DefaultLoadBalancerName (official behaviour). A
// failing plugin raises a Warning event PluginFailed and the default is used.
// Implementations must treat the *v1.Service parameter as read-only and not modify it.
func (l *LoadBalancers) GetLoadBalancerName(ctx context.Context, clusterName string, svc *corev1.Service) string {
	name, _ := l.name(ctx, clusterName, svc)
	return name
}

// name returns the name and whether it may rename an existing load balancer (annotation or
// plugin; a default name never renames, official behaviour).
func (l *LoadBalancers) name(ctx context.Context, clusterName string, svc *corev1.Service) (string, bool) {
	if n, ok := lbservice.AnnotatedName(svc); ok {
		return n, true
	}
	def := cloudprovider.DefaultLoadBalancerName(svc)
	if l.namer == nil {
		return def, false
	}
	n, err := l.namer.LoadBalancerName(ctx, plugins.LoadBalancerNameInput{
		ClusterName: clusterName,
		DefaultName: def,
		Service: plugins.Service{
			Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID),
			Labels: copyMap(svc.Labels), Annotations: copyMap(svc.Annotations),
		},
	})
	if err != nil { // the host counted it (hcloud_ccm_plugin_failures_total); on success it validated n
		l.warnf(ctx, svc, ReasonPluginFailed, "naming plugin failed, using the default name %s: %v", def, err)
		return def, false
	}
	return n, true
}

// clusterNetwork is the planner's view of the cluster network n; nil for none.
func clusterNetwork(n *hcloud.Network) *lbplan.ClusterNetwork {
	if n == nil {
		return nil
	}
	out := &lbplan.ClusterNetwork{ID: n.ID, Name: n.Name, Subnets: []string{}}
	if n.IPRange != nil {
		out.IPRange = n.IPRange.String()
	}
	for _, s := range n.Subnets {
		if s.IPRange != nil {
			out.Subnets = append(out.Subnets, s.IPRange.String())
		}
	}
	return out
}

// refreshNetwork reads the cluster network again (one request) and keeps it.
func (l *LoadBalancers) refreshNetwork(ctx context.Context) (*lbplan.ClusterNetwork, error) {
	cur := l.network.Load()
	n, err := read(ctx, fmt.Sprintf("network %d", cur.ID), func() (*hcloud.Network, error) {
		n, _, err := l.read.Networks.GetByID(ctx, cur.ID)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("read network %d: %w", cur.ID, err)
	}
	if n == nil {
		return nil, fmt.Errorf("read network %d: not found", cur.ID)
	}
	l.network.Store(n)
	return clusterNetwork(n), nil
}

// EnsureLoadBalancer creates or updates the Service's load balancer and returns its status.
// Implementations must treat the *v1.Service and *v1.Node parameters as read-only and not
// modify them.
//
// A retry of a Service whose last call was denied, with unchanged inputs, returns the same
// denial without a request (see denialCache). While a failed update of the Service waits for
// its scheduled retry (ActionRetryTracker), it returns a *RetryScheduledError without a request.
func (l *LoadBalancers) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	compatmetrics.Operation(compatmetrics.OpEnsureLoadBalancer)
	if err := l.retryScheduled(svc); err != nil {
		return nil, err
	}
	s, err := l.subjectOf(ctx, clusterName, svc)
	var st *corev1.LoadBalancerStatus
	if err == nil {
		st, err = l.reconcile(ctx, s.named(ctx, l), nodes, true)
	}
	l.track(svc, err, true)
	l.synced(svc, err)
	return st, err
}

// UpdateLoadBalancer updates the targets (and anything else that drifted) of the Service's
// load balancer; a missing load balancer is left to EnsureLoadBalancer. Implementations must
// treat the *v1.Service and *v1.Node parameters as read-only and not modify them.
//
// Like EnsureLoadBalancer, an unchanged retry of a denied call costs no request; another node
// set is a change. While a failed update of the Service waits for its scheduled retry
// (ActionRetryTracker), it returns nil without a request: the retry, an EnsureLoadBalancer at
// most requeue.ActionRetryMax later, syncs the node set of its time.
func (l *LoadBalancers) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *corev1.Service, nodes []*corev1.Node) error {
	compatmetrics.Operation(compatmetrics.OpUpdateLoadBalancer)
	if l.retryScheduled(svc) != nil { // the retry syncs svc with the nodes of its time
		return nil
	}
	s, err := l.subjectOf(ctx, clusterName, svc)
	if err == nil {
		_, err = l.reconcile(ctx, s.named(ctx, l), nodes, false)
	}
	// A missing load balancer is not reconciled here, so only a denial says something; one
	// deleted behind the CCM's back is recreated by an Ensure (drift.go).
	l.track(svc, err, false)
	return err
}

// track tells the denial tracker whether err is a denial; with settle, a result that is not a
// denial clears an earlier one.
func (l *LoadBalancers) track(svc *corev1.Service, err error, settle bool) {
	switch {
	case l.denials == nil:
	case errors.Is(err, policy.ErrDenied):
		l.denials.Denied(svc)
	case settle:
		l.denials.Settled(svc)
	}
}

// EnsureLoadBalancerDeleted deletes the load balancer carrying the Service's UID label and
// waits for the delete action; none is fine. A load balancer with delete protection is kept:
// Warning event DeleteProtected and nil, so the Service can go (the official CCM skips it the
// same way). Implementations must treat the *v1.Service parameter as read-only and not modify
// it.
//
// Like EnsureLoadBalancer, an unchanged retry of a denied delete costs no request.
func (l *LoadBalancers) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *corev1.Service) error {
	compatmetrics.Operation(compatmetrics.OpEnsureLoadBalancerDeleted)
	// A Service with an invalid group annotation (or without the Service lister) can only have
	// a load balancer of its own: the normal path deletes it, so the Service can go.
	err := l.deletedSubject(clusterName, svc).delete(ctx, l)
	l.track(svc, err, true)
	return err
}

// deleteOwnOnce is the delete of the load balancer of a Service of its own, through the denial
// cache: an unchanged retry of a denied delete returns the same denial without a request.
func (l *LoadBalancers) deleteOwnOnce(ctx context.Context, s ownSubject) error {
	call := denialCall{kind: callDelete, svc: s.svc, plan: func(ctx context.Context) (*lbplan.Plan, error) {
		lb, _, err := l.labelled(ctx, s, false)
		if err != nil || lb == nil {
			return nil, err
		}
		plan, err := lbplan.ComputeDelete(lb)
		return &plan, err
	}}
	if err := l.rememberedDenial(ctx, call); err != nil {
		return err
	}
	rctx, reads := recordReads(ctx)
	err := l.ensureDeleted(rctx, s.svc)
	l.remember(ctx, call, reads, err)
	return err
}

// ensureDeleted is EnsureLoadBalancerDeleted of the load balancer of svc's own.
func (l *LoadBalancers) ensureDeleted(ctx context.Context, svc *corev1.Service) error {
	s := ownSubject{svc: svc}
	defer s.lock(l)()
	if err := s.settle(ctx, l); err != nil { // an Update's detached run (detach.go)
		return err
	}
	lb, readAt, err := l.labelled(ctx, s, false)
	if err != nil || lb == nil {
		return err
	}
	plan, err := lbplan.ComputeDelete(lb)
	var protected *lbplan.ProtectedError
	if errors.As(err, &protected) {
		l.warnf(ctx, svc, ReasonDeleteProtected, "%v: not deleted", err)
		klog.InfoS("load balancer has delete protection, not deleted", "service", klog.KObj(svc), "loadBalancer", lb.Name)
		return nil
	}
	if err != nil {
		return err
	}
	state, err := l.exec.Run(ctx, svc, l.priced(plan))
	l.stored(s, state, readAt, err)
	l.freed(plan, err)
	return err
}

// planOwn is plan for the load balancer of a Service of its own (s.name and s.rename from
// named): nil (and no error) for an Update of a Service without a load balancer. Its order of
// checks and of Warning events follows the official CCM's reconcile (see advisoryWarnings):
// the node selector first; an Update of a Service without a load balancer does nothing; the
// type warnings come before anything on a create and after the algorithm on an update; input
// this CCM refuses before any write raises the warnings the official emits on its way to the
// same failure.
//
// An Update (create false) reads the load balancer through the cache (at most its max age
// old); an Ensure reads it fresh, so a change behind the CCM's back is seen at once and a load
// balancer missing from a stale cache can never be created twice.
func (l *LoadBalancers) planOwn(ctx context.Context, s ownSubject, nodes []*corev1.Node, create bool) (planned, error) {
	// The pre-plan checks come before any read: the official CCM reads the node selector
	// first, so a bad one fails before any warning. A bad name is the official's create or
	// rename failing: it comes after the lookups, and a create reads the type (and warns about
	// it) first (nameFailure).
	checkErr := lbservice.CheckService(s.svc, plugins.ValidateLoadBalancerName)
	if checkErr != nil && !lbservice.IsNameError(checkErr) {
		return planned{}, l.invalid(ctx, s.svc, checkErr)
	}
	if err := l.checkName(ctx, s.svc, s.name, s.cluster, ""); err != nil {
		return planned{}, err
	}
	lb, readAt, err := l.find(ctx, s, s.name, !create)
	if err != nil || (lb == nil && !create) {
		return planned{readAt: readAt}, err
	}
	if checkErr != nil {
		return planned{readAt: readAt}, l.nameFailure(ctx, s.svc, lb, checkErr)
	}
	p, d, err := l.planWith(ctx, s, nodes, create, lb)
	return planned{plan: p, status: d.Status, readAt: readAt}, err
}

// checkName refuses the load balancer name of svc's subject (group "" for its own) when it is
// reserved for another load balancer group (lbservice.CheckName): a Warning
// LoadBalancerNameConflict naming the group on svc, and the error; nothing is read or written.
func (l *LoadBalancers) checkName(ctx context.Context, svc *corev1.Service, name, cluster, group string) error {
	err := lbservice.CheckName(name, cluster, group)
	if err != nil {
		l.warn(ctx, svc, ReasonLoadBalancerNameConflict, err.Error())
	}
	return err
}

// nameFailure is the error of svc whose name annotation is invalid (nameErr): on a create (lb
// nil) the official CCM reads the type before it sends the name, so the type warnings come
// first (LoadBalancerTypeUnconfigured, issue 40 §8); on an existing load balancer the rename
// is the first step, before the type is read.
func (l *LoadBalancers) nameFailure(ctx context.Context, svc *corev1.Service, lb *lbplan.Actual, nameErr error) error {
	if lb == nil {
		if err := l.typeWarnings(ctx, svc); err != nil {
			return err
		}
	}
	return l.invalid(ctx, svc, nameErr)
}

// planWith is plan once the load balancer lb (nil: none, a create) is found.
func (l *LoadBalancers) planWith(ctx context.Context, s ownSubject, nodes []*corev1.Node, create bool, lb *lbplan.Actual) (*lbplan.Plan, lbplan.Desired, error) {
	svc, name, rename := s.svc, s.name, s.rename
	certs, err := l.certificates(ctx, svc)
	if err != nil {
		return nil, lbplan.Desired{}, err
	}
	managed, err := l.managedCertificate(ctx, svc)
	if err != nil {
		return nil, lbplan.Desired{}, err
	}
	targets, unknown, err := l.targetNodes(ctx, nodes)
	if err != nil {
		return nil, lbplan.Desired{}, err
	}
	in := lbservice.DesiredInput{
		Service: svc, Name: name, Rename: rename, Nodes: targets,
		Defaults: l.cfg, CertificateIDs: certs, ManagedCertificateID: managed,
	}
	in.Network = clusterNetwork(l.network.Load())
	d, err := l.desired(ctx, in)
	if phase := failedPhase(err); lb == nil || phase > phaseInfo {
		if terr := l.typeWarnings(ctx, svc); terr != nil {
			return nil, d, terr
		}
	}
	if err != nil {
		l.advisoryWarnings(ctx, svc, create, failedPhase(err), unknown)
		return nil, d, l.invalid(ctx, svc, err)
	}
	l.advisoryWarnings(ctx, svc, create, phaseNone, unknown)
	if err := l.checkType(ctx, svc, &d, s.basis(lb)); err != nil {
		return nil, d, err
	}
	plan, err := lbplan.Compute(d, s.basis(lb))
	if err != nil {
		return nil, d, l.invalid(ctx, svc, err)
	}
	for _, t := range plan.SkippedTargets {
		msg := fmt.Sprintf("load balancer %s reached max_targets %d of type %s: node %s not added", name, d.MaxTargets, d.Type, t.Node)
		l.warn(ctx, nodeRef(t.Node), ReasonMaxTargetsReached, msg)
		l.warn(ctx, svc, ReasonMaxTargetsReached, msg)
	}
	l.reportTargetProblems(ctx, svc, name, d, plan.SkippedIPTargets)
	return &plan, d, nil
}

// desired builds the desired state; a subnet that is not in the network read at start is
// looked up again (a subnet added since is found).
func (l *LoadBalancers) desired(ctx context.Context, in lbservice.DesiredInput) (lbplan.Desired, error) {
	d, err := lbservice.NewDesired(in)
	var usage *annotation.UsageError
	if errors.As(err, &usage) && usage.Field == string(annotation.LBPrivateSubnetIPRange) {
		if in.Network, err = l.refreshNetwork(ctx); err == nil {
			d, err = lbservice.NewDesired(in)
		}
	}
	return d, err
}

// phase is where in the official CCM's reconcile an input error surfaces: the steps of
// ReconcileHCLB (name and rDNS, algorithm, then the type, then the network and public
// interface), ReconcileHCLBServices, ReconcileHCLBTargets and the status built at the end.
// Ensure runs services before targets, Update targets before services and builds no status.
type phase int

const (
	phaseInfo     phase = iota + 1 // name, rDNS, algorithm: before the type is read
	phaseNetwork                   // network attachment and public interface: after the type
	phaseServices                  // listeners, certificates, health checks
	phaseTargets                   // targets
	phaseStatus                    // the Service status
	phaseNone                      // no error: every step ran
)

// phaseFields maps the annotations and variables whose errors surface before the services step
// in the official CCM; any other field (and any other error) is a services error.
var phaseFields = map[string]phase{
	string(annotation.LBName):                       phaseInfo,
	string(annotation.LBAlgorithmType):              phaseInfo,
	"HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE":          phaseInfo,
	string(annotation.LBDisablePublicNetwork):       phaseNetwork,
	string(annotation.LBPrivateIPv4):                phaseNetwork,
	string(annotation.LBPrivateSubnetIPRange):       phaseNetwork,
	"HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE": phaseNetwork,
	string(annotation.LBUsePrivateIP):               phaseTargets,
	string(annotation.LBIPv6Disabled):               phaseStatus,
	string(annotation.LBDisablePrivateIngress):      phaseStatus,
}

// failedPhase is the phase of err (phaseNone for nil).
func failedPhase(err error) phase {
	if err == nil {
		return phaseNone
	}
	var field string
	var ie *annotation.InvalidError
	var ue *annotation.UsageError
	switch {
	case errors.As(err, &ie):
		field = string(ie.Name)
	case errors.As(err, &ue):
		field = ue.Field
	}
	if p, ok := phaseFields[field]; ok {
		return p
	}
	return phaseServices
}

// advisoryWarnings emits UnsupportedProtocolConfigured for the Service's ports that are not TCP
// and UnknownProviderIDPrefix for the nodes without a cloud provider ID when the official CCM
// reaches the step that emits them before failing in phase failed (phaseNone: it fails nowhere):
// ports in the services step, nodes in the targets step after its own checks; Ensure runs
// services then targets, Update targets then services.
func (l *LoadBalancers) advisoryWarnings(ctx context.Context, svc *corev1.Service, ensure bool, failed phase, unknown []unknownNode) {
	servicesReached := failed >= phaseServices
	targetsReached := failed > phaseTargets
	if !ensure {
		targetsReached = failed > phaseNetwork && failed != phaseTargets
		servicesReached = failed >= phaseServices && failed != phaseTargets
	}
	if servicesReached {
		for _, p := range svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				l.warnf(ctx, svc, ReasonUnsupportedProtocolConfigured,
					"port %d uses protocol %s: only TCP is supported, the port is not load balanced", p.Port, p.Protocol)
			}
		}
	}
	if targetsReached {
		for _, n := range unknown {
			l.warnf(ctx, n.node, ReasonUnknownProviderIDPrefix,
				"Node could not be added to Load Balancer for service %s because the provider ID does not match any known format: %v", svc.Name, n.err)
		}
	}
}

// invalid emits InvalidAnnotation for an annotation error (annotation.IsUserError) and returns
// err.
func (l *LoadBalancers) invalid(ctx context.Context, svc *corev1.Service, err error) error {
	if annotation.IsUserError(err) {
		l.warn(ctx, svc, ReasonInvalidAnnotation, truncate.String(err.Error(), truncate.EventMessage))
	}
	return err
}

// typeWarnings does what the official CCM's type lookup does wherever it runs: on every
// reconcile of a Service without a type (annotation or HCLOUD_LOAD_BALANCERS_TYPE) it warns
// LoadBalancerTypeUnconfigured; for a deprecated type it warns LoadBalancerTypeDeprecated (the
// official's message), and a type that can no longer be ordered is an error, also when the load
// balancer already has it (the official refuses it there too). An unknown type is left to
// checkType.
func (l *LoadBalancers) typeWarnings(ctx context.Context, svc *corev1.Service) error {
	name, ok := lbservice.ConfiguredType(svc, l.cfg)
	if !ok {
		name = lbplan.DefaultType
		l.warnf(ctx, svc, ReasonLoadBalancerTypeUnconfigured,
			"Load Balancer Type unconfigured: this will be required in the future, set it with the annotation %q or cluster-wide with the environment variable %q",
			annotation.LBType, "HCLOUD_LOAD_BALANCERS_TYPE")
	}
	t, _, err := l.types.get(ctx, name)
	if err != nil {
		return fmt.Errorf("load balancer types: %w", err)
	}
	if t == nil {
		return nil
	}
	msg, unavailable := typeDeprecation(t, l.types.now())
	if unavailable {
		return fmt.Errorf("%s: set %q to a type that can be ordered", msg, typeField(svc))
	}
	if msg != "" {
		l.warn(ctx, svc, ReasonLoadBalancerTypeDeprecated, msg)
	}
	return nil
}

// typeField names where the type came from: the annotation when the Service carries it, else
// the variable (also when neither is set: that is where a cluster sets it).
func typeField(svc *corev1.Service) string {
	if _, ok := annotation.LBType.Value(svc); ok {
		return string(annotation.LBType)
	}
	return "HCLOUD_LOAD_BALANCERS_TYPE"
}

// checkType validates a type that is set against the type list (names are case-sensitive) and
// sets the max_targets the planner respects: the load balancer's own when its type does not
// change. Deprecation is typeWarnings' part.
func (l *LoadBalancers) checkType(ctx context.Context, svc *corev1.Service, d *lbplan.Desired, lb *lbplan.Actual) error {
	if lb != nil && (!d.TypeSet || lb.Type != "" && lb.Type == d.Type) { // the type does not change
		if lb.Type != "" {
			d.MaxTargets = lb.MaxTargets
		}
		return nil
	}
	t, known, err := l.types.get(ctx, d.Type)
	if err != nil {
		return fmt.Errorf("load balancer types: %w", err)
	}
	if t == nil {
		field := typeField(svc)
		return l.invalid(ctx, svc, annotation.Usagef(field, "invalid value for %q: %q is not a load balancer type (known, case-sensitive: %s)", field, d.Type, strings.Join(known, ", ")))
	}
	d.MaxTargets = t.MaxTargets
	return nil
}

// typeDeprecation is the official CCM's deprecation message for t at now (hcloud-go's
// deprecationutil.LoadBalancerTypeMessage, with the clock passed in): "" for a type that is not
// deprecated; unavailable when it can no longer be ordered.
func typeDeprecation(t *hcloud.LoadBalancerType, now time.Time) (msg string, unavailable bool) {
	if !t.IsDeprecated() {
		return "", false
	}
	if now.After(t.UnavailableAfter()) {
		return fmt.Sprintf("Load Balancer Type %q is unavailable and can no longer be ordered", t.Name), true
	}
	return fmt.Sprintf("Load Balancer Type %q is deprecated and will no longer be available for order as of %s",
		t.Name, t.UnavailableAfter().Format(time.DateOnly)), false
}

// targetNodes resolves nodes to servers; nodes without a cloud provider ID are skipped and
// returned for the UnknownProviderIDPrefix warning (advisoryWarnings), as the official CCM does. Robot nodes are resolved by
// robotNodes with Options.Robot, and skipped without an event otherwise (official).
func (l *LoadBalancers) targetNodes(ctx context.Context, nodes []*corev1.Node) ([]lbplan.Node, []unknownNode, error) {
	robots, unknown, err := l.robotNodes(ctx, nodes)
	if err != nil {
		return nil, nil, err
	}
	out := make([]lbplan.Node, 0, len(nodes))
	for _, n := range nodes {
		if n == nil {
			continue
		}
		if providerid.IsRobot(n.Spec.ProviderID) {
			if rn := robots[n.Name]; rn != nil {
				out = append(out, lbplan.Node{Name: n.Name, Labels: n.Labels, Robot: rn})
			}
			continue
		}
		id, err := providerid.ToServerID(n.Spec.ProviderID)
		if err != nil { // also a node the cloud node controller has not initialised yet
			unknown = append(unknown, unknownNode{node: n, err: err})
			continue
		}
		out = append(out, lbplan.Node{Name: n.Name, ServerID: id, Labels: n.Labels})
	}
	return out, unknown, nil
}

// unknownNode is a node without a cloud provider ID, for the UnknownProviderIDPrefix warning.
type unknownNode struct {
	node *corev1.Node
	err  error
}

// certificates resolves the http-certificates annotation: numeric entries are IDs (no
// request), others are names looked up by name.
func (l *LoadBalancers) certificates(ctx context.Context, svc *corev1.Service) ([]int64, error) {
	refs, err := annotation.LBSvcHTTPCertificates.CSV(svc)
	if errors.Is(err, annotation.ErrNotSet) {
		return nil, nil
	}
	if err != nil {
		return nil, l.invalid(ctx, svc, err)
	}
	ids := make([]int64, 0, len(refs))
	for _, ref := range refs {
		if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
			ids = append(ids, id)
			continue
		}
		c, err := read(ctx, "certificate named "+ref, func() (*hcloud.Certificate, error) {
			c, _, err := l.read.Certificates.GetByName(ctx, ref)
			return c, err
		})
		if err != nil {
			return nil, fmt.Errorf("certificate %q: %w", ref, err)
		}
		if c == nil {
			return nil, l.invalid(ctx, svc, annotation.Usagef(string(annotation.LBSvcHTTPCertificates), "invalid value for %q: certificate %q not found (expect IDs or names of uploaded certificates)", annotation.LBSvcHTTPCertificates, ref))
		}
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// managedCertificate finds the managed certificate carrying the Service's UID label, for https
// Services with certificate-type managed (one request); 0 when there is none or none is wanted.
func (l *LoadBalancers) managedCertificate(ctx context.Context, svc *corev1.Service) (int64, error) {
	proto, _ := annotation.LBSvcProtocol.Protocol(svc)
	ct, _ := annotation.LBSvcHTTPCertificateType.CertificateType(svc)
	if proto != hcloud.LoadBalancerServiceProtocolHTTPS || ct != hcloud.CertificateTypeManaged {
		return 0, nil // bad values are reported by lbservice.NewDesired
	}
	sel := lbplan.LabelServiceUID + "=" + string(svc.UID)
	certs, err := read(ctx, "certificates with "+sel, func() ([]*hcloud.Certificate, error) {
		certs, _, err := l.read.Certificates.List(ctx, hcloud.CertificateListOpts{ListOpts: hcloud.ListOpts{LabelSelector: sel, PerPage: 50}})
		return certs, err
	})
	if err != nil {
		return 0, fmt.Errorf("list certificates by %s: %w", sel, err)
	}
	for _, c := range certs {
		if c.Type == hcloud.CertificateTypeManaged {
			return c.ID, nil
		}
	}
	return 0, nil
}

// NameConflictError is returned when the load balancer name a Service asks for belongs to the
// load balancer of another Service (its UID label says so). Nothing is changed.
type NameConflictError struct {
	Name     string
	ID       int64
	OwnerUID string
	// Group is set when a load balancer group wants the name (Group) or when the load
	// balancer is a group's (OwnerGroup); see find.
	Group, OwnerGroup string
}

func (e *NameConflictError) Error() string {
	switch {
	case e.OwnerGroup != "":
		return fmt.Sprintf("load balancer name %q is taken by load balancer %d of load balancer group %s (%s=%s): nothing changed; set %q to another name or join the group with %q",
			e.Name, e.ID, e.OwnerGroup, lbplan.LabelGroup, e.OwnerGroup, annotation.LBName, annotation.LBGroup)
	case e.Group != "" && e.OwnerUID != "":
		return fmt.Sprintf("load balancer name %q is taken by load balancer %d of one Service (%s=%s), which load balancer group %s never adopts: nothing changed; set %q on the group's leader to another name",
			e.Name, e.ID, lbplan.LabelServiceUID, e.OwnerUID, e.Group, annotation.LBName)
	case e.Group != "":
		return fmt.Sprintf("load balancer name %q is taken by load balancer %d, which does not carry the labels of load balancer group %s and is never adopted: nothing changed; set %q on the group's leader to another name",
			e.Name, e.ID, e.Group, annotation.LBName)
	}
	return fmt.Sprintf("load balancer name %q is taken by load balancer %d of another Service (%s=%s): nothing changed; set %q to another name",
		e.Name, e.ID, lbplan.LabelServiceUID, e.OwnerUID, annotation.LBName)
}

// byName returns the load balancer called name (nil for none) and when it was read.
func (l *LoadBalancers) byName(ctx context.Context, name string) (*hcloud.LoadBalancer, time.Time, error) {
	type named struct {
		lb *hcloud.LoadBalancer
		at time.Time
	}
	r, err := read(ctx, "load balancer named "+name, func() (named, error) {
		at := time.Now()
		lb, _, err := l.read.LoadBalancers.GetByName(ctx, name)
		return named{lb, at}, err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("get load balancer by name %q: %w", name, err)
	}
	return r.lb, r.at, nil
}

// single returns the one load balancer of lbs, nil for none, or for more than one an error
// wrapping ErrNonUniqueResult that starts with what and names them all.
func single(lbs []*lbplan.Actual, what string) (*lbplan.Actual, error) {
	switch len(lbs) {
	case 0:
		return nil, nil
	case 1:
		return lbs[0], nil
	}
	names := make([]string, len(lbs))
	for i, lb := range lbs {
		names[i] = fmt.Sprintf("%s (%d)", lb.Name, lb.ID)
	}
	return nil, fmt.Errorf("%s: %w: %s; delete or relabel all but one", what, ErrNonUniqueResult, strings.Join(names, ", "))
}

func nodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Serves reports whether the CCM serves svc's load balancer: a Service of type LoadBalancer
// without a class (unless --load-balancer-class-only), or of the class served
// (Config.Class, --load-balancer-class). Drift repair and the audit judge these Services only;
// a Service of any other class is never read further.
func (l *LoadBalancers) Serves(svc *corev1.Service) bool {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return !l.classOnly
	}
	return l.cfg.Class != "" && *svc.Spec.LoadBalancerClass == l.cfg.Class
}
