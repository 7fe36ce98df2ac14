package loadbalancer

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// GroupRequeuer makes the service controller sync svcs now, for reason (ccm/requeue's
// Requeuer.Requeue).
type GroupRequeuer func(svcs []*corev1.Service, reason string)

// WatchGroups watches the Service informer (the one whose lister is Options.Services) for
// members that leave a load balancer group: the annotation removed or changed, the type no
// longer LoadBalancer, the Service being deleted. The members left are requeued at once, so the
// group's load balancer drops the leaver's ports (or an older claim passes to the next member)
// without waiting for the service controller's backoff. When a member leaves by its annotation
// and no member is left, the group's load balancer is deleted here (the leaver's own sync goes
// to a load balancer of its own and never sees the group again); a deleted Service or one that
// is no longer of type LoadBalancer is EnsureLoadBalancerDeleted's part.
//
// Nothing is decided before the informer has synced (cache.WaitForCacheSync on its HasSynced):
// a cache still filling would look like an empty group. Handlers never block the informer: the
// work runs in a goroutine per event, until ctx ends.
func (l *LoadBalancers) WatchGroups(ctx context.Context, informer cache.SharedIndexInformer, cluster string, requeue GroupRequeuer) error {
	if l.services == nil {
		return fmt.Errorf("loadbalancer.WatchGroups: Options.Services is nil: pass the lister of this informer")
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Service)
			c, ok2 := cur.(*corev1.Service)
			if ok1 && ok2 {
				l.serviceChanged(ctx, informer.HasSynced, cluster, requeue, o, c)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if svc, ok := obj.(*corev1.Service); ok {
				l.serviceChanged(ctx, informer.HasSynced, cluster, requeue, svc, nil)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("loadbalancer.WatchGroups: %w", err)
	}
	return nil
}

// memberOf is the group svc is a member of ("" for none): type LoadBalancer, a valid annotation
// and, unless deleting is allowed, no deletionTimestamp.
func memberOf(svc *corev1.Service, deleting bool) string {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.DeletionTimestamp != nil && !deleting {
		return ""
	}
	g, err := annotation.Group(svc)
	if err != nil {
		return ""
	}
	return g
}

// serviceChanged handles the change of a Service from old to cur (nil: deleted); see
// WatchGroups.
func (l *LoadBalancers) serviceChanged(ctx context.Context, synced cache.InformerSynced, cluster string, requeue GroupRequeuer, old, cur *corev1.Service) {
	group := memberOf(old, cur == nil)
	if group == "" || group == memberOf(cur, false) {
		return
	}
	curGroup, err := annotation.Group(cur)
	byAnnotation := cur != nil && (err != nil || curGroup != group)
	go l.groupLeft(ctx, synced, cluster, group, old, requeue, byAnnotation)
}

// groupLeft requeues the members of group that leaver left; with none left and byAnnotation,
// it deletes the group's load balancer.
func (l *LoadBalancers) groupLeft(ctx context.Context, synced cache.InformerSynced, cluster, group string, leaver *corev1.Service, requeue GroupRequeuer, byAnnotation bool) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	members, err := l.members(leaver, group, false)
	if err != nil {
		klog.ErrorS(err, "Load balancer group not resynced after a member left", "group", group, "member", lbplan.Key(leaver))
		return
	}
	if len(members) > 0 {
		if requeue != nil {
			requeue(members, fmt.Sprintf("%s left load balancer group %s", lbplan.Key(leaver), group))
		}
		return
	}
	if !byAnnotation {
		return
	}
	unlock := l.lockGroup(group)
	defer unlock()
	if err := l.sweepGroup(ctx, cluster, group, leaver); err != nil {
		klog.ErrorS(err, "Could not delete the load balancer of a group without members", "group", group, "lastMember", lbplan.Key(leaver))
	}
}

// sweepGroup deletes the load balancer of group once the lister shows no member (read again
// under the group's lock), on behalf of leaver, the last member (its input.service).
func (l *LoadBalancers) sweepGroup(ctx context.Context, cluster, group string, leaver *corev1.Service) error {
	members, err := l.members(leaver, group, false)
	if err != nil || len(members) > 0 {
		return err
	}
	if err := l.settleGroup(ctx, leaver); err != nil {
		return err
	}
	lb, readAt, err := l.groupLB(ctx, group, cluster, false)
	if err != nil || lb == nil {
		return err
	}
	return l.shrinkGroup(ctx, cluster, group, leaver, nil, lb, readAt)
}

// groupLocks serialises the reconciles of one group within this CCM (the service controller may
// sync several members at once, and the sweep runs beside it).
type groupLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// lockGroup locks group and returns the unlock.
func (l *LoadBalancers) lockGroup(group string) func() {
	l.groupLocks.mu.Lock()
	if l.groupLocks.locks == nil {
		l.groupLocks.locks = map[string]*sync.Mutex{}
	}
	m := l.groupLocks.locks[group]
	if m == nil {
		m = &sync.Mutex{}
		l.groupLocks.locks[group] = m
	}
	l.groupLocks.mu.Unlock()
	m.Lock()
	return m.Unlock
}
