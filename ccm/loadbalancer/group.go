package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Event reasons of load balancer groups (docs/shared-load-balancers.md). They MUST not change:
// operators alert on them.
const (
	// ReasonLoadBalancerGroupHome: the member is not served because of the group's home
	// namespace (lbgroup.CheckGroupHome): the load balancer is missing and only a member of the
	// home creates it, or the home has no member left and the group's load balancer goes.
	ReasonLoadBalancerGroupHome             = "LoadBalancerGroupHome"
	ReasonLoadBalancerGroupPortConflict     = "LoadBalancerGroupPortConflict"
	ReasonLoadBalancerGroupSettingConflict  = "LoadBalancerGroupSettingConflict"
	ReasonLoadBalancerGroupCapacityExceeded = "LoadBalancerGroupCapacityExceeded"
)

// ErrGroupNotServed is wrapped by the error of a member that the group's load balancer does not
// serve: refused for capacity, or every port of it held by older members.
var ErrGroupNotServed = errors.New("not served by the load balancer of its group")

// members returns the members of group from the Service lister with svc as given (the
// freshest copy; left out when !include or when it is being deleted), oldest first. Only
// Services the CCM serves are members (Serves): a Service of another class with the group
// annotation is not.
func (l *LoadBalancers) members(svc *corev1.Service, group string, include bool) ([]*corev1.Service, error) {
	all, err := l.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list the Services of load balancer group %s: %w", group, err)
	}
	others := slices.DeleteFunc(slices.Clone(all), func(s *corev1.Service) bool {
		return s == nil || s.Namespace == svc.Namespace && s.Name == svc.Name || !l.Serves(s)
	})
	if include {
		others = append(others, svc)
	}
	return lbgroup.GroupMembers(others, group), nil
}

// settleGroup waits until no detached run of svcs (the members of a group, and a leaver) is in
// flight: they all write the one load balancer of the group, so a plan made after it sees what
// those runs left (the executor's Settle is per Service).
func (l *LoadBalancers) settleGroup(ctx context.Context, svcs ...*corev1.Service) error {
	for _, s := range svcs {
		if err := l.exec.Settle(ctx, s.UID); err != nil {
			return err
		}
	}
	return nil
}

// planGroup is plan for the load balancer of the group s.group, for the acting member s.svc;
// it reads and records events but never writes. An Update (create false) reads the group's load
// balancer through the cache, an Ensure (and a preview) fresh, as planOwn does for one Service.
//
// The plan is lbgroup.PlanGroup's, the one group planner that `plan` and the admission webhook
// call too. With denied (a sync: the executor's decisions, or the webhook's) a plan the policy
// denies only for other members' listeners is made again without those members (gp.left); each
// member's own sync still plans with it, so a denied member keeps its own PolicyDenied.
// TestGroup_DeniedMemberDoesNotBlockTheGroup tests it.
func (l *LoadBalancers) planGroup(ctx context.Context, s groupSubject, nodes []*corev1.Node, create bool, denied lbgroup.DeniedSteps) (planned, error) {
	members, err := l.members(s.svc, s.group, true)
	if err != nil {
		return planned{}, err
	}
	r := &groupReader{l: l, s: s, nodes: nodes, cached: !create}
	out, err := lbgroup.PlanShell(ctx, r, lbgroup.Shell{
		Acting: s.svc, Group: s.group, Cluster: s.cluster, Members: members, Create: create, FromScratch: s.audit,
	}, denied)
	gp := planned{leader: out.Leader, readAt: r.readAt, typ: out.Type}
	if err != nil || !out.Planned {
		return gp, err
	}
	gp.plan, gp.adm, gp.left = &out.Plan, out.Admission, out.Left
	gp.status = l.withOwnProxyProtocol(out.LeaderDesired.Status, s.svc)
	for _, m := range gp.left {
		klog.InfoS("Load balancer group member left out of this sync: the policy denies its listeners", "group", s.group, "member", m, "service", klog.KObj(s.svc))
	}
	return gp, nil
}

// groupReader is the group shell's reader (lbgroup.Reader) for one sync of s: the caches and
// the API, the remembered homes, the refusals as Warning events (notes.go) on the acting member.
type groupReader struct {
	l      *LoadBalancers
	s      groupSubject
	nodes  []*corev1.Node
	cached bool      // an Update reads the group's load balancer through the cache
	readAt time.Time // when Find read it
}

func (r *groupReader) Find(ctx context.Context, name string) (*lbplan.Actual, error) {
	lb, readAt, err := r.l.find(ctx, r.s, name, r.cached)
	r.readAt = readAt
	return lb, err
}

func (r *groupReader) Home(lb *lbplan.Actual, members []*corev1.Service) (string, bool) {
	return r.l.groupHomeKnown(r.s.group, lb, members)
}

func (r *groupReader) Listeners(ctx context.Context, members []*corev1.Service, name string) (lbplan.Desired, []lbgroup.MemberListeners, error) {
	return r.l.memberListeners(ctx, r.s.svc, r.s.group, members, r.nodes, name)
}

func (r *groupReader) Type(ctx context.Context, leader *corev1.Service, d *lbplan.Desired, basis *lbplan.Actual) (lbgroup.TypeLimit, error) {
	t, err := r.l.typeInForce(ctx, *d, basis)
	if err != nil {
		return t, err
	}
	return t, r.l.checkType(ctx, leader, d, basis)
}

// refusalReasons are the Warning events of the shell's refusals; a failed plan is an
// InvalidAnnotation when an annotation is at fault (invalid).
var refusalReasons = map[lbgroup.Refusal]string{
	lbgroup.RefusedName: ReasonLoadBalancerNameConflict,
	lbgroup.RefusedHome: ReasonLoadBalancerGroupHome,
}

func (r *groupReader) Refused(ctx context.Context, kind lbgroup.Refusal, err error) error {
	reason, ok := refusalReasons[kind]
	if !ok {
		return r.l.invalid(ctx, r.s.svc, err)
	}
	r.l.warn(ctx, r.s.svc, reason, err.Error())
	return err
}

// gateDenied is the lbgroup.DeniedSteps of svc's sync: the executor's gate decisions (the
// audit's "would deny" on the audit's copy: deniedSteps).
func (l *LoadBalancers) gateDenied(ctx context.Context, svc *corev1.Service) lbgroup.DeniedSteps {
	return func(plan lbplan.Plan) []int { return l.deniedSteps(ctx, svc, plan) }
}

// memberListeners builds the leader's desired state (with the nodes as targets) and every
// member's listeners; members are the group's with the leader first (lbgroup.LeaderFirst). An invalid annotation of svc or of the leader fails the reconcile; another
// member's invalid annotations leave it out (its own sync reports them).
func (l *LoadBalancers) memberListeners(ctx context.Context, svc *corev1.Service, group string, members []*corev1.Service, nodes []*corev1.Node, name string) (lbplan.Desired, []lbgroup.MemberListeners, error) {
	leader := members[0]
	// Another member's annotation errors are its own sync's events, not svc's: read them silently.
	about := func(m *corev1.Service) context.Context {
		if m == svc {
			return ctx
		}
		return silently(ctx)
	}
	leaderD, err := l.memberDesired(about(leader), leader, nodes, name, true)
	if err != nil {
		if leader == svc {
			return leaderD, nil, l.invalid(ctx, svc, err)
		}
		return leaderD, nil, fmt.Errorf("load balancer group %s: the settings of its leader %s are invalid, its load balancer is left as it is: %w", group, lbplan.Key(leader), err)
	}
	lists := []lbgroup.MemberListeners{{Member: lbplan.Key(leader), Listeners: leaderD.Services}}
	for _, m := range members[1:] {
		md, err := l.memberDesired(about(m), m, nil, name, false)
		if err == nil && md.ManagedCertificate != nil {
			err = annotation.Usagef(string(annotation.LBSvcHTTPCertificateType), "%q managed works in load balancer group %s on its leader %s only: use uploaded certificates (%q) on %s",
				annotation.LBSvcHTTPCertificateType, group, lbplan.Key(leader), annotation.LBSvcHTTPCertificates, lbplan.Key(m))
		}
		switch {
		case err != nil && m == svc:
			return leaderD, nil, l.invalid(ctx, svc, err)
		case err != nil:
			klog.InfoS("Load balancer group member left out: its annotations are invalid", "group", group, "member", lbplan.Key(m), "err", err)
			continue
		}
		lists = append(lists, lbgroup.MemberListeners{Member: lbplan.Key(m), Listeners: md.Services})
	}
	return leaderD, lists, nil
}

// memberDesired is the desired state m asks for on its own; targets only with nodes, the managed
// certificate looked up only with managed (the leader's). The pre-plan checks
// (lbservice.CheckService) come before any read, as for a Service.
func (l *LoadBalancers) memberDesired(ctx context.Context, m *corev1.Service, nodes []*corev1.Node, name string, managed bool) (lbplan.Desired, error) {
	if err := lbservice.CheckService(m, plugins.ValidateLoadBalancerName); err != nil {
		return lbplan.Desired{}, err
	}
	certs, err := l.certificates(ctx, m)
	if err != nil {
		return lbplan.Desired{}, err
	}
	in := lbservice.DesiredInput{Service: m, Name: name, Rename: true, Defaults: l.cfg, CertificateIDs: certs}
	if managed {
		if in.ManagedCertificateID, err = l.managedCertificate(ctx, m); err != nil {
			return lbplan.Desired{}, err
		}
	}
	if in.Nodes, _, err = l.targetNodes(ctx, nodes); err != nil {
		return lbplan.Desired{}, err
	}
	in.Network = clusterNetwork(l.network.Load())
	return l.desired(ctx, in)
}

// typeInForce is the type of the group's load balancer after the plan, with its max_services:
// the leader's when it sets one (or for a new load balancer), else the load balancer's own.
func (l *LoadBalancers) typeInForce(ctx context.Context, leaderD lbplan.Desired, lb *lbplan.Actual) (lbgroup.TypeLimit, error) {
	name := leaderD.Type
	if lb != nil && !leaderD.TypeSet && lb.Type != "" {
		name = lb.Type
	}
	t, _, err := l.types.get(ctx, name)
	if err != nil {
		return lbgroup.TypeLimit{}, fmt.Errorf("load balancer types: %w", err)
	}
	if t == nil { // checkType reports an unknown type
		return lbgroup.TypeLimit{Name: name}, nil
	}
	return lbgroup.TypeLimit{Name: name, MaxServices: t.MaxServices}, nil
}

// groupBeforeRun does, for a member s.svc of a group, what the plan of a Service of its own
// does on its way (planWith): the Warning events of the member (groupEvents), its non-TCP ports
// (advisoryWarnings) and, when it leads, the type warnings (its type is the one in force).
func (l *LoadBalancers) groupBeforeRun(ctx context.Context, s groupSubject, gp planned, create bool) error {
	l.groupEvents(ctx, s.svc, s.group, gp)
	l.advisoryWarnings(ctx, s.svc, create, phaseNone, nil)
	if gp.leader == s.svc {
		return l.typeWarnings(ctx, s.svc)
	}
	return nil
}

// groupAfterRun ends the run of a group's plan for its member s.svc: a member that is refused
// (capacity) or has none of its ports gets an error wrapping ErrGroupNotServed after the plan
// ran for the others; an Ensure that served it deletes a load balancer it owned alone (a
// join).
func (l *LoadBalancers) groupAfterRun(ctx context.Context, s groupSubject, gp planned, create bool) error {
	l.requeueAfterRecreate(s, gp)
	if err := servedError(s.svc, s.group, gp); err != nil {
		return err
	}
	if create {
		if err := l.deleteOwn(ctx, s.svc); err != nil {
			return fmt.Errorf("load balancer group %s: delete the load balancer %s had of its own: %w", s.group, lbplan.Key(s.svc), err)
		}
	}
	return nil
}

// requeueAfterRecreate syncs now, through the DenialTracker when it is a DriftRequeuer, the other
// members of s's group that show an address when gp's plan created the group's load balancer:
// it had been deleted (by hand, or by the sweep), and their address is the old one's until their
// own sync sets the new one (found by the fault soak, issue 45). A group's first create finds no
// member with an address and requeues nobody.
func (l *LoadBalancers) requeueAfterRecreate(s groupSubject, gp planned) {
	r, ok := l.denials.(DriftRequeuer)
	if !ok || gp.plan == nil || len(gp.plan.Mutations) == 0 {
		return
	}
	if _, created := gp.plan.Mutations[0].(lbplan.Create); !created {
		return
	}
	members, err := l.members(s.svc, s.group, false)
	if err != nil {
		return
	}
	if stale := withAddress(members); len(stale) > 0 {
		r.Drifted(stale, "load balancer of group "+s.group+" created again")
	}
}

// withAddress returns the Services of svcs that show a load balancer address in their status:
// the members a group's load balancer served.
func withAddress(svcs []*corev1.Service) []*corev1.Service {
	var out []*corev1.Service
	for _, s := range svcs {
		if len(s.Status.LoadBalancer.Ingress) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// deleteOwn deletes the load balancer that carries the UID label of svc, if the cache knows one
// (a Service that joined a group).
func (l *LoadBalancers) deleteOwn(ctx context.Context, svc *corev1.Service) error {
	own, _, err := l.labelled(ctx, ownSubject{svc: svc}, true)
	if err != nil || own == nil {
		return err
	}
	return l.ensureDeleted(ctx, svc)
}

// groupEvents records the Warning events of svc: ports it lost to older members, settings that
// differ from the leader's, a capacity refusal with the type that would fit.
func (l *LoadBalancers) groupEvents(ctx context.Context, svc *corev1.Service, group string, gp planned) {
	key := lbplan.Key(svc)
	for _, c := range gp.adm.Conflicts {
		if c.Member == key {
			l.warn(ctx, svc, ReasonLoadBalancerGroupPortConflict, c.Message(group))
		}
	}
	if cs := lbgroup.SettingConflicts(gp.leader, svc); len(cs) > 0 {
		msg := lbgroup.SettingConflictMessage(cs, lbplan.Key(gp.leader))
		l.warn(ctx, svc, ReasonLoadBalancerGroupSettingConflict, truncate.String(msg, truncate.EventMessage))
	}
	for _, r := range gp.adm.Refused {
		if r.Member == key {
			l.warn(ctx, svc, ReasonLoadBalancerGroupCapacityExceeded, l.capacityMessage(ctx, r, group, gp))
		}
	}
}

// capacityMessage is the LoadBalancerGroupCapacityExceeded message of r, with the type that
// would fit.
func (l *LoadBalancers) capacityMessage(ctx context.Context, r lbgroup.CapacityRefusal, group string, gp planned) string {
	limits, err := l.types.limits(ctx)
	if err != nil {
		limits = nil
	}
	suggest, ok := lbgroup.SuggestType(limits, r.Total)
	return lbgroup.CapacityMessage(r, group, gp.typ, suggest, ok, lbplan.Key(gp.leader))
}

// servedError is the error of a member the plan does not serve: refused for capacity, or every
// port of it held by older members; nil when svc is served (or has no port).
func servedError(svc *corev1.Service, group string, gp planned) error {
	key := lbplan.Key(svc)
	for _, r := range gp.adm.Refused {
		if r.Member == key {
			return fmt.Errorf("load balancer group %s (type %s) is full: %s needs %d more listeners (%d in all, at most %d): %w",
				group, gp.typ.Name, key, r.Need, r.Total, gp.typ.MaxServices, ErrGroupNotServed)
		}
	}
	if len(gp.adm.Ports[key]) > 0 {
		return nil
	}
	var lost []string
	for _, c := range gp.adm.Conflicts {
		if c.Member == key {
			lost = append(lost, fmt.Sprintf("port %d is already served by %s", c.Port, c.Owner))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return fmt.Errorf("load balancer group %s: %s; none of %s's ports is left: %w", group, strings.Join(lost, ", "), key, ErrGroupNotServed)
}

// leaveGroupOnce is leaveGroup with the denial cache, as reconcile has it: an unchanged retry of
// a denied leave (the removal of the member's listeners, or the delete of the group's load
// balancer when it was the last member) costs no request, no decision and no event.
// TestGroup_DeniedLeaveRetryCostsNothing tests it.
func (l *LoadBalancers) leaveGroupOnce(ctx context.Context, s groupSubject) error {
	call := denialCall{kind: callDelete, group: s.group, writes: l.denied.groupWriteCount(s.group), svc: s.svc, plan: func(ctx context.Context) (*lbplan.Plan, error) {
		members, err := l.members(s.svc, s.group, false)
		if err != nil {
			return nil, err
		}
		lb, _, err := l.labelled(ctx, s, false)
		if err != nil || lb == nil {
			return nil, err
		}
		plan, err := l.planShrink(ctx, s.group, s.svc, members, lb)
		return &plan, err
	}}
	if err := l.rememberedDenial(ctx, call); err != nil {
		return err
	}
	rctx, reads := recordReads(ctx)
	err := l.leaveGroup(rctx, s)
	l.remember(ctx, call, reads, err)
	return err
}

// leaveGroup is EnsureLoadBalancerDeleted of a member of group: the members left (svc not among
// them) keep the load balancer, which loses only the listeners of ports no member left
// declares; with no member left in the group's home namespace the load balancer is deleted (delete protection honoured:
// Warning DeleteProtected, nil). A load balancer svc had of its own is deleted too.
func (l *LoadBalancers) leaveGroup(ctx context.Context, s groupSubject) error {
	unlock := l.lockGroup(s.group)
	defer unlock()
	members, err := l.members(s.svc, s.group, false)
	if err != nil {
		return err
	}
	if err := l.settleGroup(ctx, append(members, s.svc)...); err != nil {
		return err
	}
	lb, readAt, err := l.labelled(ctx, s, false)
	if err != nil {
		return err
	}
	if lb != nil {
		if err := l.shrinkGroup(ctx, s, members, lb, readAt); err != nil {
			return err
		}
	}
	return l.deleteOwn(ctx, s.svc)
}

// shrinkGroup removes the listeners of s.svc from the group's load balancer lb (read at
// readAt), or deletes lb when members is empty; the cache keeps what the run left.
func (l *LoadBalancers) shrinkGroup(ctx context.Context, s groupSubject, members []*corev1.Service, lb *lbplan.Actual, readAt time.Time) error {
	plan, err := l.planShrink(ctx, s.group, s.svc, members, lb)
	if err != nil || plan.Empty() {
		return err
	}
	state, err := l.exec.Run(ctx, s.svc, l.priced(plan))
	l.stored(s, state, readAt, err)
	l.freed(plan, err)
	l.wroteGroup(s.group, plan, err)
	return err
}

// wroteGroup tells the denial cache that plan, run with the result err, may have changed the
// load balancer of group (anything but an empty plan or a denied one that applied nothing; a
// partly denied plan ran its other steps: gate.DeniedError.Applied): the other members'
// remembered denials are decided again at their next retry. A Service of its own (group "")
// has no members to tell.
func (l *LoadBalancers) wroteGroup(group string, plan lbplan.Plan, err error) {
	var denied *gate.DeniedError
	switch {
	case group == "", plan.Empty():
	case errors.As(err, &denied) && len(denied.Applied) == 0:
	case errors.Is(err, policy.ErrDenied) && !errors.As(err, &denied):
	default:
		l.denied.wroteGroup(group)
	}
}

// planShrink plans shrinkGroup: the removal of the listeners of the ports of svc that no member
// declares, or the delete of lb (empty when it is protected: Warning DeleteProtected).
func (l *LoadBalancers) planShrink(ctx context.Context, group string, svc *corev1.Service, members []*corev1.Service, lb *lbplan.Actual) (lbplan.Plan, error) {
	adm := lbgroup.AdmitGroup(declaredLists(members), 0)
	plan := lbgroup.ComputeRemoveListeners(lb, leftPorts(svc, adm))
	if !lbgroup.HasHomeMember(members, l.groupHome(group, lb, members)) { // none left, or only members of other namespaces
		var err error
		if plan, err = l.computeDelete(ctx, svc, lb); err != nil || plan.Empty() {
			return plan, err
		}
	}
	plan.Group = lbgroup.GroupView(group, l.groupHome(group, lb, members), members, adm, lbgroup.TypeLimit{Name: lb.Type})
	return plan, nil
}

// previewLeave is PreviewDelete of a member of group: the plan leaveGroup would run on the
// group's load balancer (not the delete of a load balancer svc had of its own).
func (l *LoadBalancers) previewLeave(ctx context.Context, s groupSubject) (lbplan.Plan, error) {
	members, err := l.members(s.svc, s.group, false)
	if err != nil {
		return lbplan.Plan{}, err
	}
	lb, _, err := l.labelled(ctx, s, false)
	if err != nil || lb == nil {
		return lbplan.Plan{}, err
	}
	return l.planShrink(ctx, s.group, s.svc, members, lb)
}

// computeDelete plans the delete of lb for svc; a protected one is kept (Warning
// DeleteProtected on svc, an empty plan). Without a Service (nil: the sweep of a group without
// members) the warning is logged.
func (l *LoadBalancers) computeDelete(ctx context.Context, svc *corev1.Service, lb *lbplan.Actual) (lbplan.Plan, error) {
	plan, err := lbplan.ComputeDelete(lb)
	var protected *lbplan.ProtectedError
	if errors.As(err, &protected) {
		if svc == nil {
			klog.InfoS("Load balancer is delete protected: not deleted", "loadBalancer", lb.Name, "id", lb.ID, "reason", ReasonDeleteProtected, "err", err)
			return lbplan.Plan{}, nil
		}
		l.warnf(ctx, svc, ReasonDeleteProtected, "%v: not deleted", err)
		return lbplan.Plan{}, nil
	}
	return plan, err
}

// declaredListeners are the listen ports svc declares (TCP), as listeners without settings:
// enough to know which member holds which port.
func declaredListeners(svc *corev1.Service) []lbplan.Listener {
	var out []lbplan.Listener
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			out = append(out, lbplan.Listener{ListenPort: int(p.Port)})
		}
	}
	return out
}

// leftPorts are the listen ports of svc that no remaining member holds.
func leftPorts(svc *corev1.Service, adm lbgroup.Admission) []int {
	held := map[int]bool{}
	for _, l := range adm.Listeners {
		held[l.ListenPort] = true
	}
	var out []int
	for _, l := range declaredListeners(svc) {
		if !held[l.ListenPort] {
			out = append(out, l.ListenPort)
		}
	}
	return out
}
