package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// subject is what one call reconciles: the load balancer of one Service (ownSubject) or the
// shared load balancer of a load balancer group (groupSubject), for the acting Service (nil
// only for the sweep of a group without members). Every call finds (find, labelled), plans
// (plan), runs and stores (reconcile, runDetached, stored) and reports the status (status) of
// its subject with the functions of this file; what differs between the two is a method of the
// subject (subject_own.go, subject_group.go), so no function here asks which one it has.
type subject interface {
	// acting is the Service the call acts for; nil only for a group's sweep.
	acting() *corev1.Service
	// groupName is the group's name, "" for a Service's own load balancer: the key of the
	// group's write count in the denial cache (denials.go) and of a NameConflictError.
	groupName() string
	// named is the subject with its load balancer's name, when it has one before planning (a
	// Service's own: l.name); a group's is its leader's, chosen when it is planned.
	named(ctx context.Context, l *LoadBalancers) subject
	// forAudit is the subject as the audit plans it: from no load balancer (a create of what
	// it would be today).
	forAudit() subject
	// lookup is how labelled lists its load balancers: the key of the read (reads.go), what names
	// the labels in the error of more than one, and the cache's list.
	lookup(l *LoadBalancers, cached bool) (key, what string, list func(context.Context) ([]*lbplan.Actual, time.Time, error))
	// adopts reports whether it may take a load balancer with labels that it found by name.
	adopts(labels map[string]string) bool
	// plan plans its reconcile (see LoadBalancers.plan).
	plan(ctx context.Context, l *LoadBalancers, nodes []*corev1.Node, create bool, denied lbgroup.DeniedSteps) (planned, error)
	// beforeRun and afterRun are its checks around the run of p (reconcile).
	beforeRun(ctx context.Context, l *LoadBalancers, p planned, create bool) error
	afterRun(ctx context.Context, l *LoadBalancers, p planned, create bool) error
	// watch follows a reconcile's end (drift.go: a Service's own load balancer is watched for a
	// delete behind the CCM's back).
	watch(ctx context.Context, l *LoadBalancers, create bool, state *lbplan.Actual, err error)
	// lock locks it against the other reconciles of it in this CCM (subjectLocks) and returns
	// the unlock.
	lock(l *LoadBalancers) func()
	// settle waits until no detached run that writes its load balancer is in flight.
	settle(ctx context.Context, l *LoadBalancers) error
	// keep keeps lb (nil: none) as its cached load balancer as of readAt; forget drops it;
	// converged records state as what its last successful plan left (drift.go).
	keep(l *LoadBalancers, lb *lbplan.Actual, readAt time.Time)
	forget(l *LoadBalancers)
	converged(l *LoadBalancers, state *lbplan.Actual)
	// statusOptions are the annotations (and defaults) that shape its status on lb.
	statusOptions(ctx context.Context, l *LoadBalancers, lb *lbplan.Actual) (lbplan.StatusOptions, error)
	// delete is EnsureLoadBalancerDeleted of it; previewDelete the plan that would run.
	delete(ctx context.Context, l *LoadBalancers) error
	previewDelete(ctx context.Context, l *LoadBalancers) (lbplan.Plan, error)
}

// subjectOf returns the subject of an Ensure, Update or Get of svc: its group when it has the
// group annotation. A bad value is an InvalidAnnotation error; a group without the Service
// lister (Options.Services) is an error too: membership is computed from the cluster's Services.
func (l *LoadBalancers) subjectOf(ctx context.Context, cluster string, svc *corev1.Service) (subject, error) {
	own := ownSubject{svc: svc, cluster: cluster}
	g, err := annotation.Group(svc)
	switch {
	case errors.Is(err, annotation.ErrNotSet):
		return own, nil
	case err != nil:
		return own, l.invalid(ctx, svc, err)
	case l.services == nil:
		return own, fmt.Errorf("load balancer group %s: this CCM runs without the Service informer (loadbalancer.Options.Services), so it cannot know the group's members; remove %q", g, annotation.LBGroup)
	}
	return groupSubject{svc: svc, cluster: cluster, group: g}, nil
}

// deletedSubject returns the subject of a delete of svc: its group when the group annotation is
// valid and the Service lister is there; otherwise the load balancer of its own, which the
// delete removes so that the Service can go.
func (l *LoadBalancers) deletedSubject(cluster string, svc *corev1.Service) subject {
	if g, err := annotation.Group(svc); err == nil && l.services != nil {
		return groupSubject{svc: svc, cluster: cluster, group: g}
	}
	return ownSubject{svc: svc, cluster: cluster}
}

// labelled returns the load balancer carrying the identity labels of s (the UID label of its
// Service, or the group and cluster labels) and when that was read; nil for none, an error
// wrapping ErrNonUniqueResult for more than one. With cached it is read through the cache
// (lbcache.Cache.Get or GetGroup: at most its max age old, kept current by the CCM's own
// writes); without, it is listed by the labels now (one request) and the cache keeps the answer.
func (l *LoadBalancers) labelled(ctx context.Context, s subject, cached bool) (*lbplan.Actual, time.Time, error) {
	key, what, list := s.lookup(l, cached)
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
	cerr := &NameConflictError{Name: name, ID: found.ID, OwnerUID: found.Labels[lbplan.LabelServiceUID], Group: s.groupName(), OwnerGroup: found.Labels[lbplan.LabelGroup]}
	l.warn(ctx, s.acting(), ReasonLoadBalancerNameConflict, cerr.Error())
	return nil, time.Time{}, cerr
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
// the steps a group plan asks about (planGroup); a Service's own plan (planOwn) does not use it.
func (l *LoadBalancers) plan(ctx context.Context, s subject, nodes []*corev1.Node, create bool, denied lbgroup.DeniedSteps) (p planned, err error) {
	ctx, n := collectNotes(ctx)
	p, err = s.plan(ctx, l, nodes, create, denied)
	p.notes = n.taken()
	return p, err
}

// reconcile is an EnsureLoadBalancer (create) or UpdateLoadBalancer of s, the same steps for
// every subject: the denial cache (an unchanged retry of a call whose last run was denied
// returns the same denial without a request, a new decision or an event; denialCache says what
// "unchanged" covers), wait for the detached runs that write the load balancer (settle), plan,
// run (an Ensure whole, an Update detached: runDetached) and store what the run left. The
// subject adds its checks before the run and after it (a group's: groupBeforeRun,
// groupAfterRun) and follows its end (a Service of its own is watched for a delete behind the
// CCM's back: watchOwn). Two reconciles of one subject never overlap in this CCM (lock).
//
// It is one function, and it calls the executor's Decide and Send itself, so that the path from
// EnsureLoadBalancer to the HTTP client stays 4 of our frames
// (TestFrames_EnsureLoadBalancerToTheHTTPClient).
func (l *LoadBalancers) reconcile(ctx context.Context, s subject, nodes []*corev1.Node, create bool) (st *corev1.LoadBalancerStatus, err error) {
	svc, group := s.acting(), s.groupName()
	call := denialCall{kind: callUpdate, group: group, writes: l.denied.groupWriteCount(group), svc: svc, nodes: nodes,
		plan: func(ctx context.Context) (*lbplan.Plan, error) {
			p, err := l.plan(ctx, s, nodes, create, l.gateDenied(ctx, svc))
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
		s.watch(ctx, l, create, state, err)
	}()
	defer s.lock(l)()
	if err := s.settle(rctx, l); err != nil {
		return nil, err
	}
	p, err := l.plan(rctx, s, nodes, create, l.gateDenied(rctx, svc))
	l.record(p.notes)
	if err != nil || p.plan == nil {
		return nil, err
	}
	if err := s.beforeRun(rctx, l, p, create); err != nil {
		return nil, err
	}
	unlock := l.costLock(*p.plan) // decisions that add cost, one at a time (inventory.go)
	if create {                   // Decide then Send, not Run: one frame less to the HTTP client
		var d executor.Decided
		if d, err = l.exec.Decide(rctx, svc, l.priced(*p.plan)); err == nil {
			state, err = l.exec.Send(rctx, d)
		}
		l.stored(s, state, p.readAt, err)
	} else {
		state, err = l.runDetached(rctx, s, *p.plan, p.readAt)
	}
	unlock()
	l.freed(*p.plan, err)
	l.wroteGroup(group, *p.plan, err)
	if err != nil {
		return nil, err
	}
	if err := s.afterRun(rctx, l, p, create); err != nil {
		return nil, err
	}
	return lbplan.Status(state, p.status), nil
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
	state, err := l.exec.RunDetached(ctx, s.acting(), l.priced(plan), func(err error) {
		kept.Lock()
		defer kept.Unlock()
		s.forget(l)
		if t, ok := l.denials.(ActionFailureTracker); ok {
			t.ActionFailed(s.acting(), err)
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
		s.keep(l, state, readAt)
		s.converged(l, state)
	case errors.Is(err, policy.ErrDenied) && state != nil:
		s.keep(l, state, readAt)
	case !errors.Is(err, policy.ErrDenied):
		s.forget(l)
	}
}

// status is GetLoadBalancer of s: the status of its load balancer, found fresh by its labels
// only, and whether it exists.
func (l *LoadBalancers) status(ctx context.Context, s subject) (*corev1.LoadBalancerStatus, bool, error) {
	lb, _, err := l.labelled(ctx, s, false)
	if err != nil || lb == nil {
		return nil, false, err
	}
	opts, err := s.statusOptions(ctx, l, lb)
	if err != nil {
		return nil, true, err
	}
	return lbplan.Status(lb, opts), true, nil
}

// withOwnProxyProtocol returns opts with the proxy protocol of svc's own annotations (the ipMode
// of a member's status is its own); opts as they are when those do not parse.
func (l *LoadBalancers) withOwnProxyProtocol(opts lbplan.StatusOptions, svc *corev1.Service) lbplan.StatusOptions {
	if own, err := lbservice.NewStatusOptions(svc, l.cfg); err == nil {
		opts.ProxyProtocol = own.ProxyProtocol
	}
	return opts
}
