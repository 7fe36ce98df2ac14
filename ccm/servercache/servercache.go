// Package servercache is the one shared cache of Hetzner Cloud servers that InstancesV2 and
// Routes read through, so the API cost of node lookups does not grow with the cluster.
//
// In mode all (the default) every server of the project is read with one paginated list
// (GET /servers?page=N&per_page=50, ceil(servers/50) requests); concurrent lookups share one
// list. Mode one reads servers one by one (GET /servers/{id}, GET /servers?name=) and caches
// each for the max age; mode off reads on every lookup.
//
// # API budget (mode all)
//
// With a budget of B requests per hour (HCLOUD_API_BUDGET_PER_HOUR), half of it pays for the
// periodic list and half for liveness reads, so the steady cost stays under B however large
// the project grows; what grows instead is the time between lists:
//
//   - A list is kept for max(max age, pages × 1h / (B/2)): with B = 60, 10 minutes per page of
//     50 servers (20 minutes at 500 servers, 80 at 2,000). Lookups of the periodic loops
//     (node status, node labels, routes) are served from it.
//   - A lookup made with a [Live] context (the node lifecycle controller's InstanceExists and
//     InstanceShutdown, asked only for NotReady nodes) wants data at most the max age old (10s
//     by default), as without a budget. When the list is older it reads that one server
//     (GET /servers/{id} or ?name=) if the liveness share has a request left (a bucket of B/2,
//     refilled at B/2 per hour); when it has none, it answers from the older data. So a
//     shutdown or deletion is seen within the max age of the first question while the bucket
//     lasts, and within n × 1h / (B/2) for n NotReady nodes asked about continuously once it
//     is empty.
//   - A server missing from the list (a new server) is read alone while fewer servers than a
//     list has pages were read alone since the last list: up to that many single reads cost no
//     more than one list, so a burst of up to pages new servers costs one request each. The
//     next miss lists again (the break-even rule of renting against buying: a burst of k new
//     servers costs k requests while k ≤ pages, and at most 2 × pages + 1 beyond, which the new
//     list answers for every server created by then). TestCache_missReadsAlone counts the
//     requests. Looking for a missing server again waits at least [MinMissRefreshInterval],
//     except with a [Live] context: a liveness miss always reads that server alone, because
//     "not found" deletes the Node and the list may have started just before the server was
//     created (TestCache_liveMissReadsAlone).
//
// Servers read alone are newer than the list and take precedence over it, in [Cache.All] too.
package servercache

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/cache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/flight"
)

// MinMissRefreshInterval is the shortest time between two refreshes caused by a server that
// is missing from a cache that is still fresh.
const MinMissRefreshInterval = time.Second

// pageSize is the number of servers in one page of a list (hcloud-go's per_page).
const pageSize = 50

// Metric names. They are part of the operator interface; do not rename them.
var (
	// cacheMetrics are hcloud_ccm_server_cache_requests_total{result} and _refreshes_total{kind}.
	cacheMetrics = cache.NewMetrics(metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "hcloud_ccm_server_cache_requests_total",
		Help:           "Server cache lookups by result: hit (served from the cache) or miss (needed an API read).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"}), metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "hcloud_ccm_server_cache_refreshes_total",
		Help:           "Server cache reads from the API by kind: list (all servers, paginated), id, name.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"}))
	budgetDeferred = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "hcloud_ccm_server_cache_budget_deferred_total",
		Help:           "Liveness lookups answered from older data because the liveness half of HCLOUD_API_BUDGET_PER_HOUR was spent.",
		StabilityLevel: metrics.ALPHA,
	})
	listKeep = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_server_cache_list_keep_seconds",
		Help:           "How long the last server list is kept before a lookup lists again: the max age, or longer under HCLOUD_API_BUDGET_PER_HOUR.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// Cache looks up Hetzner Cloud servers. It is safe for concurrent use.
//
// Lookups return (nil, nil) when the server does not exist. Returned servers are shared
// between callers and MUST NOT be modified.
type Cache struct {
	servers *hcloudclient.ServerReader // no write method: the cache only reads
	mode    string
	maxAge  time.Duration
	budget  int // requests per hour; 0: no budget, a list is kept for maxAge
	now     func() time.Time

	lists *cache.Cache[*snapshot] // the last complete list, shared by concurrent lookups

	mu         sync.Mutex
	entries    map[string]entry                        // servers read alone (mode one; mode all: newer than the list)
	fetching   map[string]*flight.Call[*hcloud.Server] // reads of one server in flight by key
	missReads  int                                     // mode all: servers read alone since the list of missFor
	missFor    time.Time                               // the start of the list missReads counts for
	liveTokens float64                                 // mode all: liveness reads left in the budget
	liveAt     time.Time                               // when liveTokens was last refilled
}

// snapshot is one complete list of servers.
type snapshot struct {
	at     time.Time
	all    []*hcloud.Server
	byID   map[int64]*hcloud.Server
	byName map[string]*hcloud.Server
}

// entry is one server read in mode one; server is nil for "does not exist".
type entry struct {
	at     time.Time
	server *hcloud.Server
}

// count counts one lookup in our series and in the official CCM's (whose subsystem label this
// shared cache cannot tell: "none").
func (c *Cache) count(result string) {
	cacheMetrics.Lookup(result)
	compatmetrics.ServerCache(compatmetrics.SubsystemUnknown, c.mode, result)
}

// Options configure [New].
type Options struct {
	// Servers reads the servers (hcloudclient.Conn.Servers).
	Servers *hcloudclient.ServerReader
	// Config is the mode, max age and budget (0: none, lists are kept for the max age only).
	Config config.ServerCache
}

// New returns a cache reading o.Servers with o.Config.
//
// # Errors
//
// A nil Servers, an unknown mode, a negative max age or a negative budget.
func New(o Options) (*Cache, error) {
	const op = "servercache.New"
	cfg := o.Config
	if o.Servers == nil {
		return nil, fmt.Errorf("%s: Options.Servers is required: pass the server reader of hcloudclient.Conn", op)
	}
	switch cfg.Mode {
	case config.ServerCacheModeAll, config.ServerCacheModeOne, config.ServerCacheModeOff:
	default:
		return nil, fmt.Errorf("%s: invalid mode %q (expect one of: all, one, off)", op, cfg.Mode)
	}
	if cfg.MaxAge < 0 {
		return nil, fmt.Errorf("%s: invalid max age %s (expect 0s or more)", op, cfg.MaxAge)
	}
	if cfg.BudgetPerHour < 0 {
		return nil, fmt.Errorf("%s: invalid budget %d requests per hour (expect 0 or more)", op, cfg.BudgetPerHour)
	}
	registerOnce.Do(func() { legacyregistry.MustRegister(budgetDeferred, listKeep) })
	c := &Cache{
		servers:    o.Servers,
		mode:       cfg.Mode,
		maxAge:     cfg.MaxAge,
		budget:     cfg.BudgetPerHour,
		now:        time.Now,
		entries:    map[string]entry{},
		fetching:   map[string]*flight.Call[*hcloud.Server]{},
		liveTokens: float64(cfg.BudgetPerHour) / 2,
	}
	c.lists = cache.New(cache.Options[*snapshot]{Load: c.listAll, MaxAge: cfg.MaxAge, Metrics: cacheMetrics, Kind: "list", Now: func() time.Time { return c.now() }})
	return c, nil
}

// ByID returns the server with the given ID, or nil if there is none.
func (c *Cache) ByID(ctx context.Context, id int64) (*hcloud.Server, error) {
	const op = "servercache.ByID"
	s, err := c.lookup(ctx, fmt.Sprintf("id/%d", id),
		func(s *snapshot) *hcloud.Server { return s.byID[id] },
		func(ctx context.Context) (*hcloud.Server, error) {
			s, _, err := c.servers.GetByID(ctx, id)
			return s, err
		})
	if err != nil {
		return nil, fmt.Errorf("%s: server %d: %w", op, id, err)
	}
	return s, nil
}

// ByName returns the server with the given name, or nil if there is none.
func (c *Cache) ByName(ctx context.Context, name string) (*hcloud.Server, error) {
	const op = "servercache.ByName"
	if name == "" {
		return nil, nil
	}
	s, err := c.lookup(ctx, "name/"+name,
		func(s *snapshot) *hcloud.Server { return s.byName[name] },
		func(ctx context.Context) (*hcloud.Server, error) {
			s, _, err := c.servers.GetByName(ctx, name)
			return s, err
		})
	if err != nil {
		return nil, fmt.Errorf("%s: server %q: %w", op, name, err)
	}
	return s, nil
}

// All returns every server of the project, from one paginated list that is at most max age
// old (in mode one too, since one list is the cheapest way to read every server; in mode off,
// a new list).
func (c *Cache) All(ctx context.Context) ([]*hcloud.Server, error) {
	const op = "servercache.All"
	if c.mode == config.ServerCacheModeOff {
		c.count(compatmetrics.ResultMiss)
		cacheMetrics.Refresh("list")
		all, err := c.servers.All(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return all, nil
	}
	c.mu.Lock()
	if snap := c.snapshot(); c.fresh(snap) {
		all := c.mergedLocked(snap)
		c.mu.Unlock()
		c.count(compatmetrics.ResultHit)
		return all, nil
	}
	c.mu.Unlock()
	c.count(compatmetrics.ResultMiss)
	snap, err := c.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return snap.all, nil
}

// mergedLocked returns the servers of the snapshot with the servers read alone since then put
// over them (a server read as missing is left out). c.mu must be held; snap is not nil.
func (c *Cache) mergedLocked(snap *snapshot) []*hcloud.Server {
	// The newest entry of each server ID wins (its name entry may be older than its ID entry).
	newest := map[int64]entry{}
	for k, e := range c.entries {
		id, ok := entryID(k)
		if e.server != nil {
			id, ok = e.server.ID, true
		}
		if ok && e.at.After(snap.at) && (newest[id].at.IsZero() || e.at.After(newest[id].at)) {
			newest[id] = e
		}
	}
	if len(newest) == 0 {
		return snap.all
	}
	newer := make(map[int64]*hcloud.Server, len(newest))
	for id, e := range newest {
		newer[id] = e.server
	}
	all := make([]*hcloud.Server, 0, len(snap.all)+len(newer))
	for _, s := range snap.all {
		n, ok := newer[s.ID]
		switch {
		case !ok:
			all = append(all, s)
		case n != nil:
			all = append(all, n)
		}
		delete(newer, s.ID)
	}
	for _, n := range newer {
		if n != nil {
			all = append(all, n)
		}
	}
	return all
}

// entryID returns the ID of an "id/N" key.
func entryID(key string) (int64, bool) {
	var id int64
	if _, err := fmt.Sscanf(key, "id/%d", &id); err != nil {
		return 0, false
	}
	return id, true
}

// liveKey marks a context of a liveness lookup.
type liveKey struct{}

// Live returns ctx marked as a liveness lookup: the caller needs to know whether the server
// still exists and runs (the node lifecycle controller's questions about NotReady nodes), so
// the data may be at most the max age old while the budget allows. See the package doc.
func Live(ctx context.Context) context.Context {
	return context.WithValue(ctx, liveKey{}, true)
}

func isLive(ctx context.Context) bool {
	live, _ := ctx.Value(liveKey{}).(bool)
	return live
}

func (c *Cache) lookup(ctx context.Context, key string, find func(*snapshot) *hcloud.Server, fetch func(context.Context) (*hcloud.Server, error)) (*hcloud.Server, error) {
	switch c.mode {
	case config.ServerCacheModeOff:
		c.count(compatmetrics.ResultMiss)
		cacheMetrics.Refresh(kind(key))
		return fetch(ctx)
	case config.ServerCacheModeOne:
		return c.lookupOne(ctx, key, fetch)
	}

	c.mu.Lock()
	s, hit, alone := c.decideLocked(key, find, isLive(ctx) && c.budget > 0)
	if hit {
		c.mu.Unlock()
		c.count(compatmetrics.ResultHit)
		return s, nil
	}
	if alone {
		cl := c.fetchLocked(ctx, key, fetch)
		c.mu.Unlock()
		c.count(compatmetrics.ResultMiss)
		return cl.Wait(ctx)
	}
	c.mu.Unlock()
	c.count(compatmetrics.ResultMiss)
	snap, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	return find(snap), nil
}

// decideLocked decides how mode all answers a lookup of key: from what it holds (hit), by
// reading the one server (alone), or else by a new list. live asks for data at most
// the max age old and may spend the liveness share of the budget. c.mu must be held.
func (c *Cache) decideLocked(key string, find func(*snapshot) *hcloud.Server, live bool) (s *hcloud.Server, hit, alone bool) {
	now, snap := c.now(), c.snapshot()
	maxAge, missAge := c.listAge(snap), MinMissRefreshInterval
	if live {
		maxAge, missAge = c.maxAge, c.maxAge
	}
	e, hasEntry := c.entries[key]
	if hasEntry && snap != nil && !e.at.After(snap.at) {
		hasEntry = false // the list is newer
	}
	if hasEntry {
		age := now.Sub(e.at)
		if (e.server != nil && age <= maxAge) || (e.server == nil && age < missAge) {
			return e.server, true, false
		}
	}
	if snap != nil && now.Sub(snap.at) <= maxAge {
		// A server read as missing after the list is not taken from the list.
		readMissing := hasEntry && e.server == nil
		if s := find(snap); s != nil && !readMissing {
			return s, true, false
		}
		// Missing from fresh data: a new server, or a deleted one. A liveness lookup reads
		// the server alone: the list may have started just before the server was created, and
		// "not found" there deletes the Node (TestCache_liveMissReadsAlone). Others look again
		// only if no list started within MinMissRefreshInterval (or join the one in flight).
		if live {
			return nil, false, true
		}
		if started, inFlight := c.lists.LastLoad(); !inFlight && now.Sub(started) < MinMissRefreshInterval {
			return nil, true, false
		}
		if c.missFor != snap.at { // a new list: count again
			c.missReads, c.missFor = 0, snap.at
		}
		if c.missReads < pages(snap) { // see the package doc: each new server is read once
			c.missReads++
			return nil, false, true
		}
		return nil, false, false
	}
	if !live {
		return nil, false, false
	}
	if c.takeLiveLocked(now) {
		return nil, false, true
	}
	// The liveness share is spent: answer from older data if there is any.
	if hasEntry {
		budgetDeferred.Inc()
		return e.server, true, false
	}
	if snap != nil {
		if s := find(snap); s != nil {
			budgetDeferred.Inc()
			return s, true, false
		}
	}
	return nil, false, true
}

// takeLiveLocked takes one request from the liveness share of the budget (a bucket of
// budget/2, refilled at budget/2 per hour) and reports whether there was one. c.mu must be
// held.
func (c *Cache) takeLiveLocked(now time.Time) bool {
	share := float64(c.budget) / 2
	if !c.liveAt.IsZero() {
		c.liveTokens = min(share, c.liveTokens+now.Sub(c.liveAt).Hours()*share)
	}
	c.liveAt = now
	if c.liveTokens < 1 {
		return false
	}
	c.liveTokens--
	return true
}

// pages returns the number of pages of the list s (at least 1).
func pages(s *snapshot) int {
	if s == nil {
		return 1
	}
	return max(1, (len(s.all)+pageSize-1)/pageSize)
}

// listAge returns how long the list s is kept: the max age, or with a budget the time its
// pages take of half the budget, whichever is longer.
func (c *Cache) listAge(s *snapshot) time.Duration {
	if c.budget == 0 || s == nil {
		return c.maxAge
	}
	return max(c.maxAge, time.Duration(pages(s))*2*time.Hour/time.Duration(c.budget))
}

// fresh reports whether the list s is younger than its [Cache.listAge].
func (c *Cache) fresh(s *snapshot) bool {
	return s != nil && c.now().Sub(s.at) <= c.listAge(s)
}

// snapshot returns the last complete list, nil before the first.
func (c *Cache) snapshot() *snapshot {
	s, _, _ := c.lists.Held()
	return s
}

// list lists the servers (c.lists: a list already in flight is joined, and a caller that gives
// up does not fail the others); in mode all, it drops the servers read alone before the list.
func (c *Cache) list(ctx context.Context) (*snapshot, error) {
	snap, _, err := c.lists.Refresh(ctx)
	if err == nil && c.mode == config.ServerCacheModeAll {
		c.mu.Lock()
		maps.DeleteFunc(c.entries, func(_ string, e entry) bool { return !e.at.After(snap.at) })
		c.mu.Unlock()
	}
	return snap, err
}

// listAll lists the servers and indexes them (c.lists' Load).
func (c *Cache) listAll(ctx context.Context) (*snapshot, error) {
	started, _ := c.lists.LastLoad() // this load's start: no other runs meanwhile
	all, err := c.servers.All(ctx)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{at: started, all: all, byID: make(map[int64]*hcloud.Server, len(all)), byName: make(map[string]*hcloud.Server, len(all))}
	for _, s := range all {
		snap.byID[s.ID] = s
		snap.byName[s.Name] = s
	}
	listKeep.Set(c.listAge(snap).Seconds())
	klog.V(4).InfoS("server cache refreshed", "servers", len(all))
	return snap, nil
}

// lookupOne serves mode one: each server is read and cached on its own. A server that does
// not exist is remembered for MinMissRefreshInterval.
func (c *Cache) lookupOne(ctx context.Context, key string, fetch func(context.Context) (*hcloud.Server, error)) (*hcloud.Server, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		age := c.now().Sub(e.at)
		if (e.server != nil && age <= c.maxAge) || (e.server == nil && age < MinMissRefreshInterval) {
			c.mu.Unlock()
			c.count(compatmetrics.ResultHit)
			return e.server, nil
		}
	}
	cl := c.fetchLocked(ctx, key, fetch)
	c.mu.Unlock()
	c.count(compatmetrics.ResultMiss)
	return cl.Wait(ctx)
}

// fetchLocked starts a read of the one server of key, or joins the one in flight. c.mu must be
// held.
func (c *Cache) fetchLocked(ctx context.Context, key string, fetch func(context.Context) (*hcloud.Server, error)) *flight.Call[*hcloud.Server] {
	cl := c.fetching[key]
	if cl == nil {
		started := c.now()
		cl = flight.Start(ctx, func(ctx context.Context) (*hcloud.Server, error) { return c.runOne(ctx, key, fetch, started) })
		c.fetching[key] = cl
	}
	return cl
}

// runOne reads the one server of key, installs it under both its keys and ends the read in
// flight.
func (c *Cache) runOne(ctx context.Context, key string, fetch func(context.Context) (*hcloud.Server, error), started time.Time) (*hcloud.Server, error) {
	cacheMetrics.Refresh(kind(key))
	s, err := fetch(ctx)
	c.mu.Lock()
	if err == nil {
		c.entries[key] = entry{at: started, server: s}
		if s != nil {
			// Index the server under both keys, so a lookup by the other key is a hit.
			c.entries[fmt.Sprintf("id/%d", s.ID)] = entry{at: started, server: s}
			c.entries["name/"+s.Name] = entry{at: started, server: s}
		}
		c.evictLocked(started)
	}
	delete(c.fetching, key)
	c.mu.Unlock()
	return s, err
}

// evictLocked drops entries that expired long ago, so the map does not grow without bound.
func (c *Cache) evictLocked(now time.Time) {
	for k, e := range c.entries {
		if now.Sub(e.at) > c.maxAge+time.Hour {
			delete(c.entries, k)
		}
	}
}

// kind returns the metric label of a lookup key: "id" or "name".
func kind(key string) string {
	if len(key) > 3 && key[:3] == "id/" {
		return "id"
	}
	return "name"
}
