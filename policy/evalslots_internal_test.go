package policy

import (
	"context"
	"errors"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// stackRules recurse through a few helper rules and comprehensions, as the example policies do,
// so that OPA's evaluator grows the stack it runs on.
const stackRules = `package ccm

ports contains p if some p in [s.listen_port | some s in input.load_balancer.services]

names contains n if some n in [x | some x in object.keys(input.load_balancer.labels)]

deny contains msg if {
	some p in ports
	p < 1024
	msg := sprintf("port %d is privileged", [p])
}

warn contains msg if {
	count(names) > 1
	msg := concat(",", sort(names))
}
`

func stackInput() input.Input {
	return input.Input{Action: input.ActionLoadBalancerCreate, LoadBalancer: &input.LoadBalancer{
		Type:     "lb11",
		Labels:   map[string]string{"a": "1"},
		Services: []input.LBService{{ListenPort: 8443}, {ListenPort: 8080}},
	}}
}

// TestDecide_leavesCallerStacksSmall checks that Decide does not grow the stacks of its callers
// as an evaluation on their own stack does: goroutines that decided once and stay alive (as the
// route controller's do) hold much less stack than goroutines that evaluated themselves.
func TestDecide_leavesCallerStacksSmall(t *testing.T) {
	e := NewEngine(Options{})
	if _, err := e.Load(context.Background(), map[string][]byte{"p.rego": []byte(stackRules)}, Source{}); err != nil {
		t.Fatal(err)
	}
	if d := e.Decide(context.Background(), stackInput()); d.Err != nil || !d.Allowed || len(d.Deny)+len(d.Warn) != 0 {
		t.Fatalf("decision = %+v, want an allow without messages or error", d)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no stack shrinking while measuring

	const n = 200
	c := e.active.Load()
	perGoroutine := func(work func()) float64 {
		var ready, done sync.WaitGroup
		stop := make(chan struct{})
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				work()
				ready.Done()
				<-stop
			}()
		}
		ready.Wait()
		runtime.ReadMemStats(&after)
		close(stop)
		done.Wait()
		return (float64(after.StackInuse) - float64(before.StackInuse)) / n
	}
	idle := perGoroutine(func() {})
	evaluators := perGoroutine(func() { e.eval(context.Background(), c, stackInput()) })
	deciders := perGoroutine(func() { e.Decide(context.Background(), stackInput()) })
	t.Logf("stack per goroutine: %.0f bytes idle, %.0f after evaluating on its own stack, %.0f after Decide",
		idle, evaluators, deciders)
	if deciders-idle > (evaluators-idle)/4 {
		t.Errorf("a goroutine that called Decide holds %.0f bytes of stack, one that evaluated on its "+
			"own stack %.0f, an idle one %.0f: Decide should evaluate on a goroutine of its own (evalOnOwnStack)",
			deciders, evaluators, idle)
	}
}

// TestDecide_waitingForASlot checks that a decision whose context ends while every evaluation
// slot is busy fails by the failure mode with an error that says so.
func TestDecide_waitingForASlot(t *testing.T) {
	for _, tc := range []struct {
		mode        FailureMode
		wantAllowed bool
	}{
		{FailClosed, false},
		{FailOpen, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			e := NewEngine(Options{FailureMode: tc.mode})
			if _, err := e.Load(context.Background(), map[string][]byte{"p.rego": []byte(stackRules)}, Source{}); err != nil {
				t.Fatal(err)
			}
			for range cap(e.evalSlots) {
				e.evalSlots <- struct{}{}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			d := e.Decide(ctx, stackInput())
			if d.Allowed != tc.wantAllowed || !errors.Is(d.Err, context.DeadlineExceeded) ||
				!strings.Contains(d.Err.Error(), "waiting to evaluate") {
				t.Errorf("decision = %+v (err %v), want allowed=%v and a deadline error while waiting to evaluate", d, d.Err, tc.wantAllowed)
			}
			for range cap(e.evalSlots) {
				<-e.evalSlots
			}
			if d := e.Decide(context.Background(), stackInput()); d.Err != nil {
				t.Errorf("with free slots: %v", d.Err)
			}
		})
	}
}
