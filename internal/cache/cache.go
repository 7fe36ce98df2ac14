// Package cache is the CCM's one generic cache: a value read from the Hetzner API (a list of
// load balancers or servers, the load balancer types, a network's routes), kept for a max age
// and read by one request however many callers want it at once. The CCM's caches are instances
// of it: ccm/lbcache and ccm/servercache (their lists), the load balancer type list and the
// inventory start of ccm/loadbalancer, and the network of ccm/routes.
//
// Here's an example:
//
//	types := cache.New(cache.Options[[]*hcloud.LoadBalancerType]{
//		Load:   reader.All, // one paginated list
//		MaxAge: time.Hour,
//	})
//	list, readAt, err := types.Get(ctx) // a request at most once an hour
//
// # Contract
//
//   - Max age: [Cache.Get] answers from the value held while it is at most the max age old,
//     measured from the start of the load that read it (so a change made while the load ran
//     is seen within the max age too). A negative max age makes every Get load; the value is
//     still held for [Cache.Held]. [Cache.Refresh] loads whatever the age.
//   - Concurrent callers: one load runs at a time. Callers that need a load while one is in
//     flight wait for it and get its result (internal/flight): its value, or its error. A
//     caller whose context ends stops waiting with ctx.Err(); the load goes on for the others.
//   - Errors: a failed load changes nothing held and is not remembered: every caller waiting
//     for it gets the error, and the next Get loads again.
//   - Own writes: [Cache.Update] changes the value held (the CCM's own successful writes) and
//     is replayed on the result of a load in flight, which may have read the API before the
//     write; [Cache.Invalidate] makes the next Get load (after a write whose effect is unknown).
//   - Metrics: with Options.Metrics, every Get counts one lookup, by result hit or miss, in
//     <name>_requests_total{result}, and every load counts one read, by Options.Kind, in
//     <name>_refreshes_total{kind}; Options.Lookups sees each lookup's result too (the
//     official CCM's series). Caches that decide hits themselves count with [Metrics.Lookup]
//     and [Metrics.Refresh].
//
// The values held are shared between callers and MUST NOT be modified: Update's function
// returns a new value.
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
// part of the operator interface; an instance MUST NOT change them.
type Metrics struct {
	requests, refreshes *metrics.CounterVec
	once                sync.Once
}

// NewMetrics returns the series <name>_requests_total{result} and <name>_refreshes_total{kind}
// with their help texts. They are registered (legacyregistry) by the first [New] that uses
// them, or by [Metrics.Register].
func NewMetrics(name, requestsHelp, refreshesHelp string) *Metrics {
	return &Metrics{
		requests:  metrics.NewCounterVec(&metrics.CounterOpts{Name: name + "_requests_total", Help: requestsHelp, StabilityLevel: metrics.ALPHA}, []string{"result"}),
		refreshes: metrics.NewCounterVec(&metrics.CounterOpts{Name: name + "_refreshes_total", Help: refreshesHelp, StabilityLevel: metrics.ALPHA}, []string{"kind"}),
	}
}

// Register registers the series once; later calls do nothing. A nil m does nothing.
func (m *Metrics) Register() {
	if m != nil {
		m.once.Do(func() { legacyregistry.MustRegister(m.requests, m.refreshes) })
	}
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
	ended   chan struct{}
	endOnce sync.Once
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
	o.Metrics.Register()
	return &Cache[T]{o: o, ended: make(chan struct{})}
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
	c.endOnce.Do(func() { close(c.ended) })
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

// Ended is closed when the first load has ended, with or without success.
func (c *Cache[T]) Ended() <-chan struct{} { return c.ended }

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
