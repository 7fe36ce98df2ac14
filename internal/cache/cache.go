// Package cache is the CCM's one generic cache: a value read from the Hetzner API, kept for a
// max age and read by one request however many callers want it at once. The server list
// (ccm/servercache), the load balancer list (ccm/lbcache), the load balancer type list
// (ccm/loadbalancer) and the network's routes (ccm/routes) are instances of it.
//
//	types := cache.New(cache.Options[[]*hcloud.LoadBalancerType]{Load: reader.All, MaxAge: time.Hour})
//	list, readAt, err := types.Get(ctx) // at most one request an hour
//
// # Contract
//
//   - Max age: Get answers from the value held while it is at most the max age old, counted
//     from the start of the load that read it; a negative max age loads on every Get (the
//     value is still held for Held). Refresh loads whatever the age.
//   - Concurrent callers share the one load in flight and get its result, value or error
//     (internal/flight); a caller whose context ends gets ctx.Err(), the load goes on.
//   - An error changes nothing held and is not remembered: the next Get loads again.
//   - Own writes: Update changes the value held, and the result of a load in flight, which
//     may have read the API before the write; Invalidate makes the next Get load.
//   - Metrics: with Options.Metrics, a Get counts its requests series {result="hit"|"miss"}
//     and a load its refreshes series {kind=Options.Kind}; Options.Lookups sees each result.
//
// Values are shared between callers and MUST NOT be modified (Update's f returns a new one).
package cache

import (
	"context"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/flight"
)

// Lookup results, the values of the result label.
const (
	Hit  = "hit"
	Miss = "miss"
)

// Metrics are a cache's two series: lookups by result and API reads by kind. Their names are
// part of the operator interface: do not rename them.
type Metrics struct{ requests, refreshes *metrics.CounterVec }

// NewMetrics registers (legacyregistry) and returns a cache's two series: requests, which must
// have the one label "result", and refreshes, the one label "kind". The caller declares them
// (metrics.NewCounterVec with literal options and labels), so that the scan of the declared
// metrics (test/monitoring's TestMetricsExported) finds each name and label where it is declared.
func NewMetrics(requests, refreshes *metrics.CounterVec) *Metrics {
	m := &Metrics{
		requests:  requests,
		refreshes: refreshes,
	}
	legacyregistry.MustRegister(m.requests, m.refreshes)
	return m
}

// Lookup counts one lookup with result Hit or Miss. A nil m counts nothing.
func (m *Metrics) Lookup(result string) {
	if m != nil {
		m.requests.WithLabelValues(result).Inc()
	}
}

// Refresh counts one read from the API of kind. A nil m counts nothing.
func (m *Metrics) Refresh(kind string) {
	if m != nil {
		m.refreshes.WithLabelValues(kind).Inc()
	}
}

// Options configure [New].
type Options[T any] struct {
	// Load reads the value from the API. It runs on a goroutine of its own, with the context of
	// the caller that started it without its cancellation (flight.Start).
	Load func(context.Context) (T, error)
	// MaxAge is how old a value Get answers with may be; negative: every Get loads.
	MaxAge time.Duration
	// Metrics counts lookups and loads (nil: not counted); Kind is the kind label of a load.
	Metrics *Metrics
	Kind    string
	// Lookups, if set, is told the result of each Get (Hit or Miss).
	Lookups func(result string)
	// Now is the clock (nil: time.Now); tests pass one they move.
	Now func() time.Time
}

// Cache holds one value read by Options.Load. It is safe for concurrent use.
type Cache[T any] struct {
	o Options[T]

	mu      sync.Mutex
	val     T
	held    bool      // a load has succeeded: val is what it read, with the Updates since
	at      time.Time // the start of the load that read val; zero: the next Get loads
	started time.Time // the start of the last load, also of one in flight or one that failed
	loading *flight.Call[loaded[T]]
	updates []func(T) T // the Updates made while loading, replayed on its result
}

// loaded is the result of one load: the value and the start of the load.
type loaded[T any] struct {
	val T
	at  time.Time
}

// New returns a cache that holds nothing yet: the first Get loads.
func New[T any](o Options[T]) *Cache[T] {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cache[T]{o: o}
}

// MaxAge returns Options.MaxAge.
func (c *Cache[T]) MaxAge() time.Duration { return c.o.MaxAge }

// Get returns the value and the start of the load that read it: the value held while it is at
// most the max age old (a hit), else the result of a load (a miss; Refresh).
func (c *Cache[T]) Get(ctx context.Context) (T, time.Time, error) {
	c.mu.Lock()
	v, at, fresh := c.val, c.at, !c.at.IsZero() && c.o.Now().Sub(c.at) <= c.o.MaxAge
	c.mu.Unlock()
	result := Miss
	if fresh {
		result = Hit
	}
	c.o.Metrics.Lookup(result)
	if c.o.Lookups != nil {
		c.o.Lookups(result)
	}
	if fresh {
		return v, at, nil
	}
	return c.Refresh(ctx)
}

// Refresh loads the value now, or joins the load in flight, and returns its result: the value
// and the start of the load, or its error (nothing held changes then). A caller whose ctx
// ends first gets ctx.Err(); the load goes on.
func (c *Cache[T]) Refresh(ctx context.Context) (T, time.Time, error) {
	c.mu.Lock()
	if c.loading == nil {
		started := c.o.Now()
		c.started, c.updates = started, nil
		c.loading = flight.Start(ctx, func(ctx context.Context) (loaded[T], error) { return c.load(ctx, started) })
	}
	l := c.loading
	c.mu.Unlock()
	r, err := l.Wait(ctx)
	return r.val, r.at, err
}

// load runs Options.Load, holds its value with the Updates made meanwhile, and ends the load in
// flight.
func (c *Cache[T]) load(ctx context.Context, started time.Time) (loaded[T], error) {
	c.o.Metrics.Refresh(c.o.Kind)
	v, err := c.o.Load(ctx)
	c.mu.Lock()
	if err == nil {
		for _, f := range c.updates {
			v = f(v)
		}
		c.val, c.held, c.at = v, true, started
	}
	c.loading, c.updates = nil, nil
	c.mu.Unlock()
	return loaded[T]{v, started}, err
}

// Held returns the value held, whatever its age, and the start of the load that read it (zero
// after Invalidate), without a request; ok is false before the first load succeeded.
func (c *Cache[T]) Held() (v T, at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val, c.at, c.held
}

// LastLoad returns the start of the last load (zero before the first; also of a load that
// failed or is in flight) and whether one is in flight.
func (c *Cache[T]) LastLoad() (started time.Time, inFlight bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started, c.loading != nil
}

// Update replaces the value held with f of it (the CCM's own write, which the API answered),
// keeping its age, and applies f to the result of the load in flight too. f gets the zero T
// when nothing is held, and MUST NOT modify its argument.
func (c *Cache[T]) Update(f func(T) T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.val = f(c.val)
	if c.loading != nil {
		c.updates = append(c.updates, f)
	}
}

// Invalidate makes the next Get load; Held keeps the value.
func (c *Cache[T]) Invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = time.Time{}
}
