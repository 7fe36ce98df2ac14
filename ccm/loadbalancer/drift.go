package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Drift repair (docs/reliability.md, "Drift is repaired within a stated bound").
//
// A load balancer changed or deleted by hand is repaired by the next EnsureLoadBalancer, which
// reads it fresh. Nothing calls one while the cluster is idle, and an UpdateLoadBalancer reads
// through the cache, whose entry may still show what the hand edit removed. So the CCM
// remembers, for every Service, the state its last successful plan left the load balancer in
// (converged), and CheckDrift compares it with a fresh list every DriftPeriod: a Service whose
// load balancer differs, or is gone, is synced now (DriftRequeuer, the annotation of
// ccm/requeue), and its EnsureLoadBalancer repairs or recreates it and sets the new address.
//
// # Why compare with the converged state, not the desired one?
//
// The desired state needs the node set the service controller passes (its node predicates),
// which the CCM does not compute itself; the state the last successful plan left is exactly
// that desired state, as of that plan. A legitimate change (a node joins) runs a plan and
// replaces it; a hand edit does not.

// DefaultDriftInterval is the default of --load-balancer-drift-interval: the shortest time
// between two drift checks (DriftPeriod may make it longer to fit the API budget).
const DefaultDriftInterval = 10 * time.Minute

// DriftRequeuer is implemented by a DenialTracker that can make the service controller sync
// Services now because their load balancer drifted or is gone (ccm/requeue's Requeuer does).
type DriftRequeuer interface {
	// Drifted makes the service controller sync svcs now, for reason.
	Drifted(svcs []*corev1.Service, reason string)
}

// ReasonLoadBalancerStatusCleared is the Warning event on a Service whose load balancer was
// deleted behind the CCM's back and whose re-create the policy denied: its status address is
// cleared. It MUST not change: operators alert on it.
const ReasonLoadBalancerStatusCleared = "LoadBalancerStatusCleared"

// StatusClearer is implemented by a DenialTracker that can clear a Service's load balancer
// status (ccm/requeue's Requeuer does).
type StatusClearer interface {
	// ClearStatus removes the load balancer addresses from the status of svc.
	ClearStatus(ctx context.Context, svc *corev1.Service) error
}

// watchOwn watches the load balancer of a Service of its own after a sync (EnsureLoadBalancer
// with create, UpdateLoadBalancer without) that left state with the result err, for a delete
// behind the CCM's back: a denied Ensure clears a status that leads nowhere (clearIfGone), an
// Update that found no load balancer syncs the Service now (missingOnUpdate).
func (l *LoadBalancers) watchOwn(ctx context.Context, svc *corev1.Service, create bool, state *lbplan.Actual, err error) {
	switch {
	case create && errors.Is(err, policy.ErrDenied):
		l.clearIfGone(ctx, svc) // a denied re-create of a load balancer deleted by hand
	case !create && err == nil && state == nil:
		l.missingOnUpdate(svc)
	}
}

// clearIfGone is called after the policy denied an EnsureLoadBalancer of svc: when svc shows an
// address but has no load balancer (the entry the Ensure's fresh read just kept: no request),
// the denied plan was the re-create of a load balancer deleted behind the CCM's back, and the
// address leads nowhere. The status is cleared (StatusClearer) with a Warning event
// LoadBalancerStatusCleared; the denial stays the Ensure's error, retried as any denial.
func (l *LoadBalancers) clearIfGone(ctx context.Context, svc *corev1.Service) {
	c, ok := l.denials.(StatusClearer)
	if !ok || !lostLoadBalancer(svc) {
		return
	}
	lbs, _, err := l.cache.Get(ctx, string(svc.UID))
	if err != nil || len(lbs) > 0 {
		return
	}
	if err := c.ClearStatus(ctx, svc); err != nil {
		klog.ErrorS(err, "Could not clear the status of a Service whose load balancer is gone and whose re-create was denied", "service", klog.KObj(svc))
		return
	}
	l.warn(ctx, svc, ReasonLoadBalancerStatusCleared,
		"the load balancer was deleted outside the CCM and the policy denied its re-create: its address is removed from the status")
}

// converged is the state the last successful plan of each Service left its load balancer in.
// The zero value is ready to use.
type converged struct {
	mu sync.Mutex
	m  map[types.UID]convergedState
}

// convergedState is one Service's entry.
type convergedState struct {
	key types.NamespacedName
	fp  string    // driftFingerprint of the load balancer
	at  time.Time // when it was recorded
}

// set records state (nil: the Service has no load balancer) as svc's converged state.
func (c *converged) set(svc *corev1.Service, state *lbplan.Actual, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state == nil {
		delete(c.m, svc.UID)
		return
	}
	if c.m == nil {
		c.m = map[types.UID]convergedState{}
	}
	c.m[svc.UID] = convergedState{key: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, fp: driftFingerprint(state), at: now}
}

// drop forgets uid and reports whether it was recorded.
func (c *converged) drop(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[uid]
	delete(c.m, uid)
	return ok
}

// all returns a copy of the entries.
func (c *converged) all() map[types.UID]convergedState {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[types.UID]convergedState, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// driftFingerprint is what drift is checked on: the listeners (protocol, listen and destination
// port) and the targets (servers with use_private_ip, IPs). Everything else a hand edit may
// change is repaired by the next sync of the Service for another reason.
func driftFingerprint(a *lbplan.Actual) string {
	// Sorted: a state the planner's mutations left (Mutation.Apply appends) and one read from
	// the API may list the same listeners and targets in another order.
	var listeners, targets []string
	for _, s := range a.Services {
		listeners = append(listeners, fmt.Sprintf("%s/%d>%d", s.Protocol, s.ListenPort, s.DestinationPort))
	}
	for _, t := range a.Targets {
		id := strconv.FormatInt(t.ServerID, 10)
		if t.UsePrivateIP {
			id += "/private"
		}
		targets = append(targets, id)
	}
	targets = append(targets, a.IPTargets...)
	slices.Sort(listeners)
	slices.Sort(targets)
	return "listeners: [" + strings.Join(listeners, " ") + "] targets: [" + strings.Join(targets, " ") + "]"
}

// DriftPeriod is the time from one drift check to the next: interval, or longer when the list
// of pages pages (⌈load balancers/50⌉, at least 1) would spend more than half of budget
// requests per hour (HCLOUD_API_BUDGET_PER_HOUR; 0 or less: no limit): pages × 2h / budget.
func DriftPeriod(interval time.Duration, pages, budget int) time.Duration {
	if budget <= 0 {
		return interval
	}
	if paced := time.Duration(max(pages, 1)) * 2 * time.Hour / time.Duration(budget); paced > interval {
		return paced
	}
	return interval
}

// CheckDrift lists every load balancer carrying the UID label now (lbcache.Cache.Refresh,
// ⌈n/50⌉ requests, which also refreshes the cache) and syncs, through the DenialTracker when it
// is a DriftRequeuer, each Service whose load balancer differs from the state the CCM's last
// successful plan left it in (listeners, targets), or is gone; and, with the Service lister,
// each Service of type LoadBalancer whose status has an address but that has no load balancer
// (one deleted by hand while no CCM ran). Entries recorded after the list started are left to
// the next check; Services of load balancer groups are WatchGroups' and SweepGroups' part. It
// returns the pages listed and the Services synced. A Service whose failed update has a retry
// scheduled (ActionRetryTracker) is left to that retry.
//
// # Errors
//
// The list's error, wrapped.
func (l *LoadBalancers) CheckDrift(ctx context.Context) (pages, synced int, err error) {
	byUID, listedAt, err := l.cache.Refresh(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("check load balancer drift: %w", err)
	}
	total := 0
	for _, lbs := range byUID {
		total += len(lbs)
	}
	pages = max(1, (total+49)/50)
	type found struct {
		svc    *corev1.Service
		reason string
	}
	var todo []found
	live := l.liveServices()
	recorded := l.converged.all()
	for uid, st := range recorded {
		if st.at.After(listedAt) {
			continue
		}
		if live != nil {
			if svc, ok := live[uid]; !ok || svc.DeletionTimestamp != nil {
				l.converged.drop(uid)
				continue
			}
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: st.key.Namespace, Name: st.key.Name, UID: uid}}
		switch lbs := byUID[string(uid)]; {
		case len(lbs) == 0:
			todo = append(todo, found{svc, "load balancer deleted behind the CCM's back"})
		case len(lbs) == 1:
			if fp := driftFingerprint(lbs[0]); fp != st.fp {
				todo = append(todo, found{svc, fmt.Sprintf("load balancer %s drifted (%s, want %s)", lbs[0].Name, fp, st.fp)})
			}
		}
	}
	for uid, svc := range live { // a dropped entry was not live: it is not among these
		if _, ok := recorded[uid]; ok || len(byUID[string(uid)]) > 0 || !lostLoadBalancer(svc) {
			continue
		}
		todo = append(todo, found{svc, "load balancer of a Service with an address not found"})
	}
	slices.SortFunc(todo, func(a, b found) int {
		return strings.Compare(a.svc.Namespace+"/"+a.svc.Name, b.svc.Namespace+"/"+b.svc.Name)
	})
	n := 0
	for _, f := range todo {
		if due, ok := l.retryDue(f.svc); ok {
			klog.V(2).InfoS("Load balancer drift found, left to the scheduled retry of its failed update", "service", klog.KObj(f.svc), "reason", f.reason, "due", due)
			continue
		}
		klog.InfoS("Load balancer drift found: syncing the Service now", "service", klog.KObj(f.svc), "reason", f.reason)
		l.requeueDrift(f.svc, f.reason)
		n++
	}
	return pages, n, nil
}

// retryDue returns when the scheduled retry of svc's failed update is due, if one is
// (ActionRetryTracker): drift repair leaves such a Service to that retry, so that a burst of
// failing actions is not retried by every drift check too (issue 40 §5; the bound of
// docs/reliability.md, TestCheckDrift_leavesScheduledRetries).
func (l *LoadBalancers) retryDue(svc *corev1.Service) (time.Time, bool) {
	t, ok := l.denials.(ActionRetryTracker)
	if !ok {
		return time.Time{}, false
	}
	return t.RetryScheduled(svc)
}

// liveServices returns the Services the CCM serves (Serves: class-less ones unless
// --load-balancer-class-only, and those of --load-balancer-class) without a group annotation
// from the lister, by UID; nil without a lister.
func (l *LoadBalancers) liveServices() map[types.UID]*corev1.Service {
	if l.services == nil {
		return nil
	}
	all, err := l.services.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := map[types.UID]*corev1.Service{}
	for _, svc := range all {
		if !l.Serves(svc) {
			continue
		}
		if _, err := annotation.Group(svc); !errors.Is(err, annotation.ErrNotSet) {
			continue
		}
		out[svc.UID] = svc
	}
	return out
}

// lostLoadBalancer reports whether svc shows an address of a load balancer (so one existed).
func lostLoadBalancer(svc *corev1.Service) bool {
	return svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) > 0
}

// requeueDrift syncs svc now through the DenialTracker when it is a DriftRequeuer.
func (l *LoadBalancers) requeueDrift(svc *corev1.Service, reason string) {
	if r, ok := l.denials.(DriftRequeuer); ok {
		r.Drifted([]*corev1.Service{svc}, reason)
	}
}

// missingOnUpdate is called when an UpdateLoadBalancer found no load balancer for svc: when the
// CCM had one recorded, or the Service shows an address, it was deleted behind the CCM's back,
// and svc is synced now so that its EnsureLoadBalancer recreates it and sets the new address.
func (l *LoadBalancers) missingOnUpdate(svc *corev1.Service) {
	if l.converged.drop(svc.UID) || lostLoadBalancer(svc) {
		klog.InfoS("Load balancer not found on update: syncing the Service now to recreate it", "service", klog.KObj(svc))
		l.requeueDrift(svc, "load balancer deleted behind the CCM's back")
	}
}

// RepairDrift runs CheckDrift every DriftPeriod(interval, pages of the last list, budget), the
// first time one interval after the Service informer synced (synced; the informers start once
// this CCM leads, so a standby never checks), until ctx ends. interval 0 or less disables it. A
// failed check is logged and tried again at the next one. It blocks: run it in a goroutine.
//
// A hand edit of a listener or a target, or a hand delete, is repaired within one period plus
// one sync of the Service (docs/reliability.md).
func (l *LoadBalancers) RepairDrift(ctx context.Context, synced cache.InformerSynced, interval time.Duration, budget int) {
	if interval <= 0 || !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	period := DriftPeriod(interval, 1, budget)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
		pages, n, err := l.CheckDrift(ctx)
		if err != nil {
			klog.ErrorS(err, "Load balancer drift check failed; tried again at the next check", "nextIn", period)
			continue
		}
		period = DriftPeriod(interval, pages, budget)
		klog.V(2).InfoS("Load balancer drift checked", "pages", pages, "synced", n, "nextIn", period)
	}
}
