// Package lbcache is the one shared cache of the CCM's own load balancers, those carrying the
// hcloud-ccm/service-uid label (lbplan.LabelServiceUID), so that a round of UpdateLoadBalancer
// calls after a node change costs list pages, not one read per Service. It also holds the load
// balancers of load balancer groups, one entry per group (see Groups).
//
// # Reads
//
//   - [Cache.Get] answers from the newest data it holds when that data is at most the max age
//     old. Otherwise it lists every load balancer carrying the label key (GET
//     /load_balancers?label_selector=hcloud-ccm/service-uid&per_page=50&page=N, ⌈n/50⌉
//     requests); concurrent Gets share one list (single-flight). A Service missing from a
//     fresh list has no load balancer: no further read.
//   - [Cache.Read] reads one Service's load balancers by its UID label now (one request) and
//     keeps the answer. Callers use it where stale data could do harm: before a create (so a
//     stale cache can never create a second load balancer), before a delete, and wherever a
//     change behind the CCM's back must be seen at once (EnsureLoadBalancer).
//
// # Writes
//
// The CCM's own writes keep the cache current without a read: after the executor ran a plan,
// [Cache.Put] stores the load balancer it returned (nil after a delete: the load balancer
// leaves the cache), and after a failed run [Cache.Forget] makes the next Get read that Service
// alone. An entry written after a list started takes precedence over that list.
//
// # Groups
//
// A group's load balancer carries the group and cluster labels (lbgroup.GroupSelector), not the
// UID label, so no list above holds it. [Cache.GetGroup] answers from the group's entry while it
// is at most the max age old, else reads the group alone by its labels (one request,
// [Cache.ReadGroup], which callers use where a Read is used for a Service); [Cache.PutGroup]
// and [Cache.ForgetGroup] are Put and Forget for a group. Group entries follow the same drift
// bound; the list of Service load balancers never touches them. [Cache.ListGroups] lists the
// load balancers of every group of a cluster at once (the sweep of groups without members) and
// keeps each as its group's entry.
//
// # Drift bound
//
// A Put keeps the age of the data the plan was built from, not the time of the write, so a
// change made behind the CCM's back is in the data a Get answers with at most the max age after
// it was made, however often the CCM writes in between (TestCache, "drift behind the cache's
// back is seen after the max age, however often the CCM writes", holds this). The max age is
// therefore the bound within which an UpdateLoadBalancer sees (and repairs) drift; it is also
// kept by convention only in ccm/loadbalancer, which passes Put the time Get or Read returned.
// Drift that no UpdateLoadBalancer comes to see (an idle cluster, or a hand edit just before a
// node change whose Update answered from a fresh entry) is found by the periodic drift check
// (loadbalancer.CheckDrift), which lists through [Cache.Refresh].
package lbcache

import (
	k8smetrics "k8s.io/component-base/metrics"

	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/cache"
)

// DefaultMaxAge is the max age when Options.MaxAge is 0: long enough that one list serves a
// round of UpdateLoadBalancer calls of a few hundred Services (the service controller syncs
// them one at a time by default), short enough to bound drift repair to a minute.
const DefaultMaxAge = time.Minute

// pageSize is the number of load balancers in one page of a list (the API's maximum).
const pageSize = 50

// metrics are hcloud_ccm_load_balancer_cache_requests_total{result} and _refreshes_total{kind}.
var metrics = cache.NewMetrics(k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
	Name:           "hcloud_ccm_load_balancer_cache_requests_total",
	Help:           "Load balancer cache lookups (Get) by result: hit (served from the cache) or miss (needed an API read).",
	StabilityLevel: k8smetrics.ALPHA,
}, []string{"result"}), k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
	Name:           "hcloud_ccm_load_balancer_cache_refreshes_total",
	Help:           "Load balancer cache reads from the API by kind: list (every labelled load balancer, paginated), uid (one Service's, by its UID label), group (one load balancer group's, by its labels) or groups (every load balancer group's of the cluster, paginated).",
	StabilityLevel: k8smetrics.ALPHA,
}, []string{"kind"}))

// Options configure [New].
type Options struct {
	// LoadBalancers reads the load balancers (hcloudclient.Conn.LoadBalancers).
	LoadBalancers *hcloudclient.LoadBalancerReader
	// MaxAge is how old the data a Get answers with may be: 0 means DefaultMaxAge; a negative
	// value caches nothing (every Get is a Read).
	MaxAge time.Duration
}

// Cache holds the CCM's load balancers by Service UID. It is safe for concurrent use.
//
// The returned *lbplan.Actual values are shared between callers and MUST NOT be modified (by
// convention: lbplan's own code copies an Actual before changing it, Actual.with).
type Cache struct {
	read   *hcloudclient.LoadBalancerReader // no write method: the cache only reads
	maxAge time.Duration
	now    func() time.Time

	// lists holds the last complete list of the labelled load balancers, by Service UID, with
	// the time it started; concurrent Gets share one list.
	lists *cache.Cache[map[string][]*lbplan.Actual]

	mu      sync.Mutex
	entries map[string]entry // per Service UID: written or read alone after a list started
	groups  map[string]entry // per GroupSelector: a group's load balancer, never listed
}

// entry is one Service's load balancers as the CCM last wrote or read them alone.
type entry struct {
	data    time.Time // when the data was read: its age is checked against the max age
	written time.Time // when the entry was stored: newer than a list's start, it wins
	lbs     []*lbplan.Actual
	known   bool // false: Forget; the next Get reads the Service alone
}

// New returns a cache reading o.LoadBalancers.
//
// # Errors
//
// A nil Options.LoadBalancers.
func New(o Options) (*Cache, error) {
	if o.LoadBalancers == nil {
		return nil, errors.New("lbcache.New: Options.LoadBalancers is required: pass the load balancer reader of hcloudclient.Conn")
	}
	maxAge := o.MaxAge
	if maxAge == 0 {
		maxAge = DefaultMaxAge
	}
	c := &Cache{read: o.LoadBalancers, maxAge: maxAge, now: time.Now, entries: map[string]entry{}, groups: map[string]entry{}}
	c.lists = cache.New(cache.Options[map[string][]*lbplan.Actual]{Load: c.listUIDs, MaxAge: maxAge, Metrics: metrics, Kind: "list", Now: func() time.Time { return c.now() }})
	return c, nil
}

// MaxAge returns the max age in effect (negative: nothing is cached).
func (c *Cache) MaxAge() time.Duration { return c.maxAge }

// Get returns the load balancers carrying the UID label uid (more than one is the caller's
// error to report) and when that data was read. See the package doc for what it costs.
func (c *Cache) Get(ctx context.Context, uid string) ([]*lbplan.Actual, time.Time, error) {
	const op = "lbcache.Get"
	if c.maxAge < 0 {
		metrics.Lookup(cache.Miss)
		return c.Read(ctx, uid)
	}
	c.mu.Lock()
	lbs, at, state := c.lookupLocked(uid)
	c.mu.Unlock()
	if state == hit {
		metrics.Lookup(cache.Hit)
	} else {
		metrics.Lookup(cache.Miss)
	}
	switch state {
	case hit:
		return lbs, at, nil
	case readAlone:
		return c.Read(ctx, uid)
	}
	if _, _, err := c.list(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("%s: %w", op, err)
	}
	c.mu.Lock()
	lbs, at, state = c.lookupLocked(uid)
	c.mu.Unlock()
	if state == readAlone {
		return c.Read(ctx, uid)
	}
	// A list that just ended is fresh unless the max age is shorter than the list took: then
	// answer from it anyway rather than list again.
	return lbs, at, nil
}

// lookup results.
const (
	hit       = iota // answer with lbs
	readAlone        // the Service was forgotten: read it alone
	stale            // list again
)

// lookupLocked answers uid from the newest data held. c.mu must be held.
func (c *Cache) lookupLocked(uid string) ([]*lbplan.Actual, time.Time, int) {
	now := c.now()
	byUID, listed, ok := c.lists.Held()
	e, hasEntry := c.entries[uid]
	if hasEntry && (!ok || !e.written.Before(listed)) {
		if !e.known {
			return nil, time.Time{}, readAlone
		}
		if now.Sub(e.data) <= c.maxAge {
			return e.lbs, e.data, hit
		}
		return e.lbs, e.data, stale
	}
	if ok {
		state := stale
		if now.Sub(listed) <= c.maxAge {
			state = hit
		}
		return byUID[uid], listed, state
	}
	return nil, time.Time{}, stale
}

// Read lists the load balancers carrying the UID label uid now (one request), keeps the answer
// unless the CCM wrote that Service's load balancer while it ran, and returns it with the time
// the read started.
func (c *Cache) Read(ctx context.Context, uid string) ([]*lbplan.Actual, time.Time, error) {
	return c.readSelector(ctx, lbplan.LabelServiceUID+"="+uid, "uid", c.entries, uid)
}

// readSelector lists the load balancers matching sel now (one request, counted as a refresh of
// kind), stores the answer in m[key] unless the CCM wrote that entry while the read ran, and
// returns it with the time the read started. Read and ReadGroup are it.
func (c *Cache) readSelector(ctx context.Context, sel, kind string, m map[string]entry, key string) ([]*lbplan.Actual, time.Time, error) {
	started := c.now()
	metrics.Refresh(kind)
	found, _, err := c.read.List(ctx, hcloud.LoadBalancerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: sel, PerPage: pageSize}})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list load balancers by %s: %w", sel, err)
	}
	lbs := actuals(found)
	if c.maxAge >= 0 {
		c.mu.Lock()
		keepRead(m, key, lbs, started)
		c.mu.Unlock()
	}
	return lbs, started, nil
}

// keepRead stores lbs, read by a read that started at started, in m[key] unless the CCM wrote
// that entry while the read ran. c.mu must be held.
func keepRead(m map[string]entry, key string, lbs []*lbplan.Actual, started time.Time) {
	if e, ok := m[key]; !ok || !e.written.After(started) {
		m[key] = entry{data: started, written: started, lbs: lbs, known: true}
	}
}

// Put stores lb as the load balancer of the Service uid after the CCM wrote it (nil: it was
// deleted, the Service has none). dataAt is when the data the write was planned from was read
// (what Get or Read returned): the entry is as old as that data, so drift the plan did not see
// is still read again within the max age.
func (c *Cache) Put(uid string, lb *lbplan.Actual, dataAt time.Time) {
	c.put(c.entries, uid, lb, dataAt)
}

// put stores lb (nil: none) in m[key] as written now from data read at dataAt.
func (c *Cache) put(m map[string]entry, key string, lb *lbplan.Actual, dataAt time.Time) {
	if c.maxAge < 0 {
		return
	}
	var lbs []*lbplan.Actual
	if lb != nil {
		lbs = []*lbplan.Actual{lb}
	}
	c.mu.Lock()
	m[key] = entry{data: dataAt, written: c.now(), lbs: lbs, known: true}
	c.mu.Unlock()
}

// Forget makes the next Get of uid read that Service alone (after a failed write, whose effect
// on the load balancer is not known).
func (c *Cache) Forget(uid string) { c.forget(c.entries, uid) }

// forget marks m[key] unknown as of now, so the next lookup reads it.
func (c *Cache) forget(m map[string]entry, key string) {
	if c.maxAge < 0 {
		return
	}
	c.mu.Lock()
	m[key] = entry{written: c.now(), lbs: m[key].lbs} // the lbs stay for All, the last known
	c.mu.Unlock()
}

// All returns every load balancer the cache holds now, without a request: the last list's,
// each Service's replaced by what was written or read alone for it since (a Service forgotten
// after a failed write keeps its last known load balancers), and every group's entry. The
// inventory of policy inputs is built from it (loadbalancer's inventory source). complete is
// false until a list (Get of a stale cache, Refresh) has completed: before, only the Services
// read or written alone are known. The values MUST NOT be modified.
func (c *Cache) All() (lbs []*lbplan.Actual, complete bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byUID, listed, complete := c.lists.Held()
	for uid, e := range c.entries {
		switch {
		case (!complete || !e.written.Before(listed)) && (e.known || e.lbs != nil):
			lbs = append(lbs, e.lbs...)
		default: // older than the list, or forgotten with nothing known since it
			lbs = append(lbs, byUID[uid]...)
		}
	}
	for uid, listed := range byUID {
		if _, ok := c.entries[uid]; !ok {
			lbs = append(lbs, listed...)
		}
	}
	for _, e := range c.groups {
		lbs = append(lbs, e.lbs...)
	}
	return lbs, complete
}

// GetGroup returns the load balancers carrying the labels of group in cluster
// (lbgroup.GroupSelector; more than one is the caller's error to report) and when that data was
// read: from the group's entry while it is at most the max age old, else by ReadGroup.
func (c *Cache) GetGroup(ctx context.Context, group, cluster string) ([]*lbplan.Actual, time.Time, error) {
	if c.maxAge >= 0 {
		c.mu.Lock()
		e, ok := c.groups[lbgroup.GroupSelector(group, cluster)]
		fresh := ok && e.known && c.now().Sub(e.data) <= c.maxAge
		c.mu.Unlock()
		if fresh {
			metrics.Lookup(cache.Hit)
			return e.lbs, e.data, nil
		}
	}
	metrics.Lookup(cache.Miss)
	return c.ReadGroup(ctx, group, cluster)
}

// ReadGroup lists the load balancers carrying the labels of group in cluster now (one
// request), keeps the answer unless the CCM wrote the group's load balancer while it ran, and
// returns it with the time the read started.
func (c *Cache) ReadGroup(ctx context.Context, group, cluster string) ([]*lbplan.Actual, time.Time, error) {
	sel := lbgroup.GroupSelector(group, cluster)
	return c.readSelector(ctx, sel, "group", c.groups, sel)
}

// PutGroup is Put for the load balancer of group in cluster (nil: the group has none).
func (c *Cache) PutGroup(group, cluster string, lb *lbplan.Actual, dataAt time.Time) {
	c.put(c.groups, lbgroup.GroupSelector(group, cluster), lb, dataAt)
}

// ForgetGroup is Forget for the load balancer of group in cluster: the next GetGroup reads it.
func (c *Cache) ForgetGroup(group, cluster string) {
	c.forget(c.groups, lbgroup.GroupSelector(group, cluster))
}

// ListGroups lists the load balancers of every load balancer group of cluster now (label
// selector "<lbplan.LabelGroup>,<lbplan.LabelCluster>=<cluster>", ⌈n/50⌉ requests, counted as
// one refresh of kind "groups"), keeps each group's as its entry (as ReadGroup would, unless
// the CCM wrote that group's load balancer while the list ran) and returns them with the time
// the list started. A group without a load balancer is not in the answer, and its entry is left
// as it is. The sweep of groups without members (loadbalancer.SweepGroups) calls it.
func (c *Cache) ListGroups(ctx context.Context, cluster string) ([]*lbplan.Actual, time.Time, error) {
	started := c.now()
	metrics.Refresh("groups")
	all, err := c.listAll(ctx, lbplan.LabelGroup+","+lbplan.LabelCluster+"="+cluster)
	if err != nil {
		return nil, time.Time{}, err
	}
	if c.maxAge >= 0 {
		byGroup := map[string][]*lbplan.Actual{}
		for _, a := range all {
			sel := lbgroup.GroupSelector(a.Labels[lbplan.LabelGroup], cluster)
			byGroup[sel] = append(byGroup[sel], a)
		}
		c.mu.Lock()
		for sel, lbs := range byGroup {
			keepRead(c.groups, sel, lbs, started)
		}
		c.mu.Unlock()
	}
	return all, started, nil
}

// list lists the labelled load balancers (c.lists: a list already in flight is joined, and a
// caller that gives up does not fail the others) and drops the entries older than the list.
func (c *Cache) list(ctx context.Context) (map[string][]*lbplan.Actual, time.Time, error) {
	byUID, started, err := c.lists.Refresh(ctx)
	if err == nil {
		c.mu.Lock()
		maps.DeleteFunc(c.entries, func(_ string, e entry) bool { return e.written.Before(started) })
		c.mu.Unlock()
	}
	return byUID, started, err
}

// listUIDs lists the labelled load balancers by Service UID (c.lists' Load).
func (c *Cache) listUIDs(ctx context.Context) (map[string][]*lbplan.Actual, error) {
	all, err := c.listAll(ctx, lbplan.LabelServiceUID)
	if err != nil {
		return nil, err
	}
	byUID := map[string][]*lbplan.Actual{}
	for _, a := range all {
		uid := a.Labels[lbplan.LabelServiceUID]
		byUID[uid] = append(byUID[uid], a)
	}
	klog.V(4).InfoS("load balancer cache refreshed", "loadBalancers", len(all))
	return byUID, nil
}

// listAll reads every page of the load balancers matching the label selector sel.
func (c *Cache) listAll(ctx context.Context, sel string) ([]*lbplan.Actual, error) {
	var out []*lbplan.Actual
	for page := 1; ; page++ {
		lbs, resp, err := c.read.List(ctx, hcloud.LoadBalancerListOpts{ListOpts: hcloud.ListOpts{LabelSelector: sel, Page: page, PerPage: pageSize}})
		if err != nil {
			return nil, fmt.Errorf("list load balancers by %s (page %d): %w", sel, page, err)
		}
		out = append(out, actuals(lbs)...)
		if resp == nil || resp.Meta.Pagination == nil || resp.Meta.Pagination.NextPage == 0 || len(lbs) == 0 {
			return out, nil
		}
	}
}

// actuals converts lbs.
func actuals(lbs []*hcloud.LoadBalancer) []*lbplan.Actual {
	out := make([]*lbplan.Actual, 0, len(lbs))
	for _, lb := range lbs {
		out = append(out, lbplan.NewActual(lb))
	}
	return out
}

// Refresh lists every load balancer carrying the UID label now (as a stale Get would: ⌈n/50⌉
// requests, counted as one refresh of kind "list", shared with a list already in flight), keeps
// it as the cache's snapshot, and returns it by Service UID with the time the list started.
// The periodic drift check (loadbalancer.CheckDrift) calls it. The returned map and its
// values MUST NOT be modified.
func (c *Cache) Refresh(ctx context.Context) (map[string][]*lbplan.Actual, time.Time, error) {
	byUID, at, err := c.list(ctx)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("lbcache.Refresh: %w", err)
	}
	return byUID, at, nil
}
