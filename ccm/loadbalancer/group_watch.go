package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// GroupRequeuer makes the service controller sync svcs now, for reason (ccm/requeue's
// Requeuer.Requeue).
type GroupRequeuer func(svcs []*corev1.Service, reason string)

// WatchGroups watches the Service informer (the one whose lister is Options.Services) for
// members that leave a load balancer group: the annotation removed or changed, the type no
// longer LoadBalancer, the Service deleted. The members whose sync the leave changes (toResync:
// an older claim passes to them, they were not served, or the leader and its settings change, or
// the leaver's listeners are still on the load balancer) are requeued at once, without waiting
// for the service controller's backoff; a deleted member is looked at once, when it is gone. When a member leaves by its annotation
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
	if group == "" || group == memberOf(cur, false) || !l.Serves(old) { // another class was never a member
		return
	}
	if cur != nil && memberOf(cur, true) == group {
		// Being deleted: EnsureLoadBalancerDeleted takes its listeners off the group's load
		// balancer, and the others are looked at once, when the Service is gone (DeleteFunc).
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
		home := l.groupHomeAfterLeave(ctx, cluster, group, leaver, members)
		if lbgroup.HasHomeMember(members, home) {
			if resync := toResync(leaver, members, home, byAnnotation); requeue != nil && len(resync) > 0 {
				requeue(resync, fmt.Sprintf("%s left load balancer group %s", lbplan.Key(leaver), group))
			}
			return
		}
		// Only members of other namespaces are left: the group's load balancer goes (below, or
		// the leaver's EnsureLoadBalancerDeleted), and each of them is told why at its sync.
		if requeue != nil {
			requeue(members, fmt.Sprintf("%s left load balancer group %s, whose home namespace %s has no member left", lbplan.Key(leaver), group, home))
		}
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

// toResync returns the members (oldest first, leaver not among them) whose sync the leave of
// leaver may change, so that only they are requeued:
//   - every member that claims a port the leaver held (an older claim passes to it), and every
//     member without an address in its status (refused for capacity, every port held by older
//     members, or denied): the leave may have made room for it;
//   - the new leader (lbgroup.GroupLeader: the oldest member in the group's home namespace
//     home), when the leaver led and their load-balancer-wide settings differ (the leader's
//     are in force), or when the leaver left by its annotation (its
//     listeners are still on the group's load balancer, and any member's sync takes them off).
//
// A served member gains nothing from a deleted member's leave otherwise: its
// EnsureLoadBalancerDeleted already took the leaver's listeners off. Requeueing every member at
// every leave made a group's delete read its load balancer once per member and leave
// (TestGroup_DeleteRequeuesOnlyWhatChanges, issue 33). It is pure.
func toResync(leaver *corev1.Service, members []*corev1.Service, home string, byAnnotation bool) []*corev1.Service {
	before := membersBefore(leaver, members)
	led := lbgroup.GroupLeader(before, home)
	held := map[string]bool{} // members that claim a port the leaver held
	for _, c := range lbgroup.AdmitGroup(declaredLists(lbgroup.LeaderFirst(before, led)), 0).Conflicts {
		if c.Owner == lbplan.Key(leaver) {
			held[c.Member] = true
		}
	}
	var out []*corev1.Service
	for _, m := range members {
		if len(m.Status.LoadBalancer.Ingress) == 0 || held[lbplan.Key(m)] {
			out = append(out, m)
		}
	}
	lead := lbgroup.GroupLeader(members, home)
	if slices.Contains(out, lead) {
		return out
	}
	if byAnnotation || lbplan.Key(led) == lbplan.Key(leaver) && leaderSettingsDiffer(leaver, lead) {
		out = append([]*corev1.Service{lead}, out...)
	}
	return out
}

// groupHomeAfterLeave returns the home namespace of group (lbgroup.GroupHome) as its load
// balancer records it, read through the cache (the leaver's own sync has just stored it: no
// request), else the namespace of its oldest member before leaver left.
func (l *LoadBalancers) groupHomeAfterLeave(ctx context.Context, cluster, group string, leaver *corev1.Service, members []*corev1.Service) string {
	lb, _, err := l.labelled(ctx, groupSubject{cluster: cluster, group: group}, true)
	if err != nil {
		klog.V(2).InfoS("Load balancer group's home read from its oldest member: its load balancer could not be read", "group", group, "err", err)
		lb = nil
	}
	return l.groupHome(group, lb, membersBefore(leaver, members))
}

// groupHomes are the home namespaces of load balancer groups as this CCM last read them on
// their load balancers (the label lbplan.LabelGroupNamespace). The zero value is ready to use.
type groupHomes struct {
	mu    sync.Mutex
	homes map[string]string
}

// groupHome is the home namespace of group: lbgroup.GroupHome of its load balancer lb and
// members, except that when lb is nil (deleted by hand, or swept because its home had no member
// left) the home this CCM last read on it wins: the home never moves to a member of another
// namespace, whatever is deleted (issue 40 §3). After a restart without the load balancer,
// lbgroup.GroupHome's members with an address stand in for it.
func (l *LoadBalancers) groupHome(group string, lb *lbplan.Actual, members []*corev1.Service) string {
	home, _ := l.groupHomeKnown(group, lb, members)
	return home
}

// groupHomeKnown is groupHome, and whether the home is known from a load balancer the group has
// or had (lbgroup.GroupHomeKnown, or this CCM's memory of it).
func (l *LoadBalancers) groupHomeKnown(group string, lb *lbplan.Actual, members []*corev1.Service) (string, bool) {
	h := l.homes
	h.mu.Lock()
	defer h.mu.Unlock()
	if lb != nil && lb.Labels[lbplan.LabelGroupNamespace] != "" {
		if h.homes == nil {
			h.homes = map[string]string{}
		}
		h.homes[group] = lb.Labels[lbplan.LabelGroupNamespace]
	}
	if home, ok := h.homes[group]; ok && lb == nil {
		return home, true
	}
	return lbgroup.GroupHomeKnown(lb, members)
}

// membersBefore returns the members of the group before leaver left (members and leaver, oldest
// first), leaver as it was while a member.
func membersBefore(leaver *corev1.Service, members []*corev1.Service) []*corev1.Service {
	was := leaver.DeepCopy()
	was.DeletionTimestamp = nil
	was.Spec.Type = corev1.ServiceTypeLoadBalancer
	out := append(slices.Clone(members), was)
	slices.SortStableFunc(out, lbgroup.CompareAge)
	return out
}

// leaderSettingsDiffer reports whether two leaders differ in a setting only the leader's counts:
// a load-balancer-wide one (lbgroup.GroupSettings, set on either) or the certificate type (a
// managed certificate is the leader's).
func leaderSettingsDiffer(a, b *corev1.Service) bool {
	for _, n := range append(lbgroup.GroupSettings(), annotation.LBSvcHTTPCertificateType) {
		v, set := n.Value(a)
		w, wset := n.Value(b)
		if set != wset || v != w {
			return true
		}
	}
	return false
}

// declaredLists are the listen ports each of members declares (declaredListeners), in order.
func declaredLists(members []*corev1.Service) []lbgroup.MemberListeners {
	lists := make([]lbgroup.MemberListeners, len(members))
	for i, m := range members {
		lists[i] = lbgroup.MemberListeners{Member: lbplan.Key(m), Listeners: declaredListeners(m)}
	}
	return lists
}

// sweepGroup deletes the load balancer of group once the lister shows no member in the group's
// home namespace (read again under the group's lock), on behalf of leaver, the last member there
// (its input.service).
func (l *LoadBalancers) sweepGroup(ctx context.Context, cluster, group string, leaver *corev1.Service) error {
	members, err := l.members(leaver, group, false)
	if err != nil {
		return err
	}
	if err := l.settleGroup(ctx, append(members, leaver)...); err != nil {
		return err
	}
	s := groupSubject{svc: leaver, cluster: cluster, group: group}
	lb, readAt, err := l.labelled(ctx, s, false)
	if err != nil || lb == nil || lbgroup.HasHomeMember(members, l.groupHome(group, lb, members)) {
		return err
	}
	return l.shrinkGroup(ctx, s, members, lb, readAt)
}

// subjectLocks serialise the reconciles of one subject within this CCM (subject.go: lock): the
// service controller may sync a Service's Ensure and its Update (a node change) at once, or
// several members of a group, and the sweep runs beside them. Without it the later of two
// overlapping runs stores a load balancer read before the other one's writes, a stale cache
// entry that can hide a target to remove until it expires. A key's entry lives while someone
// holds or waits for it.
type subjectLocks struct {
	mu    sync.Mutex
	locks map[string]*subjectLock
}

// subjectLock is the lock of one key and how many hold or wait for it.
type subjectLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns the unlock.
func (k *subjectLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*subjectLock{}
	}
	m := k.locks[key]
	if m == nil {
		m = &subjectLock{}
		k.locks[key] = m
	}
	m.users++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		if m.users--; m.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// lockGroup locks the load balancer group and returns the unlock.
func (l *LoadBalancers) lockGroup(group string) func() { return l.locks.lock(group) }

// GroupSweepInterval is how often SweepGroups looks again for load balancers of groups without
// a member, after its first sweep at start: a group orphaned behind the CCM's back (its last
// member left while no CCM ran, or a delete failed) is deleted within this bound, for one list
// request (⌈groups/50⌉) per sweep, 6 an hour.
const GroupSweepInterval = 10 * time.Minute

// SweepGroups deletes the load balancers of this cluster's groups that have no member, as the
// last member's leave would have (groupLeft): once the Service informer has synced (synced; the
// controller manager starts the shared informers only once it leads, so a standby never
// sweeps), then every interval until ctx ends. A failed sweep is logged and tried again at the
// next one. It blocks: run it in a goroutine.
func (l *LoadBalancers) SweepGroups(ctx context.Context, synced cache.InformerSynced, cluster string, interval time.Duration) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if n, err := l.SweepOrphanGroups(ctx, cluster); err != nil {
			klog.ErrorS(err, "Sweep of load balancer groups without members failed; tried again at the next sweep", "deleted", n, "nextIn", interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepOrphanGroups deletes the load balancer of every group of cluster that has no member in
// its home namespace in the Service lister (Options.Services) and returns how many it deleted;
// and it syncs now the members of the home of every group that has lost its load balancer
// (requeueLostGroups). It lists the group
// load balancers of cluster with one labelled list (lbcache.Cache.ListGroups, which keeps each
// as its group's cache entry); then, for each group under the group's lock (so never beside a
// member's sync), it reads the members again and the load balancer through the cache, and
// deletes it through the executor, gate first, exactly as the last member's leave does (delete
// protection honoured: kept and logged; a denial: kept, counted and logged like any denial).
//
// No Service acts: the decision's input.service is null and input.group names the group with
// no member (leader empty), input.current is the load balancer; events, which need a Service
// to sit on, are logged instead (executor.Run with a nil Service). Load balancers of other
// clusters, and those of one Service (hcloud-ccm/service-uid), are never listed.
//
// # Errors
//
// The list's error, or the joined errors of the groups that failed, each naming its group.
func (l *LoadBalancers) SweepOrphanGroups(ctx context.Context, cluster string) (int, error) {
	if l.services == nil {
		return 0, errors.New("loadbalancer.SweepOrphanGroups: Options.Services is nil: group membership is read from the Service lister")
	}
	lbs, listedAt, err := l.cache.ListGroups(ctx, cluster)
	if err != nil {
		return 0, fmt.Errorf("sweep load balancer groups without members: %w", err)
	}
	var groups []string
	for _, lb := range lbs {
		if g := lb.Labels[lbplan.LabelGroup]; !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	l.requeueLostGroups(groups)
	l.requeueDriftedGroups(lbs, listedAt)
	deleted := 0
	var errs []error
	for _, g := range groups {
		done, err := l.sweepOrphan(ctx, cluster, g)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep load balancer group %s: %w", g, err))
		}
		if done {
			deleted++
		}
	}
	return deleted, errors.Join(errs...)
}

// sweepOrphan deletes the load balancer of group when the lister shows no member (read under
// the group's lock) and reports whether it did; see SweepOrphanGroups.
func (l *LoadBalancers) sweepOrphan(ctx context.Context, cluster, group string) (bool, error) {
	unlock := l.lockGroup(group)
	defer unlock()
	all, err := l.services.List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list the Services of load balancer group %s: %w", group, err)
	}
	members := lbgroup.GroupMembers(slices.DeleteFunc(slices.Clone(all), func(s *corev1.Service) bool { return !l.Serves(s) }), group)
	s := groupSubject{cluster: cluster, group: group} // no Service: the last member left while no CCM ran
	lb, readAt, err := l.labelled(ctx, s, true)
	if err != nil || lb == nil {
		return false, err
	}
	home := l.groupHome(group, lb, members)
	if lbgroup.HasHomeMember(members, home) {
		return false, nil
	}
	plan, err := l.computeDelete(ctx, nil, lb)
	if err != nil || plan.Empty() {
		return false, err
	}
	plan.Group = lbgroup.GroupView(group, home, nil, lbgroup.Admission{}, lbgroup.TypeLimit{Name: lb.Type})
	klog.InfoS("Deleting the load balancer of a group without members in its home namespace", "group", group, "home", home, "otherMembers", len(members), "loadBalancer", lb.Name, "id", lb.ID)
	state, err := l.exec.Run(ctx, nil, l.priced(plan))
	l.stored(s, state, readAt, err)
	l.freed(plan, err)
	return err == nil, err
}

// requeueLostGroups syncs now, through the DenialTracker when it is a DriftRequeuer, the
// members that show an address of every group of the Service lister that has none of listed
// (the groups whose load balancer the sweep's list found): the group's load balancer was
// deleted behind the CCM's back, and a sync of a member of its home creates it again (a
// member of another namespace never does: lbgroup.CheckGroupHome). The sweep's list is the only
// read: a lost group load balancer is repaired within one sweep interval.
func (l *LoadBalancers) requeueLostGroups(listed []string) {
	r, ok := l.denials.(DriftRequeuer)
	if !ok || l.services == nil {
		return
	}
	all, err := l.services.List(labels.Everything())
	if err != nil {
		return
	}
	lost := map[string][]*corev1.Service{}
	for _, svc := range all {
		g := memberOf(svc, false)
		if g == "" || !l.Serves(svc) || slices.Contains(listed, g) || len(svc.Status.LoadBalancer.Ingress) == 0 {
			continue
		}
		lost[g] = append(lost[g], svc)
	}
	for _, g := range slices.Sorted(maps.Keys(lost)) {
		klog.InfoS("Load balancer of a group not found: syncing its members that had an address", "group", g, "members", len(lost[g]))
		r.Drifted(lost[g], "load balancer of group "+g+" deleted behind the CCM's back")
	}
}

// groupStates are the states the last successful plan of each group left its load balancer in
// (driftFingerprint), and when. The zero value is ready to use.
type groupStates struct {
	mu sync.Mutex
	m  map[string]groupState
}

// groupState is one group's entry.
type groupState struct {
	fp string
	at time.Time
}

// set records state (nil: the group has no load balancer) as group's converged state.
func (g *groupStates) set(group string, state *lbplan.Actual, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if state == nil {
		delete(g.m, group)
		return
	}
	if g.m == nil {
		g.m = map[string]groupState{}
	}
	g.m[group] = groupState{fp: driftFingerprint(state), at: now}
}

// get returns group's converged state, if one is recorded.
func (g *groupStates) get(group string) (groupState, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, ok := g.m[group]
	return st, ok
}

// requeueDriftedGroups syncs now, through the DenialTracker when it is a DriftRequeuer, the
// members that show an address of every group whose load balancer in listed (the sweep's list,
// made at listedAt) differs from the state the CCM's last successful plan of the group left it
// in (a listener or a target changed by hand): drift repair for group load balancers, within one
// sweep interval, from the sweep's own list (no extra request). A state recorded after the list
// started is left to the next sweep.
func (l *LoadBalancers) requeueDriftedGroups(listed []*lbplan.Actual, listedAt time.Time) {
	r, ok := l.denials.(DriftRequeuer)
	if !ok || l.services == nil {
		return
	}
	for _, lb := range listed {
		g := lb.Labels[lbplan.LabelGroup]
		st, ok := l.groupsConverged.get(g)
		if !ok || st.at.After(listedAt) || driftFingerprint(lb) == st.fp {
			continue
		}
		members, err := l.members(&corev1.Service{}, g, false)
		if err != nil {
			continue
		}
		if served := withAddress(members); len(served) > 0 {
			klog.InfoS("Load balancer of a group drifted: syncing its members that have an address", "group", g, "loadBalancer", lb.Name, "members", len(served))
			r.Drifted(served, "load balancer "+lb.Name+" of group "+g+" drifted")
		}
	}
}
