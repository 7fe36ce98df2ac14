// Package lbgroup plans the load balancer a group of Services shares (the annotation
// load-balancer.hetzner.cloud/group; docs/shared-load-balancers.md): who is a member, who leads,
// which namespace is its home, which listeners each member gets (AdmitGroup: port conflicts,
// capacity), the group's desired state (GroupDesired, from the leader's, for lbplan.Compute),
// its policy view (GroupView: input.group), and the plan without the members the policy denies
// (PlanGroup). It is pure, like ccm/lbplan, and links neither OPA nor client-go
// (TestPlannersAreLight).
package lbgroup

import (
	"cmp"
	"fmt"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	corev1 "k8s.io/api/core/v1"
	"maps"
	"slices"
	"strings"
)

// GroupLabels are the identity labels of the load balancer of group in cluster.
func GroupLabels(group, cluster string) map[string]string {
	return map[string]string{lbplan.LabelGroup: group, lbplan.LabelCluster: cluster}
}

// GroupDesiredLabels are the labels the load balancer of group in cluster is given: the
// identity labels and LabelGroupNamespace set to home.
func GroupDesiredLabels(group, cluster, home string) map[string]string {
	l := GroupLabels(group, cluster)
	if home != "" {
		l[lbplan.LabelGroupNamespace] = home
	}
	return l
}

// GroupHome returns the home namespace of a group: the LabelGroupNamespace label of its load
// balancer lb when set, else (no load balancer, or one created before the label existed) the
// namespace of the oldest of members that shows an address in its status (the group's load
// balancer served it: its home outlives a load balancer deleted by hand, issue 40 §3), else of
// the oldest of members (a new group), which the next plan records on the load balancer. ""
// without either. A member the policy refused never had an address, so it never makes the
// home; ccm/loadbalancer also remembers the homes it read (groupHomes).
func GroupHome(lb *lbplan.Actual, members []*corev1.Service) string {
	home, _ := GroupHomeKnown(lb, members)
	return home
}

// GroupHomeKnown is GroupHome, and whether the home is known from a load balancer the group has
// or had (its label, or a member with an address) rather than taken from the oldest member of
// a group that never had one.
func GroupHomeKnown(lb *lbplan.Actual, members []*corev1.Service) (string, bool) {
	if lb != nil && lb.Labels[lbplan.LabelGroupNamespace] != "" {
		return lb.Labels[lbplan.LabelGroupNamespace], true
	}
	for _, m := range members {
		if len(m.Status.LoadBalancer.Ingress) > 0 {
			return m.Namespace, true
		}
	}
	if len(members) == 0 {
		return "", false
	}
	return members[0].Namespace, false
}

// HasHomeMember reports whether a member of members lives in the home namespace home. A group
// lives while its home has a member: without one its load balancer is deleted and not created
// again for members of other namespaces (docs/shared-load-balancers.md, Home namespace).
func HasHomeMember(members []*corev1.Service, home string) bool {
	for _, m := range members {
		if m.Namespace == home {
			return true
		}
	}
	return false
}

// GroupLeader returns the leader of a group among members (oldest first, GroupMembers): its
// oldest member in the home namespace home, else its oldest member (a group whose members are
// all outside its home: the policy decides whether they may share); nil without members. The
// leader's load-balancer-wide settings are in force, so a member of another namespace never
// takes them over by outliving the members of the home namespace.
func GroupLeader(members []*corev1.Service, home string) *corev1.Service {
	for _, m := range members {
		if m.Namespace == home {
			return m
		}
	}
	if len(members) == 0 {
		return nil
	}
	return members[0]
}

// LeaderFirst returns members (oldest first) with leader moved to the front, the others in
// age order: the order in which listeners are admitted (AdmitGroup), the leader's first.
func LeaderFirst(members []*corev1.Service, leader *corev1.Service) []*corev1.Service {
	out := make([]*corev1.Service, 0, len(members))
	if leader != nil {
		out = append(out, leader)
	}
	for _, m := range members {
		if m != leader {
			out = append(out, m)
		}
	}
	return out
}

// GroupSelector is the Hetzner label selector that finds the load balancer of group in cluster.
func GroupSelector(group, cluster string) string {
	return lbplan.LabelGroup + "=" + group + "," + lbplan.LabelCluster + "=" + cluster
}

// GroupMembers returns the members of group among services: the Services of type LoadBalancer
// whose group annotation is group (a valid one) and whose deletionTimestamp is unset, oldest
// first (creationTimestamp, then namespace/name). The first is the leader. It is pure and
// keeps services as they are; nil entries are skipped.
func GroupMembers(services []*corev1.Service, group string) []*corev1.Service {
	var out []*corev1.Service
	for _, s := range services {
		if s == nil || s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.DeletionTimestamp != nil {
			continue
		}
		if g, err := annotation.Group(s); err == nil && g == group {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, CompareAge)
	return out
}

// CompareAge orders Services oldest first, then by namespace/name: the member order of a group.
func CompareAge(a, b *corev1.Service) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(lbplan.Key(a), lbplan.Key(b))
}

// MemberListeners are the listeners one member asks for (its own Desired.Services), in
// member order (GroupMembers).
type MemberListeners struct {
	Member    string // namespace/name
	Listeners []lbplan.Listener
}

// PortConflict is a listen port two members claim: Owner, the older, keeps it.
type PortConflict struct {
	Port   int
	Owner  string
	Member string
}

// Message is the LoadBalancerGroupPortConflict event of the newer member.
func (c PortConflict) Message(group string) string {
	return fmt.Sprintf("port %d is already served by %s in load balancer group %s; %s's other ports are served", c.Port, c.Owner, group, c.Member)
}

// CapacityRefusal is a member refused as a whole because its ports would exceed the type's
// max_services.
type CapacityRefusal struct {
	Member string
	// Need is the number of listeners the member adds; Total the listeners with it.
	Need, Total int
}

// Admission is the outcome of AdmitGroup: which member is served on which port.
type Admission struct {
	// Listeners is the union of the admitted members' listeners, sorted by listen port.
	Listeners []lbplan.Listener
	// Ports are the admitted listen ports of every member (sorted; empty for a refused one).
	Ports map[string][]int
	// Conflicts are the ports newer members lost to older ones, in member order.
	Conflicts []PortConflict
	// Refused are the members over capacity, in member order.
	Refused []CapacityRefusal
}

// AdmitGroup admits the members' listeners in member order (oldest first): a port an older
// member holds stays with it (PortConflict for the newer one); a member whose remaining ports
// would make more than maxServices listeners is refused as a whole, none of its ports added
// (maxServices 0: no limit). It is pure.
func AdmitGroup(members []MemberListeners, maxServices int) Admission {
	adm := Admission{Ports: make(map[string][]int, len(members))}
	owner := map[int]string{}
	for _, m := range members {
		adm.Ports[m.Member] = []int{}
		var mine []lbplan.Listener
		for _, l := range m.Listeners {
			if o, taken := owner[l.ListenPort]; taken {
				adm.Conflicts = append(adm.Conflicts, PortConflict{Port: l.ListenPort, Owner: o, Member: m.Member})
				continue
			}
			mine = append(mine, l)
		}
		total := len(adm.Listeners) + len(mine)
		if maxServices > 0 && len(mine) > 0 && total > maxServices {
			adm.Refused = append(adm.Refused, CapacityRefusal{Member: m.Member, Need: len(mine), Total: total})
			continue
		}
		for _, l := range mine {
			owner[l.ListenPort] = m.Member
			adm.Listeners = append(adm.Listeners, l)
			adm.Ports[m.Member] = append(adm.Ports[m.Member], l.ListenPort)
		}
		slices.Sort(adm.Ports[m.Member])
	}
	slices.SortFunc(adm.Listeners, func(a, b lbplan.Listener) int { return cmp.Compare(a.ListenPort, b.ListenPort) })
	return adm
}

// TypeLimit is a load balancer type's listener limit.
type TypeLimit struct {
	Name        string
	MaxServices int
}

// SuggestType returns the type with the fewest max_services that still holds need listeners
// (ties: by name); false when none does.
func SuggestType(types []TypeLimit, need int) (TypeLimit, bool) {
	var best TypeLimit
	found := false
	for _, t := range types {
		if t.MaxServices < need {
			continue
		}
		if !found || t.MaxServices < best.MaxServices || t.MaxServices == best.MaxServices && t.Name < best.Name {
			best, found = t, true
		}
	}
	return best, found
}

// CapacityMessage is the LoadBalancerGroupCapacityExceeded event of a refused member r of
// group, whose load balancer type typ holds max listeners; suggest is a type that would fit
// (ok false: none) and leader the leader's namespace/name.
func CapacityMessage(r CapacityRefusal, group string, typ TypeLimit, suggest TypeLimit, ok bool, leader string) string {
	msg := fmt.Sprintf("load balancer group %s (type %s) serves at most %d listeners; %s needs %d more (%d in all).",
		group, typ.Name, typ.MaxServices, r.Member, r.Need, r.Total)
	if !ok {
		return msg + " No load balancer type holds that many: split the group."
	}
	return msg + fmt.Sprintf(" Type %s (%d) would fit: set %s on the leader %s.", suggest.Name, suggest.MaxServices, annotation.LBType, leader)
}

// GroupSettings returns the annotations of load-balancer-wide settings, which must agree across
// the members of a group: the leader's are in force.
func GroupSettings() []annotation.Name { return slices.Clone(groupSettings) }

// groupSettings are GroupSettings' table.
var groupSettings = []annotation.Name{
	annotation.LBType, annotation.LBLocation, annotation.LBNetworkZone, annotation.LBUsePrivateIP,
	annotation.LBPrivateIPv4, annotation.LBPrivateSubnetIPRange, annotation.LBAlgorithmType,
	annotation.LBDisablePublicNetwork, annotation.LBDisablePrivateIngress, annotation.LBIPv6Disabled,
	annotation.LBPublicIPv4RDNS, annotation.LBPublicIPv6RDNS, annotation.LBNodeSelector,
	annotation.LBHostname, annotation.LBName, annotation.LBDeleteProtection,
}

// SettingConflict is a load-balancer-wide annotation a member sets to another value than the
// leader (LeaderSet false: the leader does not set it).
type SettingConflict struct {
	Annotation  annotation.Name
	Value       string
	LeaderValue string
	LeaderSet   bool
}

// SettingConflicts returns the GroupSettings that member sets to another value than leader, in
// GroupSettings order; none for the leader itself. An annotation the member does not set is no
// conflict (the leader's applies). It is pure.
func SettingConflicts(leader, member *corev1.Service) []SettingConflict {
	if leader == nil || member == nil || lbplan.Key(leader) == lbplan.Key(member) {
		return nil
	}
	var out []SettingConflict
	for _, n := range groupSettings {
		v, set := n.Value(member)
		if !set {
			continue
		}
		lv, lset := n.Value(leader)
		if lset && lv == v {
			continue
		}
		out = append(out, SettingConflict{Annotation: n, Value: v, LeaderValue: lv, LeaderSet: lset})
	}
	return out
}

// SettingConflictMessage is the LoadBalancerGroupSettingConflict event of a member with the
// conflicts cs, leader being the leader's namespace/name.
func SettingConflictMessage(cs []SettingConflict, leader string) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		lv := "not set"
		if c.LeaderSet {
			lv = fmt.Sprintf("%q", c.LeaderValue)
		}
		parts[i] = fmt.Sprintf("%s: %q here, %s on the leader %s (in force)", c.Annotation, c.Value, lv, leader)
	}
	return strings.Join(parts, "; ")
}

// GroupDesired turns the leader's desired state into the group's: the group's name and
// identity labels (no LabelServiceUID) and the admitted listeners; every load-balancer-wide
// setting, the targets and the leader's managed certificate stay the leader's. It is pure.
func GroupDesired(leader lbplan.Desired, adm Admission, name string, labels map[string]string) lbplan.Desired {
	d := leader
	d.Name, d.Rename = name, true
	d.Labels = maps.Clone(labels)
	d.Services = slices.Clone(adm.Listeners)
	return d
}

// GroupView is the policy view of a group (input.group): its home namespace home (GroupHome),
// its leader (GroupLeader), members in member order with their admitted ports, the type in
// force with its max_services, and the listeners after the plan.
func GroupView(group, home string, members []*corev1.Service, adm Admission, typ TypeLimit) *input.Group {
	g := &input.Group{Name: group, Namespace: home, Members: make([]input.GroupMember, 0, len(members)),
		Capacity: input.GroupCapacity{Type: typ.Name, MaxServices: typ.MaxServices, Used: len(adm.Listeners)}}
	if leader := GroupLeader(members, home); leader != nil {
		g.Leader = input.ServiceRef{Namespace: leader.Namespace, Name: leader.Name}
	}
	for _, m := range members {
		ports := slices.Clone(adm.Ports[lbplan.Key(m)])
		if ports == nil {
			ports = []int{}
		}
		g.Members = append(g.Members, input.GroupMember{Namespace: m.Namespace, Name: m.Name, Ports: ports})
	}
	return g
}

// ComputeRemoveListeners plans the removal of the listeners on ports from actual (nil: nothing):
// the listeners of a member that leaves a group or is deleted, while the other members stay.
// Ports actual does not serve are skipped. It is pure.
func ComputeRemoveListeners(actual *lbplan.Actual, ports []int) lbplan.Plan {
	p := lbplan.Plan{Actual: actual, IPv6: true}
	if actual == nil {
		return p
	}
	for _, s := range actual.Services {
		if slices.Contains(ports, s.ListenPort) {
			p.Mutations = append(p.Mutations, lbplan.DeleteService{ListenPort: s.ListenPort})
		}
	}
	return p
}

// GroupHomeError is CheckGroupHome's refusal of a member: the group's home namespace has no
// member (its load balancer goes), or the load balancer is missing and the member is not in
// the home (only a member there creates it). It wraps nothing; the member is not served.
type GroupHomeError struct {
	Group, Home, Member string
	// Empty: the home has no member.
	Empty bool
}

func (e *GroupHomeError) Error() string {
	if e.Empty {
		return fmt.Sprintf("load balancer group %s lives in namespace %s, which has no member left: its load balancer is deleted and not created for members of other namespaces, so %s gets no address; use a group name of its own namespace", e.Group, e.Home, e.Member)
	}
	return fmt.Sprintf("load balancer group %s has no load balancer: only a member of its home namespace %s creates it, %s waits for that", e.Group, e.Home, e.Member)
}

// CheckGroupHome refuses the sync of svc, a member of group whose home namespace is home, when
// the home has no member (members, svc among them) or, without a load balancer (exists false)
// while the home is known from one the group had (known: GroupHomeKnown, or the CCM's memory),
// when svc is not in the home: a *GroupHomeError. A group that never had a load balancer is
// created by whichever member syncs first, for its oldest member's namespace, and the policy
// decides who may share it (so `plan`, which knows no history, gives the CCM's verdict). The
// CCM and `plan` call it before any write.
func CheckGroupHome(svc *corev1.Service, group, home string, known bool, members []*corev1.Service, exists bool) error {
	switch {
	case !HasHomeMember(members, home):
		return &GroupHomeError{Group: group, Home: home, Member: lbplan.Key(svc), Empty: true}
	case !exists && known && svc.Namespace != home:
		return &GroupHomeError{Group: group, Home: home, Member: lbplan.Key(svc)}
	}
	return nil
}
