package executor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// partialIterations is the number of random Services of TestProperty_StepsFailAlone.
const partialIterations = 200

// TestProperty_StepsFailAlone is the property of "steps fail alone" over random plans on
// existing load balancers (the generator of TestProperty_DecisionsSeeWhatRequestsDo, seeded),
// each with the steps of one random operation denied: the API accepts every request the
// executor sends (lbplan.Plan.Needs misses no rule the API enforces), no request is sent for a
// denied operation, the requests sent are exactly those of the plan that runs
// (gate.Gate.Decide's Run, as `plan` lists it), and the last decisions, those of the steps that
// run, see exactly what those requests do.
func TestProperty_StepsFailAlone(t *testing.T) {
	f := newFaithfulEnv(t)
	r := rand.New(rand.NewPCG(faithfulSeed, 29))
	partial := 0
	for i := range partialIterations {
		svc := faithfulService(100000 + i)
		f.decider.decision = allow
		f.check(t, i, "create", svc, f.randomDesired(r, svc, true), nil)
		before := f.lbOf(t, svc)
		p, err := lbplan.Compute(f.randomDesired(r, svc, false), lbplan.NewActual(before))
		if err != nil {
			t.Fatalf("iteration %d: plan: %v", i, err)
		}
		if p.Empty() {
			continue
		}
		denied := p.Mutations[r.IntN(len(p.Mutations))].Operation()
		f.decider.decision = func(in input.Input) policy.Decision {
			if in.Operation == denied {
				return policy.Decision{Deny: []policy.Message{{Msg: "not " + denied}}}
			}
			return policy.Decision{Allowed: true}
		}
		name := fmt.Sprintf("iteration %d: %v with %s denied", i, p.Labels(), denied)
		run := gate.Gate{Decider: policy.DecideFunc(func(_ context.Context, in input.Input) policy.Decision {
			return f.decider.decision(in)
		})}.Decide(context.Background(), p, nil).Run
		f.emu.ResetRequests()
		f.decider.inputs = nil
		after, err := f.exec.Run(context.Background(), svc, p)
		if !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("%s: run = %v, want a denial", name, err)
		}
		var sent, wire []string
		for _, req := range f.emu.Requests() {
			if req.Method == "GET" {
				continue
			}
			if req.Status >= 300 {
				t.Fatalf("%s: %s %s answered %d: a step ran without a step it needs", name, req.Method, req.Path, req.Status)
			}
			effects := requestEffects(t, req, before)
			if strings.HasPrefix(effects, denied+":") {
				t.Errorf("%s: a request of the denied operation was sent: %s", name, effects)
			}
			sent = append(sent, effects)
			wire = append(wire, req.Method+" "+strings.TrimPrefix(req.Path, "/v1")+" "+req.Body)
		}
		planned, err := run.APIRequests()
		if err != nil {
			t.Fatalf("%s: APIRequests: %v", name, err)
		}
		f.checkPlanned(t, name, run, planned, after, wire)
		last := f.decider.inputs[len(f.decider.inputs)-len(run.Steps()):] // the round that let them run
		var seen []string
		for _, in := range last {
			seen = append(seen, decisionEffects(in))
		}
		slices.Sort(sent)
		slices.Sort(seen)
		if !slices.Equal(sent, seen) {
			t.Errorf("%s: the last decisions do not see what the requests do\nrequests sent:\n  %s\ndecisions:\n  %s",
				name, strings.Join(sent, "\n  "), strings.Join(seen, "\n  "))
		}
		if len(sent) > 0 {
			partial++
		}
		if t.Failed() {
			t.Fatalf("%s failed (seed %d)", name, faithfulSeed)
		}
	}
	if partial < partialIterations/4 {
		t.Errorf("only %d plans ran in part, want at least %d: widen the generator", partial, partialIterations/4)
	}
	t.Logf("%d of %d random update plans with one operation denied ran in part", partial, partialIterations)
}
