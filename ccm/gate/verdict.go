package gate

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

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
	// Digest is, when a step is denied, the Digest of the plan decided (the plan given to
	// Decide), provided every decision was made under the revision in force before the first
	// one and the input was complete; "" otherwise. The CCM remembers a denial under it.
	Digest string
}

// Denied reports whether any step is denied.
func (v Verdict) Denied() bool {
	return slices.ContainsFunc(v.Steps, StepVerdict.Denied)
}

// Decide decides every step of plan for svc and returns which steps run. It is the one verdict
// of the CCM's executor, `plan` (ccm/ciplan) and the admission webhook (ccm/admission).
//
// Steps fail alone (lbplan.Plan.Runnable): on an existing load balancer a denied step skips
// itself and the steps that need it, and nothing else; a create or delete is all or nothing.
// The steps that are left are decided again on the plan that runs, because their inputs (the
// load balancer before and after each step, the final state) no longer show what the skipped
// steps would have done; a step denied then is skipped the same way, until every step that
// runs is allowed on the inputs of exactly the plan that is sent. Each round skips at least
// one step, so there are at most as many rounds as steps; with nothing denied there is one.
func (g Gate) Decide(ctx context.Context, plan lbplan.Plan, svc *corev1.Service) Verdict {
	rev, named := g.Revision() // before the decisions: see Verdict.Digest
	service, inputErr := g.Service(svc)
	v := Verdict{Run: plan}
	idx := []int{} // step of the plan that runs -> step of plan
	for i := range plan.Steps() {
		idx = append(idx, i)
		v.Steps = append(v.Steps, StepVerdict{})
	}
	for !v.Run.Empty() {
		var denied []int
		for i, in := range Inputs(v.Run, g.Cluster, service) {
			if g.Audit {
				in.Input.Audit = true
			}
			d := g.decide(ctx, in.Input, inputErr)
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
	if v.Denied() && named && inputErr == nil && sameRevision(rev, v.Steps) {
		v.Digest = inputsDigest(rev, Inputs(plan, g.Cluster, service))
	}
	return v
}

// sameRevision reports whether no decision of steps names another revision than rev (a reload
// during the decisions). Deciders that name no revision are taken to have decided with rev.
func sameRevision(rev string, steps []StepVerdict) bool {
	for _, s := range steps {
		if r := s.Decision.Revision; r != "" && r != rev {
			return false
		}
	}
	return true
}
