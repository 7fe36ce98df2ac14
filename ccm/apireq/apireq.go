// Package apireq is a mutating Hetzner Cloud API request as data: method, path, a body of
// hcloud-go's exported schema request types, whether its action is awaited, what its answer
// carries, and the declared outcomes of API error codes. Mutations of ccm/lbplan and
// ccm/routeplan build one each; the executor (ccm/executor) is the only code that sends them.
//
// [Endpoints] returns the one table of the API paths the CCM writes to: each method and path
// pattern with the policy action and operation of a request to it. The executor derives a
// request's operation from it ([Of]) and refuses to send a request whose operation is not the
// one the policy decided.
//
// The package does no I/O and holds no client: a Request is a value that can be printed
// (`hcloud-policy-ccm plan -o json` shows them), compared in tests and sent.
package apireq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Request is one mutating API request.
type Request struct {
	// Method is the HTTP method: POST, PUT or DELETE.
	Method string
	// Path is the request path below the API endpoint, with IDs filled in, for example
	// /load_balancers/42/actions/add_target. Its pattern is an Endpoint's (Of).
	Path string
	// Body is the JSON body, a value of a github.com/hetznercloud/hcloud-go/v2/hcloud/schema
	// request type; nil sends no body. It is encoded with encoding/json, as hcloud-go does.
	Body any
	// Wait is set when the answer's action must finish before the next request (an action
	// that fails fails the request).
	Wait bool
	// Answer says what the answer carries besides an action.
	Answer Answer
	// Outcomes are the API error codes that are not a plain failure, each with what it means.
	Outcomes []Outcome
}

// Answer is what a request's answer carries that the run uses.
type Answer int

const (
	// AnswerAction means the answer carries at most an action; the state after the request is its mutation's Apply.
	AnswerAction Answer = iota
	// AnswerLoadBalancer means it carries the load balancer (a create): the state after the request is the
	// answer's, which knows the addresses the API picked.
	AnswerLoadBalancer
	// AnswerCertificate means it carries the certificate created, whose ID replaces
	// lbplan.PendingCertificateID in the listeners sent later in the run.
	AnswerCertificate
)

// Result is what an outcome makes of the request.
type Result int

const (
	// Fail means the request failed; the run stops with the API's error (wrapped by Outcome.Err).
	Fail Result = iota
	// Done means as if the request had succeeded (for example not_found on a delete).
	Done
	// Skipped means the request changed nothing and the run goes on; the state stays as it was.
	Skipped
	// Split means send the request's mutations again, one request each (a create with what rides
	// along that the API refused for capacity).
	Split
)

// String is the result's name, as the plan output shows it.
func (r Result) String() string {
	switch r {
	case Fail:
		return "fail"
	case Done:
		return "done"
	case Skipped:
		return "skipped"
	case Split:
		return "split"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// MarshalText makes a Result its name in JSON.
func (r Result) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// Outcome is what an API error code means for a request.
type Outcome struct {
	// Code is the API error code, as hcloud.IsError matches it.
	Code hcloud.ErrorCode `json:"code"`
	// Then is what the request becomes.
	Then Result `json:"then"`
	// Log is an info log line written when the outcome happens; "" writes none.
	Log string `json:"log,omitempty"`
	// Events are Warning events emitted when the outcome happens.
	Events []Event `json:"events,omitempty"`
	// Err, for Fail, is the error returned instead of the API's, built from it; nil returns
	// the API's error.
	Err Cause `json:"-"`
}

// Event is a Warning event of an outcome.
type Event struct {
	// Node is the name of the Node the event is put on; "" puts it on the object of the run
	// (the Service, or a route plan's Node).
	Node    string `json:"node,omitempty"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Cause is an error declared by an outcome that wraps the API's refusal.
type Cause interface {
	// Because returns the error of the outcome caused by apiErr; errors.Unwrap of it must
	// lead to apiErr (so hcloud.IsError still matches).
	Because(apiErr error) error
}

// On returns the outcome declared for err, if any: the first whose code hcloud.IsError
// matches.
func (r Request) On(err error) (Outcome, bool) {
	if err == nil {
		return Outcome{}, false
	}
	for _, o := range r.Outcomes {
		if hcloud.IsError(err, o.Code) {
			return o, true
		}
	}
	return Outcome{}, false
}

// JSON returns the body as sent: encoding/json of Body, nil for no body.
func (r Request) JSON() ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := json.Marshal(r.Body)
	if err != nil {
		return nil, fmt.Errorf("encode the body of %s %s: %w", r.Method, r.Path, err)
	}
	return b, nil
}

// Post returns a POST of body to the path pattern filled with id (when pattern has a %d),
// waiting for its action.
func Post(pattern string, id int64, body any) Request {
	return Request{Method: "POST", Path: Fill(pattern, id), Body: body, Wait: true}
}

// Fill returns pattern with id in place of its %d (pattern unchanged without one).
func Fill(pattern string, id int64) string {
	if !strings.Contains(pattern, "%d") {
		return pattern
	}
	return fmt.Sprintf(pattern, id)
}

// The path patterns of the requests the CCM sends, below the API endpoint, as hcloud-go names
// them; %d is the ID of the load balancer or network the request changes.
const (
	PathLoadBalancers       = "/load_balancers"
	PathLoadBalancer        = "/load_balancers/%d"
	PathLoadBalancerActions = "/load_balancers/%d/actions/" // followed by the action's name
	PathCertificates        = "/certificates"
	PathNetworkActions      = "/networks/%d/actions/" // followed by the action's name
)

// Endpoint is a mutating endpoint of the API that the CCM sends requests to.
type Endpoint struct {
	// Method is the HTTP method.
	Method string
	// Pattern is the path with %d for the ID of the load balancer or network it changes:
	// hcloud-go's name for it and the api_endpoint label of its request metrics, so that they
	// stay those of the official CCM.
	Pattern string
	// Action and Operation are what a request to it is as the policy input names it
	// (input.Input's action and operation).
	Action, Operation string
}

// The policy actions of the endpoints, written out here so that this package links no policy
// engine. TestRequests_AreWhatHcloudGoSends (ccm/executor) fails when a kind's request and its
// Endpoint disagree.
const (
	actionLBCreate = "loadbalancer.create"
	actionLBUpdate = "loadbalancer.update"
	actionLBDelete = "loadbalancer.delete"
)

// endpoints are every endpoint the CCM writes to, the one table of the paths it sends. A new
// kind of mutation that uses a new endpoint adds it here; the executor refuses to send to any
// other (ccm/executor, vetRequest). Unexported: no other package can add one (Endpoints hands
// out a copy).
var endpoints = []Endpoint{
	{Method: "POST", Pattern: PathLoadBalancers, Action: actionLBCreate, Operation: "create"},
	{Method: "PUT", Pattern: PathLoadBalancer, Action: actionLBUpdate, Operation: "update"},
	{Method: "DELETE", Pattern: PathLoadBalancer, Action: actionLBDelete, Operation: "delete"},
	{Method: "POST", Pattern: PathCertificates, Action: actionLBUpdate, Operation: "create_managed_certificate"},
	loadBalancerAction("change_type"),
	loadBalancerAction("change_algorithm"),
	loadBalancerAction("change_dns_ptr"),
	loadBalancerAction("change_protection"),
	loadBalancerAction("attach_to_network"),
	loadBalancerAction("detach_from_network"),
	loadBalancerAction("enable_public_interface"),
	loadBalancerAction("disable_public_interface"),
	loadBalancerAction("add_service"),
	loadBalancerAction("update_service"),
	loadBalancerAction("delete_service"),
	loadBalancerAction("add_target"),
	loadBalancerAction("remove_target"),
	{Method: "POST", Pattern: PathNetworkActions + "add_route", Action: "route.create", Operation: "add_route"},
	{Method: "POST", Pattern: PathNetworkActions + "delete_route", Action: "route.delete", Operation: "delete_route"},
}

// loadBalancerAction is the endpoint of the load balancer action name: its operation is name.
func loadBalancerAction(name string) Endpoint {
	return Endpoint{Method: "POST", Pattern: PathLoadBalancerActions + name, Action: actionLBUpdate, Operation: name}
}

// Of returns the endpoint of a request with method to path and the ID in the path (0 when its
// pattern has none). ok is false when path is not an endpoint's pattern with a positive
// decimal ID (no sign, no leading zero) in place of its %d.
func Of(method, path string) (e Endpoint, id int64, ok bool) {
	for _, ep := range endpoints {
		if ep.Method != method {
			continue
		}
		if id, ok := match(ep.Pattern, path); ok {
			return ep, id, true
		}
	}
	return Endpoint{}, 0, false
}

// match reports whether path is pattern with an ID in place of its %d (see Of), and returns
// the ID.
func match(pattern, path string) (int64, bool) {
	before, after, hasID := strings.Cut(pattern, "%d")
	if !hasID {
		return 0, path == pattern
	}
	digits, ok := strings.CutPrefix(path, before)
	if ok {
		digits, ok = strings.CutSuffix(digits, after)
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil || id <= 0 || strconv.FormatInt(id, 10) != digits {
		return 0, false
	}
	return id, true
}

// Endpoints returns a copy of every endpoint the CCM writes to.
func Endpoints() []Endpoint { return slices.Clone(endpoints) }
