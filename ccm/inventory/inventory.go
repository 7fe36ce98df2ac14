package inventory

import (
	"cmp"
	"slices"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Owner kinds (input.Owner.Kind). They MUST not change: operators' policies match on them.
const (
	// OwnerService is a Service's own load balancer.
	OwnerService = "service"
	// OwnerGroup is a load balancer group's shared load balancer.
	OwnerGroup = "group"
)

// Entry is one managed load balancer, as the CCM's load balancer cache (or `plan`) knows it.
type Entry struct {
	// ID is the Hetzner ID; 0 for a load balancer not created yet.
	ID int64
	// Name is the load balancer's name.
	Name string
	// Owner is the Service or group it belongs to; a group counts in its home namespace.
	Owner input.Owner
	// Type is the load balancer type, e.g. "lb11".
	Type string
	// Location is the location; "" when only NetworkZone is known.
	Location string
	// NetworkZone is the network zone.
	NetworkZone string
	// Listeners is the number of listeners.
	Listeners int
	// Targets is the number of targets.
	Targets int
}

// Build returns the inventory of the entries, priced by p: the entries by ID (those without an
// ID last, by name), each with its monthly price, and the totals per owner namespace and for
// the cluster. It does not modify entries.
func Build(entries []Entry, p Prices) input.Inventory {
	sorted := make([]*Entry, len(entries)) // pointers: an Entry is large to swap
	for i := range entries {
		sorted[i] = &entries[i]
	}
	slices.SortStableFunc(sorted, func(a, b *Entry) int {
		if (a.ID == 0) != (b.ID == 0) {
			if a.ID == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Name, b.Name))
	})
	inv := input.Inventory{
		Currency:      Currency,
		LoadBalancers: make([]input.InventoryLoadBalancer, 0, len(sorted)),
		Namespaces:    map[string]input.Totals{},
		Cluster:       input.Totals{ByType: map[string]int{}},
	}
	namespaces := map[string]*totals{}
	var cluster totals
	for _, e := range sorted {
		a, known := p.lookup(e.Type, e.Location, e.NetworkZone)
		inv.LoadBalancers = append(inv.LoadBalancers, input.InventoryLoadBalancer{
			ID: e.ID, Name: e.Name, Owner: e.Owner, Type: e.Type, Location: e.Location,
			NetworkZone: e.NetworkZone, Listeners: e.Listeners, Targets: e.Targets,
			Price: input.Price{Known: known, MonthlyNet: a.net.float(), MonthlyGross: a.gross.float(), Currency: Currency},
		})
		cluster.add(e.Type, a)
		ns := namespaces[e.Owner.Namespace]
		if ns == nil {
			ns = &totals{}
			namespaces[e.Owner.Namespace] = ns
		}
		ns.add(e.Type, a)
	}
	inv.Cluster = cluster.input()
	for name, t := range namespaces {
		inv.Namespaces[name] = t.input()
	}
	return inv
}

// totals sums exactly, in micros.
type totals struct {
	count  int
	byType map[string]int
	sum    amount
}

func (t *totals) add(typ string, a amount) {
	if t.byType == nil {
		t.byType = map[string]int{}
	}
	t.count++
	t.byType[typ]++
	t.sum.net += a.net
	t.sum.gross += a.gross
}

func (t *totals) input() input.Totals {
	byType := t.byType
	if byType == nil {
		byType = map[string]int{}
	}
	return input.Totals{LoadBalancers: t.count, ByType: byType, MonthlyNet: t.sum.net.float(), MonthlyGross: t.sum.gross.float()}
}

// StepCost returns the monthly price of a step's load balancer before (nil on create) and
// after (nil on delete) the step, and the delta after - before. An unknown price counts as 0.
func StepCost(before, after *input.LoadBalancer, p Prices) input.Cost {
	b, a := p.priceOf(before), p.priceOf(after)
	return input.Cost{
		Currency: Currency,
		Before:   b.input(),
		After:    a.input(),
		Delta:    amount{net: a.net - b.net, gross: a.gross - b.gross}.input(),
	}
}

func (p Prices) priceOf(lb *input.LoadBalancer) amount {
	if lb == nil {
		return amount{}
	}
	a, _ := p.lookup(lb.Type, lb.Location, lb.NetworkZone)
	return a
}

func (a amount) input() input.Amount {
	return input.Amount{MonthlyNet: a.net.float(), MonthlyGross: a.gross.float()}
}

// AddsCost reports whether the step of in adds cost: a create, or a change of type that is not
// known to be cheaper or as dear (a price of either type unknown counts as dearer). Such steps
// are the ones a quota rule must see one at a time.
func AddsCost(in input.Input, p Prices) bool {
	switch {
	case in.Audit || in.LoadBalancer == nil:
		return false
	case in.Action == input.ActionLoadBalancerCreate:
		return true
	case in.Current != nil && in.Current.Type != in.LoadBalancer.Type:
		before, knownBefore := p.lookup(in.Current.Type, in.Current.Location, in.Current.NetworkZone)
		after, knownAfter := p.lookup(in.LoadBalancer.Type, in.LoadBalancer.Location, in.LoadBalancer.NetworkZone)
		return !knownBefore || !knownAfter || after.gross > before.gross || after.net > before.net
	}
	return false
}

// Entries returns the entries of an inventory (the inverse of Build, without prices).
func Entries(inv input.Inventory) []Entry {
	out := make([]Entry, 0, len(inv.LoadBalancers))
	for _, lb := range inv.LoadBalancers {
		out = append(out, Entry{
			ID: lb.ID, Name: lb.Name, Owner: lb.Owner, Type: lb.Type, Location: lb.Location,
			NetworkZone: lb.NetworkZone, Listeners: lb.Listeners, Targets: lb.Targets,
		})
	}
	return out
}

// Apply returns the inventory after the step decided on in was applied: a create adds its load
// balancer (owned by in.Group when set, else by in.Service), a delete removes in.Current, and
// an update sets the matching entry's name, type, location, listener and target counts to
// in.LoadBalancer (so change_type retypes it). The entry of an update or delete is found by
// ID, else by in.Current's name; an audit decision, a route, or a step whose load balancer is
// not in the inventory leaves it as it is. It does not modify inv.
func Apply(inv input.Inventory, in input.Input, p Prices) input.Inventory {
	if in.Audit {
		return inv
	}
	entries := Entries(inv)
	switch in.Action {
	case input.ActionLoadBalancerCreate:
		if in.LoadBalancer == nil {
			return inv
		}
		e := entryOf(in.LoadBalancer)
		e.Owner = ownerOf(in)
		entries = append(entries, e)
	case input.ActionLoadBalancerDelete:
		i := find(entries, in.Current)
		if i < 0 {
			return inv
		}
		entries = slices.Delete(entries, i, i+1)
	case input.ActionLoadBalancerUpdate:
		i := find(entries, in.Current)
		if i < 0 || in.LoadBalancer == nil {
			return inv
		}
		owner := entries[i].Owner
		id := entries[i].ID
		entries[i] = entryOf(in.LoadBalancer)
		entries[i].Owner, entries[i].ID = owner, id
	default:
		return inv
	}
	return Build(entries, p)
}

func entryOf(lb *input.LoadBalancer) Entry {
	return Entry{
		ID: lb.ID, Name: lb.Name, Type: lb.Type, Location: lb.Location, NetworkZone: lb.NetworkZone,
		Listeners: len(lb.Services), Targets: len(lb.Targets),
	}
}

// ownerOf is the owner of the load balancer a create builds: the group, else the Service.
func ownerOf(in input.Input) input.Owner {
	switch {
	case in.Group != nil:
		return input.Owner{Kind: OwnerGroup, Namespace: in.Group.Namespace, Name: in.Group.Name}
	case in.Service != nil:
		return input.Owner{Kind: OwnerService, Namespace: in.Service.Namespace, Name: in.Service.Name}
	}
	return input.Owner{}
}

// find returns the index of the entry of lb (by ID, else by name), or -1.
func find(entries []Entry, lb *input.LoadBalancer) int {
	if lb == nil {
		return -1
	}
	return slices.IndexFunc(entries, func(e Entry) bool {
		if lb.ID != 0 && e.ID != 0 {
			return e.ID == lb.ID
		}
		return e.Name == lb.Name
	})
}

// Age orders managed load balancers by when Hetzner created them, then by ID.
type Age struct {
	// Created is the load balancer's created time; zero when unknown (then IDs decide).
	Created time.Time
	// ID is the Hetzner ID.
	ID int64
}

// Before reports whether a was created before b: by created time when both are known and
// differ, else by ID (Hetzner hands out IDs in creation order).
func (a Age) Before(b Age) bool {
	if !a.Created.IsZero() && !b.Created.IsZero() && !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.ID < b.ID
}

// OlderThan returns the inventory a load balancer of owner met when it was created: only the
// load balancers older than owner's oldest (Age.Before; ages by ID, from the load balancers'
// created times). The policy audit judges an existing load balancer with it, so with a limit
// of 2 and three load balancers only the newest is over the limit, and the same for a budget.
// Without a load balancer of owner in inv (or its age) it is Without. It does not modify inv.
func OlderThan(inv input.Inventory, owner input.Owner, ages map[int64]time.Time, p Prices) input.Inventory {
	var own *Age
	for _, lb := range inv.LoadBalancers {
		if lb.Owner != owner || lb.ID == 0 {
			continue
		}
		if a := (Age{Created: ages[lb.ID], ID: lb.ID}); own == nil || a.Before(*own) {
			own = &a
		}
	}
	if own == nil {
		return Without(inv, owner, p)
	}
	entries := slices.DeleteFunc(Entries(inv), func(e Entry) bool {
		return e.Owner == owner || e.ID == 0 || !(Age{Created: ages[e.ID], ID: e.ID}).Before(*own)
	})
	return Build(entries, p)
}

// Without returns the inventory without the load balancers of owner: what OlderThan returns
// for an owner whose load balancer's age is unknown. It does not modify inv.
func Without(inv input.Inventory, owner input.Owner, p Prices) input.Inventory {
	entries := slices.DeleteFunc(Entries(inv), func(e Entry) bool { return e.Owner == owner })
	if len(entries) == len(inv.LoadBalancers) {
		return inv
	}
	return Build(entries, p)
}
