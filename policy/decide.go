package policy

import (
	"context"
	"errors"
	"fmt"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
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
//   - deny messages in ModeEnforce: Allowed=false, unless every one of them carries
//     "enforcement": "dryrun" (Allowed=true, DryRun=true); the dry-run ones never block;
//   - deny messages in ModeDryRun: Allowed=true, DryRun=true, the messages in Deny;
//   - evaluation of deny failed (error, deadline of Options.Timeout, a deny message that is
//     neither a string nor an object with a string "msg", a bad "enforcement"): Err set, no
//     messages, Allowed=false with FailClosed, true with FailOpen; in ModeDryRun Allowed=true
//     whatever the failure mode (dry run never blocks), with DryRun=true when the failure mode
//     would have blocked (resolveFailure);
//   - evaluation of warn failed but deny did not (a built-in error or a malformed message in a
//     warn rule only): WarnErr set, no warnings, and Allowed, Deny and DryRun as if warn were
//     empty: a warn rule never blocks, not even by failing (TestEngine_Decide).
//
// Every decision is counted in hcloud_ccm_policy_decisions_total{action,result,source} (result
// "error" when Err or WarnErr is set; source "audit" when in.Audit, else "gate"), each of its
// deny messages in hcloud_ccm_policy_denials_total{action,code,enforced,source} (enforced
// "true" only when it blocked a mutation: never for the audit), and the decision is logged with its
// revision: allowed ones at verbosity 2, the others at 0.
func (e *Engine) Decide(ctx context.Context, in input.Input) Decision {
	return e.decide(ctx, in, nil)
}

var _ InputFailer = (*Engine)(nil)

// DecideFailed implements [InputFailer]: the decision of an input the CCM could not complete
// (inputErr names the field and why) is a failed evaluation, resolved by the failure mode, and
// counted and logged like one. Without a revision in force it is allowed, as in Decide.
func (e *Engine) DecideFailed(ctx context.Context, in input.Input, inputErr error) Decision {
	if inputErr == nil {
		inputErr = errors.New("incomplete input")
	}
	return e.decide(ctx, in, inputErr)
}

// decide is Decide; a non-nil inputErr fails the decision without evaluating.
func (e *Engine) decide(ctx context.Context, in input.Input, inputErr error) Decision {
	start := time.Now()
	var d Decision
	c := e.active.Load()
	switch {
	case e.optsErr != nil:
		d = e.resolveFailure(Decision{Err: fmt.Errorf("policy engine options: %w", e.optsErr)})
	case c == nil:
		e.noPolicyOnce.Do(func() {
			klog.InfoS("No policy revision loaded yet: allowing every mutation until one is")
		})
		d = Decision{Allowed: true}
	case inputErr != nil:
		d = e.failed(c, in, fmt.Errorf("incomplete input: %w", inputErr))
	default:
		d = e.evalOnOwnStack(ctx, c, in)
	}
	elapsed := time.Since(start)
	d.ID = newDecisionID()
	decisionDuration.WithLabelValues(in.Action, sourceOf(in)).Observe(elapsed.Seconds())
	result := resultOf(d)
	countDecision(in, d, result)
	logDecision(in, d, result, elapsed)
	if l := e.opts.DecisionLog; l.wants(result) {
		if err := l.write(in, d, start, elapsed); err != nil {
			klog.ErrorS(err, "Writing the decision log failed", "decision", d.ID)
		}
	}
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
func (e *Engine) evalOnOwnStack(ctx context.Context, c *compiled, in input.Input) Decision {
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

// failed is the decision for an evaluation of revision c that failed with err: no messages,
// allowed as resolveFailure says.
func (e *Engine) failed(c *compiled, in input.Input, err error) Decision {
	return e.resolveFailure(Decision{
		Revision: c.revision,
		Err:      fmt.Errorf("policy revision %s: decide %s: %w", c.revision, in.Action, err),
	})
}

// resolveFailure sets Allowed and DryRun of d, a decision whose evaluation failed (d.Err): the
// failure mode decides in ModeEnforce (allowed only with FailOpen); ModeDryRun never blocks,
// whatever the failure mode, and marks DryRun the failures the failure mode would have blocked
// (anything but FailOpen, an invalid value too), so that they are reported as dry-run denials
// (Decision.NotEnforced) rather than dropped. Issue 34: in dry run, a rule that failed at run
// time kept a new node out of every load balancer.
func (e *Engine) resolveFailure(d Decision) Decision {
	blocks := e.opts.FailureMode != FailOpen
	d.Allowed = !blocks || e.opts.Mode == ModeDryRun
	d.DryRun = blocks && e.opts.Mode == ModeDryRun
	return d
}

// newEvalSlots returns the semaphore of evalOnOwnStack: GOMAXPROCS slots.
func newEvalSlots() chan struct{} { return make(chan struct{}, max(1, runtime.GOMAXPROCS(0))) }

func (e *Engine) eval(ctx context.Context, c *compiled, in input.Input) Decision {
	ctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	deny, warn, warnErr, err := evalQuery(ctx, c, in)
	if err != nil {
		return e.failed(c, in, err)
	}
	d := Decision{Revision: c.revision, Deny: deny, Warn: warn}
	if warnErr != nil {
		d.WarnErr = fmt.Errorf("policy revision %s: decide %s: warn rules failed (not blocking): %w", c.revision, in.Action, warnErr)
	}
	enforced := 0
	for _, m := range deny {
		if m.Enforcement != EnforcementDryRun {
			enforced++
		}
	}
	d.Allowed = enforced == 0 || e.opts.Mode == ModeDryRun
	d.DryRun = len(deny) > 0 && (e.opts.Mode == ModeDryRun || enforced < len(deny))
	return d
}

// evalQuery runs the gate query of c and decodes its messages. err is a failure of the whole
// decision or of deny; warnErr a failure of warn alone, found by evaluating deny on its own
// (c.pqDeny) after the gate query failed: deny and warn are then deny's messages and none.
func evalQuery(ctx context.Context, c *compiled, in input.Input) (deny, warn []Message, warnErr, err error) {
	v, err := inputValue(in)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode input: %w", err)
	}
	rs, err := c.pq.Eval(ctx, rego.EvalParsedInput(v))
	if err != nil {
		if cancelled(err) {
			return nil, nil, nil, fmt.Errorf("evaluation cancelled (timeout or shutdown): %w", err)
		}
		drs, derr := c.pqDeny.Eval(ctx, rego.EvalParsedInput(v))
		switch {
		case derr != nil && cancelled(derr):
			return nil, nil, nil, fmt.Errorf("evaluation cancelled (timeout or shutdown): %w", derr)
		case derr != nil:
			return nil, nil, nil, derr
		case len(drs) != 1 || len(drs[0].Expressions) != 1:
			return nil, nil, nil, errors.New("the decision is undefined")
		}
		if deny, derr = messages(drs[0].Expressions[0].Value, "deny"); derr != nil {
			return nil, nil, nil, derr
		}
		return deny, nil, err, nil
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, nil, nil, errors.New("the decision is undefined")
	}
	obj, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return nil, nil, nil, fmt.Errorf("the decision is %T, not an object", rs[0].Expressions[0].Value)
	}
	if deny, err = messages(obj["deny"], "deny"); err != nil {
		return nil, nil, nil, err
	}
	if warn, warnErr = messages(obj["warn"], "warn"); warnErr != nil {
		return deny, nil, warnErr, nil
	}
	return deny, warn, nil, nil
}

// cancelled reports whether err is an evaluation stopped by its deadline or by shutdown.
func cancelled(err error) bool {
	return topdown.IsCancel(err) || errors.Is(err, context.DeadlineExceeded)
}

// messages decodes data.ccm.deny or data.ccm.warn: a set of strings or {"msg", "code"} objects;
// a deny object may also carry "enforcement" ("dryrun" or "enforce"). Each msg is cut at
// truncate.EventMessage bytes and each code at truncate.Value (on a character boundary), so a
// policy cannot flood the decision log, the events or the errors; a malformed message is echoed
// in the error only up to truncate.Value.
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
			if rule != "deny" {
				continue // warn never blocks: "enforcement" means nothing there
			}
			enf, present := m["enforcement"]
			switch enf {
			case EnforcementDryRun:
				out[len(out)-1].Enforcement = EnforcementDryRun
			case EnforcementEnforce:
			default:
				if present {
					// Fail (closed by default) rather than guess: a misspelt "dry-run" must not
					// quietly block, nor quietly pass.
					return nil, fmt.Errorf("a data.ccm.deny message object has \"enforcement\": %s: want %q or %q (or leave it out to follow --policy-mode)", echo(enf), EnforcementDryRun, EnforcementEnforce)
				}
			}
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
	case d.Err != nil, d.WarnErr != nil:
		return resultError
	case !d.Allowed && len(d.Deny) > 0:
		return resultDeny
	case len(d.Deny) > 0 && d.DryRun:
		return resultDryRunDeny
	case len(d.Warn) > 0:
		return resultWarn
	default:
		return resultAllow
	}
}

// subject names what a decision is about, for logs.
func subject(in input.Input) string {
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

func logDecision(in input.Input, d Decision, result string, elapsed time.Duration) {
	kv := []any{"action", in.Action, "operation", in.Operation, "subject", subject(in),
		"revision", d.Revision, "result", result, "duration", elapsed}
	if in.Audit { // the policy audit's decision: nothing is sent either way
		kv = append(kv, "audit", true)
	}
	switch result {
	case resultError:
		if d.Err != nil {
			klog.ErrorS(d.Err, "Policy evaluation failed", append(kv, "allowed", d.Allowed)...)
			return
		}
		klog.ErrorS(d.WarnErr, "Policy warn rules failed; the decision stands on deny alone", append(kv, "allowed", d.Allowed, "deny", d.Deny)...)
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
