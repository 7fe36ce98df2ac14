// Package apireq is a mutating Hetzner Cloud API request as data: method, path, a body of
// hcloud-go's exported schema request types, whether its action is awaited, what its answer
// carries, and the declared outcomes of API error codes. Mutations of ccm/lbplan and
// ccm/routeplan build one each; the executor (ccm/executor) is the only code that sends them.
//
// The package does no I/O and holds no client: a Request is a value that can be printed
// (`hcloud-policy-ccm plan -o json` shows them), compared in tests and sent.
package apireq

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// Request is one mutating API request.
type Request struct {
	// Method is the HTTP method: POST, PUT or DELETE.
	Method string
	// Path is the request path below the API endpoint, with IDs filled in, for example
	// /load_balancers/42/actions/add_target.
	Path string
	// OpPath is Path's pattern as hcloud-go names it (/load_balancers/%d/actions/add_target):
	// the api_endpoint label of hcloud-go's request metrics, so that they stay those of the
	// official CCM (hcloud-go's typed methods set it the same way).
	OpPath string
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

// Post returns a POST of body to the path pattern opPath filled with id (when opPath has a
// %d), waiting for its action.
func Post(opPath string, id int64, body any) Request {
	return Request{Method: "POST", Path: Fill(opPath, id), OpPath: opPath, Body: body, Wait: true}
}

// Fill returns opPath with id in place of its %d (opPath unchanged without one).
func Fill(opPath string, id int64) string {
	if !strings.Contains(opPath, "%d") {
		return opPath
	}
	return fmt.Sprintf(opPath, id)
}
