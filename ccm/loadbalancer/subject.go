package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// subject is what one call reconciles: the load balancer of one Service (group "") or the
// shared load balancer of a load balancer group, for the acting Service svc (nil only for the
// sweep of a group without members). Every call finds (find, labelled), plans (plan), runs and
// stores (reconcile, runDetached, stored) and reports the status (status) of its subject with
// the functions of this file. Only the planning differs: planOwn (loadbalancer.go) or
// planGroup (group.go), chosen once, in plan.
type subject struct {
	svc     *corev1.Service
	cluster string
	group   string
	// name and rename are the name of a Service's own load balancer (l.name: annotation, naming
	// plugin, default), set by named; a group's name is its leader's, chosen when it is planned.
	name   string
	rename bool
	// audit is set for the audit (AuditPlans): its plan starts from no load balancer (basis), a
	// create of what the load balancer would be today.
	audit bool
}

// basis is the load balancer the plan of s starts from: lb, or none (a create) for the audit.
func (s subject) basis(lb *lbplan.Actual) *lbplan.Actual {
	if s.audit {
		return nil
	}
	return lb
}

// subjectOf returns the subject of an Ensure, Update or Get of svc: its group when it has the
// group annotation. A bad value is an InvalidAnnotation error; a group without the Service
// lister (Options.Services) is an error too: membership is computed from the cluster's Services.
func (l *LoadBalancers) subjectOf(ctx context.Context, cluster string, svc *corev1.Service) (subject, error) {
	s := subject{svc: svc, cluster: cluster}
	g, err := annotation.Group(svc)
	switch {
	case errors.Is(err, annotation.ErrNotSet):
		return s, nil
	case err != nil:
		return s, l.invalid(ctx, svc, err)
	case l.services == nil:
		return s, fmt.Errorf("load balancer group %s: this CCM runs without the Service informer (loadbalancer.Options.Services), so it cannot know the group's members; remove %q", g, annotation.LBGroup)
	}
	s.group = g
	return s, nil
}

// deletedSubject returns the subject of a delete of svc: its group when the group annotation is
// valid and the Service lister is there; otherwise the load balancer of its own, which the
// delete removes so that the Service can go.
func (l *LoadBalancers) deletedSubject(cluster string, svc *corev1.Service) subject {
	s := subject{svc: svc, cluster: cluster}
	if g, err := annotation.Group(svc); err == nil && l.services != nil {
		s.group = g
	}
	return s
}

// named returns s with the name of a Service's own load balancer (l.name); a group's is chosen
// when it is planned.
func (l *LoadBalancers) named(ctx context.Context, s subject) subject {
	if s.group == "" {
		s.name, s.rename = l.name(ctx, s.cluster, s.svc)
	}
	return s
}

// labelled returns the load balancer carrying the identity labels of s (the UID label of its
// Service, or the group and cluster labels) and when that was read; nil for none, an error
// wrapping ErrNonUniqueResult for more than one. With cached it is read through the cache
// (lbcache.Cache.Get or GetGroup: at most its max age old, kept current by the CCM's own
// writes); without, it is listed by the labels now (one request) and the cache keeps the answer.
func (l *LoadBalancers) labelled(ctx context.Context, s subject, cached bool) (*lbplan.Actual, time.Time, error) {
	key, what, list := s.labels(l, cached)
	r, err := read(ctx, key, func() (listed, error) {
		lbs, readAt, err := list(ctx)
		return listed{lbs, readAt}, err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	lb, err := single(r.lbs, what)
	if err != nil {
		return nil, time.Time{}, err
	}
	return lb, r.at, nil
}

// labels returns how labelled lists the load balancers of s: the key of the read (reads.go),
// what names the labels in the error of more than one, and the cache's list.
func (s subject) labels(l *LoadBalancers, cached bool) (key, what string, list func(context.Context) ([]*lbplan.Actual, time.Time, error)) {
	if s.group != "" {
		get := l.cache.ReadGroup
		if cached {
			get = l.cache.GetGroup
		}
		return fmt.Sprintf("load balancers of group %s in cluster %s (cached %t)", s.group, s.cluster, cached),
			lbgroup.GroupSelector(s.group, s.cluster) + ": more than one load balancer carries the group's labels",
			func(ctx context.Context) ([]*lbplan.Actual, time.Time, error) { return get(ctx, s.group, s.cluster) }
	}
	get := l.cache.Read
	if cached {
		get = l.cache.Get
	}
	uid := string(s.svc.UID)
	return fmt.Sprintf("load balancers of Service %s (cached %t)", uid, cached), lbplan.LabelServiceUID + "=" + uid,
		func(ctx context.Context) ([]*lbplan.Actual, time.Time, error) { return get(ctx, uid) }
}

// listed is what a list of load balancers answered and when it was read.
type listed struct {
	lbs []*lbplan.Actual
	at  time.Time
}

// find returns the load balancer of s and when it was read: by its identity labels (labelled),
// else by name (adoption of a load balancer without the labels, e.g. one created before the
// label existed, or a group's created between the list and this read); nil if none. A load
// balancer found by name that s does not own (adopts) is never adopted: that is a
// *NameConflictError and a Warning event on the Service, so no Service or group can take over
// or delete another one's load balancer by naming it.
func (l *LoadBalancers) find(ctx context.Context, s subject, name string, cached bool) (*lbplan.Actual, time.Time, error) {
	lb, readAt, err := l.labelled(ctx, s, cached)
	if err != nil || lb != nil {
		return lb, readAt, err
	}
	found, readAt, err := l.byName(ctx, name)
	if err != nil || found == nil {
		return nil, readAt, err
	}
	if s.adopts(found.Labels) {
		return lbplan.NewActual(found), readAt, nil
	}
	cerr := &NameConflictError{Name: name, ID: found.ID, OwnerUID: found.Labels[lbplan.LabelServiceUID], Group: s.group, OwnerGroup: found.Labels[lbplan.LabelGroup]}
	l.warn(ctx, s.svc, ReasonLoadBalancerNameConflict, cerr.Error())
	return nil, time.Time{}, cerr
}

// adopts reports whether s may take a load balancer with labels that it found by name: a
// Service one without a group label and without another Service's UID label; a group one with
// the group's labels.
func (s subject) adopts(labels map[string]string) bool {
	if s.group != "" {
		return labels[lbplan.LabelGroup] == s.group && labels[lbplan.LabelCluster] == s.cluster
	}
	uid := labels[lbplan.LabelServiceUID]
	return (uid == "" || uid == string(s.svc.UID)) && labels[lbplan.LabelGroup] == ""
}

// planned is a planned reconcile of a subject.
type planned struct {
	plan   *lbplan.Plan // nil: an Update of a subject without a load balancer
	status lbplan.StatusOptions
	readAt time.Time // when the load balancer planned from was read
	// The group's admission, type, leader and the members left out because the policy denies
	// their listeners (the gate); unset for a Service of its own.
	adm    lbgroup.Admission
	typ    lbgroup.TypeLimit
	leader *corev1.Service
	left   []string
	// notes are the Warning events planning found, in order (notes.go); plan returns them with
	// an error too.
	notes []note
}

// plan plans the reconcile of s (an Ensure with create, an Update or the audit without); it
// reads the API but records nothing and never writes (it has no executor call): the Warning
// events it finds are its planned.notes (notes.go), which reconcile records. denied decides
// the steps a group plan asks about (planGroup); a Service's own plan does not use it.
func (l *LoadBalancers) plan(ctx context.Context, s subject, nodes []*corev1.Node, create bool, denied lbgroup.DeniedSteps) (p planned, err error) {
	ctx, n := collectNotes(ctx)
	if s.group != "" {
		p, err = l.planGroup(ctx, s, nodes, create, denied)
	} else {
		p, err = l.planOwn(ctx, s, nodes, create)
	}
	p.notes = n.taken()
	return p, err
}

// reconcile is an EnsureLoadBalancer (create) or UpdateLoadBalancer of s, the same steps for
// every subject: the denial cache (an unchanged retry of a call whose last run was denied
// returns the same denial without a request, a new decision or an event; denialCache says what
// "unchanged" covers), wait for the detached runs that write the load balancer (settle), plan,
// run (an Ensure whole, an Update detached: runDetached) and store what the run left. A group
// adds its checks before the run and after it (groupBeforeRun, groupAfterRun); a Service of its
// own is watched for a delete behind the CCM's back (watchOwn). Two reconciles of one subject
// never overlap in this CCM (lock).
//
// It is one function so that the path from EnsureLoadBalancer to the HTTP client stays 5 of
// our frames (TestFrames_EnsureLoadBalancerToTheHTTPClient).
func (l *LoadBalancers) reconcile(ctx context.Context, s subject, nodes []*corev1.Node, create bool) (st *corev1.LoadBalancerStatus, err error) {
	call := denialCall{kind: callUpdate, group: s.group, writes: l.denied.groupWriteCount(s.group), svc: s.svc, nodes: nodes,
		plan: func(ctx context.Context) (*lbplan.Plan, error) {
			p, err := l.plan(ctx, s, nodes, create, l.gateDenied(ctx, s.svc))
			return p.plan, err
		}}
	if create {
		call.kind = callEnsure
	}
	if err := l.rememberedDenial(ctx, call); err != nil {
		return nil, err
	}
	rctx, reads := recordReads(ctx)
	var state *lbplan.Actual
	defer func() { // after the unlock (deferred later, run first)
		l.remember(ctx, call, reads, err)
		if s.group == "" {
			l.watchOwn(ctx, s.svc, create, state, err)
		}
	}()
	defer l.lock(s)()
	if err := l.settle(rctx, s); err != nil {
		return nil, err
	}
	p, err := l.plan(rctx, s, nodes, create, l.gateDenied(rctx, s.svc))
	l.record(p.notes)
	if err != nil || p.plan == nil {
		return nil, err
	}
	if err := l.groupBeforeRun(rctx, s, p, create); err != nil {
		return nil, err
	}
	unlock := l.costLock(*p.plan) // decisions that add cost, one at a time (inventory.go)
	if create {
		state, err = l.exec.Run(rctx, s.svc, l.priced(*p.plan))
		l.stored(s, state, p.readAt, err)
	} else {
		state, err = l.runDetached(rctx, s, *p.plan, p.readAt)
	}
	unlock()
	l.freed(*p.plan, err)
	l.wroteGroup(s.group, *p.plan, err)
	if err != nil {
		return nil, err
	}
	if err := l.groupAfterRun(rctx, s, p, create); err != nil {
		return nil, err
	}
	return lbplan.Status(state, p.status), nil
}

// lock locks s against the other reconciles of s in this CCM (subjectLocks) and returns the
// unlock: its group, or its Service by UID ("uid:" + UID, which no group name can be).
func (l *LoadBalancers) lock(s subject) func() {
	if s.group != "" {
		return l.lockGroup(s.group)
	}
	return l.locks.lock("uid:" + string(s.svc.UID))
}

// settle waits until no detached run that writes the load balancer of s is in flight (the
// executor's Settle is per Service): the Service's own, or every member's of a group.
func (l *LoadBalancers) settle(ctx context.Context, s subject) error {
	if s.group == "" {
		return l.exec.Settle(ctx, s.svc.UID) // an Update's detached run (detach.go)
	}
	members, err := l.members(s.svc, s.group, true)
	if err != nil {
		return err
	}
	return l.settleGroup(ctx, members...)
}

// runDetached runs an Update's plan with executor.RunDetached (target changes return once the
// API accepted the first request; the action waits of a round share their polls) and keeps the
// returned state in the cache as of readAt. When the background part fails, the cached load
// balancer of s is forgotten, after the state was kept and never before (the lock below), so
// the next call reads it again; and the Service is retried through the DenialTracker when it is
// an ActionFailureTracker. TestUpdateLoadBalancer_detached tests both.
func (l *LoadBalancers) runDetached(ctx context.Context, s subject, plan lbplan.Plan, readAt time.Time) (*lbplan.Actual, error) {
	var kept sync.Mutex
	kept.Lock()
	state, err := l.exec.RunDetached(ctx, s.svc, l.priced(plan), func(err error) {
		kept.Lock()
		defer kept.Unlock()
		l.forget(s)
		if t, ok := l.denials.(ActionFailureTracker); ok {
			t.ActionFailed(s.svc, err)
		}
	})
	l.stored(s, state, readAt, err)
	kept.Unlock()
	return state, err
}

// stored keeps what a run of the executor for s left: the load balancer it returned (nil after
// a delete) as of readAt, the time the data the plan was built from was read. After a failed
// run the effect is not known, and the next cached read of s reads it alone. A denial that ran
// nothing leaves the cache as it is; one whose other steps ran (steps fail alone) returned what
// they left, which is kept but is not converged (drift.go: only a Service's own load balancer
// is checked for drift).
func (l *LoadBalancers) stored(s subject, state *lbplan.Actual, readAt time.Time, err error) {
	switch {
	case err == nil:
		l.put(s, state, readAt)
		if s.group == "" {
			l.converged.set(s.svc, state, time.Now())
		} else {
			l.groupsConverged.set(s.group, state, time.Now())
		}
	case errors.Is(err, policy.ErrDenied) && state != nil:
		l.put(s, state, readAt)
	case !errors.Is(err, policy.ErrDenied):
		l.forget(s)
	}
}

// put keeps lb (nil: none) as the cached load balancer of s as of readAt.
func (l *LoadBalancers) put(s subject, lb *lbplan.Actual, readAt time.Time) {
	if s.group != "" {
		l.cache.PutGroup(s.group, s.cluster, lb, readAt)
		return
	}
	l.cache.Put(string(s.svc.UID), lb, readAt)
}

// forget drops the cached load balancer of s: the next cached read reads it again.
func (l *LoadBalancers) forget(s subject) {
	if s.group != "" {
		l.cache.ForgetGroup(s.group, s.cluster)
		return
	}
	l.cache.Forget(string(s.svc.UID))
}

// status is GetLoadBalancer of s: the status of its load balancer, found fresh by its labels
// only, and whether it exists.
func (l *LoadBalancers) status(ctx context.Context, s subject) (*corev1.LoadBalancerStatus, bool, error) {
	lb, _, err := l.labelled(ctx, s, false)
	if err != nil || lb == nil {
		return nil, false, err
	}
	opts, err := l.statusOptions(ctx, s, lb)
	if err != nil {
		return nil, true, err
	}
	return lbplan.Status(lb, opts), true, nil
}

// statusOptions are the annotations (and defaults) that shape the status of s on lb: the
// Service's own; a group's leader's (its load balancer's settings), with the acting member's
// proxy protocol (withOwnProxyProtocol). A bad annotation of a Service is an InvalidAnnotation.
func (l *LoadBalancers) statusOptions(ctx context.Context, s subject, lb *lbplan.Actual) (lbplan.StatusOptions, error) {
	if s.group == "" {
		opts, err := lbservice.NewStatusOptions(s.svc, l.cfg)
		if err != nil {
			return opts, l.invalid(ctx, s.svc, err)
		}
		return opts, nil
	}
	members, err := l.members(s.svc, s.group, true)
	if err != nil {
		return lbplan.StatusOptions{}, err
	}
	leader := s.svc
	if len(members) > 0 {
		leader = lbgroup.GroupLeader(members, l.groupHome(s.group, lb, members))
	}
	opts, err := lbservice.NewStatusOptions(leader, l.cfg)
	if err != nil {
		return opts, err
	}
	return l.withOwnProxyProtocol(opts, s.svc), nil
}

// withOwnProxyProtocol returns opts with the proxy protocol of svc's own annotations (the ipMode
// of a member's status is its own); opts as they are when those do not parse.
func (l *LoadBalancers) withOwnProxyProtocol(opts lbplan.StatusOptions, svc *corev1.Service) lbplan.StatusOptions {
	if own, err := lbservice.NewStatusOptions(svc, l.cfg); err == nil {
		opts.ProxyProtocol = own.ProxyProtocol
	}
	return opts
}
