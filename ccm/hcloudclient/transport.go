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
// It reads RateLimit-Limit and RateLimit-Remaining from every response. While the remaining
// budget is at or above the reserve (a fraction of the limit), requests pass unchanged. Below
// it, requests are spaced by the refill interval (one hour divided by the limit, 1s for the
// default 3600 per hour), so the CCM settles at the refill rate instead of running into 429
// and retrying into the wall. Between responses the remaining budget is estimated by counting
// requests, so a burst of concurrent requests is paced too.
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

	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	mu        sync.Mutex
	known     bool // a response carried rate limit headers
	limit     int
	remaining int
	next      time.Time // earliest start of the next paced request
}

// NewTransport returns a Transport over base that keeps reserve (a fraction from 0 to 1) of
// the rate limit in reserve.
func NewTransport(base http.RoundTripper, reserve float64) *Transport {
	registerMetrics()
	return &Transport{base: base, reserve: reserve, now: time.Now, sleep: sleepContext}
}

// RoundTrip implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if d := t.delay(); d > 0 {
		rateLimitDelay.Add(d.Seconds())
		if err := t.sleep(req.Context(), d); err != nil {
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

// delay reserves a start time for one request and returns how long to wait for it.
func (t *Transport) delay() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.known || t.limit <= 0 {
		return 0
	}
	low := float64(t.remaining) < t.reserve*float64(t.limit)
	if t.remaining > 0 {
		t.remaining-- // estimate until the next response says better
	}
	if !low {
		return 0
	}
	now := t.now()
	interval := time.Hour / time.Duration(t.limit)
	start := t.next
	if start.Before(now) {
		start = now
	}
	t.next = start.Add(interval)
	return start.Sub(now)
}

// observe records the rate limit headers of a response.
func (t *Transport) observe(h http.Header) {
	limit, err1 := strconv.Atoi(h.Get("RateLimit-Limit"))
	remaining, err2 := strconv.Atoi(h.Get("RateLimit-Remaining"))
	if err1 != nil || err2 != nil || limit <= 0 {
		return
	}
	t.mu.Lock()
	t.known, t.limit, t.remaining = true, limit, max(remaining, 0)
	t.mu.Unlock()
	rateLimitLimit.Set(float64(limit))
	rateLimitRemaining.Set(float64(remaining))
}

func sleepContext(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
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
