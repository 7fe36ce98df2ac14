package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Pricing is the executor's InventorySource: the load balancers the caches hold now (the load
// balancer cache's All: every Service's and every group's), each owned by its Service (found
// by the UID label among the Services the lister knows) or its group (the group labels, in
// its home namespace), priced with the type list the type cache holds. It makes no request: the
// type list is read at start and refreshed hourly by StartInventory, the load balancers by the
// cache's own reads and the CCM's writes.
//
// A load balancer carrying the UID label of a Service the lister does not know is not in the
// inventory: the official label names no cluster, so it may be another cluster's in the same
// project (or its Service is gone and the load balancer is on its way out).
//
// Before the first list of the load balancers has completed, the cache knows only the Services
// it read alone, and a quota would count too few: while StartInventory's start-up list runs,
// Pricing waits for it, at most listWait. It sends no request of its own.
func (l *LoadBalancers) Pricing() *lbplan.Pricing {
	lbs, complete := l.cache.All()
	if !complete && l.start.wait(listWait) {
		lbs, _ = l.cache.All()
	}
	owners := l.serviceOwners()
	entries := make([]inventory.Entry, 0, len(lbs))
	seen := make(map[int64]bool, len(lbs))
	for _, a := range lbs {
		if seen[a.ID] {
			continue
		}
		seen[a.ID] = true
		if e, ok := inventoryEntry(a, owners); ok {
			entries = append(entries, e)
		}
	}
	prices := l.types.prices()
	return &lbplan.Pricing{Inventory: inventory.Build(entries, prices), Prices: prices}
}

// listWait bounds how long Pricing waits for the start-up list of the load balancers.
const listWait = 30 * time.Second

// inventoryStart is the start-up list of the inventory (StartInventory), which Pricing waits for.
type inventoryStart struct {
	needed  func() bool   // whether the policy in force reads the inventory; set by StartInventory
	running atomic.Bool   // the start-up reads were asked for (kick closed)
	kick    chan struct{} // closed to start them
	done    chan struct{} // closed when their list of the load balancers has ended
	once    sync.Once
}

func newInventoryStart() *inventoryStart {
	return &inventoryStart{kick: make(chan struct{}), done: make(chan struct{})}
}

// finish marks the start-up list ended (with or without success).
func (s *inventoryStart) finish() { s.once.Do(func() { close(s.done) }) }

// wait waits, at most d, for the start-up list when one runs, and reports whether it ended.
func (s *inventoryStart) wait(d time.Duration) bool {
	if !s.running.Load() {
		return false
	}
	select {
	case <-s.done:
		return true
	case <-time.After(d):
		return false
	}
}

// serviceOwners maps the UIDs of the Services the lister knows to their owner entries.
func (l *LoadBalancers) serviceOwners() map[string]input.Owner {
	out := map[string]input.Owner{}
	if l.services == nil {
		return out
	}
	svcs, err := l.services.List(labels.Everything())
	if err != nil {
		return out
	}
	for _, s := range svcs {
		out[string(s.UID)] = input.Owner{Kind: inventory.OwnerService, Namespace: s.Namespace, Name: s.Name}
	}
	return out
}

// inventoryEntry is the inventory entry of a; ok is false for a load balancer of a Service
// that owners does not hold.
func inventoryEntry(a *lbplan.Actual, owners map[string]input.Owner) (e inventory.Entry, ok bool) {
	e = inventory.Entry{
		ID: a.ID, Name: a.Name, Type: a.Type, Location: a.Location, NetworkZone: a.NetworkZone,
		Listeners: len(a.Services), Targets: len(a.Targets) + len(a.IPTargets) + a.OtherTargets,
	}
	if group := a.Labels[lbplan.LabelGroup]; group != "" {
		e.Owner = input.Owner{Kind: inventory.OwnerGroup, Namespace: a.Labels[lbplan.LabelGroupNamespace], Name: group}
		return e, true
	}
	e.Owner, ok = owners[a.Labels[lbplan.LabelServiceUID]]
	return e, ok
}

// prices returns the prices of the type list the cache holds, without a request; none before
// the first read.
func (c *typeCache) prices() inventory.Prices {
	list, _, _ := c.Held()
	return list.prices
}

// StartInventory fills the caches the inventory is built from and keeps the prices current,
// in a goroutine of its own, until ctx ends, once needed reports that the policy in force
// reads the inventory (gate.Gate.ReadsInventory; InventoryNeeded asks again, after each policy
// revision): after the Service informer synced (synced), PrimeInventory, then a read of the
// load balancer type list with its prices once every max age of the type cache (an hour).
// Failed reads are logged and tried again at the next interval. Decisions made before the
// start-up list has ended wait for it (Pricing). A policy that does not read the inventory
// costs no request for it. It returns at once.
func (l *LoadBalancers) StartInventory(ctx context.Context, synced cache.InformerSynced, cluster string, needed func() bool) {
	l.start.needed = needed
	go l.keepInventory(ctx, synced, cluster)
	l.InventoryNeeded()
}

// InventoryNeeded starts the inventory's start-up reads when the policy in force reads the
// inventory and they have not started; the CCM calls it after each policy revision.
func (l *LoadBalancers) InventoryNeeded() {
	if l.start.needed == nil || !l.start.needed() || l.start.running.Swap(true) {
		return
	}
	close(l.start.kick)
}

// keepInventory is StartInventory's goroutine.
func (l *LoadBalancers) keepInventory(ctx context.Context, synced cache.InformerSynced, cluster string) {
	select {
	case <-ctx.Done():
		return
	case <-l.start.kick:
	}
	defer l.start.finish() // also when ctx ends first: Pricing waits no longer
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	if err := l.PrimeInventory(ctx, cluster); err != nil {
		klog.ErrorS(err, "Policy inventory not read in full; it fills as Services are synced", "nextIn", l.types.MaxAge())
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.types.MaxAge()):
		}
		if err := l.types.refresh(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Load balancer types not read; policy inputs keep the prices read before", "nextIn", l.types.MaxAge())
		}
	}
}

// PrimeInventory reads what the inventory is built from (Pricing): the load balancers of
// Services (a list, as the drift check's; Pricing waits for it), of the groups of cluster
// (as the group sweep's), and the load balancer type list with its prices: ⌈n/50⌉ + ⌈g/50⌉ + 1
// requests. It returns every error it met, joined.
func (l *LoadBalancers) PrimeInventory(ctx context.Context, cluster string) error {
	_, _, listErr := l.cache.Refresh(ctx)
	l.start.finish()
	_, _, groupsErr := l.cache.ListGroups(ctx, cluster)
	typesErr := l.types.refresh(ctx)
	if err := errors.Join(listErr, groupsErr, typesErr); err != nil {
		return fmt.Errorf("prime the policy inventory: %w", err)
	}
	return nil
}

// costLock serialises the runs of plans that add cost (inventory.AddsCost of a step: a create,
// or a change to a type not known to be cheaper) in this CCM process, so that each is decided
// on an inventory that holds the result of the one before: it locks l.costMu when plan adds
// cost and returns the unlock, which the caller calls once the run's result is in the cache
// (stored). Plans that add no cost run unserialised: a delete or a cheaper type
// decided concurrently only makes a quota rule see more than there is. docs/policy.md, "The
// quota guarantee"; TestQuota_concurrentCreatesSerialised.
func (l *LoadBalancers) costLock(plan lbplan.Plan) (unlock func()) {
	if !addsCost(plan, l.types.prices()) {
		return func() {}
	}
	l.costMu.Lock()
	return l.costMu.Unlock
}

// addsCost reports whether a step of plan adds cost.
func addsCost(plan lbplan.Plan, prices inventory.Prices) bool {
	for _, st := range plan.Steps() {
		in := input.Input{Action: st.Mutation.Action(), Current: st.Current, LoadBalancer: st.LoadBalancer}
		if inventory.AddsCost(in, prices) {
			return true
		}
	}
	return false
}

// RoomTracker is implemented by a DenialTracker that retries the denied Services when the
// inventory gains room (ccm/requeue's Requeuer does).
type RoomTracker interface {
	// RoomAppeared retries the denied Services; text says what made room.
	RoomAppeared(text string)
}

// freed tells the denial tracker, when it is a RoomTracker, that plan ran (err nil) and made
// room: it deleted a load balancer or changed one to a type not dearer (frees). Callers call it
// once the run's result is in the cache (stored), so the retried Services are
// decided on an inventory without what was freed.
func (l *LoadBalancers) freed(plan lbplan.Plan, err error) {
	t, ok := l.denials.(RoomTracker)
	if !ok || err != nil {
		return
	}
	if what := frees(plan, l.types.prices()); what != "" {
		t.RoomAppeared(what)
	}
}

// frees names the step of plan that makes room, or "": a delete, or a change to a type that
// does not add cost (inventory.AddsCost).
func frees(plan lbplan.Plan, prices inventory.Prices) string {
	for _, st := range plan.Steps() {
		in := input.Input{Action: st.Mutation.Action(), Current: st.Current, LoadBalancer: st.LoadBalancer}
		switch {
		case in.Action == input.ActionLoadBalancerDelete && st.Current != nil:
			return "load balancer " + st.Current.Name + " deleted"
		case in.Action == input.ActionLoadBalancerUpdate && st.Current != nil && st.LoadBalancer != nil &&
			st.Current.Type != st.LoadBalancer.Type && !inventory.AddsCost(in, prices):
			return "load balancer " + st.Current.Name + " changed to " + st.LoadBalancer.Type
		}
	}
	return ""
}
