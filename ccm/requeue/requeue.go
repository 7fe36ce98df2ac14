// Package requeue retries denied Services at once when the policy input changes, and a Service
// whose detached load balancer update failed after UpdateLoadBalancer returned (ActionFailed).
//
// The upstream service controller retries a Service whose load balancer sync failed with
// exponential backoff (up to 5 minutes), and offers no way to enqueue a Service from outside. It
// does enqueue a Service at once, without backoff, on any update its needsUpdate considers
// relevant, and a change of annotations is one. So the CCM remembers which Services its policy
// denied, and when a new policy revision is put in force or the labels of a namespace change
// (both are policy input), it sets the annotation [Annotation] on those Services (all of them,
// or those of the namespace), which makes the service controller sync them now.
//
// # Why an annotation, through the status subresource?
//
// An annotation is the only Service change that needsUpdate sees and that means nothing to the
// Service's owner. It is patched through services/status, which the CCM may already patch
// (ingress, finalizer): the status strategy resets only spec, so metadata can change there and
// the CCM needs no write access to the Service itself.
//
// Start with New, feed it with Denied/Settled from the load balancer calls, connect
// PolicyLoaded and WatchNamespaces, and Run it. The load balancer code calls ActionFailed.
//
// A retry of a failed update sets the same annotation: the service controller then syncs the
// Service with EnsureLoadBalancer, which reads its load balancer fresh and repairs the targets.
//
// # Backoff of failed updates
//
// A failed update is not retried at once: that bypassed the service controller's backoff, and
// a burst of failing actions became a retry storm (issue 34 §1). Each Service that failed has a
// streak: its n-th failure schedules the retry ActionRetryBase·2ⁿ⁻¹ later, at most
// ActionRetryMax (2, 4, 8, 16, 16, … s). While the retry is scheduled the load balancer code
// sends nothing for the Service (RetryScheduled), so the syncs of a burst are the retries, not
// the failures: during a burst of D seconds a Service is synced at most 1 + ⌊log₂(min(D,30 s)/2 s
// + 1)⌋ + ⌊max(0, D−30 s)/16 s⌋ times (4 in 20 s, 8 in 90 s), each sync sending at most one request per
// missing target. A failed retry (SyncFailed) schedules the next; a sync that succeeds (Synced)
// ends the streak. The gap between a failure and the next retry is at most ActionRetryMax, so
// every target is in place within ActionRetryMax (plus one sync) of the end of the burst.
package requeue

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
)

// Annotation is set on a denied Service to make the service controller retry it at once. Its
// value says why and when ("policy revision 0123456789ab at 2026-11-25T10:47:24.123Z"). The name
// MUST not change: operators may filter it out of diffs.
const Annotation = annotation.PolicyRetry

// maxPatchRetries bounds the retries of a failed annotation patch; the service controller's own
// backoff retries the Service anyway.
const maxPatchRetries = 5

// ActionRetryBase and ActionRetryMax are the backoff of failed updates: the n-th failure in a
// row of a Service is retried ActionRetryBase·2ⁿ⁻¹ later, at most ActionRetryMax.
const (
	ActionRetryBase = 2 * time.Second
	ActionRetryMax  = 16 * time.Second
)

// Triggers of a retry (the metric's trigger label).
const (
	TriggerPolicy    = "policy"
	TriggerNamespace = "namespace"
	// TriggerGroup: a member left a load balancer group or was deleted; the members the leave
	// changes something for resync the group's load balancer (ccm/loadbalancer WatchGroups).
	TriggerGroup = "group"
	// TriggerAction is a detached load balancer update that failed (ActionFailed).
	TriggerAction = "action"
	// TriggerDrift is a load balancer that drifted from the state the CCM left it in, or was
	// deleted, behind the CCM's back (ccm/loadbalancer CheckDrift).
	TriggerDrift = "drift"
	// TriggerInventory is room in the inventory: the CCM deleted a load balancer or changed one
	// to a cheaper type (RoomAppeared).
	TriggerInventory = "inventory"
)

// retriesTotal counts annotation patches by trigger and result (success, error).
var retriesTotal = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "hcloud_ccm_policy_retries_total",
	Help:           "Services synced again by the CCM: denied ones because the policy or their namespace's labels changed or a load balancer was deleted or made cheaper, members of a load balancer group another member left, Services whose detached load balancer update failed (after a per-Service backoff) and Services whose load balancer drifted; by trigger (policy, namespace, group, action, drift, inventory) and result (success, error).",
	StabilityLevel: metrics.ALPHA,
}, []string{"trigger", "result"})

var registerOnce sync.Once

// Requeuer remembers the denied Services and retries them when the policy input changes, and
// retries failed updates with backoff. It is safe for concurrent use.
type Requeuer struct {
	client kubernetes.Interface
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	now    func() time.Time

	mu     sync.Mutex
	denied map[types.NamespacedName]types.UID
	// pending are Services queued for another reason than a denial (Requeue, ActionFailed),
	// patched once.
	pending map[types.NamespacedName]types.UID
	cause   map[types.NamespacedName]cause // why a queued Service is retried
	// failing are the Services whose update failed and whose sync has not succeeded since.
	failing map[types.NamespacedName]*streak
	// base and max are ActionRetryBase and ActionRetryMax (tests shorten them).
	base, max time.Duration
}

// streak is a run of failed updates of one Service.
type streak struct {
	failures int       // in a row
	next     time.Time // when the scheduled retry is due
}

// cause is why a Service is retried.
type cause struct{ trigger, text string }

// New returns a Requeuer that patches Services with client.
func New(client kubernetes.Interface) *Requeuer {
	registerOnce.Do(func() { legacyregistry.MustRegister(retriesTotal) })
	return &Requeuer{
		client: client,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "policy-retry"},
		),
		now:     time.Now,
		denied:  map[types.NamespacedName]types.UID{},
		pending: map[types.NamespacedName]types.UID{},
		cause:   map[types.NamespacedName]cause{},
		failing: map[types.NamespacedName]*streak{},
		base:    ActionRetryBase,
		max:     ActionRetryMax,
	}
}

// Denied records that the policy denied the last plan of svc.
func (r *Requeuer) Denied(svc *corev1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denied[keyOf(svc)] = svc.UID
}

// Settled records that the last plan of svc was not denied (it ran, failed otherwise, or there
// was nothing to do): svc is no longer retried on policy input changes.
func (r *Requeuer) Settled(svc *corev1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.denied, keyOf(svc))
}

// ActionFailed retries svc after the backoff of its streak of failures (see the package
// documentation): its detached load balancer update failed with err after UpdateLoadBalancer
// returned (ccm/loadbalancer's ActionFailureTracker). Unlike a denial, it is retried whatever
// Denied or Settled say meanwhile. A failure while a retry is already scheduled (one that
// started before it) changes nothing: the retry comes as scheduled.
func (r *Requeuer) ActionFailed(svc *corev1.Service, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := keyOf(svc)
	now := r.now()
	st := r.failing[k]
	if st == nil {
		st = &streak{}
		r.failing[k] = st
	} else if now.Before(st.next) {
		return
	}
	st.failures++
	delay := r.max
	if st.failures <= 30 {
		delay = min(r.base<<(st.failures-1), r.max)
	}
	st.next = now.Add(delay)
	r.pending[k] = svc.UID
	text := "failed load balancer update"
	if err != nil {
		text += " (" + truncate.String(err.Error(), maxCauseError) + ")"
	}
	r.cause[k] = cause{TriggerAction, text}
	r.queue.AddAfter(k, delay)
}

// SyncFailed records that a sync of svc that was not denied failed with err: when svc is in a
// streak of failed updates (its retry failed), the next retry is scheduled as by ActionFailed;
// otherwise the service controller's backoff retries it, and nothing happens here.
func (r *Requeuer) SyncFailed(svc *corev1.Service, err error) {
	r.mu.Lock()
	_, ok := r.failing[keyOf(svc)]
	r.mu.Unlock()
	if ok {
		r.ActionFailed(svc, err)
	}
}

// Synced records that a sync of svc (EnsureLoadBalancer) succeeded: its streak of failed
// updates ends, and the next failure is retried after ActionRetryBase again.
func (r *Requeuer) Synced(svc *corev1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failing, keyOf(svc))
}

// RetryScheduled returns when the scheduled retry of svc's failed update is due, and whether
// one is scheduled and not yet due. The load balancer code sends nothing for svc until then:
// the retry syncs it with the Service and nodes of that time.
func (r *Requeuer) RetryScheduled(svc *corev1.Service) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.failing[keyOf(svc)]
	if !ok || !r.now().Before(st.next) {
		return time.Time{}, false
	}
	return st.next, true
}

// maxCauseError bounds the error quoted in the annotation of a failed update's retry.
const maxCauseError = 200

// DeniedServices returns the Services whose last plan was denied.
func (r *Requeuer) DeniedServices() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(r.denied))
	for k := range maps.Keys(r.denied) {
		out = append(out, k)
	}
	return out
}

// PolicyLoaded retries every denied Service: revision was just put in force.
func (r *Requeuer) PolicyLoaded(revision string) {
	r.retry(cause{TriggerPolicy, "policy revision " + revision}, func(types.NamespacedName) bool { return true })
}

// NamespaceChanged retries the denied Services of cur when its labels differ from old's.
func (r *Requeuer) NamespaceChanged(old, cur *corev1.Namespace) {
	if maps.Equal(old.Labels, cur.Labels) {
		return
	}
	r.retry(cause{TriggerNamespace, "labels of namespace " + cur.Name}, func(k types.NamespacedName) bool { return k.Namespace == cur.Name })
}

// NamespaceAdded retries the denied Services of ns, which just reached the CCM's namespace
// cache: a Service decided before (at start-up, before the cache synced) was denied because its
// namespace's labels could not be read, and now they can.
func (r *Requeuer) NamespaceAdded(ns *corev1.Namespace) {
	r.retry(cause{TriggerNamespace, "namespace " + ns.Name + " readable"}, func(k types.NamespacedName) bool { return k.Namespace == ns.Name })
}

// RoomAppeared retries every denied Service: the CCM deleted a load balancer or changed one to
// a cheaper type (text says which), so a quota or budget rule over input.inventory may now let
// a denied create pass. Under a policy every load balancer decision carries the inventory, so
// every denied Service's last denial may have been such a rule; a Service whose denial had
// another reason is decided again once and denied again (its retry costs the decision, the
// denial cache of ccm/loadbalancer sees the new inventory in its digest).
func (r *Requeuer) RoomAppeared(text string) {
	r.retry(cause{TriggerInventory, text}, func(types.NamespacedName) bool { return true })
}

// WatchNamespaces calls NamespaceAdded for every namespace the informer adds and
// NamespaceChanged on every update.
func (r *Requeuer) WatchNamespaces(informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok {
				r.NamespaceAdded(ns)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Namespace)
			c, ok2 := cur.(*corev1.Namespace)
			if ok1 && ok2 {
				r.NamespaceChanged(o, c)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("requeue: watch namespaces: %w", err)
	}
	return nil
}

// Requeue makes the service controller sync svcs now (whether denied or not), for the reason
// text (trigger TriggerGroup): the members of a load balancer group when another member left it.
func (r *Requeuer) Requeue(svcs []*corev1.Service, text string) {
	r.syncNow(svcs, cause{TriggerGroup, text})
}

// syncNow queues svcs (whether denied or not) for a sync now, for c.
func (r *Requeuer) syncNow(svcs []*corev1.Service, c cause) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, svc := range svcs {
		k := keyOf(svc)
		r.pending[k] = svc.UID
		r.cause[k] = c
		r.queue.Add(k)
	}
}

// retry queues the denied Services that match.
func (r *Requeuer) retry(c cause, match func(types.NamespacedName) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.denied {
		if match(k) {
			r.cause[k] = c
			r.queue.Add(k)
		}
	}
}

// Run patches queued Services until ctx ends.
func (r *Requeuer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for r.next(ctx) {
	}
}

// next patches one queued Service; false once the queue is shut down.
func (r *Requeuer) next(ctx context.Context) bool {
	k, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(k)
	r.mu.Lock()
	uid, denied := r.denied[k]
	if pendingUID, pending := r.pending[k]; pending { // dropped by forget, after the last try
		uid, denied = pendingUID, true
	}
	c := r.cause[k]
	r.mu.Unlock()
	if !denied { // settled meanwhile
		r.forget(k)
		return true
	}
	err := r.patch(ctx, k, uid, c)
	switch {
	case err == nil:
		retriesTotal.WithLabelValues(c.trigger, "success").Inc()
		switch c.trigger {
		case TriggerGroup:
			klog.InfoS("Syncing a Service now: its load balancer group changed", "service", k, "cause", c.text)
		case TriggerAction:
			klog.InfoS("Retrying a Service now: its load balancer update failed after it was accepted", "service", k, "cause", c.text)
		case TriggerDrift:
			klog.InfoS("Syncing a Service now: its load balancer drifted behind the CCM's back", "service", k, "cause", c.text)
		default:
			klog.InfoS("Retrying a denied Service now: the policy input changed", "service", k, "cause", c.text)
		}
		r.forget(k)
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err): // gone, or replaced by a new Service
		gone := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
		r.Settled(gone)
		r.Synced(gone)
		r.forget(k)
	default:
		retriesTotal.WithLabelValues(c.trigger, "error").Inc()
		if r.queue.NumRequeues(k) < maxPatchRetries {
			klog.ErrorS(err, "Could not mark a denied Service for retry; trying again", "service", k, "cause", c.text)
			r.queue.AddRateLimited(k)
			return true
		}
		klog.ErrorS(err, "Could not mark a denied Service for retry; the service controller's backoff retries it", "service", k, "cause", c.text)
		r.forget(k)
	}
	return true
}

// forget drops k from the queue's backoff, its cause and its pending retry (Requeue,
// ActionFailed).
func (r *Requeuer) forget(k types.NamespacedName) {
	r.queue.Forget(k)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.cause, k)
	delete(r.pending, k)
}

// patch sets the annotation on the Service k through its status subresource. The UID in the
// patch is a precondition: a Service recreated under the same name is not touched (Conflict).
func (r *Requeuer) patch(ctx context.Context, k types.NamespacedName, uid types.UID, c cause) error {
	value := c.text + " at " + r.now().UTC().Format(time.RFC3339Nano)
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": map[string]string{Annotation: value},
	}})
	if err != nil {
		return fmt.Errorf("requeue: patch %s: %w", k, err)
	}
	if _, err := r.client.CoreV1().Services(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("requeue: patch %s: %w", k, err)
	}
	return nil
}

func keyOf(svc *corev1.Service) types.NamespacedName {
	return types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
}

// Drifted makes the service controller sync svcs now, for the reason text (trigger
// TriggerDrift): their EnsureLoadBalancer reads the load balancer fresh and repairs or recreates
// it (ccm/loadbalancer's DriftRequeuer).
func (r *Requeuer) Drifted(svcs []*corev1.Service, text string) {
	r.syncNow(svcs, cause{TriggerDrift, text})
}

// ClearStatus removes the load balancer addresses from the status of svc (a merge patch of
// services/status with svc's UID as precondition): its load balancer was deleted behind the
// CCM's back and the policy denied the create that would replace it, so the address it shows
// leads nowhere (ccm/loadbalancer's StatusClearer). A Service that is gone or was replaced is
// no error.
func (r *Requeuer) ClearStatus(ctx context.Context, svc *corev1.Service) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": svc.UID},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": nil}},
	})
	if err != nil {
		return fmt.Errorf("requeue: clear status of %s: %w", keyOf(svc), err)
	}
	_, err = r.client.CoreV1().Services(svc.Namespace).Patch(ctx, svc.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("requeue: clear status of %s: %w", keyOf(svc), err)
	}
	return nil
}
