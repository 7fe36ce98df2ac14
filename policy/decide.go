package policy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
)

// Decide evaluates data.ccm.deny and data.ccm.warn for in with the revision in force.
//
// It implements [Decider]: it never returns an error. The decision is:
//   - no revision yet: allowed (logged once);
//   - deny messages in ModeEnforce: Allowed=false;
//   - deny messages in ModeDryRun: Allowed=true, DryRun=true, the messages in Deny;
//   - evaluation failed (error, deadline of Options.Timeout, a message that is neither a string
//     nor an object with a string "msg"): Err set, Allowed=false with FailClosed, true with
//     FailOpen, no messages.
//
// Every decision is counted in hcloud_ccm_policy_decisions_total{action,result} and logged with
// its revision: allowed ones at verbosity 2, the others at 0.
func (e *Engine) Decide(ctx context.Context, in Input) Decision {
	start := time.Now()
	var d Decision
	c := e.active.Load()
	switch {
	case e.optsErr != nil:
		d = Decision{Allowed: false, Err: fmt.Errorf("policy engine options: %w", e.optsErr)}
	case c == nil:
		e.noPolicyOnce.Do(func() {
			klog.InfoS("No policy revision loaded yet: allowing every mutation until one is")
		})
		d = Decision{Allowed: true}
	default:
		d = e.evalOnOwnStack(ctx, c, in)
	}
	elapsed := time.Since(start)
	decisionDuration.WithLabelValues(in.Action).Observe(elapsed.Seconds())
	result := resultOf(d)
	decisionsTotal.WithLabelValues(in.Action, result).Inc()
	logDecision(in, d, result, elapsed)
	return d
}

// evalOnOwnStack runs eval on a goroutine of its own, at most cap(e.evalSlots) at once, and
// waits for it. OPA's evaluator recurses deeply: it grows the stack of the goroutine it runs on
// to tens of KiB (64 KiB in TestDecide_leavesCallerStacksSmall), and a goroutine keeps a grown stack until a garbage collection finds it mostly
// unused. The callers are many and long-lived (the route controller starts one goroutine per
// route, 500 at once at 500 nodes, each waiting for its action afterwards), so evaluating on
// their stacks cost megabytes at start; an evaluation goroutine returns its stack when it ends.
// The deadline of Options.Timeout starts when the evaluation does, not while it waits for a
// slot; ctx bounds both. A panic in the evaluator is a failed evaluation, not a crash.
func (e *Engine) evalOnOwnStack(ctx context.Context, c *compiled, in Input) Decision {
	done := make(chan Decision, 1)
	go func() {
		var d Decision
		defer func() {
			if r := recover(); r != nil {
				d = e.failed(c, in, fmt.Errorf("evaluator panicked: %v", r))
			}
			done <- d
		}()
		select {
		case e.evalSlots <- struct{}{}:
			defer func() { <-e.evalSlots }()
		case <-ctx.Done():
			d = e.failed(c, in, fmt.Errorf("waiting to evaluate: %w", ctx.Err()))
			return
		}
		d = e.eval(ctx, c, in)
	}()
	return <-done
}

// failed is the decision for an evaluation of revision c that failed with err: allowed only
// with FailOpen, no messages.
func (e *Engine) failed(c *compiled, in Input, err error) Decision {
	return Decision{
		Revision: c.revision,
		Allowed:  e.opts.FailureMode == FailOpen,
		Err:      fmt.Errorf("policy revision %s: decide %s: %w", c.revision, in.Action, err),
	}
}

// newEvalSlots returns the semaphore of evalOnOwnStack: GOMAXPROCS slots.
func newEvalSlots() chan struct{} { return make(chan struct{}, max(1, runtime.GOMAXPROCS(0))) }

func (e *Engine) eval(ctx context.Context, c *compiled, in Input) Decision {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	deny, warn, err := evalQuery(ctx, c.pq, in)
	if err != nil {
		return e.failed(c, in, err)
	}
	d := Decision{Revision: c.revision}
	d.Deny, d.Warn = deny, warn
	d.Allowed = len(deny) == 0 || e.opts.Mode == ModeDryRun
	d.DryRun = len(deny) > 0 && e.opts.Mode == ModeDryRun
	return d
}

// evalQuery runs the gate query and decodes its messages.
func evalQuery(ctx context.Context, pq rego.PreparedEvalQuery, in Input) (deny, warn []Message, err error) {
	v, err := inputValue(in)
	if err != nil {
		return nil, nil, fmt.Errorf("encode input: %w", err)
	}
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(v))
	if err != nil {
		if topdown.IsCancel(err) || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, fmt.Errorf("evaluation cancelled (timeout or shutdown): %w", err)
		}
		return nil, nil, err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, nil, errors.New("the decision is undefined")
	}
	obj, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("the decision is %T, not an object", rs[0].Expressions[0].Value)
	}
	if deny, err = messages(obj["deny"], "deny"); err != nil {
		return nil, nil, err
	}
	if warn, err = messages(obj["warn"], "warn"); err != nil {
		return nil, nil, err
	}
	return deny, warn, nil
}

// messages decodes data.ccm.deny or data.ccm.warn: a set of strings or {"msg", "code"} objects.
// Each msg is cut at truncate.EventMessage bytes and each code at truncate.Value (on a character
// boundary), so a policy cannot flood the decision log, the events or the errors; a malformed
// message is echoed in the error only up to truncate.Value.
func messages(v any, rule string) ([]Message, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("data.ccm.%s is %T: want a set of messages (partial set rule `%s contains msg if {...}`)", rule, v, rule)
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]Message, 0, len(items))
	for _, item := range items {
		switch m := item.(type) {
		case string:
			out = append(out, Message{Msg: truncate.String(m, truncate.EventMessage)})
		case map[string]any:
			msg, ok := m["msg"].(string)
			if !ok {
				return nil, fmt.Errorf("a data.ccm.%s message object has no string \"msg\": %s", rule, echo(m))
			}
			code, ok := m["code"].(string)
			if _, present := m["code"]; present && !ok {
				return nil, fmt.Errorf("a data.ccm.%s message object has a \"code\" that is not a string: %s", rule, echo(m))
			}
			out = append(out, Message{Msg: truncate.String(msg, truncate.EventMessage), Code: truncate.String(code, truncate.Value)})
		default:
			return nil, fmt.Errorf("a data.ccm.%s message is %T (%s): want a string or {\"msg\": \"...\", \"code\": \"...\"}", rule, item, echo(item))
		}
	}
	return out, nil
}

// echo formats a malformed message for an error, cut at truncate.Value bytes.
func echo(v any) string { return truncate.String(fmt.Sprint(v), truncate.Value) }

func resultOf(d Decision) string {
	switch {
	case d.Err != nil:
		return resultError
	case len(d.Deny) > 0 && d.DryRun:
		return resultDryRunDeny
	case len(d.Deny) > 0:
		return resultDeny
	case len(d.Warn) > 0:
		return resultWarn
	default:
		return resultAllow
	}
}

// subject names what a decision is about, for logs.
func subject(in Input) string {
	switch {
	case in.Service != nil:
		return "service " + in.Service.Namespace + "/" + in.Service.Name
	case in.Route != nil:
		return "route " + in.Route.Destination + " via " + in.Route.Gateway
	case in.LoadBalancer != nil:
		return "load balancer " + in.LoadBalancer.Name
	case in.Current != nil:
		return "load balancer " + in.Current.Name
	}
	return ""
}

func logDecision(in Input, d Decision, result string, elapsed time.Duration) {
	kv := []any{"action", in.Action, "operation", in.Operation, "subject", subject(in),
		"revision", d.Revision, "result", result, "duration", elapsed}
	switch result {
	case resultError:
		klog.ErrorS(d.Err, "Policy evaluation failed", append(kv, "allowed", d.Allowed)...)
	case resultDeny:
		klog.InfoS("Policy denied mutation", append(kv, "deny", d.Deny, "warn", d.Warn)...)
	case resultDryRunDeny:
		klog.InfoS("Policy would deny mutation (dry run, allowed)", append(kv, "deny", d.Deny, "warn", d.Warn)...)
	case resultWarn:
		klog.InfoS("Policy allowed mutation with warnings", append(kv, "warn", d.Warn)...)
	default:
		klog.V(2).InfoS("Policy allowed mutation", kv...)
	}
}
