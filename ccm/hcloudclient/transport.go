package hcloudclient

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// DefaultReserve is the fraction of the rate limit kept in reserve: below it, requests are
// paced at the refill rate.
const DefaultReserve = 0.1

// Metric names. They are part of the operator interface; do not rename them.
var (
	apiRequests = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "hcloud_ccm_api_requests_total",
		Help:           "Requests to the Hetzner Cloud API by method, endpoint (IDs replaced by {id}) and HTTP status code (\"error\" when no response arrived).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"method", "endpoint", "code"})
	rateLimitRemaining = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_api_ratelimit_remaining",
		Help:           "RateLimit-Remaining of the last Hetzner Cloud API response: requests left in the project's budget.",
		StabilityLevel: metrics.ALPHA,
	})
	rateLimitLimit = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "hcloud_ccm_api_ratelimit_limit",
		Help:           "RateLimit-Limit of the last Hetzner Cloud API response: the project's budget per hour.",
		StabilityLevel: metrics.ALPHA,
	})
	rateLimitDelay = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "hcloud_ccm_api_ratelimit_delay_seconds_total",
		Help:           "Time requests to the Hetzner Cloud API were held back because the rate limit ran low.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(apiRequests, rateLimitRemaining, rateLimitLimit, rateLimitDelay)
	})
}

// Transport is an [http.RoundTripper] that spends the Hetzner Cloud rate limit carefully.
//
// It reads RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (the unix time at which the
// budget is full again) from every response. While the remaining budget is at or above the
// reserve (a fraction of the limit), requests pass unchanged. Below it, requests are spaced by
// the refill interval (one hour divided by the limit, 1s for the default 3600 per hour), so the
// CCM settles at the refill rate instead of running into 429 and retrying into the wall.
// Between responses the remaining budget is estimated by counting requests, so a burst of
// concurrent requests is paced too.
//
// Pacing holds no reservations: a request that is held back waits for the next free slot and
// gives nothing back when its context ends, so requests that time out or are retried while held
// back cannot push later requests into the future. Every response with rate limit headers
// replaces the estimate and wakes the held-back requests to decide again, so pacing ends with
// the first answer that reports enough budget. No request waits past the reset the API
// announced: from then on the budget counts as full until the next answer says otherwise.
//
// It counts requests in hcloud_ccm_api_requests_total{method,endpoint,code} and exposes the
// budget as hcloud_ccm_api_ratelimit_remaining and _limit, and the time held back as
// hcloud_ccm_api_ratelimit_delay_seconds_total (registered in the component-base legacy
// registry).
//
// A request whose context ends while it is held back returns the context's error.
type Transport struct {
	base    http.RoundTripper
	reserve float64

	now func() time.Time
	// sleep waits d, or until wake is closed or ctx ends (then it returns ctx's error).
	sleep func(ctx context.Context, d time.Duration, wake <-chan struct{}) error

	mu        sync.Mutex
	known     bool // a response carried rate limit headers
	limit     int
	remaining int           // estimate: the last answer's value minus the requests sent since
	reset     time.Time     // when the API said the budget is full again; zero when unknown
	lastPaced time.Time     // start of the last request sent while the budget was low
	changed   chan struct{} // closed and replaced when an answer updates the budget
}

// newTransport returns a Transport over base that keeps reserve (a fraction from 0 to 1) of
// the rate limit in reserve.
func newTransport(base http.RoundTripper, reserve float64) *Transport {
	registerMetrics()
	return &Transport{base: base, reserve: reserve, now: time.Now, sleep: sleepContext, changed: make(chan struct{})}
}

// RoundTrip implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		d, wake := t.delay()
		if d <= 0 {
			break
		}
		start := t.now()
		err := t.sleep(req.Context(), d, wake)
		rateLimitDelay.Add(t.now().Sub(start).Seconds())
		if err != nil {
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	code := "error"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
		t.observe(resp.Header)
	}
	apiRequests.WithLabelValues(req.Method, Endpoint(req.URL.Path), code).Inc()
	return resp, err
}

// delay decides whether one request may start now. It returns 0 when it may (and counts it
// against the estimate), or how long to wait at most before asking again, with a channel that
// is closed when an answer changes the budget earlier.
func (t *Transport) delay() (time.Duration, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.known || t.limit <= 0 {
		return 0, nil
	}
	now := t.now()
	if !t.reset.IsZero() && !now.Before(t.reset) {
		// The API announced the budget to be full by now.
		t.remaining, t.reset = t.limit, time.Time{}
	}
	if float64(t.remaining) >= t.reserve*float64(t.limit) {
		t.take()
		return 0, nil
	}
	slot := t.lastPaced.Add(time.Hour / time.Duration(t.limit))
	if !slot.After(now) {
		t.lastPaced = now
		t.take()
		return 0, nil
	}
	d := slot.Sub(now)
	if !t.reset.IsZero() {
		d = min(d, t.reset.Sub(now))
	}
	return d, t.changed
}

// take counts one request against the estimate until the next answer says better.
func (t *Transport) take() {
	if t.remaining > 0 {
		t.remaining--
	}
}

// observe records the rate limit headers of a response and wakes held-back requests.
func (t *Transport) observe(h http.Header) {
	limit, err1 := strconv.Atoi(h.Get("RateLimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("RateLimit-Remaining"))
	if err1 != nil || err2 != nil || limit <= 0 {
		return
	}
	var reset time.Time
	if unix, err := strconv.ParseInt(h.Get("RateLimit-Reset"), 10, 64); err == nil && unix > 0 {
		reset = time.Unix(unix+1, 0) // whole seconds, rounded down: the budget may be full up to 1 s later
	}
	t.mu.Lock()
	t.known, t.limit, t.remaining, t.reset = true, limit, max(remaining, 0), reset
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	rateLimitLimit.Set(float64(limit))
	rateLimitRemaining.Set(float64(remaining))
}

func sleepContext(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Endpoint returns path with every numeric segment replaced by {id}, so metrics have one
// series per endpoint, not per resource: /v1/servers/42 → /v1/servers/{id}.
func Endpoint(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}
