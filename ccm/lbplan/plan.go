package lbplan

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// ErrProtected is matched (errors.Is) by every *ProtectedError.
var ErrProtected = errors.New("load balancer has delete protection")

// ProtectedError is returned for a load balancer whose delete protection keeps the CCM from
// deleting it: by ComputeDelete when the load balancer says so, and by the executor when the
// API refuses the delete as protected (Err is then the API's error). Callers choose the
// DeleteProtected event with errors.As, never by the message.
type ProtectedError struct {
	Name string
	ID   int64
	// Err is the API's refusal; nil when the planner saw the protection.
	Err error
}

func (e *ProtectedError) Error() string {
	msg := fmt.Sprintf("load balancer %s (%d): %v; remove the protection to let the CCM delete it", e.Name, e.ID, ErrProtected)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is lets errors.Is(err, ErrProtected) match.
func (e *ProtectedError) Is(target error) bool { return target == ErrProtected }

// Unwrap returns the API's refusal, if any.
func (e *ProtectedError) Unwrap() error { return e.Err }

// Because returns a copy of e with the API's refusal apiErr (apireq.Cause: Delete's declared
// outcome of the error code protected).
func (e *ProtectedError) Because(apiErr error) error {
	c := *e
	c.Err = apiErr
	return &c
}

// Plan is the ordered list of mutations that turns an actual load balancer into the desired
// one. An empty plan means nothing to do (an unchanged load balancer costs no mutation).
type Plan struct {
	// Actual is the load balancer the plan starts from; nil when the plan creates one.
	Actual    *Actual
	Mutations []Mutation
	// SkippedTargets are wanted targets beyond the type's max_targets (MaxTargetsReached).
	SkippedTargets []Target
	// SkippedIPTargets are wanted IP targets (Robot nodes) beyond max_targets.
	SkippedIPTargets []IPTarget
	// IPv6 is the policy view's ipv6 flag (IPv6 in the Service status).
	IPv6 bool
	// Group is the load balancer group the plan is for (every step's input.group); nil for
	// the load balancer of one Service.
	Group *input.Group
	// Pricing, when set, is the inventory and the prices the plan is decided against: every
	// step's input carries input.inventory and input.cost (gate.Inputs). Nil: neither (no
	// policy in force, or no prices known).
	Pricing *Pricing
	// network is the cluster network; its range fills the policy view of an attachment the
	// API reports without one.
	network *Attachment
}

// Empty reports whether the plan has no mutation.
func (p Plan) Empty() bool { return len(p.Mutations) == 0 }

// Labels returns the mutations' labels, in order.
func (p Plan) Labels() []string {
	out := make([]string, len(p.Mutations))
	for i, m := range p.Mutations {
		out[i] = m.Label()
	}
	return out
}

// Step is one decision of the policy gate: one API request (see Requests) with its policy
// view. Current is the load balancer before the request (nil on create), LoadBalancer the load
// balancer after it, with everything the request does: a create's step shows the listeners and
// targets that ride along in its body (Inline), because the one POST /load_balancers creates
// them. Final is the state after the last step of the plan; nil when the plan deletes.
//
// Target, Listener and Certificate are the one target, listener or managed certificate the
// request adds, changes or removes (nil for other operations), so that a rule can name it
// without comparing Current and LoadBalancer.
type Step struct {
	Mutation Mutation
	// Inline are the mutations sent in the same request as Mutation (a create's listeners and
	// targets); they have no step of their own.
	Inline       []Mutation
	Current      *input.LoadBalancer
	LoadBalancer *input.LoadBalancer
	Final        *input.LoadBalancer
	Target       *input.LBTarget
	Listener     *input.LBService
	Certificate  *input.Certificate
}

// Label is the label of the step's request: its mutation's label (a create's inline listeners
// and targets are part of the create).
func (s Step) Label() string { return s.Mutation.Label() }

// Steps gives the policy view of each request of the plan, one step per request, in plan
// order: the create (with what rides along inline, as Requests groups it) first, then each
// other mutation. Every step applies its request's mutations (Mutation.Apply) to the state the
// previous step left, so the steps describe exactly what the requests send: the property test
// TestProperty_DecisionsSeeWhatRequestsDo (ccm/executor) checks it against the request bodies.
// Each step owns its copies. A delete keeps the load balancer being deleted as its view
// (policies match on its name and labels).
//
// A managed certificate is created just before the load balancer (Requests), but its step
// comes after the create's: its view is the load balancer whose listener will use it.
func (p Plan) Steps() []Step {
	state := p.Actual
	cur := p.view(state)
	steps := make([]Step, 0, len(p.Mutations))
	inline := map[int]bool{}
	for i, m := range p.Mutations {
		if inline[i] {
			continue
		}
		st := Step{Mutation: m, Current: clonePolicy(cur)}
		next := m.Apply(state)
		if c, ok := m.(Create); ok {
			for j := i + 1; j < len(p.Mutations); j++ {
				if ridesAlong(c, p.Mutations[j]) {
					inline[j] = true
					st.Inline = append(st.Inline, p.Mutations[j])
					next = p.Mutations[j].Apply(next)
				}
			}
		}
		view := p.view(next)
		if next == nil {
			view = clonePolicy(cur)
		}
		st.LoadBalancer = view
		st.Target, st.Listener, st.Certificate = policyTargetOf(m), policyListenerOf(m, state), policyCertificateOf(m)
		steps = append(steps, st)
		state, cur = next, view
	}
	if state != nil {
		for i := range steps {
			steps[i].Final = clonePolicy(cur)
		}
	}
	return steps
}

// policyTargetOf is the target m adds or removes; nil for other mutations.
func policyTargetOf(m Mutation) *input.LBTarget {
	if t, ok := m.(TargetMutation); ok {
		pt := t.PolicyTarget()
		return &pt
	}
	return nil
}

// listenerMutation is implemented by the mutations that add, change or delete one listener:
// policyListener is that listener as the policy input's "listener" shows it, as it is after m
// (add, change) or as it was in before (delete); nil when it is not there.
type listenerMutation interface {
	Mutation
	policyListener(before *Actual) *input.LBService
}

var _ = []listenerMutation{AddService{}, UpdateService{}, DeleteService{}}

// certificateMutation is implemented by the mutations that create a certificate:
// policyCertificate is that certificate as the policy input's "certificate" shows it.
type certificateMutation interface {
	Mutation
	policyCertificate() *input.Certificate
}

var _ certificateMutation = CreateManagedCertificate{}

// policyListenerOf is the listener of m (listenerMutation) on before; nil for other mutations.
func policyListenerOf(m Mutation, before *Actual) *input.LBService {
	if l, ok := m.(listenerMutation); ok {
		return l.policyListener(before)
	}
	return nil
}

// policyListenerOn is the policy view of the listener on port of a; nil when a has none.
func policyListenerOn(a *Actual, port int) *input.LBService {
	if a == nil {
		return nil
	}
	for _, s := range a.Services {
		if s.ListenPort == port {
			ps := policyService(s)
			return &ps
		}
	}
	return nil
}

func (m AddService) policyListener(before *Actual) *input.LBService {
	return policyListenerOn(m.Apply(before), m.Listener.ListenPort)
}

func (m UpdateService) policyListener(before *Actual) *input.LBService {
	return policyListenerOn(m.Apply(before), m.Listener.ListenPort)
}

func (m DeleteService) policyListener(before *Actual) *input.LBService {
	return policyListenerOn(before, m.ListenPort)
}

// policyCertificateOf is the certificate of m (certificateMutation); nil for other mutations.
func policyCertificateOf(m Mutation) *input.Certificate {
	if c, ok := m.(certificateMutation); ok {
		return c.policyCertificate()
	}
	return nil
}

func (m CreateManagedCertificate) policyCertificate() *input.Certificate {
	return &input.Certificate{Type: string(hcloud.CertificateTypeManaged), Name: m.Certificate.Name,
		Domains: slices.Clone(m.Certificate.Domains), Labels: maps.Clone(m.Certificate.Labels)}
}

// view is the policy view of a (nil for none); an attachment to the cluster network that the
// API reported without its range gets the cluster network's.
func (p Plan) view(a *Actual) *input.LoadBalancer {
	if a == nil {
		return nil
	}
	lb := a.Policy(p.IPv6)
	if n := lb.Network; n != nil && n.IPRange == "" && p.network != nil && p.network.ID == n.ID {
		n.IPRange = p.network.IPRange
	}
	return lb
}

// Policy returns the policy view of the load balancer; ipv6 is the view's ipv6 flag.
func (a *Actual) Policy(ipv6 bool) *input.LoadBalancer {
	lb := &input.LoadBalancer{
		ID: a.ID, Name: a.Name, Type: a.Type, Location: a.Location, NetworkZone: a.NetworkZone,
		Algorithm: string(a.Algorithm), PublicInterface: a.PublicInterface, IPv6: ipv6,
		Labels: maps.Clone(a.Labels), Protected: a.Protected,
		Services: []input.LBService{}, Targets: []input.LBTarget{},
	}
	if len(a.Networks) > 0 {
		n := &input.LBNetwork{ID: a.Networks[0].ID}
		n.IPRange = a.Networks[0].IPRange
		if a.Networks[0].IP != nil {
			n.PrivateIP = a.Networks[0].IP.String()
		}
		lb.Network = n
	}
	for _, s := range a.Services {
		lb.Services = append(lb.Services, policyService(s))
	}
	for _, t := range a.Targets {
		lb.Targets = append(lb.Targets, policyTarget(t))
	}
	for _, ip := range a.IPTargets {
		lb.Targets = append(lb.Targets, input.LBTarget{Type: string(hcloud.LoadBalancerTargetTypeIP), IP: ip})
	}
	return lb
}

func clonePolicy(lb *input.LoadBalancer) *input.LoadBalancer {
	if lb == nil {
		return nil
	}
	c := *lb
	c.Labels = maps.Clone(lb.Labels)
	c.Services = slices.Clone(lb.Services)
	for i, s := range c.Services {
		c.Services[i].HealthCheck = cloneHealthCheck(s.HealthCheck)
	}
	c.Targets = slices.Clone(lb.Targets)
	if lb.Network != nil {
		n := *lb.Network
		c.Network = &n
	}
	return &c
}

// cloneHealthCheck is a deep copy of hc: a step's view shares no pointer with another's.
func cloneHealthCheck(hc input.LBHealthCheck) input.LBHealthCheck {
	hc.Interval, hc.Timeout, hc.Retries = clonePtr(hc.Interval), clonePtr(hc.Timeout), clonePtr(hc.Retries)
	if h := hc.HTTP; h != nil {
		hc.HTTP = &input.LBHealthCheckHTTP{Domain: clonePtr(h.Domain), Path: clonePtr(h.Path),
			StatusCodes: slices.Clone(h.StatusCodes), TLS: clonePtr(h.TLS)}
	}
	return hc
}

// Compute plans the mutations that turn actual (nil: none exists) into d. It is pure.
//
// Order: create; update (name, labels); change_type; change_algorithm; enable_public_interface;
// detach_from_network; attach_to_network; change_dns_ptr; change_protection; remove_target;
// create_managed_certificate; delete_service;
// update_service; add_service; add_target; disable_public_interface — so that targets are on
// private IPs before the public interface goes away, and a listener is gone before its port is
// reused.
//
// # Errors
//
// Invalid desired states (no identity: the UID label or the two group labels, not both; no
// location on create) and changes that are not allowed
// on an existing load balancer (location, network zone).
func Compute(d Desired, actual *Actual) (Plan, error) {
	if err := checkIdentity(d.Labels); err != nil {
		return Plan{}, err
	}
	if d.Name == "" {
		return Plan{}, errors.New("desired load balancer has no name")
	}
	p := Plan{Actual: actual, IPv6: !d.Status.DisableIPv6, network: d.Network}
	if actual == nil {
		return planCreate(d, p)
	}
	add := func(ms ...Mutation) { p.Mutations = append(p.Mutations, ms...) }
	add(planUpdate(d, actual)...)
	if d.TypeSet && d.Type != actual.Type {
		add(ChangeType{Type: d.Type})
	}
	if d.Algorithm != nil && *d.Algorithm != actual.Algorithm {
		add(ChangeAlgorithm{Algorithm: *d.Algorithm})
	}
	public := d.PublicInterface
	if public != nil && *public && !actual.PublicInterface {
		add(EnablePublicInterface{})
	}
	add(planNetwork(d, actual)...)
	add(planDNSPtr(d, actual)...)
	add(planProtection(d, actual)...)
	removes, adds, skipped, skippedIP := planTargets(d, actual)
	add(removes...)
	add(planCertificate(d)...)
	add(planServices(d, actual)...)
	add(adds...)
	p.SkippedTargets, p.SkippedIPTargets = skipped, skippedIP
	if public != nil && !*public && actual.PublicInterface {
		add(DisablePublicInterface{})
	}
	return p, nil
}

// ComputeDelete plans the deletion of actual (nil: nothing to delete). A protected load balancer
// is not deleted: a *ProtectedError is returned.
func ComputeDelete(actual *Actual) (Plan, error) {
	if actual == nil {
		return Plan{}, nil
	}
	if actual.Protected {
		return Plan{}, &ProtectedError{Name: actual.Name, ID: actual.ID}
	}
	return Plan{Actual: actual, IPv6: true, Mutations: []Mutation{Delete{Name: actual.Name}}}, nil
}

func planCreate(d Desired, p Plan) (Plan, error) {
	if d.Location == "" && d.NetworkZone == "" {
		return Plan{}, annotation.Usagef(string(annotation.LBLocation), "neither %q nor %q is set (nor HCLOUD_LOAD_BALANCERS_LOCATION or HCLOUD_LOAD_BALANCERS_NETWORK_ZONE): set one to create the load balancer",
			annotation.LBLocation, annotation.LBNetworkZone)
	}
	c := Create{
		Name: d.Name, Type: d.Type, Location: d.Location, NetworkZone: d.NetworkZone,
		Algorithm: d.Algorithm, Labels: maps.Clone(d.Labels), PublicInterface: true,
	}
	attachLater := d.Network != nil && (d.Network.IP != nil || d.Network.Subnet != nil)
	if d.Network != nil && !attachLater {
		n := *d.Network
		c.Network = &n
		c.PublicInterface = d.PublicInterfaceOnCreate()
	}
	p.Mutations = append(p.Mutations, c)
	if attachLater {
		p.Mutations = append(p.Mutations, AttachNetwork{Network: *d.Network})
	}
	// A new load balancer has the API's default PTR records: a set annotation always changes them.
	p.Mutations = append(p.Mutations, planDNSPtr(d, &Actual{IPv4RDNS: "\x00", IPv6RDNS: "\x00"})...)
	p.Mutations = append(p.Mutations, planProtection(d, &Actual{})...) // a new load balancer has none
	p.Mutations = append(p.Mutations, planCertificate(d)...)
	for _, s := range d.Services {
		p.Mutations = append(p.Mutations, AddService{Listener: s})
	}
	_, adds, skipped, skippedIP := planTargets(d, &Actual{})
	p.Mutations = append(p.Mutations, adds...)
	p.SkippedTargets, p.SkippedIPTargets = skipped, skippedIP
	if c.PublicInterface && !d.PublicInterfaceOnCreate() {
		p.Mutations = append(p.Mutations, DisablePublicInterface{})
	}
	return p, nil
}

// planUpdate renames and (re-)labels in one PUT. Existing labels are kept; the desired labels
// (the UID label) are set on top, so the UID label is never removed.
func planUpdate(d Desired, a *Actual) []Mutation {
	labels := maps.Clone(a.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, d.Labels)
	name := a.Name
	if d.Rename {
		name = d.Name
	}
	if name == a.Name && maps.Equal(labels, a.Labels) {
		return nil
	}
	return []Mutation{Update{Name: name, Labels: labels}}
}

// planNetwork detaches from other networks and from the cluster network when the private IP
// differs, then attaches. Without a cluster network every attachment is detached: the official
// CCM does the same.
func planNetwork(d Desired, a *Actual) []Mutation {
	var out []Mutation
	if d.Network == nil {
		for _, n := range a.Networks {
			out = append(out, DetachNetwork{NetworkID: n.ID})
		}
		return out
	}
	attached := false
	for _, n := range a.Networks {
		switch {
		case n.ID != d.Network.ID:
			out = append(out, DetachNetwork{NetworkID: n.ID})
		case d.Network.IP != nil && !d.Network.IP.Equal(n.IP):
			out = append(out, DetachNetwork{NetworkID: n.ID})
		default:
			attached = true
		}
	}
	if !attached {
		out = append(out, AttachNetwork{Network: *d.Network})
	}
	return out
}

// planCertificate creates the managed certificate when the caller found none.
func planCertificate(d Desired) []Mutation {
	mc := d.ManagedCertificate
	if mc == nil || mc.ID != PendingCertificateID {
		return nil
	}
	c := *mc
	c.Domains, c.Labels = slices.Clone(mc.Domains), maps.Clone(mc.Labels)
	return []Mutation{CreateManagedCertificate{Certificate: c}}
}

func planDNSPtr(d Desired, a *Actual) []Mutation {
	var out []Mutation
	if d.IPv4RDNS != nil && *d.IPv4RDNS != a.IPv4RDNS {
		out = append(out, ChangeDNSPtr{Ptr: *d.IPv4RDNS})
	}
	if d.IPv6RDNS != nil && *d.IPv6RDNS != a.IPv6RDNS {
		out = append(out, ChangeDNSPtr{IPv6: true, Ptr: *d.IPv6RDNS})
	}
	return out
}

// planTargets removes unwanted targets and those whose use_private_ip flips (remove + add),
// and adds wanted ones up to max_targets, server targets first, then IP targets (Robot
// nodes, planIPTargets); the rest are skipped.
func planTargets(d Desired, a *Actual) (removes, adds []Mutation, skipped []Target, skippedIP []IPTarget) {
	want := map[int64]Target{}
	for _, t := range d.Targets {
		want[t.ServerID] = t
	}
	have := map[int64]bool{}
	for _, t := range a.Targets {
		w, ok := want[t.ServerID]
		if ok && w.UsePrivateIP == t.UsePrivateIP {
			have[t.ServerID] = true
			continue
		}
		removes = append(removes, RemoveTarget{Target: t})
	}
	limit := d.MaxTargets
	if limit == 0 {
		limit = a.MaxTargets
	}
	count := len(have) + a.OtherTargets + keptIPTargets(d, a) // as the official CCM counts
	for _, t := range d.Targets {
		if have[t.ServerID] {
			continue
		}
		if limit > 0 && count >= limit {
			skipped = append(skipped, t)
			continue
		}
		adds = append(adds, AddTarget{Target: t})
		count++
	}
	ipRemoves, ipAdds, skippedIP := planIPTargets(d, a, count, limit)
	return append(removes, ipRemoves...), append(adds, ipAdds...), skipped, skippedIP
}

// planServices deletes listeners on ports no longer wanted, updates those that differ and
// adds new ones.
func planServices(d Desired, a *Actual) []Mutation {
	var dels, ups, adds []Mutation
	have := map[int]Listener{}
	for _, s := range a.Services {
		have[s.ListenPort] = s
	}
	want := map[int]bool{}
	for _, s := range d.Services {
		want[s.ListenPort] = true
		cur, ok := have[s.ListenPort]
		switch {
		case !ok:
			adds = append(adds, AddService{Listener: s})
		case !serviceMatches(s, cur):
			ups = append(ups, UpdateService{Listener: s})
		}
	}
	for _, s := range a.Services {
		if !want[s.ListenPort] {
			dels = append(dels, DeleteService{ListenPort: s.ListenPort})
		}
	}
	return slices.Concat(dels, ups, adds)
}

// serviceMatches reports whether the actual listener already is what the desired one asks
// for. Optional desired fields that are not set are not compared.
func serviceMatches(want, have Listener) bool {
	if want.Protocol != have.Protocol || want.DestinationPort != have.DestinationPort || !optEqual(want.Proxyprotocol, have.Proxyprotocol) {
		return false
	}
	if IsHTTP(want.Protocol) && !httpMatches(want.HTTP, have.HTTP) {
		return false
	}
	return healthCheckMatches(want.HealthCheck, have.HealthCheck)
}

// optEqual reports whether want is not set or equals have (have is always set on an actual
// listener).
func optEqual[T comparable](want, have *T) bool {
	return want == nil || (have != nil && *want == *have)
}

// IsHTTP reports whether p is http or https: the protocols with http settings.
func IsHTTP(p hcloud.LoadBalancerServiceProtocol) bool {
	return p == hcloud.LoadBalancerServiceProtocolHTTP || p == hcloud.LoadBalancerServiceProtocolHTTPS
}

func httpMatches(want, have HTTP) bool {
	return optEqual(want.StickySessions, have.StickySessions) && optEqual(want.CookieName, have.CookieName) &&
		optEqual(want.CookieLifetime, have.CookieLifetime) && optEqual(want.TimeoutIdle, have.TimeoutIdle) &&
		optEqual(want.RedirectHTTP, have.RedirectHTTP) &&
		(want.Certificates == nil || slices.Equal(want.Certificates, have.Certificates))
}

func healthCheckMatches(want, have HealthCheck) bool {
	if want.Protocol != have.Protocol || want.Port != have.Port || !optEqual(want.Interval, have.Interval) ||
		!optEqual(want.Timeout, have.Timeout) || !optEqual(want.Retries, have.Retries) {
		return false
	}
	if !IsHTTP(want.Protocol) {
		return true
	}
	return optEqual(want.Domain, have.Domain) && optEqual(want.Path, have.Path) && optEqual(want.TLS, have.TLS) &&
		(want.StatusCodes == nil || slices.Equal(want.StatusCodes, have.StatusCodes))
}

// checkIdentity accepts the labels of a load balancer that is found again: the UID label of one
// Service, or the group and cluster labels of a load balancer group (never both).
func checkIdentity(labels map[string]string) error {
	uid, group := labels[LabelServiceUID] != "", labels[LabelGroup] != "" && labels[LabelCluster] != ""
	switch {
	case uid && group:
		return fmt.Errorf("desired load balancer has both the %s label and the group labels %s, %s", LabelServiceUID, LabelGroup, LabelCluster)
	case !uid && !group:
		return fmt.Errorf("desired load balancer has no %s label (nor the group labels %s, %s)", LabelServiceUID, LabelGroup, LabelCluster)
	}
	return nil
}
