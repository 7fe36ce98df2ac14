// Package servercache is the one shared cache of Hetzner Cloud servers that InstancesV2 and
// Routes read through, so the API cost of node lookups does not grow with the cluster.
//
// In mode all (the default) every server of the project is read with one paginated list
// (GET /servers?page=N&per_page=50, ceil(servers/50) requests) and kept for the max age;
// concurrent lookups share one list; a server missing from a fresh list is looked for again at
// most once per second, so a deleted server cannot cause a storm of lists. Mode one reads
// servers one by one (GET /servers/{id}, GET /servers?name=) and caches each for the max age;
// mode off reads on every lookup.
package servercache

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// MinMissRefreshInterval is the shortest time between two refreshes caused by a server that
// is missing from a cache that is still fresh.
const MinMissRefreshInterval = time.Second

// Metric names. They are part of the operator interface; do not rename them.
var (
	cacheRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "hcloud_ccm_server_cache_requests_total",
		Help:           "Server cache lookups by result: hit (served from the cache) or miss (needed an API read).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	cacheRefreshes = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "hcloud_ccm_server_cache_refreshes_total",
		Help:           "Server cache reads from the API by kind: list (all servers, paginated), id, name.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

var registerOnce sync.Once

// ServerLister reads servers; *hcloud.ServerClient is one. It has no mutating method: the cache
// only reads, and only ccm/executor can reach a method that writes.
type ServerLister interface {
	GetByID(ctx context.Context, id int64) (*hcloud.Server, *hcloud.Response, error)
	GetByName(ctx context.Context, name string) (*hcloud.Server, *hcloud.Response, error)
	All(ctx context.Context) ([]*hcloud.Server, error)
}

// readers is the read side of the API the cache uses.
type readers struct {
	Server ServerLister
}

// Cache looks up Hetzner Cloud servers. It is safe for concurrent use.
//
// Lookups return (nil, nil) when the server does not exist. Returned servers are shared
// between callers and MUST NOT be modified.
type Cache struct {
	client readers
	mode   string
	maxAge time.Duration
	now    func() time.Time

	mu          sync.Mutex
	snap        *snapshot // mode all: the last complete list
	lastRefresh time.Time // start of the last list
	listing     *call     // the list in flight, shared by concurrent lookups
	entries     map[string]entry
	fetching    map[string]*call // mode one: reads in flight by key
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

// call is a read in flight; done is closed when the result is set.
type call struct {
	done   chan struct{}
	snap   *snapshot
	server *hcloud.Server
	err    error
}

// count counts one lookup in our series and in the official CCM's (whose subsystem label this
// shared cache cannot tell: "none").
func (c *Cache) count(result string) {
	cacheRequests.WithLabelValues(result).Inc()
	compatmetrics.ServerCache(compatmetrics.SubsystemUnknown, c.mode, result)
}

// New returns a cache reading servers (&client.Server) with cfg's mode and max age.
//
// # Errors
//
// An unknown mode or a negative max age.
func New(servers ServerLister, cfg config.ServerCache) (*Cache, error) {
	const op = "servercache.New"
	switch cfg.Mode {
	case config.ServerCacheModeAll, config.ServerCacheModeOne, config.ServerCacheModeOff:
	default:
		return nil, fmt.Errorf("%s: invalid mode %q (expect one of: all, one, off)", op, cfg.Mode)
	}
	if cfg.MaxAge < 0 {
		return nil, fmt.Errorf("%s: invalid max age %s (expect 0s or more)", op, cfg.MaxAge)
	}
	registerOnce.Do(func() { legacyregistry.MustRegister(cacheRequests, cacheRefreshes) })
	return &Cache{
		client:   readers{Server: servers},
		mode:     cfg.Mode,
		maxAge:   cfg.MaxAge,
		now:      time.Now,
		entries:  map[string]entry{},
		fetching: map[string]*call{},
	}, nil
}

// ByID returns the server with the given ID, or nil if there is none.
func (c *Cache) ByID(ctx context.Context, id int64) (*hcloud.Server, error) {
	const op = "servercache.ByID"
	s, err := c.lookup(ctx, fmt.Sprintf("id/%d", id),
		func(s *snapshot) *hcloud.Server { return s.byID[id] },
		func(ctx context.Context) (*hcloud.Server, error) {
			s, _, err := c.client.Server.GetByID(ctx, id)
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
			s, _, err := c.client.Server.GetByName(ctx, name)
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
		cacheRefreshes.WithLabelValues("list").Inc()
		all, err := c.client.Server.All(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return all, nil
	}
	c.mu.Lock()
	if c.fresh(c.snap) {
		all := c.snap.all
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

func (c *Cache) lookup(ctx context.Context, key string, find func(*snapshot) *hcloud.Server, fetch func(context.Context) (*hcloud.Server, error)) (*hcloud.Server, error) {
	switch c.mode {
	case config.ServerCacheModeOff:
		c.count(compatmetrics.ResultMiss)
		cacheRefreshes.WithLabelValues(kind(key)).Inc()
		return fetch(ctx)
	case config.ServerCacheModeOne:
		return c.lookupOne(ctx, key, fetch)
	}

	c.mu.Lock()
	if c.fresh(c.snap) {
		if s := find(c.snap); s != nil {
			c.mu.Unlock()
			c.count(compatmetrics.ResultHit)
			return s, nil
		}
		// Missing from a fresh list: a new server, or a deleted one. Look again only if no
		// list started within the last second (or join the one in flight).
		if c.listing == nil && c.now().Sub(c.lastRefresh) < MinMissRefreshInterval {
			c.mu.Unlock()
			c.count(compatmetrics.ResultHit)
			return nil, nil
		}
	}
	c.mu.Unlock()
	c.count(compatmetrics.ResultMiss)
	snap, err := c.list(ctx)
	if err != nil {
		return nil, err
	}
	return find(snap), nil
}

// fresh reports whether s is younger than the max age. c.mu must be held.
func (c *Cache) fresh(s *snapshot) bool {
	return s != nil && c.now().Sub(s.at) <= c.maxAge
}

// list returns a new snapshot, starting one list or joining the one in flight. The list runs
// on its own goroutine without the caller's cancellation, so a caller that gives up does not
// fail the others; each caller waits until its own context ends.
func (c *Cache) list(ctx context.Context) (*snapshot, error) {
	c.mu.Lock()
	cl := c.listing
	if cl == nil {
		cl = &call{done: make(chan struct{})}
		c.listing = cl
		c.lastRefresh = c.now()
		started := c.lastRefresh
		go c.runList(context.WithoutCancel(ctx), cl, started)
	}
	c.mu.Unlock()
	select {
	case <-cl.done:
		return cl.snap, cl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Cache) runList(ctx context.Context, cl *call, started time.Time) {
	cacheRefreshes.WithLabelValues("list").Inc()
	all, err := c.client.Server.All(ctx)
	var snap *snapshot
	if err == nil {
		snap = &snapshot{at: started, all: all, byID: make(map[int64]*hcloud.Server, len(all)), byName: make(map[string]*hcloud.Server, len(all))}
		for _, s := range all {
			snap.byID[s.ID] = s
			snap.byName[s.Name] = s
		}
		klog.V(4).InfoS("server cache refreshed", "servers", len(all))
	}
	c.mu.Lock()
	if snap != nil {
		c.snap = snap
	}
	c.listing = nil
	cl.snap, cl.err = snap, err
	c.mu.Unlock()
	close(cl.done)
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
	cl := c.fetching[key]
	if cl == nil {
		cl = &call{done: make(chan struct{})}
		c.fetching[key] = cl
		go c.runOne(context.WithoutCancel(ctx), key, fetch, cl, c.now())
	}
	c.mu.Unlock()
	c.count(compatmetrics.ResultMiss)
	select {
	case <-cl.done:
		return cl.server, cl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Cache) runOne(ctx context.Context, key string, fetch func(context.Context) (*hcloud.Server, error), cl *call, started time.Time) {
	cacheRefreshes.WithLabelValues(kind(key)).Inc()
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
	cl.server, cl.err = s, err
	c.mu.Unlock()
	close(cl.done)
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
