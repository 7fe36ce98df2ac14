package lbplan

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Mutation is one change of a load balancer, run by the executor with one API call, or inline
// in the create's call (see Plan.Requests); the policy gate decides each request once, with
// its whole effect (Plan.Steps).
//
// Action is the policy action (policy.ActionLoadBalancer*), Operation the Hetzner operation
// (also the policy input's operation and the metric label), Label a stable human label such as
// add_service(80) used in logs, events and errors.
//
// Apply returns the load balancer after the mutation: the one model of its effect, from which
// both the policy view of each step (Plan.Steps, Actual.Policy) and the executor's Service
// status (Status) are built. It is pure and never modifies a; a is nil only before a Create,
// and Delete returns nil. A private IP the API picks (an attachment without a fixed one) is
// modelled as a nil IP.
//
// How a kind of mutation is sent to the API and awaited is its entry in the executor's table
// (ccm/executor/kinds.go); docs/rationale.md says how to add a kind.
type Mutation interface {
	Action() string
	Operation() string
	Label() string
	Apply(a *Actual) *Actual
}

// The operations, as in policy.Input.Operation. They MUST not change: policies match on them.
const (
	OpCreate                 = "create"
	OpUpdate                 = "update"
	OpDelete                 = "delete"
	OpChangeType             = "change_type"
	OpChangeAlgorithm        = "change_algorithm"
	OpChangeDNSPtr           = "change_dns_ptr"
	OpAttachToNetwork        = "attach_to_network"
	OpDetachFromNetwork      = "detach_from_network"
	OpEnablePublicInterface  = "enable_public_interface"
	OpDisablePublicInterface = "disable_public_interface"
	OpAddService             = "add_service"
	OpUpdateService          = "update_service"
	OpDeleteService          = "delete_service"
	OpAddTarget              = "add_target"
	OpRemoveTarget           = "remove_target"
	// OpCreateManagedCertificate creates the managed certificate of https listeners; its policy
	// action is loadbalancer.update (it changes what the load balancer serves).
	OpCreateManagedCertificate = "create_managed_certificate"
)

type update struct{}

func (update) Action() string { return policy.ActionLoadBalancerUpdate }

// Create creates the load balancer. Network is set when the network is attached at create
// time (no fixed IP or subnet wanted); otherwise an AttachNetwork follows.
type Create struct {
	Name        string
	Type        string
	Location    string
	NetworkZone string
	// Algorithm is nil when not set: the API default (round_robin) applies.
	Algorithm       *hcloud.LoadBalancerAlgorithmType
	Labels          map[string]string
	PublicInterface bool
	Network         *Network
}

func (Create) Action() string    { return policy.ActionLoadBalancerCreate }
func (Create) Operation() string { return OpCreate }
func (m Create) Label() string   { return fmt.Sprintf("create(%s)", m.Name) }

// Apply is the new load balancer as far as the plan knows it: no ID, addresses or PTR records
// yet (the executor takes them from the create's answer).
func (m Create) Apply(*Actual) *Actual {
	a := &Actual{
		Name: m.Name, Type: m.Type, Location: m.Location, NetworkZone: m.NetworkZone,
		Algorithm: hcloud.LoadBalancerAlgorithmTypeRoundRobin, PublicInterface: m.PublicInterface,
		Labels: maps.Clone(m.Labels),
	}
	if m.Algorithm != nil {
		a.Algorithm = *m.Algorithm
	}
	if m.Network != nil {
		a.Networks = []AttachedNetwork{attachment(*m.Network)}
	}
	return a
}

// Update sets name and labels in one PUT. Labels is the whole set (the API replaces it).
type Update struct {
	update
	Name   string
	Labels map[string]string
}

func (Update) Operation() string { return OpUpdate }
func (m Update) Label() string   { return fmt.Sprintf("update(%s)", m.Name) }
func (m Update) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Name, c.Labels = m.Name, maps.Clone(m.Labels) })
}

// ChangeType changes the load balancer type.
type ChangeType struct {
	update
	Type string
}

func (ChangeType) Operation() string { return OpChangeType }
func (m ChangeType) Label() string   { return fmt.Sprintf("change_type(%s)", m.Type) }
func (m ChangeType) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Type = m.Type })
}

// ChangeAlgorithm changes the balancing algorithm.
type ChangeAlgorithm struct {
	update
	Algorithm hcloud.LoadBalancerAlgorithmType
}

func (ChangeAlgorithm) Operation() string { return OpChangeAlgorithm }
func (m ChangeAlgorithm) Label() string   { return fmt.Sprintf("change_algorithm(%s)", m.Algorithm) }
func (m ChangeAlgorithm) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Algorithm = m.Algorithm })
}

// ChangeDNSPtr sets the reverse DNS record of the public IPv4 (or IPv6) address; the executor
// takes the address from the load balancer, so it also works right after Create.
type ChangeDNSPtr struct {
	update
	IPv6 bool
	Ptr  string
}

func (ChangeDNSPtr) Operation() string { return OpChangeDNSPtr }
func (m ChangeDNSPtr) Label() string {
	if m.IPv6 {
		return "change_dns_ptr(ipv6)"
	}
	return "change_dns_ptr(ipv4)"
}

// Apply sets the record (the policy view has no PTR records).
func (m ChangeDNSPtr) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		if m.IPv6 {
			c.IPv6RDNS = m.Ptr
		} else {
			c.IPv4RDNS = m.Ptr
		}
	})
}

// AttachNetwork attaches the load balancer to the network.
type AttachNetwork struct {
	update
	Network Network
}

func (AttachNetwork) Operation() string { return OpAttachToNetwork }
func (m AttachNetwork) Label() string   { return fmt.Sprintf("attach_to_network(%d)", m.Network.ID) }

// Apply adds the attachment; its IP is nil when the API picks it.
func (m AttachNetwork) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		c.Networks = append(deleteNetwork(c.Networks, m.Network.ID), attachment(m.Network))
	})
}

// DetachNetwork detaches the load balancer from a network.
type DetachNetwork struct {
	update
	NetworkID int64
}

func (DetachNetwork) Operation() string { return OpDetachFromNetwork }
func (m DetachNetwork) Label() string   { return fmt.Sprintf("detach_from_network(%d)", m.NetworkID) }
func (m DetachNetwork) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Networks = deleteNetwork(c.Networks, m.NetworkID) })
}

// EnablePublicInterface enables the public interface.
type EnablePublicInterface struct{ update }

func (EnablePublicInterface) Operation() string { return OpEnablePublicInterface }
func (EnablePublicInterface) Label() string     { return OpEnablePublicInterface }
func (EnablePublicInterface) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.PublicInterface = true })
}

// DisablePublicInterface disables the public interface.
type DisablePublicInterface struct{ update }

func (DisablePublicInterface) Operation() string { return OpDisablePublicInterface }
func (DisablePublicInterface) Label() string     { return OpDisablePublicInterface }
func (DisablePublicInterface) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.PublicInterface = false })
}

// AddService adds a listener.
type AddService struct {
	update
	Listener Listener
}

func (AddService) Operation() string { return OpAddService }
func (m AddService) Label() string   { return fmt.Sprintf("add_service(%d)", m.Listener.ListenPort) }
func (m AddService) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Services = setService(c.Services, m.Listener) })
}

// UpdateService changes a listener; planned only when something differs.
type UpdateService struct {
	update
	Listener Listener
}

func (UpdateService) Operation() string { return OpUpdateService }
func (m UpdateService) Label() string   { return fmt.Sprintf("update_service(%d)", m.Listener.ListenPort) }

// Apply sets the listener; the proxy protocol flag is kept when not sent, as the API does.
func (m UpdateService) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		next := m.Listener
		if next.Proxyprotocol == nil {
			for _, s := range c.Services {
				if s.ListenPort == next.ListenPort {
					next.Proxyprotocol = s.Proxyprotocol
				}
			}
		}
		c.Services = setService(c.Services, next)
	})
}

// DeleteService removes a listener.
type DeleteService struct {
	update
	ListenPort int
}

func (DeleteService) Operation() string { return OpDeleteService }
func (m DeleteService) Label() string   { return fmt.Sprintf("delete_service(%d)", m.ListenPort) }
func (m DeleteService) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		c.Services = slices.DeleteFunc(c.Services, func(s Listener) bool { return s.ListenPort == m.ListenPort })
	})
}

// AddTarget adds a server target.
type AddTarget struct {
	update
	Target Target
}

func (AddTarget) Operation() string { return OpAddTarget }
func (m AddTarget) Label() string   { return fmt.Sprintf("add_target(server:%d)", m.Target.ServerID) }

// Apply appends the target (a target of the same server is replaced).
func (m AddTarget) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Targets = append(removeTarget(c.Targets, m.Target.ServerID), m.Target) })
}

// RemoveTarget removes a server target.
type RemoveTarget struct {
	update
	Target Target
}

func (RemoveTarget) Operation() string { return OpRemoveTarget }
func (m RemoveTarget) Label() string {
	return fmt.Sprintf("remove_target(server:%d)", m.Target.ServerID)
}
func (m RemoveTarget) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Targets = removeTarget(c.Targets, m.Target.ServerID) })
}

// RemoveIPTarget removes an IP target: one no Robot node wants (as the official CCM, every IP
// target of a load balancer it manages that is not a selected Robot node's address).
type RemoveIPTarget struct {
	update
	IP string
}

func (RemoveIPTarget) Operation() string { return OpRemoveTarget }
func (m RemoveIPTarget) Label() string   { return fmt.Sprintf("remove_target(ip:%s)", m.IP) }
func (m RemoveIPTarget) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		c.IPTargets = slices.DeleteFunc(c.IPTargets, func(ip string) bool { return ip == m.IP })
	})
}

// CreateManagedCertificate creates a managed certificate; listeners later in the plan that use
// PendingCertificateID get its ID.
type CreateManagedCertificate struct {
	update
	Certificate ManagedCertificate
}

func (CreateManagedCertificate) Operation() string { return OpCreateManagedCertificate }
func (m CreateManagedCertificate) Label() string {
	return fmt.Sprintf("create_managed_certificate(%s)", m.Certificate.Name)
}

// Apply changes nothing: certificates are not part of the load balancer.
func (CreateManagedCertificate) Apply(a *Actual) *Actual { return a.with(func(*Actual) {}) }

// Delete deletes the load balancer. Its policy view keeps the load balancer being deleted as
// load_balancer (and current), so policies can match on its name and labels (see Plan.Steps).
type Delete struct {
	Name string
}

func (Delete) Action() string    { return policy.ActionLoadBalancerDelete }
func (Delete) Operation() string { return OpDelete }
func (m Delete) Label() string   { return fmt.Sprintf("delete(%s)", m.Name) }

// Apply returns nil: no load balancer is left.
func (Delete) Apply(*Actual) *Actual { return nil }

// attachment is the attachment n gives; IP is nil when the API picks it.
func attachment(n Network) AttachedNetwork {
	return AttachedNetwork{ID: n.ID, IPRange: n.IPRange, IP: n.IP}
}

func deleteNetwork(list []AttachedNetwork, id int64) []AttachedNetwork {
	return slices.DeleteFunc(list, func(n AttachedNetwork) bool { return n.ID == id })
}

func policyService(s Listener) policy.LBService {
	return policy.LBService{Protocol: string(s.Protocol), ListenPort: s.ListenPort, DestinationPort: s.DestinationPort, Proxyprotocol: s.Proxyprotocol != nil && *s.Proxyprotocol}
}

func policyTarget(t Target) policy.LBTarget {
	return policy.LBTarget{Type: string(hcloud.LoadBalancerTargetTypeServer), ServerID: t.ServerID, UsePrivateIP: t.UsePrivateIP}
}

// setService puts s in place of the listener on its port and keeps list sorted by port.
func setService(list []Listener, s Listener) []Listener {
	list = slices.DeleteFunc(list, func(x Listener) bool { return x.ListenPort == s.ListenPort })
	list = append(list, s)
	slices.SortFunc(list, func(a, b Listener) int { return cmpInt(a.ListenPort, b.ListenPort) })
	return list
}

func removeTarget(list []Target, serverID int64) []Target {
	return slices.DeleteFunc(list, func(t Target) bool { return t.ServerID == serverID })
}
