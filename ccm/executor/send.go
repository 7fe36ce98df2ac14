package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/exp/ctxutil"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// run is the state of one Run.
type run struct {
	svc *corev1.Service
	// state is the load balancer after the requests sent so far: plan.Actual, then each
	// mutation's Apply (the create's answer after the create); nil after a delete.
	state *lbplan.Actual
	// lb is the ID of the load balancer the policy decided on: plan.Actual's (the input's
	// current.id), or, after a create, the ID of the load balancer it made (0 before it). Every
	// request whose path names a load balancer must name this one (vetRequest).
	lb int64
	// certificateID is the managed certificate created in this run, for listeners that use
	// lbplan.PendingCertificateID.
	certificateID int64
	// applied are the mutations that ran, in order.
	applied []lbplan.Mutation
}

// waitFunc awaits the action of a request; nil when it succeeded.
type waitFunc func(ctx context.Context, a *hcloud.Action) error

// waitAlone is Run's wait: hcloud-go's WaitFor, one poll series per action (the golden replay
// records its requests).
func (x *Executor) waitAlone(ctx context.Context, a *hcloud.Action) error {
	return x.client.Action.WaitFor(ctx, a)
}

// waitShared awaits a with the shared waiter (actionwait.go): concurrent waits share polls.
func (x *Executor) waitShared(ctx context.Context, a *hcloud.Action) error {
	return x.actions.wait(ctx, x.client, a)
}

// waitNext awaits a with the shared waiter within the first poll interval (waitSoon): the next
// request of a detached run waits for it.
func (x *Executor) waitNext(ctx context.Context, a *hcloud.Action) error {
	return x.actions.waitSoon(ctx, x.client, a)
}

// reply is the part of an answer the executor reads: the action to await, a created load
// balancer or certificate (apireq.Answer). Every mutating answer of the API is a subset.
type reply struct {
	Action       *schema.Action       `json:"action"`
	LoadBalancer *schema.LoadBalancer `json:"load_balancer"`
	Certificate  *schema.Certificate  `json:"certificate"`
}

// newRun returns the run of plan for svc.
func newRun(svc *corev1.Service, plan lbplan.Plan) *run {
	r := &run{svc: svc, state: plan.Actual}
	if plan.Actual != nil {
		r.lb = plan.Actual.ID
	}
	return r
}

// target is the resource a run changes, as send sees it: the load balancer of a Service
// (*run, R lbplan.Batch) or the routes of a network (*routeRun, R routeplan.Mutation). It
// holds the state of the run; send does everything else.
type target[R any] interface {
	// build returns the mutations req carries (the decided one first; its label names the
	// request) and its API request, built from the run's state.
	build(req R) (carried []step, api apireq.Request, err error)
	// decided is the ID of the load balancer or network the policy decided on (vetRequest).
	decided() int64
	// object is where the events of outcomes go; name names the load balancer in the logs of
	// outcomes ("" for none); logKeys name the resource in the log line of each request.
	object() runtime.Object
	name() string
	logKeys() []any
	// advance moves the state on after req's request succeeded (or its outcome was Done or
	// Skipped); answer is what the request answers with (apireq.Request.Answer).
	advance(req R, answer apireq.Answer, then apireq.Result, ans reply) error
}

// send is the one interpreter of requests, for every resource (Run, RunDetached, RunRoutes).
// It builds the request of req (target.build), awaits its action when it says so, moves the
// run's state on (target.advance) and counts the outcome of every mutation req carries. A request that is not what the policy
// decided is refused before it is sent (vetRequest: ErrRefused). An API error with a declared
// outcome (apireq.Outcome) is that outcome: its events are emitted, Done counts as success,
// Skipped leaves the state, Split returns split when req carries more than one mutation (the
// caller then sends them one request each) and Fail returns the outcome's error. wait awaits
// the action (Run: hcloud-go's WaitFor; RunDetached and RunRoutes: the shared waiter, or a
// capture that leaves the wait to the background). An error is prefixed with req's label.
func send[R any](ctx context.Context, x *Executor, t target[R], req R, wait waitFunc) (split bool, err error) {
	carried, api, err := t.build(req)
	m := carried[0]
	labels := make([]string, len(carried))
	for i, c := range carried {
		labels[i] = c.Label()
	}
	klog.InfoS("executing", append([]any{"op", m.Label(), "inline", labels[1:]}, t.logKeys()...)...)
	if err == nil {
		if err := vetRequest(m, api, t.decided()); err != nil {
			return false, err // logged and counted as refused
		}
	}
	var hreq *http.Request
	if err == nil {
		hreq, err = x.newRequest(ctx, api)
	}
	var ans reply
	if err == nil {
		_, err = x.client.Do(hreq, &ans)
	}
	then := apireq.Fail
	if o, ok := api.On(err); ok {
		x.report(t.object(), o, m.Label(), t.name())
		switch then = o.Then; then {
		case apireq.Split:
			if len(carried) > 1 {
				return true, nil
			}
		case apireq.Done, apireq.Skipped:
			err, ans = nil, reply{}
		case apireq.Fail:
			if o.Err != nil {
				err = o.Err.Because(err)
			}
		}
	}
	if err == nil && api.Wait && ans.Action != nil {
		err = wait(ctx, hcloud.ActionFromSchema(*ans.Action))
	}
	if err == nil {
		err = t.advance(req, api.Answer, then, ans)
	}
	result := resultSuccess
	if err != nil {
		result = resultError
	}
	for _, c := range carried {
		countMutation(c.Action(), c.Operation(), result)
	}
	if err != nil {
		return false, wrapAPIError(m, err)
	}
	return false, nil
}

func (r *run) build(req lbplan.Batch) ([]step, apireq.Request, error) {
	ms := req.Mutations()
	carried := make([]step, len(ms))
	for i, m := range ms {
		carried[i] = m
	}
	api, err := req.API(r.state, r.certificateID)
	return carried, api, err
}

func (r *run) decided() int64 { return r.lb }

func (r *run) object() runtime.Object { return r.svc }

func (r *run) name() string { return lbName(r.state) }

func (r *run) logKeys() []any {
	return []any{"service", klog.KObj(r.svc), "loadBalancer", lbName(r.state)}
}

// advance moves the run on after req's request succeeded (or its outcome was Done or
// Skipped) and records its mutations as applied.
func (r *run) advance(req lbplan.Batch, kind apireq.Answer, then apireq.Result, ans reply) error {
	m := req.Mutation
	switch {
	case then == apireq.Skipped:
	case kind == apireq.AnswerLoadBalancer:
		if ans.LoadBalancer == nil {
			return errors.New("the answer has no load balancer")
		}
		r.state = lbplan.NewActual(hcloud.LoadBalancerFromSchema(*ans.LoadBalancer))
		r.lb = ans.LoadBalancer.ID
	case kind == apireq.AnswerCertificate:
		if ans.Certificate == nil {
			return errors.New("the answer has no certificate")
		}
		r.certificateID = ans.Certificate.ID
		r.state = m.Apply(r.state)
	default:
		r.state = m.Apply(r.state)
	}
	r.applied = append(r.applied, req.Mutations()...)
	return nil
}

// newRequest is api as an HTTP request of the client (its endpoint, token and headers), with
// the pattern of its endpoint (apireq.Of) in ctx as hcloud-go's operation path, the label of
// its request metrics.
func (x *Executor) newRequest(ctx context.Context, api apireq.Request) (*http.Request, error) {
	ep, _, ok := apireq.Of(api.Method, api.Path)
	if !ok {
		return nil, fmt.Errorf("%s %s: no endpoint of apireq.Endpoints", api.Method, api.Path)
	}
	b, err := api.JSON()
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if b != nil {
		body = bytes.NewReader(b)
	}
	req, err := x.client.NewRequest(ctxutil.SetOpPath(ctx, ep.Pattern), api.Method, api.Path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", api.Method, api.Path, err)
	}
	return req, nil
}

// report logs an outcome and emits its events: on the Node it names, else on obj.
func (x *Executor) report(obj runtime.Object, o apireq.Outcome, label, lb string) {
	if o.Log != "" {
		klog.InfoS(o.Log, "op", label, "code", o.Code, "loadBalancer", lb)
	}
	for _, e := range o.Events {
		target := obj
		if e.Node != "" {
			target = nodeRef(e.Node)
		}
		x.event(target, corev1.EventTypeWarning, e.Reason, e.Message)
	}
}
