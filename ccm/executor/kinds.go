package executor

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// The table of load balancer mutation kinds: for each lbplan mutation type, how it becomes a
// request (send, and inline when it can ride along with a create), and how its action is
// awaited. How it changes the state is its lbplan type's Apply, the one model both the policy
// view and the Service status are built from; the executor applies it after the request
// succeeded (a create takes the API's answer instead, which knows the addresses).
//
// Adding a kind of write is one entry here (add in init) plus the lbplan type with its Apply
// and the planner rule that emits it; docs/rationale.md ("How do I add a kind of mutation?").
func init() {
	add(spec[lbplan.Create]{send: sendCreate, standalone: true, carries: true})
	add(spec[lbplan.CreateManagedCertificate]{send: sendCertificate, standalone: true, await: awaitNone})
	add(spec[lbplan.Update]{await: awaitNone, send: func(ctx context.Context, x *Executor, c call, m lbplan.Update) (answer, error) {
		_, _, err := x.lbClient().Update(ctx, c.ref(), hcloud.LoadBalancerUpdateOpts{Name: m.Name, Labels: m.Labels})
		return answer{}, err
	}})
	add(spec[lbplan.ChangeType]{send: func(ctx context.Context, x *Executor, c call, m lbplan.ChangeType) (answer, error) {
		return action(x.lbClient().ChangeType(ctx, c.ref(), hcloud.LoadBalancerChangeTypeOpts{LoadBalancerType: &hcloud.LoadBalancerType{Name: m.Type}}))
	}})
	add(spec[lbplan.ChangeAlgorithm]{send: func(ctx context.Context, x *Executor, c call, m lbplan.ChangeAlgorithm) (answer, error) {
		return action(x.lbClient().ChangeAlgorithm(ctx, c.ref(), hcloud.LoadBalancerChangeAlgorithmOpts{Type: m.Algorithm}))
	}})
	add(spec[lbplan.ChangeDNSPtr]{send: sendDNSPtr})
	add(spec[lbplan.AttachNetwork]{send: func(ctx context.Context, x *Executor, c call, m lbplan.AttachNetwork) (answer, error) {
		return action(x.lbClient().AttachToNetwork(ctx, c.ref(), hcloud.LoadBalancerAttachToNetworkOpts{
			Network: &hcloud.Network{ID: m.Network.ID}, IP: m.Network.IP, IPRange: m.Network.Subnet,
		}))
	}})
	add(spec[lbplan.DetachNetwork]{send: func(ctx context.Context, x *Executor, c call, m lbplan.DetachNetwork) (answer, error) {
		return action(x.lbClient().DetachFromNetwork(ctx, c.ref(), hcloud.LoadBalancerDetachFromNetworkOpts{Network: &hcloud.Network{ID: m.NetworkID}}))
	}})
	add(spec[lbplan.EnablePublicInterface]{send: func(ctx context.Context, x *Executor, c call, _ lbplan.EnablePublicInterface) (answer, error) {
		return action(x.lbClient().EnablePublicInterface(ctx, c.ref()))
	}})
	add(spec[lbplan.DisablePublicInterface]{send: func(ctx context.Context, x *Executor, c call, _ lbplan.DisablePublicInterface) (answer, error) {
		return action(x.lbClient().DisablePublicInterface(ctx, c.ref()))
	}})
	add(spec[lbplan.AddService]{
		send: func(ctx context.Context, x *Executor, c call, m lbplan.AddService) (answer, error) {
			return action(x.lbClient().AddService(ctx, c.ref(), addServiceOpts(withCertificate(m.Listener, c.certificateID))))
		},
		inline: func(o *hcloud.LoadBalancerCreateOpts, m lbplan.AddService, certificateID int64) {
			o.Services = append(o.Services, createServiceOpts(withCertificate(m.Listener, certificateID)))
		},
	})
	add(spec[lbplan.UpdateService]{send: func(ctx context.Context, x *Executor, c call, m lbplan.UpdateService) (answer, error) {
		s := withCertificate(m.Listener, c.certificateID)
		return action(x.lbClient().UpdateService(ctx, c.ref(), s.ListenPort, updateServiceOpts(s)))
	}})
	add(spec[lbplan.DeleteService]{send: func(ctx context.Context, x *Executor, c call, m lbplan.DeleteService) (answer, error) {
		return action(x.lbClient().DeleteService(ctx, c.ref(), m.ListenPort))
	}})
	add(spec[lbplan.AddTarget]{
		send: sendAddTarget,
		inline: func(o *hcloud.LoadBalancerCreateOpts, m lbplan.AddTarget, _ int64) {
			o.Targets = append(o.Targets, hcloud.LoadBalancerCreateOptsTarget{
				Type:         hcloud.LoadBalancerTargetTypeServer,
				Server:       hcloud.LoadBalancerCreateOptsTargetServer{Server: &hcloud.Server{ID: m.Target.ServerID}},
				UsePrivateIP: new(m.Target.UsePrivateIP),
			})
		},
	})
	add(spec[lbplan.RemoveTarget]{send: func(ctx context.Context, x *Executor, c call, m lbplan.RemoveTarget) (answer, error) {
		return action(x.lbClient().RemoveServerTarget(ctx, c.ref(), &hcloud.Server{ID: m.Target.ServerID}))
	}})
	add(spec[lbplan.RemoveIPTarget]{send: func(ctx context.Context, x *Executor, c call, m lbplan.RemoveIPTarget) (answer, error) {
		return action(x.lbClient().RemoveIPTarget(ctx, c.ref(), net.ParseIP(m.IP)))
	}})
	add(spec[lbplan.AddIPTarget]{send: sendAddIPTarget})
	add(spec[lbplan.Delete]{send: sendDelete})
}

// spec is the table entry of the mutation type M.
type spec[M lbplan.Mutation] struct {
	// send issues the request of m (with what rides along, for a create) and returns the
	// API's answer.
	send func(ctx context.Context, x *Executor, c call, m M) (answer, error)
	// inline adds m to the body of the create it rides along with (lbplan.Plan.Requests
	// decides which ride along); nil: m never does.
	inline func(o *hcloud.LoadBalancerCreateOpts, m M, certificateID int64)
	// await is how the answer's action is awaited.
	await await
	// standalone kinds run without a load balancer (a create, a certificate before the
	// create); every other kind changes the one the run has.
	standalone bool
	// carries is set for the one kind whose request carries the mutations riding along (the
	// create, lbplan.Request.Inline).
	carries bool
}

// await says how the action of a request is awaited.
type await int

const (
	// awaitAction waits until the answer's action (if any) has finished; an action that
	// failed fails the mutation.
	awaitAction await = iota
	// awaitNone does not wait: the request has no action (PUT), or its action takes minutes
	// and nothing later in the run needs it (a managed certificate's issuance).
	awaitNone
)

// call is what a request is sent with.
type call struct {
	svc *corev1.Service
	// lb is the load balancer before the mutation (the run's state); nil for standalone kinds
	// before the create.
	lb *lbplan.Actual
	// inline are the mutations riding along with a create.
	inline []lbplan.Mutation
	// certificateID is the managed certificate created earlier in the run (0: none), for
	// listeners that use lbplan.PendingCertificateID.
	certificateID int64
}

// ref is the load balancer as hcloud-go's methods take it (they use the ID).
func (c call) ref() *hcloud.LoadBalancer {
	return &hcloud.LoadBalancer{ID: c.lb.ID, Name: c.lb.Name}
}

// answer is what the API answered to a request.
type answer struct {
	// action is the action to await; nil when the request has none.
	action *hcloud.Action
	// created is the load balancer a create answered with: the state after it, instead of
	// the mutation's Apply (it knows the addresses).
	created *hcloud.LoadBalancer
	// certificateID is the ID of a certificate the request created.
	certificateID int64
	// skipped is set when the API refused the mutation in a way send already reported as an
	// outcome (MaxTargetsReached): the run goes on and the state stays as it was.
	skipped bool
}

// action is the answer of an hcloud-go call that returns an action.
func action(a *hcloud.Action, _ *hcloud.Response, err error) (answer, error) {
	return answer{action: a}, err
}

// kind is a table entry with the mutation type erased.
type kind struct {
	send       func(ctx context.Context, x *Executor, c call, m lbplan.Mutation) (answer, error)
	inline     func(o *hcloud.LoadBalancerCreateOpts, m lbplan.Mutation, certificateID int64)
	await      await
	standalone bool
	carries    bool
}

// kinds is the table, by mutation type; filled by init.
var kinds = map[reflect.Type]kind{}

// add puts the entry of M in the table. It panics on a second entry for M: a programming
// error found by any test.
func add[M lbplan.Mutation](s spec[M]) {
	t := reflect.TypeFor[M]()
	if _, dup := kinds[t]; dup || s.send == nil {
		panic(fmt.Sprintf("executor: bad or duplicate table entry for %v", t))
	}
	k := kind{
		send: func(ctx context.Context, x *Executor, c call, m lbplan.Mutation) (answer, error) {
			return s.send(ctx, x, c, m.(M))
		},
		await:      s.await,
		standalone: s.standalone,
		carries:    s.carries,
	}
	if s.inline != nil {
		k.inline = func(o *hcloud.LoadBalancerCreateOpts, m lbplan.Mutation, id int64) { s.inline(o, m.(M), id) }
	}
	kinds[t] = k
}

// kindOf returns the table entry of m's type.
func kindOf(m lbplan.Mutation) (kind, error) {
	k, ok := kinds[reflect.TypeOf(m)]
	if !ok {
		return kind{}, fmt.Errorf("%s: no executor table entry for %T", m.Label(), m)
	}
	return k, nil
}

// lbClient is the load balancer client every send uses.
func (x *Executor) lbClient() *hcloud.LoadBalancerClient { return &x.client.LoadBalancer }

// sendCreate sends POST /load_balancers with the listeners and targets riding along in its
// body. The answer's load balancer already holds its addresses, listeners and targets.
func sendCreate(ctx context.Context, x *Executor, c call, m lbplan.Create) (answer, error) {
	opts, err := createOpts(m, c.inline, c.certificateID)
	if err != nil {
		return answer{}, err
	}
	res, _, err := x.lbClient().Create(ctx, opts)
	if err != nil {
		return answer{}, err
	}
	if res.LoadBalancer == nil {
		return answer{}, fmt.Errorf("create answered without a load balancer")
	}
	return answer{action: res.Action, created: res.LoadBalancer}, nil
}

// sendCertificate creates a managed certificate. Its issuance is not awaited, which can take
// minutes (DNS validation); listeners can use a pending certificate, as with the official
// CCM. A certificate of that name without our label is a uniqueness_error.
func sendCertificate(ctx context.Context, x *Executor, _ call, m lbplan.CreateManagedCertificate) (answer, error) {
	cert := m.Certificate
	res, _, err := x.client.Certificate.CreateCertificate(ctx, hcloud.CertificateCreateOpts{
		Name: cert.Name, Type: hcloud.CertificateTypeManaged, DomainNames: cert.Domains, Labels: cert.Labels,
	})
	if hcloud.IsError(err, hcloud.ErrorCodeUniquenessError) {
		return answer{}, fmt.Errorf("a certificate named %q exists without the %s label: rename it, or set %q to another name: %w",
			cert.Name, lbplan.LabelServiceUID, "load-balancer.hetzner.cloud/http-managed-certificate-name", err)
	}
	if err != nil {
		return answer{}, err
	}
	if res.Certificate == nil {
		return answer{}, fmt.Errorf("create answered without a certificate")
	}
	return answer{certificateID: res.Certificate.ID}, nil
}

// sendDNSPtr sets the record of the load balancer's public address (known right after the
// create: the create's answer carries it).
func sendDNSPtr(ctx context.Context, x *Executor, c call, m lbplan.ChangeDNSPtr) (answer, error) {
	ip := c.lb.IPv4
	if m.IPv6 {
		ip = c.lb.IPv6
	}
	if ip == "" {
		return answer{}, fmt.Errorf("the load balancer has no public address for the record")
	}
	ptr := m.Ptr
	return action(x.lbClient().ChangeDNSPtr(ctx, c.ref(), ip, &ptr))
}

// sendAddTarget adds a server target. A target beyond the type's limit (the planner knew an
// older limit) is an outcome, not a failure: Warning events MaxTargetsReached on the node and
// the Service, and the run goes on.
func sendAddTarget(ctx context.Context, x *Executor, c call, m lbplan.AddTarget) (answer, error) {
	a, err := action(x.lbClient().AddServerTarget(ctx, c.ref(), hcloud.LoadBalancerAddServerTargetOpts{
		Server: &hcloud.Server{ID: m.Target.ServerID}, UsePrivateIP: new(m.Target.UsePrivateIP),
	}))
	if hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded) {
		x.recorder.Eventf(nodeRef(m.Target.Node), corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: server %d not added", c.lb.Name, m.Target.ServerID)
		x.recorder.Eventf(c.svc, corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: server %d (node %s) not added", c.lb.Name, m.Target.ServerID, m.Target.Node)
		return answer{skipped: true}, nil
	}
	return a, err
}

// sendAddIPTarget adds an IP target (a Robot node). As with server targets, one beyond the
// type's limit is an outcome (MaxTargetsReached); one a concurrent reconcile of the same
// Service added first (upstream's node sync runs beside the service sync) is done.
func sendAddIPTarget(ctx context.Context, x *Executor, c call, m lbplan.AddIPTarget) (answer, error) {
	a, err := action(x.lbClient().AddIPTarget(ctx, c.ref(), hcloud.LoadBalancerAddIPTargetOpts{IP: net.ParseIP(m.Target.IP)}))
	switch {
	case hcloud.IsError(err, hcloud.ErrorCodeTargetAlreadyDefined):
		klog.InfoS("IP target already defined", "loadBalancer", c.lb.Name, "ip", m.Target.IP)
		return answer{}, nil
	case hcloud.IsError(err, hcloud.ErrorCodeResourceLimitExceeded):
		x.recorder.Eventf(nodeRef(m.Target.Node), corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: IP %s not added", c.lb.Name, m.Target.IP)
		x.recorder.Eventf(c.svc, corev1.EventTypeWarning, ReasonMaxTargetsReached,
			"load balancer %s has reached its target limit: IP %s (node %s) not added", c.lb.Name, m.Target.IP, m.Target.Node)
		return answer{skipped: true}, nil
	}
	return a, err
}

// sendDelete deletes the load balancer; not_found means done. Delete protection is a
// *lbplan.ProtectedError and a Warning event DeleteProtected.
func sendDelete(ctx context.Context, x *Executor, c call, _ lbplan.Delete) (answer, error) {
	res, _, err := x.lbClient().DeleteWithResult(ctx, c.ref())
	switch {
	case hcloud.IsError(err, hcloud.ErrorCodeNotFound):
		klog.InfoS("load balancer already gone", "loadBalancer", c.lb.Name, "id", c.lb.ID)
		return answer{}, nil
	case hcloud.IsError(err, hcloud.ErrorCodeProtected):
		x.recorder.Eventf(c.svc, corev1.EventTypeWarning, ReasonDeleteProtected,
			"load balancer %s (%d) has delete protection: not deleted; remove the protection to let the CCM delete it", c.lb.Name, c.lb.ID)
		return answer{}, &lbplan.ProtectedError{Name: c.lb.Name, ID: c.lb.ID, Err: err}
	case err != nil:
		return answer{}, err
	}
	return answer{action: res.Action}, nil
}

// withCertificate puts the certificate created in this run into a listener that waits for it
// (lbplan.PendingCertificateID).
func withCertificate(s lbplan.Listener, id int64) lbplan.Listener {
	certs := slices.Clone(s.HTTP.Certificates)
	for i, c := range certs {
		if c == lbplan.PendingCertificateID {
			certs[i] = id
		}
	}
	s.HTTP.Certificates = certs
	return s
}
