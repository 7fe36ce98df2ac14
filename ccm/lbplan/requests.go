package lbplan

import (
	"fmt"
	"slices"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
)

// Batch is one mutating API request of a plan: Mutation, and the mutations that ride along
// inline in its body. Only a Create carries others (POST /load_balancers takes services and
// targets); every other request runs exactly its Mutation.
type Batch struct {
	Mutation Mutation
	Inline   []Mutation
}

// Mutations returns Mutation followed by Inline.
func (r Batch) Mutations() []Mutation {
	return append([]Mutation{r.Mutation}, r.Inline...)
}

// Labels returns the labels of Mutations, in order.
func (r Batch) Labels() []string {
	ms := r.Mutations()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Label()
	}
	return out
}

// Split returns the request as one request per mutation: Mutation alone, then each inline
// mutation on its own. The executor falls back to it when the API rejects an inline create.
func (r Batch) Split() []Batch {
	out := []Batch{{Mutation: r.Mutation}}
	for _, m := range r.Inline {
		out = append(out, Batch{Mutation: m})
	}
	return out
}

// Requests groups the plan's mutations into the API requests that run them, in the order they
// run. It is pure. Steps gives one policy decision per request, in the same grouping (both use
// ridesAlong): the create's decision shows what rides along.
//
// A plan that creates a load balancer sends its listeners (add_service) and the targets the new
// load balancer can reach inline with the create: private targets when it is created in the
// network, public ones when it is created with its public interface on. A managed certificate
// is created before the load balancer, so that the listener using it rides along too. The
// rest runs after the create, one request each, in plan order: a network attachment with a
// fixed IP or subnet (the API takes only a network ID on create), rDNS records (they need the
// new addresses), targets that need that later attachment, and disabling the public interface.
// Any other plan is one request per mutation, in plan order.
func (p Plan) Requests() []Batch {
	if p.Empty() {
		return nil
	}
	c, ok := p.Mutations[0].(Create)
	if !ok {
		out := make([]Batch, len(p.Mutations))
		for i, m := range p.Mutations {
			out[i] = Batch{Mutation: m}
		}
		return out
	}
	create := Batch{Mutation: c}
	var before, after []Batch
	for _, m := range p.Mutations[1:] {
		switch {
		case ridesAlong(c, m):
			create.Inline = append(create.Inline, m)
		case isCertificate(m):
			before = append(before, Batch{Mutation: m})
		default:
			after = append(after, Batch{Mutation: m})
		}
	}
	return slices.Concat(before, []Batch{create}, after)
}

func isCertificate(m Mutation) bool {
	_, ok := m.(CreateManagedCertificate)
	return ok
}

// PlannedRequest is one API request of a plan as it is known at plan time.
type PlannedRequest struct {
	// Label is the label of the request's Mutation (Step.Label of its step).
	Label   string
	Request apireq.Request
}

// Placeholders of a plan-time request for what only the API's answers know.
const (
	// PlaceholderID stands in the paths of the requests after a create for the ID the create
	// returns.
	PlaceholderID int64 = 0
	// PlaceholderIPv4 and PlaceholderIPv6 stand for the public addresses a create returns (the
	// address of a change_dns_ptr after a create).
	PlaceholderIPv4 = "0.0.0.0"
	PlaceholderIPv6 = "::"
)

// APIRequests returns the requests of Requests as the executor would build them, in order, each
// from the state the plan expects before it (every earlier request's Apply). It is pure. What
// only the API's answers know has a placeholder: after a create, the load balancer's ID is
// PlaceholderID and its public addresses PlaceholderIPv4 and PlaceholderIPv6; a listener using
// the certificate the plan creates keeps PendingCertificateID (0). The executor sends the same
// requests with the real values (TestAPIRequests_AreWhatTheExecutorSends).
func (p Plan) APIRequests() ([]PlannedRequest, error) {
	reqs := p.Requests()
	out := make([]PlannedRequest, 0, len(reqs))
	state := p.Actual
	for _, r := range reqs {
		api, err := r.API(state, PendingCertificateID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Mutation.Label(), err)
		}
		out = append(out, PlannedRequest{Label: r.Mutation.Label(), Request: api})
		for _, m := range r.Mutations() {
			state = m.Apply(state)
		}
		if _, ok := r.Mutation.(Create); ok && state != nil {
			state = state.with(func(c *Actual) {
				c.ID, c.IPv4, c.IPv6 = PlaceholderID, PlaceholderIPv4, PlaceholderIPv6
			})
		}
	}
	return out, nil
}
