package nodelabels

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/instances"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/providerid"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// Event reasons on Nodes. They are part of the compatibility surface; do not rename them.
const (
	// EventPluginFailed is the reason of the Warning event on a Node whose label plugin failed
	// or returned invalid labels; the node's labels were left as they were. It is the reason
	// ccm/instances uses for the same failure at initialisation.
	EventPluginFailed = instances.EventPluginFailed
	// EventPluginLabelConflict is the reason of the Warning event on a Node that carries a label
	// the plugin wants, with another value, that this controller does not own.
	EventPluginLabelConflict = "PluginLabelConflict"
)

// Results of one node sync, the values of the result label of hcloud_ccm_node_label_sync_total.
const (
	resultApplied   = "applied"
	resultUnchanged = "unchanged"
	resultFailed    = "failed"
	resultConflict  = "conflict"
	resultRetried   = "retried"
)

// fieldManager names this controller in the node's managedFields.
const fieldManager = "hcloud-policy-ccm-node-labels"

// syncTotal counts node syncs by result. The name MUST not change: dashboards use it.
var syncTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Name: "hcloud_ccm_node_label_sync_total",
	Help: "Node label syncs by result: applied (labels written), unchanged (nothing to write), " +
		"conflict (a wanted label carries another value set by someone else), " +
		"retried (the node changed between read and patch, typically while it is initialised; " +
		"synced again against the new node), " +
		"failed (plugin failure, server lookup or API error).",
	StabilityLevel: metrics.ALPHA,
}, []string{"result"})

var registerOnce sync.Once

// ServerLookup finds Hetzner Cloud servers by ID. [*servercache.Cache] satisfies it.
type ServerLookup interface {
	// ByID returns the server with the given ID, or (nil, nil) when it does not exist.
	ByID(ctx context.Context, id int64) (*hcloud.Server, error)
}

// Labeler computes the plugin labels of a node, for example a node_labels wasm plugin.
type Labeler interface {
	NodeLabels(ctx context.Context, in plugins.NodeInput) (map[string]string, error)
}

// Options configure a Controller. Client, Nodes, Servers and Labeler are required.
type Options struct {
	// Client writes the node patches.
	Client kubernetes.Interface
	// Nodes is the node informer of the shared informer factory; the caller starts the factory.
	Nodes coreinformers.NodeInformer
	// Servers finds the server behind a node.
	Servers ServerLookup
	// Labeler computes the labels a node should carry.
	Labeler Labeler
	// Recorder receives Warning events on Nodes; nil drops them.
	Recorder record.EventRecorder
	// Resync is the period of a pass over all nodes, so changes of servers' Hetzner labels are
	// picked up; 0 syncs only on node events and Trigger.
	Resync time.Duration
}

// Controller re-applies plugin labels to initialised nodes. See the package documentation.
type Controller struct {
	client   kubernetes.Interface
	lister   corelisters.NodeLister
	synced   []cache.InformerSynced
	servers  ServerLookup
	labeler  Labeler
	recorder record.EventRecorder
	resync   time.Duration
	queue    workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	conflicts map[string]string // node name → the conflict last reported by an event
}

// New returns a Controller and registers its handler on o.Nodes. Start the informer factory
// and call Run to start it.
//
// # Errors
//
// A missing required option or a negative Resync is an error naming every problem.
func New(o Options) (*Controller, error) {
	const op = "nodelabels.New"
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("option Client is required"))
	}
	if o.Nodes == nil {
		errs = append(errs, errors.New("option Nodes is required"))
	}
	if o.Servers == nil {
		errs = append(errs, errors.New("option Servers is required"))
	}
	if o.Labeler == nil {
		errs = append(errs, errors.New("option Labeler is required"))
	}
	if o.Resync < 0 {
		errs = append(errs, fmt.Errorf("option Resync must not be negative, got %s", o.Resync))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	registerOnce.Do(func() {
		if err := legacyregistry.Register(syncTotal); err != nil {
			klog.ErrorS(err, "registering metric", "name", "hcloud_ccm_node_label_sync_total")
		}
	})
	if o.Recorder == nil {
		o.Recorder = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	c := &Controller{
		client:   o.Client,
		lister:   o.Nodes.Lister(),
		servers:  o.Servers,
		labeler:  o.Labeler,
		recorder: o.Recorder,
		resync:   o.Resync,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-labels"},
		),
		conflicts: map[string]string{},
	}
	informer := o.Nodes.Informer()
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			oldNode, ok1 := old.(*corev1.Node)
			curNode, ok2 := cur.(*corev1.Node)
			if ok1 && ok2 && relevantUpdate(oldNode, curNode) {
				c.queue.Add(curNode.Name)
			}
		},
		DeleteFunc: c.forget,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: adding the node event handler: %w", op, err)
	}
	c.synced = []cache.InformerSynced{informer.HasSynced, reg.HasSynced}
	return c, nil
}

// Run waits for the node cache to sync, then syncs nodes with the given number of workers
// (at least one) until ctx is done. It returns when ctx is done and every worker has stopped.
// Call it once.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	workers = max(workers, 1)
	klog.InfoS("Starting node label controller", "workers", workers, "resync", c.resync)
	defer klog.InfoS("Stopped node label controller")
	if !cache.WaitForNamedCacheSync("node-labels", ctx.Done(), c.synced...) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	if c.resync > 0 {
		wg.Go(func() {
			t := time.NewTicker(c.resync)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					c.enqueueAll()
				}
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

// Trigger queues every node for a sync. Call it after the label plugin was reloaded. It does
// not block, and does nothing once Run has returned.
func (c *Controller) Trigger() {
	c.enqueueAll()
}

func (c *Controller) enqueue(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		c.queue.Add(n.Name)
	}
}

func (c *Controller) enqueueAll() {
	nodes, err := c.lister.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Listing nodes from the cache")
		return
	}
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
}

// forget drops what the controller remembers about a deleted node.
func (c *Controller) forget(obj any) {
	name, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	c.mu.Lock()
	delete(c.conflicts, name)
	c.mu.Unlock()
}

// relevantUpdate reports whether a node update may change the outcome of a sync: labels,
// annotations or the provider ID changed, or the node was initialised.
func relevantUpdate(old, cur *corev1.Node) bool {
	return !maps.Equal(old.Labels, cur.Labels) ||
		!maps.Equal(old.Annotations, cur.Annotations) ||
		old.Spec.ProviderID != cur.Spec.ProviderID ||
		uninitialized(old) != uninitialized(cur)
}

// uninitialized reports whether the node still carries the taint of the upstream node
// controller, which applies plugin labels itself when it removes the taint.
func uninitialized(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	c.handle(ctx, name)
	return true
}

// handle syncs one node, counts the result and requeues the node with backoff on an error.
func (c *Controller) handle(ctx context.Context, name string) {
	result, err := c.sync(ctx, name)
	if result != "" {
		syncTotal.WithLabelValues(result).Inc()
	}
	switch {
	case err == nil:
		c.queue.Forget(name)
		return
	case apierrors.IsConflict(err):
		klog.V(2).InfoS("Node changed while syncing its plugin labels, retrying", "node", name)
	default:
		klog.ErrorS(err, "Syncing node plugin labels, retrying", "node", name)
	}
	c.queue.AddRateLimited(name)
}

// sync brings the plugin labels of one node up to date. It returns the result to count ("" for
// a node it skipped) and an error when the node should be retried with backoff.
func (c *Controller) sync(ctx context.Context, name string) (string, error) {
	const op = "nodelabels.sync"
	node, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return resultFailed, fmt.Errorf("%s: node %q: %w", op, name, err)
	}
	if uninitialized(node) {
		klog.V(5).InfoS("Skipping uninitialised node", "node", klog.KObj(node))
		return "", nil
	}
	id, err := providerid.ToServerID(node.Spec.ProviderID)
	if err != nil {
		klog.V(5).InfoS("Skipping node that is not a Hetzner Cloud server", "node", klog.KObj(node), "providerID", node.Spec.ProviderID)
		return "", nil
	}
	server, err := c.servers.ByID(ctx, id)
	if err != nil {
		return resultFailed, fmt.Errorf("%s: node %q: looking up server %d: %w", op, name, id, err)
	}
	if server == nil {
		klog.V(4).InfoS("Skipping node whose server does not exist", "node", klog.KObj(node), "serverID", id)
		return "", nil
	}

	want, err := c.labeler.NodeLabels(ctx, instances.NodeInput(node, server))
	if err != nil { // the host validated want (plugins.ValidateLabels) and counted the failure
		// Not retried: a broken plugin stays broken until it is replaced, and the reload
		// calls Trigger. The periodic resync retries too.
		klog.InfoS("Plugin failed, node labels left as they are", "hook", plugins.HookNodeLabels, "node", klog.KObj(node), "err", err)
		c.recorder.Eventf(node, corev1.EventTypeWarning, EventPluginFailed,
			"node_labels plugin failed, the node's labels are left as they are: %v", err)
		return resultFailed, nil
	}

	p := newPlan(node.Labels, node.Annotations, want)
	c.reportConflicts(node, want, p.conflicts)
	if p.changed() {
		data, err := p.patch(node.ResourceVersion)
		if err != nil {
			return resultFailed, fmt.Errorf("%s: node %q: %w", op, name, err)
		}
		_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if apierrors.IsConflict(err) {
			// The resourceVersion precondition failed: another writer (the cloud-node
			// controller initialising the node, a kubelet status update) got there first.
			// Not a failure: the node is synced again against its new version.
			return resultRetried, fmt.Errorf("%s: patching node %q: %w", op, name, err)
		}
		if err != nil {
			return resultFailed, fmt.Errorf("%s: patching node %q: %w", op, name, err)
		}
		klog.InfoS("Applied plugin labels", "node", klog.KObj(node), "set", p.set, "removed", p.remove, "owned", p.owned)
	}
	switch {
	case len(p.conflicts) > 0:
		return resultConflict, nil
	case p.changed():
		return resultApplied, nil
	default:
		return resultUnchanged, nil
	}
}

// reportConflicts records a PluginLabelConflict event naming every conflicting key, unless the
// same conflicts were already reported for this node: a lasting conflict costs one event, not
// one per sync.
func (c *Controller) reportConflicts(node *corev1.Node, want map[string]string, keys []string) {
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s (node has %q, plugin wants %q)", k, node.Labels[k], want[k]))
	}
	msg := strings.Join(parts, ", ")

	c.mu.Lock()
	last := c.conflicts[node.Name]
	if msg == "" {
		delete(c.conflicts, node.Name)
	} else {
		c.conflicts[node.Name] = msg
	}
	c.mu.Unlock()

	if msg == "" || msg == last {
		return
	}
	klog.InfoS("Plugin labels conflict with labels this controller does not own, left alone", "node", klog.KObj(node), "conflicts", msg)
	c.recorder.Eventf(node, corev1.EventTypeWarning, EventPluginLabelConflict,
		"labels set by someone else differ from the node_labels plugin and are left alone: %s", msg)
}
