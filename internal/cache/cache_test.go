package cache_test

import (
	"k8s.io/component-base/metrics"

	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/cache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// source is a Load that counts its calls and answers with its next value or error.
type source struct {
	mu    sync.Mutex
	calls int
	val   int
	err   error
	gate  chan struct{} // non-nil: each load waits for it
}

func (s *source) load(context.Context) (int, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.val, s.err
}

func (s *source) set(val int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.val, s.err = val, err
}

// clock is a clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// TestCache_Get: each step is a call on one cache over a source; the table says what the cache
// answers and how many loads it made in all.
func TestCache_Get(t *testing.T) {
	type step struct {
		do    string // get, refresh, advance, invalidate, update (adds 100), set (the API's value), fail
		d     time.Duration
		val   int
		want  int
		err   bool
		loads int
	}
	tests := []struct {
		name   string
		maxAge time.Duration
		steps  []step
	}{
		{"a value is read once and served for the max age", time.Minute, []step{
			{do: "set", val: 1}, {do: "get", want: 1, loads: 1},
			{do: "set", val: 2}, {do: "advance", d: time.Minute}, {do: "get", want: 1, loads: 1},
			{do: "advance", d: time.Second}, {do: "get", want: 2, loads: 2},
		}},
		{"a negative max age loads on every Get", -1, []step{
			{do: "set", val: 1}, {do: "get", want: 1, loads: 1}, {do: "get", want: 1, loads: 2},
		}},
		{"Refresh loads whatever the age", time.Hour, []step{
			{do: "set", val: 1}, {do: "get", want: 1, loads: 1},
			{do: "set", val: 2}, {do: "refresh", want: 2, loads: 2}, {do: "get", want: 2, loads: 2},
		}},
		{"an error is every caller's and not remembered: the next Get loads", time.Hour, []step{
			{do: "fail"}, {do: "get", err: true, loads: 1}, {do: "get", err: true, loads: 2},
			{do: "set", val: 3}, {do: "get", want: 3, loads: 3}, {do: "get", want: 3, loads: 3},
		}},
		{"a failed load keeps what is held, the next Get loads again", time.Minute, []step{
			{do: "set", val: 1}, {do: "get", want: 1, loads: 1}, {do: "advance", d: 2 * time.Minute},
			{do: "fail"}, {do: "get", err: true, loads: 2}, {do: "held", want: 1, loads: 2},
		}},
		{"Invalidate makes the next Get load", time.Hour, []step{
			{do: "set", val: 1}, {do: "get", want: 1, loads: 1}, {do: "set", val: 2},
			{do: "invalidate"}, {do: "held", want: 1, loads: 1}, {do: "get", want: 2, loads: 2},
		}},
		{"Update changes the value held, keeping its age", time.Minute, []step{
			{do: "set", val: 1}, {do: "get", want: 1, loads: 1}, {do: "update"}, {do: "get", want: 101, loads: 1},
			{do: "advance", d: 2 * time.Minute}, {do: "get", want: 1, loads: 2},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, clk := &source{}, &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			c := cache.New(cache.Options[int]{Load: src.load, MaxAge: tc.maxAge, Now: clk.Now})
			for i, st := range tc.steps {
				var got int
				var err error
				switch st.do {
				case "set":
					src.set(st.val, nil)
				case "fail":
					src.set(0, errors.New("API down"))
				case "advance":
					clk.advance(st.d)
				case "invalidate":
					c.Invalidate()
				case "update":
					c.Update(func(v int) int { return v + 100 })
				case "get":
					got, _, err = c.Get(t.Context())
				case "refresh":
					got, _, err = c.Refresh(t.Context())
				case "held":
					got, _, _ = c.Held()
				}
				if (err != nil) != st.err {
					t.Fatalf("step %d (%s): err = %v, want error %v", i, st.do, err, st.err)
				}
				if st.do == "get" || st.do == "refresh" || st.do == "held" {
					if got != st.want || src.calls != st.loads {
						t.Fatalf("step %d (%s) = %d after %d loads, want %d after %d", i, st.do, got, src.calls, st.want, st.loads)
					}
				}
			}
		})
	}
}

// TestHammerCache: callers that arrive while a load is in flight share it, an Update made
// meanwhile is applied to its result, and a caller that gives up does not fail the others.
func TestHammerCache(t *testing.T) {
	src := &source{val: 1, gate: make(chan struct{})}
	c := cache.New(cache.Options[int]{Load: src.load, MaxAge: time.Hour})
	const callers = 50
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for range callers {
		wg.Go(func() {
			if v, _, err := c.Get(t.Context()); err != nil || v != 11 {
				wrong.Add(1)
			}
		})
	}
	gaveUp, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.Get(gaveUp); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with an ended context = %v, want context.Canceled", err)
	}
	for { // every caller waits on the one load
		if _, inFlight := c.LastLoad(); inFlight {
			break
		}
		time.Sleep(time.Millisecond)
	}
	c.Update(func(v int) int { return v + 10 }) // a write while the load is in flight
	time.Sleep(10 * time.Millisecond)
	close(src.gate)
	wg.Wait()
	if src.calls != 1 || wrong.Load() != 0 {
		t.Errorf("%d loads, %d callers with another answer than 11; want 1 load and every caller 11", src.calls, wrong.Load())
	}
}

// testMetrics are registered once per test binary (go test -count=2 runs TestMetrics twice).
var testMetrics = cache.NewMetrics(metrics.NewCounterVec(&metrics.CounterOpts{Name: "hcloud_ccm_test_cache_requests_total", Help: "Test lookups."}, []string{"result"}), metrics.NewCounterVec(&metrics.CounterOpts{Name: "hcloud_ccm_test_cache_refreshes_total", Help: "Test reads."}, []string{"kind"}))

// TestMetrics: Get counts its result, a load counts its kind, Lookups sees each result.
func TestMetrics(t *testing.T) {
	m := testMetrics
	hits := testutil.Metric(t, "hcloud_ccm_test_cache_requests_total", map[string]string{"result": cache.Hit})
	misses := testutil.Metric(t, "hcloud_ccm_test_cache_requests_total", map[string]string{"result": cache.Miss})
	lists := testutil.Metric(t, "hcloud_ccm_test_cache_refreshes_total", map[string]string{"kind": "list"})
	var results []string
	src := &source{val: 1}
	c := cache.New(cache.Options[int]{Load: src.load, MaxAge: time.Hour, Metrics: m, Kind: "list", Lookups: func(r string) { results = append(results, r) }})
	for range 3 {
		if _, _, err := c.Get(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got := fmt.Sprint(
		testutil.Metric(t, "hcloud_ccm_test_cache_requests_total", map[string]string{"result": cache.Hit})-hits,
		testutil.Metric(t, "hcloud_ccm_test_cache_requests_total", map[string]string{"result": cache.Miss})-misses,
		testutil.Metric(t, "hcloud_ccm_test_cache_refreshes_total", map[string]string{"kind": "list"})-lists,
		results)
	if want := "2 1 1 [miss hit hit]"; got != want {
		t.Errorf("hits, misses, lists, lookups = %s, want %s", got, want)
	}
}
