package ciplan

import (
	"context"
	"errors"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// maxServices are the listener limits of the load balancer types, which plan (without the API)
// cannot read: Hetzner's published max_services (the emulator's catalog has the same). The
// CCM reads them from the API; a type missing here plans without a capacity limit.
var maxServices = map[string]int{"lb11": 5, "lb21": 15, "lb31": 30}

// groupState plans the members of load balancer groups (docs/shared-load-balancers.md) as the
// CCM does: every member's sync plans the whole group with lbgroup.PlanGroup, the CCM's own group
// planner, which leaves out the members the policy denies only for their listeners. The first
// member of a group in the input plans from the state; the later ones plan from what the last
// allowed plan of the group leaves (a denied plan sends nothing), so the report shows each
// request once, by the member whose sync sends it.
type groupState struct {
	all   []*corev1.Service
	after map[string]*lbplan.Actual // by group, after the group's last plan
	seen  map[string]bool
	// version counts, by group, the allowed plans that changed the group's load balancer.
	version map[string]int
	// plans counts every plan made (ServiceResult.seq).
	plans int
}

func newGroupState(m Manifests) *groupState {
	g := &groupState{after: map[string]*lbplan.Actual{}, seen: map[string]bool{}, version: map[string]int{}}
	for _, mf := range m.Services {
		g.all = append(g.all, WithAPIDefaults(mf.Service))
	}
	return g
}

// plan is the plan of the load balancer of group for its member svc (gerr: the annotation's
// error), whose namespace has the labels nsLabels; it fills res's load balancer name and
// existence. Its leave-out decisions are o.Decider's, on the inputs the CCM's gate builds.
func (g *groupState) plan(ctx context.Context, svc *corev1.Service, group string, gerr error, o Options, nsLabels map[string]string, res *ServiceResult) (lbplan.Plan, error) {
	if gerr != nil {
		return lbplan.Plan{}, gerr
	}
	res.group, res.groupVersion = group, g.version[group]
	r := &stateReader{g: g, svc: svc, group: group, cluster: o.Cluster.Name, o: o}
	out, err := lbgroup.PlanShell(ctx, r, lbgroup.Shell{
		Acting: svc, Group: group, Cluster: o.Cluster.Name, Members: lbgroup.GroupMembers(g.all, group), Create: true,
	}, deniedSteps(ctx, svc, o, nsLabels))
	res.LoadBalancer, res.Exists = out.Name, out.Found != nil
	if err != nil {
		return lbplan.Plan{}, err
	}
	return out.Plan, nil
}

// stateReader is the group shell's reader (lbgroup.Reader) for `plan`: the state it was given
// and what the earlier members' plans left, the manifests' listeners, the published
// max_services; refusals are errors in the report.
type stateReader struct {
	g              *groupState
	svc            *corev1.Service
	group, cluster string
	o              Options
}

func (r *stateReader) Find(_ context.Context, name string) (*lbplan.Actual, error) {
	return r.g.actual(r.group, r.cluster, name, r.o.State)
}

func (r *stateReader) Home(lb *lbplan.Actual, members []*corev1.Service) (string, bool) {
	return lbgroup.GroupHomeKnown(lb, members)
}

func (r *stateReader) Listeners(_ context.Context, members []*corev1.Service, name string) (lbplan.Desired, []lbgroup.MemberListeners, error) {
	return memberListeners(r.svc, members, name, r.o)
}

// Type is the leader's type when it sets one (or for a new load balancer), else the load
// balancer's, with the published max_services.
func (r *stateReader) Type(_ context.Context, _ *corev1.Service, d *lbplan.Desired, lb *lbplan.Actual) (lbgroup.TypeLimit, error) {
	typ := d.Type
	if lb != nil && !d.TypeSet && lb.Type != "" {
		typ = lb.Type
	}
	return lbgroup.TypeLimit{Name: typ, MaxServices: maxServices[typ]}, nil
}

func (r *stateReader) Refused(_ context.Context, _ lbgroup.Refusal, err error) error { return err }

// deniedSteps is the lbgroup.DeniedSteps of svc's plan: the steps the CCM's gate denies
// (gate.Gate.DeniedSteps), priced with o.pricing.
func deniedSteps(ctx context.Context, svc *corev1.Service, o Options, nsLabels map[string]string) lbgroup.DeniedSteps {
	return func(plan lbplan.Plan) []int {
		plan.Pricing = o.pricing
		return o.gate(nsLabels).DeniedSteps(ctx, plan, svc)
	}
}

// actual is the group's load balancer: what an earlier member's plan left, else the state's
// load balancer with the group's labels. One with the group's name but not its labels is never
// adopted (as the CCM refuses it).
func (g *groupState) actual(group, cluster, name string, st State) (*lbplan.Actual, error) {
	if g.seen[group] {
		return g.after[group], nil
	}
	g.seen[group] = true
	var byName *hcloud.LoadBalancer
	for _, lb := range st.LoadBalancers {
		if lb.Labels[lbplan.LabelGroup] == group && lb.Labels[lbplan.LabelCluster] == cluster {
			return lbplan.NewActual(lb), nil
		}
		if lb.Name == name {
			byName = lb
		}
	}
	if byName != nil {
		return nil, fmt.Errorf("load balancer group %s: the name %q is taken by load balancer %d, which does not carry the group's labels and is never adopted: set %q on the group's leader to another name",
			group, name, byName.ID, annotation.LBName)
	}
	return nil, nil
}

// planned keeps what an allowed plan leaves for the later members of its group.
func (g *groupState) planned(plan lbplan.Plan, after *lbplan.Actual) {
	if plan.Group != nil && !plan.Empty() {
		g.after[plan.Group.Name] = after
		g.version[plan.Group.Name]++
	}
}

// next returns the sequence number of the plan just made.
func (g *groupState) next() int {
	g.plans++
	return g.plans
}

// memberListeners is the leader's desired state and every member's listeners, from the
// manifests alone (no nodes, no certificate lookups, as plan plans one Service). The errors of
// svc and of the leader fail the plan; another member's leave it out, as in the CCM.
func memberListeners(svc *corev1.Service, members []*corev1.Service, name string, o Options) (lbplan.Desired, []lbgroup.MemberListeners, error) {
	var leader lbplan.Desired
	var lists []lbgroup.MemberListeners
	for i, m := range members {
		err := lbservice.CheckService(m, plugins.ValidateLoadBalancerName)
		var d lbplan.Desired
		if err == nil {
			d, err = lbservice.NewDesired(lbservice.DesiredInput{Service: m, Name: name, Rename: true, Defaults: o.Config.LoadBalancer})
		}
		switch {
		case err != nil && (i == 0 || lbplan.Key(m) == lbplan.Key(svc)):
			if i == 0 && lbplan.Key(m) != lbplan.Key(svc) {
				err = fmt.Errorf("the settings of the group's leader %s are invalid: %w", lbplan.Key(m), err)
			}
			return leader, nil, err
		case err != nil:
			continue
		case i == 0:
			leader = d
		}
		lists = append(lists, lbgroup.MemberListeners{Member: lbplan.Key(m), Listeners: d.Services})
	}
	if leader.Name == "" {
		return leader, nil, errors.New("load balancer group without a leader")
	}
	return leader, lists, nil
}
