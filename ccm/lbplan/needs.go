package lbplan

import (
	"fmt"
	"slices"
)

// Need is one dependency between two mutations of a plan: the mutation at index Step (of
// Plan.Mutations) cannot run without the earlier one at index On. Why says what it needs, for
// logs and for the output of `plan`.
type Need struct {
	Step, On int
	Why      string
}

// Needs returns the dependencies between the mutations of a plan that changes an existing load
// balancer (Actual set), in plan order. It is pure. These are every way one mutation of Compute
// relies on an earlier one, as the API enforces it (internal/hcloudemu refuses each of them):
//
//   - a listener (add_service, update_service) that uses the managed certificate the plan
//     creates needs create_managed_certificate;
//   - a listener or target added beyond the current type's max_services or max_targets (a limit
//     of 0 is unknown and counts as exceeded) needs change_type; one that fits only because of
//     the delete_service or remove_target steps before it needs those;
//   - a target on a private IP needs attach_to_network, one on a public IP (server or Robot IP)
//     enable_public_interface;
//   - a target added again (use_private_ip flips) needs its remove_target;
//   - attach_to_network needs the detach_from_network of the same network (a new private IP);
//   - detach_from_network and change_dns_ptr need enable_public_interface;
//   - disable_public_interface needs attach_to_network and the remove_target of every target
//     on a public IP.
//
// Anything else is independent: update (name, labels), change_algorithm, delete_service, and
// targets and listeners that need nothing the plan changes. A plan that creates or deletes the
// load balancer has no entries: it is all or nothing (see Runnable).
func (p Plan) Needs() []Need {
	if p.Actual == nil || p.deletes() {
		return nil
	}
	var out []Need
	first := map[string]int{} // operation -> index of its first mutation
	state := p.Actual
	for j, m := range p.Mutations {
		need := func(i int, why string) {
			if i >= 0 && i < j {
				out = append(out, Need{Step: j, On: i, Why: why})
			}
		}
		on := func(op string) int {
			if i, ok := first[op]; ok {
				return i
			}
			return -1
		}
		next := m.Apply(state)
		switch m := m.(type) {
		case AddService:
			need(p.certificateOf(m.Listener, j), "uses the certificate it creates")
			if over(len(next.Services), p.Actual.MaxServices) {
				need(on(OpChangeType), fmt.Sprintf("more listeners than max_services %d of type %s", p.Actual.MaxServices, p.Actual.Type))
			}
			p.roomNeeds(j, len(next.Services), p.Actual.MaxServices, isDeleteService, need)
		case UpdateService:
			need(p.certificateOf(m.Listener, j), "uses the certificate it creates")
		case AddTarget:
			p.targetNeeds(j, m.Target.UsePrivateIP, next, on, need)
			need(p.removeOf(m.Target.ServerID, j), "adds the target again with another use_private_ip")
		case AddIPTarget:
			p.targetNeeds(j, false, next, on, need)
		case AttachNetwork:
			need(p.indexOf(j, func(o Mutation) bool { d, ok := o.(DetachNetwork); return ok && d.NetworkID == m.Network.ID }),
				"attaches the network again with another private IP")
		case DetachNetwork, ChangeDNSPtr:
			need(on(OpEnablePublicInterface), "needs the public interface")
		case DisablePublicInterface:
			need(on(OpAttachToNetwork), "needs the network attached")
			for i, o := range p.Mutations[:j] {
				if publicRemove(o) {
					need(i, "needs every target on a private IP")
				}
			}
		}
		if _, ok := first[m.Operation()]; !ok {
			first[m.Operation()] = j
		}
		state = next
	}
	return out
}

// targetNeeds adds the needs of a target added at j: the interface it is reached on, and the
// type change when the load balancer has more targets than its type allows after it (next).
func (p Plan) targetNeeds(j int, private bool, next *Actual, on func(string) int, need func(int, string)) {
	if private {
		need(on(OpAttachToNetwork), "needs the network attached")
	} else {
		need(on(OpEnablePublicInterface), "needs the public interface")
	}
	count := len(next.Targets) + len(next.IPTargets) + next.OtherTargets
	if over(count, p.Actual.MaxTargets) {
		need(on(OpChangeType), fmt.Sprintf("more targets than max_targets %d of type %s", p.Actual.MaxTargets, p.Actual.Type))
	}
	p.roomNeeds(j, count, p.Actual.MaxTargets, isRemoveTarget, need)
}

// roomNeeds adds the needs of an add at j that fits the type's limit (count after it) only
// thanks to the earlier removals that removes matches: it needs every one of them. A removal
// whose target is added again up to j (use_private_ip flips) makes no room by then. An unknown
// limit (0) adds none: removals are not held for a limit nobody knows.
func (p Plan) roomNeeds(j, count, limit int, removes func(Mutation) bool, need func(int, string)) {
	if limit == 0 || count > limit {
		return
	}
	var before []int
	for i, m := range p.Mutations[:j] {
		if removes(m) && !slices.ContainsFunc(p.Mutations[i+1:j+1], func(a Mutation) bool { return sameTarget(m, a) }) {
			before = append(before, i)
		}
	}
	if count+len(before) <= limit {
		return
	}
	for _, i := range before {
		need(i, fmt.Sprintf("fits the limit of type %s only after the removals before it", p.Actual.Type))
	}
}

// sameTarget reports whether the target mutations a and b name the same target.
func sameTarget(a, b Mutation) bool {
	ta, ok1 := a.(TargetMutation)
	tb, ok2 := b.(TargetMutation)
	if !ok1 || !ok2 {
		return false
	}
	x, y := ta.PolicyTarget(), tb.PolicyTarget()
	return x.Type == y.Type && x.ServerID == y.ServerID && x.IP == y.IP
}

func isDeleteService(m Mutation) bool { _, ok := m.(DeleteService); return ok }

func isRemoveTarget(m Mutation) bool {
	switch m.(type) {
	case RemoveTarget, RemoveIPTarget:
		return true
	}
	return false
}

// over reports whether n exceeds limit; a limit of 0 is unknown and always exceeded.
func over(n, limit int) bool { return limit == 0 || n > limit }

// publicRemove reports whether m removes a target on a public IP.
func publicRemove(m Mutation) bool {
	switch m := m.(type) {
	case RemoveTarget:
		return !m.Target.UsePrivateIP
	case RemoveIPTarget:
		return true
	}
	return false
}

// certificateOf is the index of the create_managed_certificate before j when l uses the
// certificate the plan creates; -1 otherwise.
func (p Plan) certificateOf(l Listener, j int) int {
	if !slices.Contains(l.HTTP.Certificates, PendingCertificateID) {
		return -1
	}
	return p.indexOf(j, func(o Mutation) bool { _, ok := o.(CreateManagedCertificate); return ok })
}

// removeOf is the index of the remove_target of server before j; -1 for none.
func (p Plan) removeOf(server int64, j int) int {
	return p.indexOf(j, func(o Mutation) bool { r, ok := o.(RemoveTarget); return ok && r.Target.ServerID == server })
}

// indexOf is the index of the first mutation before j that match matches; -1 for none.
func (p Plan) indexOf(j int, match func(Mutation) bool) int {
	return slices.IndexFunc(p.Mutations[:j], match)
}

// deletes reports whether the plan deletes the load balancer.
func (p Plan) deletes() bool {
	return slices.ContainsFunc(p.Mutations, func(m Mutation) bool { _, ok := m.(Delete); return ok })
}

// Skip is a step of a plan that does not run: denied itself, or needing (Need) a step that
// does not run.
type Skip struct {
	// Step is its index in Steps (and Mutations: a plan that can skip part of itself has no
	// create, so each mutation is one step).
	Step int
	// Denied is true for a step the policy denied; false for one that needs a skipped step.
	Denied bool
	// Because is the label of the step it needs that does not run, and Why the need; both
	// empty when Denied.
	Because, Why string
}

// Runnable returns what runs of the plan when the steps at the indices denied (of Steps) are
// denied, and the steps that do not, in plan order. It is pure.
//
// On an existing load balancer a denied step skips itself and the steps that need it (Needs,
// followed transitively) and nothing else: the plan returned keeps every other mutation in
// order, from the same Actual. A plan that creates or deletes the load balancer is all or
// nothing: any denial skips every step (the create's riders are part of its one step).
func (p Plan) Runnable(denied []int) (Plan, []Skip) {
	run := p
	run.Mutations = nil
	if len(denied) == 0 {
		return p, nil
	}
	steps := len(p.Steps())
	if p.Actual == nil || p.deletes() {
		skips := make([]Skip, steps)
		for i := range skips {
			skips[i] = Skip{Step: i, Denied: slices.Contains(denied, i)}
			if !skips[i].Denied {
				skips[i].Why = "a create or delete is all or nothing"
			}
		}
		return run, skips
	}
	skipped := make(map[int]Skip, len(denied))
	for _, i := range denied {
		skipped[i] = Skip{Step: i, Denied: true}
	}
	for _, n := range p.Needs() { // in plan order: what n.On needs is settled before n.Step
		if _, on := skipped[n.On]; on {
			if _, done := skipped[n.Step]; !done {
				skipped[n.Step] = Skip{Step: n.Step, Because: p.Mutations[n.On].Label(), Why: n.Why}
			}
		}
	}
	var skips []Skip
	for i, m := range p.Mutations {
		if s, ok := skipped[i]; ok {
			skips = append(skips, s)
			continue
		}
		run.Mutations = append(run.Mutations, m)
	}
	return run, skips
}
