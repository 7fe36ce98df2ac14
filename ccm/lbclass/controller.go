// Package lbclass serves the Services of type LoadBalancer whose spec.loadBalancerClass is the
// class the CCM was given (--load-balancer-class). The upstream service controller of
// k8s.io/cloud-provider ignores every Service with a class, so this controller makes, for those
// Services, the calls the upstream one makes for class-less Services, on the same
// cloudprovider.LoadBalancer: the finalizer service.kubernetes.io/load-balancer-cleanup before
// the first EnsureLoadBalancer, the nodes the upstream passes, status.loadBalancer patched
// through services/status, UpdateLoadBalancer when the node set changes, EnsureLoadBalancerDeleted
// and the finalizer removed on deletion, retries with exponential backoff (5 s to 5 min, as the
// upstream), and the upstream's events. Services of any other class are never read further than
// their class.
//
// In class-only mode (--load-balancer-class-only, the upstream service controller off) it also
// finishes the deletion of class-less Services that carry the cleanup finalizer (served before
// the switch): it deletes their load balancer and removes the finalizer, so their deletion does
// not hang. It never creates or updates a load balancer for a class-less Service.
//
// Differences from the upstream controller: a Service deleted without the finalizer (removed
// by hand) is not cleaned up (the upstream keeps a cache of Services for that case; the
// finalizer is always added before the first create here), and the node sync runs on the
// service queue rather than a queue of its own.
package lbclass

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	"k8s.io/klog/v2"
)

// Name is the controller's name for --controllers; it runs under leader election like the
// upstream controllers.
const Name = "load-balancer-class"

// Upstream's retry bounds of a failed Service sync (minRetryDelay, maxRetryDelay).
const (
	DefaultRetryBase = 5 * time.Second
	DefaultRetryCap  = 5 * time.Minute
)

// toBeDeletedTaint is the cluster autoscaler's taint; the upstream leaves such nodes out.
const toBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// nodesKey is the queue item of a node set change; it cannot be a namespace/name key.
const nodesKey = "\x00nodes"

// Options configure New.
type Options struct {
	// Class is the spec.loadBalancerClass served; required.
	Class string
	// ClassOnly: the upstream service controller does not run, so this one also finishes the
	// deletion of class-less Services that carry the cleanup finalizer.
	ClassOnly bool
	// ClusterName is --cluster-name, passed to the load balancer calls.
	ClusterName string
	// Client patches Services (finalizer, status) through services/status.
	Client kubernetes.Interface
	// Services and Nodes are the controller manager's shared informers.
	Services coreinformers.ServiceInformer
	Nodes    coreinformers.NodeInformer
	// Balancer is the provider's load balancer implementation.
	Balancer cloudprovider.LoadBalancer
	// Recorder receives the events on Services.
	Recorder record.EventRecorder
	// RetryBase and RetryCap bound the backoff of failed syncs; zero: the upstream's.
	RetryBase, RetryCap time.Duration
}

// Controller is the load balancer controller of one class. Build it with New, start it with
// Run.
type Controller struct {
	o        Options
	services corelisters.ServiceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	mu        sync.Mutex
	lastNodes map[string][]string // Service key -> sorted node names of its last sync
}

// New builds the controller and registers its event handlers on the informers.
//
// # Errors
//
// A missing option, or an informer that refuses the handlers.
func New(o Options) (*Controller, error) {
	if o.Class == "" || o.Client == nil || o.Services == nil || o.Nodes == nil || o.Balancer == nil || o.Recorder == nil {
		return nil, errors.New("lbclass.New: Class, Client, Services, Nodes, Balancer and Recorder are required")
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryCap <= 0 {
		o.RetryCap = DefaultRetryCap
	}
	c := &Controller{
		o:        o,
		services: o.Services.Lister(),
		nodes:    o.Nodes.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.RetryBase, o.RetryCap),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: Name}),
		lastNodes: map[string][]string{},
	}
	sreg, err := o.Services.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.serviceChanged(nil, obj) },
		UpdateFunc: c.serviceChanged,
		DeleteFunc: c.serviceDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("lbclass.New: service handlers: %w", err)
	}
	nreg, err := o.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.queue.Add(nodesKey) },
		UpdateFunc: func(old, cur any) {
			on, ok1 := old.(*corev1.Node)
			nn, ok2 := cur.(*corev1.Node)
			if ok1 && ok2 && nodeSetChanged(on, nn) {
				c.queue.Add(nodesKey)
			}
		},
		DeleteFunc: func(any) { c.queue.Add(nodesKey) },
	})
	if err != nil {
		return nil, fmt.Errorf("lbclass.New: node handlers: %w", err)
	}
	c.synced = []cache.InformerSynced{sreg.HasSynced, nreg.HasSynced}
	return c, nil
}

// Run syncs Services with workers goroutines until ctx ends; the informers must be started.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	klog.InfoS("Starting the load balancer class controller", "class", c.o.Class, "classOnly", c.o.ClassOnly)
	if !cache.WaitForNamedCacheSync(Name, ctx.Done(), c.synced...) {
		return
	}
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

// Action is what the controller does for one Service.
type Action int

// The actions of Decide.
const (
	// Skip: not this controller's Service.
	Skip Action = iota
	// Ensure: finalizer, EnsureLoadBalancer, status.
	Ensure
	// Cleanup: EnsureLoadBalancerDeleted, finalizer removed, status cleared.
	Cleanup
)

// Decide returns what the controller of class (in class-only mode or not) does for svc:
// Ensure for a Service of the class that is not being deleted, Cleanup for a Service of the
// class being deleted with the finalizer, and, in class-only mode, for a class-less Service
// with the finalizer that is being deleted or is no longer of type LoadBalancer; Skip for
// every other Service, in particular every Service of another class.
func Decide(class string, classOnly bool, svc *corev1.Service) Action {
	if svc == nil {
		return Skip
	}
	finalizer := servicehelper.HasLBFinalizer(svc)
	deleting := svc.DeletionTimestamp != nil
	switch {
	case svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass == class:
		switch {
		case deleting && finalizer, finalizer && svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
			return Cleanup
		case deleting || svc.Spec.Type != corev1.ServiceTypeLoadBalancer:
			return Skip
		}
		return Ensure
	case svc.Spec.LoadBalancerClass == nil && classOnly && finalizer:
		if deleting || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return Cleanup
		}
	}
	return Skip
}

// needsSync reports whether an update from old to cur can change what a sync does: a change of
// spec, annotations (the requeuer's retries are one), UID or deletion, or the finalizer
// removed (by hand: the next sync adds it again). Status-only updates and the finalizer added
// (the controller's own patches) and resyncs are not, as in the upstream's needsUpdate.
func needsSync(old, cur *corev1.Service) bool {
	return old == nil || old.UID != cur.UID ||
		!equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
		!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		servicehelper.HasLBFinalizer(old) && !servicehelper.HasLBFinalizer(cur)
}

// serviceChanged enqueues cur when this controller acts on it and the change matters.
func (c *Controller) serviceChanged(old, cur any) {
	svc, ok := cur.(*corev1.Service)
	if !ok || Decide(c.o.Class, c.o.ClassOnly, svc) == Skip {
		return
	}
	prev, _ := old.(*corev1.Service)
	if !needsSync(prev, svc) {
		return
	}
	if key, err := cache.MetaNamespaceKeyFunc(svc); err == nil {
		c.queue.Add(key)
	}
}

// serviceDeleted forgets the node set of a deleted Service.
func (c *Controller) serviceDeleted(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.mu.Lock()
		delete(c.lastNodes, key)
		c.mu.Unlock()
	}
}

// worker processes queue items until the queue shuts down.
func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

// processNext syncs one item; a failed Service is retried with backoff.
func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if key == nodesKey {
		c.syncNodes(ctx)
		return true
	}
	if err := c.syncService(ctx, key); err != nil {
		utilruntime.HandleError(fmt.Errorf("load balancer class %s: sync %s: %w", c.o.Class, key, err))
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// syncService does Decide's action for the Service key names, on a copy of the cached object.
// It records SyncLoadBalancerFailed when the action fails.
func (c *Controller) syncService(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil //nolint:nilerr // a malformed key is never retried
	}
	cached, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get service: %w", err)
	}
	svc := cached.DeepCopy()
	switch Decide(c.o.Class, c.o.ClassOnly, svc) {
	case Ensure:
		err = c.ensure(ctx, key, svc)
	case Cleanup:
		err = c.cleanup(ctx, key, svc)
	default:
		return nil
	}
	if err != nil {
		c.o.Recorder.Eventf(svc, corev1.EventTypeWarning, "SyncLoadBalancerFailed", "Error syncing load balancer: %v", err)
	}
	return err
}

// ensure adds the finalizer, calls EnsureLoadBalancer with the eligible nodes and patches the
// status, as the upstream does for a class-less Service.
func (c *Controller) ensure(ctx context.Context, key string, svc *corev1.Service) error {
	c.o.Recorder.Event(svc, corev1.EventTypeNormal, "EnsuringLoadBalancer", "Ensuring load balancer")
	if err := c.patch(svc, func(s *corev1.Service) {
		if !servicehelper.HasLBFinalizer(s) {
			s.Finalizers = append(s.Finalizers, servicehelper.LoadBalancerCleanupFinalizer)
		}
	}); err != nil {
		return fmt.Errorf("failed to add load balancer cleanup finalizer: %w", err)
	}
	nodes, err := c.eligibleNodes()
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		c.o.Recorder.Event(svc, corev1.EventTypeWarning, "UnAvailableLoadBalancer", "There are no available nodes for LoadBalancer")
	}
	c.storeNodes(key, nodes)
	status, err := c.o.Balancer.EnsureLoadBalancer(ctx, c.o.ClusterName, svc, nodes)
	if errors.Is(err, cloudprovider.ImplementedElsewhere) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to ensure load balancer: %w", err)
	}
	if status == nil {
		return errors.New("service status returned by EnsureLoadBalancer is nil")
	}
	c.o.Recorder.Event(svc, corev1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")
	return c.patchStatus(svc, status)
}

// cleanup deletes the Service's load balancer if one exists, removes the finalizer and clears
// the status, as the upstream does.
func (c *Controller) cleanup(ctx context.Context, key string, svc *corev1.Service) error {
	_, exists, err := c.o.Balancer.GetLoadBalancer(ctx, c.o.ClusterName, svc)
	if err != nil {
		return fmt.Errorf("failed to check if load balancer exists before cleanup: %w", err)
	}
	if exists {
		c.o.Recorder.Event(svc, corev1.EventTypeNormal, "DeletingLoadBalancer", "Deleting load balancer")
		if err := c.o.Balancer.EnsureLoadBalancerDeleted(ctx, c.o.ClusterName, svc); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
			return fmt.Errorf("failed to delete load balancer: %w", err)
		}
	}
	if err := c.patch(svc, func(s *corev1.Service) {
		s.Finalizers = slices.DeleteFunc(s.Finalizers, func(f string) bool { return f == servicehelper.LoadBalancerCleanupFinalizer })
	}); err != nil {
		return fmt.Errorf("failed to remove load balancer cleanup finalizer: %w", err)
	}
	c.o.Recorder.Event(svc, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	c.mu.Lock()
	delete(c.lastNodes, key)
	c.mu.Unlock()
	return c.patchStatus(svc, &corev1.LoadBalancerStatus{})
}

// patch applies change to a copy of svc and patches the difference through services/status;
// on success svc becomes the patched object. No difference sends nothing.
func (c *Controller) patch(svc *corev1.Service, change func(*corev1.Service)) error {
	updated := svc.DeepCopy()
	change(updated)
	if equality.Semantic.DeepEqual(svc.ObjectMeta, updated.ObjectMeta) && equality.Semantic.DeepEqual(svc.Status, updated.Status) {
		return nil
	}
	got, err := servicehelper.PatchService(c.o.Client.CoreV1(), svc, updated)
	if err != nil {
		return err
	}
	*svc = *got
	return nil
}

// patchStatus sets status.loadBalancer unless it is equal; a Service gone meanwhile is no error.
func (c *Controller) patchStatus(svc *corev1.Service, status *corev1.LoadBalancerStatus) error {
	if servicehelper.LoadBalancerStatusEqual(&svc.Status.LoadBalancer, status) {
		return nil
	}
	err := c.patch(svc, func(s *corev1.Service) { s.Status.LoadBalancer = *status })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to update load balancer status: %w", err)
	}
	return nil
}

// syncNodes calls UpdateLoadBalancer for every served Service whose eligible node set differs
// from its last sync; a failure records UpdateLoadBalancerFailed and retries the Service's
// full sync with backoff, as the upstream.
func (c *Controller) syncNodes(ctx context.Context) {
	nodes, err := c.eligibleNodes()
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	all, err := c.services.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("load balancer class %s: list services: %w", c.o.Class, err))
		return
	}
	for _, cached := range all {
		if Decide(c.o.Class, c.o.ClassOnly, cached) != Ensure || !servicehelper.HasLBFinalizer(cached) {
			continue
		}
		key, err := cache.MetaNamespaceKeyFunc(cached)
		if err != nil || !c.storeNodes(key, nodes) {
			continue
		}
		svc := cached.DeepCopy()
		if err := c.o.Balancer.UpdateLoadBalancer(ctx, c.o.ClusterName, svc, nodes); err != nil && !errors.Is(err, cloudprovider.ImplementedElsewhere) {
			c.o.Recorder.Eventf(svc, corev1.EventTypeWarning, "UpdateLoadBalancerFailed", "Error updating load balancer with new hosts: %v", err)
			c.queue.AddRateLimited(key)
			continue
		}
		c.o.Recorder.Event(svc, corev1.EventTypeNormal, "UpdatedLoadBalancer", "Updated load balancer with new hosts")
	}
}

// storeNodes remembers the node names of key's sync and reports whether they changed.
func (c *Controller) storeNodes(key string, nodes []*corev1.Node) bool {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.lastNodes[key]
	c.lastNodes[key] = names
	return !ok || !slices.Equal(prev, names)
}

// eligibleNodes lists the nodes the upstream service controller passes (its
// stableNodeSetPredicates): not being deleted, not labelled
// node.kubernetes.io/exclude-from-external-load-balancers (unless the value parses as false),
// not tainted ToBeDeletedByClusterAutoscaler. Readiness is not a condition, as upstream.
func (c *Controller) eligibleNodes() ([]*corev1.Node, error) {
	all, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]*corev1.Node, 0, len(all))
	for _, n := range all {
		if Eligible(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Eligible reports whether the upstream service controller would pass node to a load balancer.
func Eligible(node *corev1.Node) bool {
	return node.DeletionTimestamp == nil && included(node) && !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == toBeDeletedTaint })
}

// included is the upstream's nodeIncludedPredicate.
func included(node *corev1.Node) bool {
	v, ok := node.Labels[corev1.LabelNodeExcludeBalancers]
	if !ok {
		return true
	}
	exclude, err := strconv.ParseBool(v)
	return err == nil && !exclude
}

// nodeSetChanged is the upstream's shouldSyncUpdatedNode: the exclusion label's verdict or the
// provider ID changed.
func nodeSetChanged(old, cur *corev1.Node) bool {
	return included(old) != included(cur) || old.Spec.ProviderID != cur.Spec.ProviderID
}
