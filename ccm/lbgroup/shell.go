package lbgroup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
)

// Reader is what the group shell (PlanShell) reads: the CCM's caches and the Hetzner API
// (ccm/loadbalancer), or the state `plan` was given (ccm/ciplan). Everything else of a member's
// plan of its group is the shell's, written once for both.
type Reader interface {
	// Find returns the group's load balancer for the name it would have: by the group's labels,
	// else by that name (an error for one the group may not adopt); nil for none.
	Find(ctx context.Context, name string) (*lbplan.Actual, error)
	// Home returns the group's home namespace and whether it is known (GroupHomeKnown of lb and
	// members, with what the reader remembers of a load balancer that is gone).
	Home(lb *lbplan.Actual, members []*corev1.Service) (home string, known bool)
	// Listeners returns the leader's desired state and every member's listeners; members are the
	// group's with the leader first (LeaderFirst), name the load balancer's.
	Listeners(ctx context.Context, members []*corev1.Service, name string) (lbplan.Desired, []MemberListeners, error)
	// Type returns the type in force after the plan with its max_services, from the leader's
	// desired state (which it may check and complete: the max targets of a type that does not
	// change) and the load balancer the plan starts from (nil for a create).
	Type(ctx context.Context, leader *corev1.Service, d *lbplan.Desired, basis *lbplan.Actual) (TypeLimit, error)
	// Refused returns the error of a refusal of the acting member, as the reader reports it (the
	// CCM: a Warning event of the kind).
	Refused(ctx context.Context, kind Refusal, err error) error
}

// Refusal is the kind of a refusal of the shell.
type Refusal int

const (
	// RefusedName is a name reserved for another group (lbservice.CheckName).
	RefusedName Refusal = iota
	// RefusedHome is the acting member that may not create the group's load balancer (CheckGroupHome).
	RefusedHome
	// RefusedPlan is a group plan that failed (PlanGroup: an annotation of the leader, say).
	RefusedPlan
)

// Shell is one member's plan of its group's load balancer.
type Shell struct {
	// Acting is the member whose sync plans; Group and Cluster name the group.
	Acting         *corev1.Service
	Group, Cluster string
	// Members are the group's members (GroupMembers: oldest first); Acting is one of them.
	Members []*corev1.Service
	// Create is an Ensure (or `plan`): without it, a group without a load balancer plans nothing.
	Create bool
	// FromScratch plans from no load balancer (a create of what it would be today: the audit).
	FromScratch bool
}

// Shelled is what PlanShell found and planned. Its fields are set as far as it got, also with
// an error.
type Shelled struct {
	GroupOutcome
	// Planned is false when nothing was planned: an error, or no Create and no load balancer.
	Planned bool
	// Leader is the group's leader (the home's oldest member), Name its load balancer's name.
	Leader *corev1.Service
	Name   string
	// Found is the group's load balancer as found (nil: none), Home its home namespace.
	Found *lbplan.Actual
	Home  string
	// LeaderDesired is the leader's desired state, Type the type in force.
	LeaderDesired lbplan.Desired
	Type          TypeLimit
	lists         []MemberListeners // every member's listeners, for PlanGroup
}

// PlanShell plans the load balancer of s.Group for s.Acting, the one way the CCM's sync, its
// preview and audit, and `plan` do: the leader (the home's oldest member) names it; a name
// reserved for another group is refused before anything is read and again once the home's
// leader names it; the load balancer is found (r.Find); the home is its label, or remembered,
// or the oldest member's namespace, and only a member there creates it (CheckGroupHome); the
// members' listeners and the type in force are read (r.Listeners, r.Type); PlanGroup plans,
// leaving out the members denied decides against.
func PlanShell(ctx context.Context, r Reader, s Shell, denied DeniedSteps) (Shelled, error) {
	if len(s.Members) == 0 { // the acting Service is being deleted or is no load balancer Service
		return Shelled{}, fmt.Errorf("load balancer group %s: %s is no member (deleted, or not of type LoadBalancer)", s.Group, lbplan.Key(s.Acting))
	}
	out := Shelled{Leader: s.Members[0]}
	out.Name = lbservice.GroupName(out.Leader, s.Cluster, s.Group)
	if err := lbservice.CheckName(out.Name, s.Cluster, s.Group); err != nil {
		return out, r.Refused(ctx, RefusedName, err)
	}
	lb, err := r.Find(ctx, out.Name)
	out.Found = lb
	if err != nil || lb == nil && !s.Create {
		return out, err
	}
	// The home namespace is the load balancer's label (the oldest member's namespace for a new
	// one, or one made before the label), remembered when the load balancer is gone: the leader
	// is the oldest member there, never a member of another namespace that outlived the members
	// of the home (issue 34 §2), and only a member there creates the load balancer (issue 40 §3).
	home, known := r.Home(lb, s.Members)
	out.Home = home
	if err := CheckGroupHome(s.Acting, s.Group, home, known, s.Members, lb != nil); err != nil {
		return out, r.Refused(ctx, RefusedHome, err)
	}
	if out.Leader = GroupLeader(s.Members, home); out.Leader != s.Members[0] {
		out.Name = lbservice.GroupName(out.Leader, s.Cluster, s.Group)
	}
	if err := lbservice.CheckName(out.Name, s.Cluster, s.Group); err != nil { // the home's leader names it
		return out, r.Refused(ctx, RefusedName, err)
	}
	if out.LeaderDesired, err = out.listeners(ctx, r, s); err != nil {
		return out, err
	}
	return out, out.plan(ctx, r, s, lb, denied)
}

// listeners reads the leader's desired state and the members' listeners, and keeps them for plan.
func (out *Shelled) listeners(ctx context.Context, r Reader, s Shell) (lbplan.Desired, error) {
	d, lists, err := r.Listeners(ctx, LeaderFirst(s.Members, out.Leader), out.Name)
	out.lists = lists
	return d, err
}

// plan reads the type in force and plans with PlanGroup.
func (out *Shelled) plan(ctx context.Context, r Reader, s Shell, lb *lbplan.Actual, denied DeniedSteps) error {
	basis := lb
	if s.FromScratch {
		basis = nil
	}
	var err error
	if out.Type, err = r.Type(ctx, out.Leader, &out.LeaderDesired, basis); err != nil {
		return err
	}
	o, err := PlanGroup(GroupInput{
		Group: s.Group, Home: out.Home, Name: out.Name, Labels: GroupDesiredLabels(s.Group, s.Cluster, out.Home),
		Acting: lbplan.Key(s.Acting), Members: s.Members, Leader: out.LeaderDesired, Lists: out.lists, Type: out.Type, Actual: basis,
	}, denied)
	if err != nil {
		return r.Refused(ctx, RefusedPlan, err)
	}
	out.GroupOutcome, out.Planned = o, true
	return nil
}
