package lbplan

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"

	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Mutation is one change of a load balancer, run by the executor with one API call, or inline
// in the create's call (see Plan.Requests); the policy gate decides each request once, with
// its whole effect (Plan.Steps).
//
// Action is the policy action (input.ActionLoadBalancer*), Operation the Hetzner operation
// (also the policy input's operation and the metric label), Label a stable human label such as
// add_service(80) used in logs, events and errors.
//
// Apply returns the load balancer after the mutation: the one model of its effect, from which
// both the policy view of each step (Plan.Steps, Actual.Policy) and the executor's Service
// status (Status) are built. It is pure and never modifies a; a is nil only before a Create,
// and Delete returns nil. A private IP the API picks (an attachment without a fixed one) is
// modelled as a nil IP.
//
// Request is how the mutation is sent: the API request (method, path, a body of hcloud-go's
// schema types, whether its action is awaited, the declared outcomes of error codes) that runs
// it on the load balancer a (nil before the create: only Create and CreateManagedCertificate
// need none; the others return ErrNoLoadBalancer), with certificateID (the managed certificate
// created earlier in the run, 0 for none) in place of PendingCertificateID. It is pure. The
// compiler requires every kind to have one; the executor sends exactly it. A kind that can
// ride along with a create also implements rider (send.go).
//
// Every kind lives in this file, except those that have a file of their own (change_dns_ptr.go,
// robot.go); docs/rationale.md says how to add a kind.
type Mutation interface {
	Action() string
	Operation() string
	Label() string
	Apply(a *Actual) *Actual
	Request(a *Actual, certificateID int64) (apireq.Request, error)
}

// The operations, as in input.Input.Operation. They MUST not change: policies match on them.
const (
	OpCreate                 = "create"
	OpUpdate                 = "update"
	OpDelete                 = "delete"
	OpChangeType             = "change_type"
	OpChangeAlgorithm        = "change_algorithm"
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

// kinds are the load balancer mutation kinds, one zero value each; the file of each kind
// registers it (register, from its init). Nothing outside this package can add one: the slice
// is unexported and Kinds hands out a copy (the compiler; TestKinds_closed). The policy
// contract's operation list is generated from them (policy/internal/gendoc), and the executor
// refuses a mutation whose exact type is not one of them. TestKinds_EveryKindIsListed (a type
// check of this package) fails for a kind that is missing.
var kinds []Mutation

// register adds the kinds ks; only the inits of this package call it.
func register(ks ...Mutation) { kinds = append(kinds, ks...) }

// Kinds returns a copy of the registered load balancer mutation kinds, one zero value each.
func Kinds() []Mutation { return slices.Clone(kinds) }

func init() {
	register(Create{}, Update{}, ChangeType{}, ChangeAlgorithm{}, AttachNetwork{}, DetachNetwork{},
		EnablePublicInterface{}, DisablePublicInterface{}, AddService{}, UpdateService{}, DeleteService{},
		AddTarget{}, RemoveTarget{}, RemoveIPTarget{}, CreateManagedCertificate{}, Delete{})
}

type update struct{}

func (update) Action() string { return input.ActionLoadBalancerUpdate }

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
	Network         *Attachment
}

func (Create) Action() string    { return input.ActionLoadBalancerCreate }
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

// Request is the create alone, nothing riding along (see Request.API).
func (m Create) Request(_ *Actual, certificateID int64) (apireq.Request, error) {
	return m.request(nil, certificateID)
}

// request is POST /load_balancers with the mutations riding along (each a rider that
// ridesWith m) in its body, as hcloud-go's Create sends it. The answer's load balancer is the
// state after it. When something rides along, resource_limit_exceeded (more targets or
// certificates than the type allows) splits it: the create is sent alone and the rest one
// request each. A create refused for any other reason is not retried stripped: that would
// leave a billed load balancer that never converges.
func (m Create) request(inline []Mutation, certificateID int64) (apireq.Request, error) {
	opts := hcloud.LoadBalancerCreateOpts{
		Name:             m.Name,
		LoadBalancerType: &hcloud.LoadBalancerType{Name: m.Type},
		Labels:           m.Labels,
	}
	if m.Algorithm != nil { // unset: the API default, as the official CCM sends it
		opts.Algorithm = &hcloud.LoadBalancerAlgorithm{Type: *m.Algorithm}
	}
	if !m.PublicInterface {
		opts.PublicInterface = new(false)
	}
	if m.Location != "" {
		opts.Location = &hcloud.Location{Name: m.Location}
	} else {
		opts.NetworkZone = hcloud.NetworkZone(m.NetworkZone)
	}
	if m.Network != nil {
		opts.Network = &hcloud.Network{ID: m.Network.ID}
	}
	for _, im := range inline {
		r, ok := im.(rider)
		if !ok || !r.ridesWith(m) {
			return apireq.Request{}, fmt.Errorf("%s cannot ride along with %s", im.Label(), m.Label())
		}
		r.addTo(&opts, certificateID)
	}
	req := apireq.Request{
		Method: "POST", Path: pathLoadBalancers,
		Body: hcloud.SchemaFromLoadBalancerCreateOpts(opts), Wait: true, Answer: apireq.AnswerLoadBalancer,
	}
	if len(inline) > 0 {
		req.Outcomes = []apireq.Outcome{{Code: hcloud.ErrorCodeResourceLimitExceeded, Then: apireq.Split,
			Log: "the API rejected the create with its listeners and targets inline; sending them one by one"}}
	}
	return req, nil
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

// Request is PUT /load_balancers/{id}; it has no action.
func (m Update) Request(a *Actual, _ int64) (apireq.Request, error) {
	if a == nil {
		return apireq.Request{}, ErrNoLoadBalancer
	}
	body := schema.LoadBalancerUpdateRequest{}
	if m.Name != "" {
		body.Name = &m.Name
	}
	if m.Labels != nil {
		body.Labels = &m.Labels
	}
	return apireq.Request{Method: "PUT", Path: apireq.Fill(pathLoadBalancer, a.ID), Body: body}, nil
}

// ChangeType changes the load balancer type.
type ChangeType struct {
	update
	Type string
}

// FieldAnnotation names the annotation of the field type of a refusal of its request (the
// executor's refusal hints); "" for the others.
func (ChangeType) FieldAnnotation(key string) annotation.Name {
	if key == "type" {
		return annotation.LBType
	}
	return ""
}

func (ChangeType) Operation() string { return OpChangeType }
func (m ChangeType) Label() string   { return fmt.Sprintf("change_type(%s)", m.Type) }
func (m ChangeType) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Type = m.Type })
}

// Request is the change_type action.
func (m ChangeType) Request(a *Actual, _ int64) (apireq.Request, error) {
	body := schema.LoadBalancerActionChangeTypeRequest{}
	if m.Type != "" {
		body.LoadBalancerType = schema.IDOrName{Name: m.Type}
	}
	return action(a, "change_type", body)
}

// ChangeAlgorithm changes the balancing algorithm.
type ChangeAlgorithm struct {
	update
	Algorithm hcloud.LoadBalancerAlgorithmType
}

// FieldAnnotation names the annotation of the field type of a refusal of its request (the
// executor's refusal hints); "" for the others.
func (ChangeAlgorithm) FieldAnnotation(key string) annotation.Name {
	if key == "type" {
		return annotation.LBAlgorithmType
	}
	return ""
}

func (ChangeAlgorithm) Operation() string { return OpChangeAlgorithm }
func (m ChangeAlgorithm) Label() string   { return fmt.Sprintf("change_algorithm(%s)", m.Algorithm) }
func (m ChangeAlgorithm) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Algorithm = m.Algorithm })
}

// Request is the change_algorithm action.
func (m ChangeAlgorithm) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, "change_algorithm", schema.LoadBalancerActionChangeAlgorithmRequest{Type: string(m.Algorithm)})
}

// AttachNetwork attaches the load balancer to the network.
type AttachNetwork struct {
	update
	Network Attachment
}

// FieldAnnotation names the annotation of the field ip of a refusal of its request (the
// executor's refusal hints); "" for the others.
func (AttachNetwork) FieldAnnotation(key string) annotation.Name {
	if key == "ip" {
		return annotation.LBPrivateIPv4
	}
	return ""
}

func (AttachNetwork) Operation() string { return OpAttachToNetwork }
func (m AttachNetwork) Label() string   { return fmt.Sprintf("attach_to_network(%d)", m.Network.ID) }

// Apply adds the attachment; its IP is nil when the API picks it.
func (m AttachNetwork) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		c.Networks = append(deleteNetwork(c.Networks, m.Network.ID), attachment(m.Network))
	})
}

// Request is the attach_to_network action; ip and ip_range only when fixed.
func (m AttachNetwork) Request(a *Actual, _ int64) (apireq.Request, error) {
	body := schema.LoadBalancerActionAttachToNetworkRequest{Network: m.Network.ID}
	if m.Network.IP != nil {
		body.IP = new(m.Network.IP.String())
	}
	if m.Network.Subnet != nil {
		body.IPRange = new(m.Network.Subnet.String())
	}
	return action(a, "attach_to_network", body)
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

// Request is the detach_from_network action.
func (m DetachNetwork) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, "detach_from_network", schema.LoadBalancerActionDetachFromNetworkRequest{Network: m.NetworkID})
}

// EnablePublicInterface enables the public interface.
type EnablePublicInterface struct{ update }

func (EnablePublicInterface) Operation() string { return OpEnablePublicInterface }
func (EnablePublicInterface) Label() string     { return OpEnablePublicInterface }
func (EnablePublicInterface) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.PublicInterface = true })
}

// Request has no body, as hcloud-go sends it.
func (EnablePublicInterface) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, OpEnablePublicInterface, nil)
}

// DisablePublicInterface disables the public interface.
type DisablePublicInterface struct{ update }

func (DisablePublicInterface) Operation() string { return OpDisablePublicInterface }
func (DisablePublicInterface) Label() string     { return OpDisablePublicInterface }
func (DisablePublicInterface) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.PublicInterface = false })
}

// Request has no body, as hcloud-go sends it.
func (DisablePublicInterface) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, OpDisablePublicInterface, nil)
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

// Request is the add_service action.
func (m AddService) Request(a *Actual, certificateID int64) (apireq.Request, error) {
	return action(a, OpAddService, addServiceBody(withCertificate(m.Listener, certificateID)))
}

// ridesWith: a listener always rides along with a create.
func (AddService) ridesWith(Create) bool { return true }

// addTo adds the listener to the create's services.
func (m AddService) addTo(o *hcloud.LoadBalancerCreateOpts, certificateID int64) {
	o.Services = append(o.Services, createServiceOpts(withCertificate(m.Listener, certificateID)))
}

// UpdateService changes a listener; planned only when something differs.
type UpdateService struct {
	update
	Listener Listener
}

func (UpdateService) Operation() string { return OpUpdateService }
func (m UpdateService) Label() string {
	return fmt.Sprintf("update_service(%d)", m.Listener.ListenPort)
}

// Apply sets the listener; what is not sent keeps its value, as the API does: the proxy
// protocol flag and the health check's optional fields (interval, timeout, retries and, for an
// http or https check, domain, path, status codes and tls).
func (m UpdateService) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		next := m.Listener
		for _, s := range c.Services {
			if s.ListenPort == next.ListenPort {
				next = keepUnsent(next, s)
			}
		}
		c.Services = setService(c.Services, next)
	})
}

// keepUnsent is next with the optional fields it does not set taken from prev, the listener
// the update_service changes.
func keepUnsent(next, prev Listener) Listener {
	if next.Proxyprotocol == nil {
		next.Proxyprotocol = prev.Proxyprotocol
	}
	hc, old := &next.HealthCheck, prev.HealthCheck
	hc.Interval, hc.Timeout, hc.Retries = cmp.Or(hc.Interval, old.Interval), cmp.Or(hc.Timeout, old.Timeout), cmp.Or(hc.Retries, old.Retries)
	if IsHTTP(hc.Protocol) {
		hc.Domain, hc.Path, hc.TLS = cmp.Or(hc.Domain, old.Domain), cmp.Or(hc.Path, old.Path), cmp.Or(hc.TLS, old.TLS)
		if hc.StatusCodes == nil {
			hc.StatusCodes = slices.Clone(old.StatusCodes)
		}
	}
	return next
}

// Request is the update_service action: what the official CCM sends (see updateServiceOpts).
func (m UpdateService) Request(a *Actual, certificateID int64) (apireq.Request, error) {
	return action(a, OpUpdateService, updateServiceBody(withCertificate(m.Listener, certificateID)))
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

// Request is the delete_service action.
func (m DeleteService) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, OpDeleteService, schema.LoadBalancerDeleteServiceRequest{ListenPort: m.ListenPort})
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

// Request adds the target. One beyond the type's limit (the planner knew an older limit) is
// skipped, not a failure: Warning events MaxTargetsReached on the node and the Service.
func (m AddTarget) Request(a *Actual, _ int64) (apireq.Request, error) {
	req, err := action(a, OpAddTarget, schema.LoadBalancerActionAddTargetRequest{
		Type:         string(hcloud.LoadBalancerTargetTypeServer),
		Server:       &schema.LoadBalancerActionAddTargetRequestServer{ID: m.Target.ServerID},
		UsePrivateIP: new(m.Target.UsePrivateIP),
	})
	if err != nil {
		return req, err
	}
	req.Outcomes = []apireq.Outcome{targetLimitReached(a, fmt.Sprintf("server %d", m.Target.ServerID), m.Target.Node)}
	return req, nil
}

// ridesWith: a private target rides along with a create in the network, a public one with a
// create with its public interface on.
func (m AddTarget) ridesWith(c Create) bool {
	if m.Target.UsePrivateIP {
		return c.Network != nil
	}
	return c.PublicInterface
}

// addTo adds the target to the create's targets.
func (m AddTarget) addTo(o *hcloud.LoadBalancerCreateOpts, _ int64) {
	o.Targets = append(o.Targets, hcloud.LoadBalancerCreateOptsTarget{
		Type:         hcloud.LoadBalancerTargetTypeServer,
		Server:       hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: m.Target.ServerID}},
		UsePrivateIP: new(m.Target.UsePrivateIP),
	})
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

// Request is the remove_target action of a server target.
func (m RemoveTarget) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, OpRemoveTarget, schema.LoadBalancerActionRemoveTargetRequest{
		Type: string(hcloud.LoadBalancerTargetTypeServer), Server: &schema.LoadBalancerActionRemoveTargetRequestServer{ID: m.Target.ServerID},
	})
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

// Request is the remove_target action of an IP target.
func (m RemoveIPTarget) Request(a *Actual, _ int64) (apireq.Request, error) {
	ip := net.ParseIP(m.IP)
	if ip == nil {
		return apireq.Request{}, fmt.Errorf("%s: %q is not an IP address", m.Label(), m.IP)
	}
	return action(a, OpRemoveTarget, schema.LoadBalancerActionRemoveTargetRequest{
		Type: string(hcloud.LoadBalancerTargetTypeIP), IP: &schema.LoadBalancerActionRemoveTargetRequestIP{IP: ip.String()},
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

// Request is POST /certificates, as hcloud-go's CreateCertificate sends a managed one. Its
// issuance is not awaited, which can take minutes (DNS validation); listeners can use a
// pending certificate, as with the official CCM. A certificate of that name without our label
// is a uniqueness_error, returned as an error that names the fix.
func (m CreateManagedCertificate) Request(*Actual, int64) (apireq.Request, error) {
	c := m.Certificate
	if c.Name == "" || len(c.Domains) == 0 {
		return apireq.Request{}, fmt.Errorf("%s: a managed certificate needs a name and domain names", m.Label())
	}
	body := schema.CertificateCreateRequest{Name: c.Name, Type: string(hcloud.CertificateTypeManaged), DomainNames: c.Domains}
	if c.Labels != nil {
		body.Labels = &c.Labels
	}
	return apireq.Request{
		Method: "POST", Path: pathCertificates, Body: body, Answer: apireq.AnswerCertificate,
		Outcomes: []apireq.Outcome{{Code: hcloud.ErrorCodeUniquenessError, Then: apireq.Fail, Err: certificateNameTaken(c.Name)}},
	}, nil
}

const pathCertificates = apireq.PathCertificates

// certificateNameTaken is the error of a certificate name another certificate has.
type certificateNameTaken string

// Because names the fix.
func (n certificateNameTaken) Because(apiErr error) error {
	return fmt.Errorf("a certificate named %q exists without the %s label: rename it, or set %q to another name: %w",
		string(n), LabelServiceUID, "load-balancer.hetzner.cloud/http-managed-certificate-name", apiErr)
}

// Delete deletes the load balancer. Its policy view keeps the load balancer being deleted as
// load_balancer (and current), so policies can match on its name and labels (see Plan.Steps).
type Delete struct {
	Name string
}

func (Delete) Action() string    { return input.ActionLoadBalancerDelete }
func (Delete) Operation() string { return OpDelete }
func (m Delete) Label() string   { return fmt.Sprintf("delete(%s)", m.Name) }

// Apply returns nil: no load balancer is left.
func (Delete) Apply(*Actual) *Actual { return nil }

// Request is DELETE /load_balancers/{id}; not_found means done. Delete protection is a
// *ProtectedError and a Warning event DeleteProtected on the Service.
func (Delete) Request(a *Actual, _ int64) (apireq.Request, error) {
	if a == nil {
		return apireq.Request{}, ErrNoLoadBalancer
	}
	return apireq.Request{Method: "DELETE", Path: apireq.Fill(pathLoadBalancer, a.ID), Wait: true,
		Outcomes: []apireq.Outcome{
			{Code: hcloud.ErrorCodeNotFound, Then: apireq.Done, Log: "load balancer already gone"},
			{Code: hcloud.ErrorCodeProtected, Then: apireq.Fail, Err: &ProtectedError{Name: a.Name, ID: a.ID},
				Events: []apireq.Event{{Reason: ReasonDeleteProtected, Message: fmt.Sprintf(
					"load balancer %s (%d) has delete protection: not deleted; remove the protection to let the CCM delete it", a.Name, a.ID)}}},
		}}, nil
}

// attachment is the attachment n gives; IP is nil when the API picks it.
func attachment(n Attachment) AttachedNetwork {
	return AttachedNetwork{ID: n.ID, IPRange: n.IPRange, IP: n.IP}
}

func deleteNetwork(list []AttachedNetwork, id int64) []AttachedNetwork {
	return slices.DeleteFunc(list, func(n AttachedNetwork) bool { return n.ID == id })
}

func policyService(s Listener) input.LBService {
	return input.LBService{Protocol: string(s.Protocol), ListenPort: s.ListenPort, DestinationPort: s.DestinationPort,
		Proxyprotocol: s.Proxyprotocol != nil && *s.Proxyprotocol, HealthCheck: policyHealthCheck(s.HealthCheck)}
}

// policyHealthCheck is hc as the request bodies carry it (updateServiceOpts and hcloud-go's
// schema conversion): durations in whole seconds, each optional field only when set (null
// otherwise), and the http object for an http or https check only.
func policyHealthCheck(hc HealthCheck) input.LBHealthCheck {
	out := input.LBHealthCheck{Protocol: string(hc.Protocol), Port: hc.Port,
		Interval: seconds(hc.Interval), Timeout: seconds(hc.Timeout), Retries: clonePtr(hc.Retries)}
	if IsHTTP(hc.Protocol) {
		out.HTTP = &input.LBHealthCheckHTTP{Domain: clonePtr(hc.Domain), Path: clonePtr(hc.Path),
			StatusCodes: slices.Clone(hc.StatusCodes), TLS: clonePtr(hc.TLS)}
	}
	return out
}

// seconds is d in whole seconds, as hcloud-go sends a duration; nil stays nil.
func seconds(d *time.Duration) *int {
	if d == nil {
		return nil
	}
	return new(int(d.Seconds()))
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return new(*p)
}

func policyTarget(t Target) input.LBTarget {
	return input.LBTarget{Type: string(hcloud.LoadBalancerTargetTypeServer), ServerID: t.ServerID, UsePrivateIP: t.UsePrivateIP}
}

// setService puts s in place of the listener on its port and keeps list sorted by port.
func setService(list []Listener, s Listener) []Listener {
	list = slices.DeleteFunc(list, func(x Listener) bool { return x.ListenPort == s.ListenPort })
	list = append(list, s)
	slices.SortFunc(list, func(a, b Listener) int { return cmp.Compare(a.ListenPort, b.ListenPort) })
	return list
}

func removeTarget(list []Target, serverID int64) []Target {
	return slices.DeleteFunc(list, func(t Target) bool { return t.ServerID == serverID })
}
