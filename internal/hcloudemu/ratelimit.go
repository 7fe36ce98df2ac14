package hcloudemu

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// bucket is Hetzner's rate limit: a token bucket of limit tokens refilled at
// limit/3600 per second (1/s for the default 3600), computed from the clock.
type bucket struct {
	limit  int
	tokens float64
	last   time.Time
}

func newBucket(limit int, now time.Time) bucket {
	return bucket{limit: limit, tokens: float64(limit), last: now}
}

// take refills the bucket up to now and takes one token if there is one.
func (b *bucket) take(now time.Time) (ok bool, remaining int, reset time.Time) {
	rate := float64(b.limit) / 3600
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(float64(b.limit), b.tokens+el*rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		ok = true
	}
	missing := float64(b.limit) - b.tokens
	reset = now.Add(time.Duration(math.Ceil(missing/rate)) * time.Second)
	return ok, int(b.tokens), reset
}

// rateLimitAllows takes a token and sets the RateLimit-* headers; it reports
// false when the bucket is empty. With the limit off it allows everything
// and sets no headers.
func (e *Emulator) rateLimitAllows(w http.ResponseWriter) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bucket.limit <= 0 {
		return true
	}
	ok, remaining, reset := e.bucket.take(e.now())
	h := w.Header()
	h.Set("RateLimit-Limit", strconv.Itoa(e.bucket.limit))
	h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	return ok
}

// SetRateLimit replaces the rate limit with a full bucket of perHour tokens;
// 0 turns it off.
func (e *Emulator) SetRateLimit(perHour int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rateLimit = perHour
	e.bucket = newBucket(perHour, e.now())
}
