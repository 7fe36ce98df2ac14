package executor

import (
	"context"
	"slices"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// StepVerdict is the gate's answer for one step of a plan.
type StepVerdict struct {
	// StepInput is the step as last decided: the input of the plan that runs when the step
	// was decided again (see Decide).
	StepInput
	// Decision is the step's last decision.
	Decision policy.Decision
	// Runs is true when the step is sent: it is allowed and needs no step that does not run.
	Runs bool
	// Needs is, for a step that does not run although it was allowed (or not decided again),
	// the label of the step it needs that does not run, and Why the need (lbplan.Need); both
	// empty otherwise. A create's or delete's steps need each other ("all or nothing").
	Needs, Why string
}

// Denied reports whether the policy denied the step itself.
func (s StepVerdict) Denied() bool { return !s.Decision.Allowed }

// SkipReason says why an allowed step does not run: "needs LABEL", or the reason when it needs
// no one step ("a create or delete is all or nothing"); "" for a step that runs or is denied.
func (s StepVerdict) SkipReason() string {
	switch {
	case s.Runs || s.Denied():
		return ""
	case s.Needs == "":
		return s.Why
	}
	return "needs " + s.Needs
}

// Verdict is the gate's answer for one plan: one StepVerdict per step (plan.Steps order) and
// the plan that runs.
type Verdict struct {
	Steps []StepVerdict
	// Run is the part of the plan that is sent: every step that Runs, in plan order, from the
	// same load balancer. It is the whole plan when nothing is denied, and empty when a denied
	// step is part of a create or delete.
	Run lbplan.Plan
}

// Denied reports whether any step is denied.
func (v Verdict) Denied() bool {
	return slices.ContainsFunc(v.Steps, StepVerdict.Denied)
}

// Decide decides every step of plan for the Service view service in cluster with decide, and
// returns which steps run. It is the one verdict of the CCM's gate (Run), `plan` (ccm/ciplan)
// and the admission webhook (ccm/admission): they all call it.
//
// Steps fail alone (lbplan.Plan.Runnable): on an existing load balancer a denied step skips
// itself and the steps that need it, and nothing else; a create or delete is all or nothing.
// The steps that are left are decided again on the plan that runs, because their inputs (the
// load balancer before and after each step, the final state) no longer show what the skipped
// steps would have done; a step denied then is skipped the same way, until every step that
// runs is allowed on the inputs of exactly the plan that is sent. Each round skips at least
// one step, so there are at most as many rounds as steps; with nothing denied there is one.
func Decide(ctx context.Context, plan lbplan.Plan, cluster policy.Cluster, service *policy.Service, decide func(context.Context, policy.Input) policy.Decision) Verdict {
	v := Verdict{Run: plan}
	idx := []int{} // step of the plan that runs -> step of plan
	for i := range plan.Steps() {
		idx = append(idx, i)
		v.Steps = append(v.Steps, StepVerdict{})
	}
	for !v.Run.Empty() {
		var denied []int
		for i, in := range Inputs(v.Run, cluster, service) {
			d := decide(ctx, in.Input)
			v.Steps[idx[i]] = StepVerdict{StepInput: in, Decision: d, Runs: true}
			if !d.Allowed {
				denied = append(denied, i)
			}
		}
		if len(denied) == 0 {
			break
		}
		run, skips := v.Run.Runnable(denied)
		left := slices.Clone(idx)
		for _, s := range skips {
			sv := &v.Steps[idx[s.Step]]
			sv.Runs, sv.Needs, sv.Why = false, s.Because, s.Why
			left = slices.DeleteFunc(left, func(i int) bool { return i == idx[s.Step] })
		}
		v.Run, idx = run, left
	}
	return v
}
