package hcloudclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// budgetServer answers every request with the given limit and a remaining count that drops
// by one per request.
func budgetServer(t *testing.T, limit, remaining int) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		remaining--
		r := remaining
		mu.Unlock()
		w.Header().Set("RateLimit-Limit", strconv.Itoa(limit))
		w.Header().Set("RateLimit-Remaining", strconv.Itoa(r))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fakeTime is the transport's clock: a sleep records its duration and moves the clock by it
// (or by at most timeout, then fails like a request whose HTTP timeout ended while held back).
type fakeTime struct {
	mu      sync.Mutex
	now     time.Time
	timeout time.Duration // 0: sleeps always complete
	sleeps  []time.Duration
}

func (f *fakeTime) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }

func (f *fakeTime) advance(d time.Duration) { f.mu.Lock(); defer f.mu.Unlock(); f.now = f.now.Add(d) }

func (f *fakeTime) install(tr *Transport) {
	tr.now = f.Now
	tr.sleep = func(ctx context.Context, d time.Duration, _ <-chan struct{}) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sleeps = append(f.sleeps, d)
		if f.timeout > 0 && d > f.timeout {
			f.now = f.now.Add(f.timeout)
			return context.DeadlineExceeded
		}
		f.now = f.now.Add(d)
		return nil
	}
}

func get(t *testing.T, tr http.RoundTripper, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

func TestTransport_pacing(t *testing.T) {
	tests := []struct {
		name       string
		limit      int
		remaining  int // before the first request
		requests   int
		wantSleeps []time.Duration
	}{
		{
			name:      "a budget above the reserve is not paced",
			limit:     3600,
			remaining: 3600,
			requests:  5,
		},
		{
			name:      "below the reserve requests are spaced by the refill interval of 1s",
			limit:     3600,
			remaining: 300,
			requests:  4,
			// The first request learns the budget; the second starts at once; each further one
			// waits one refill interval after the previous.
			wantSleeps: []time.Duration{time.Second, time.Second},
		},
		{
			name:       "the refill interval follows the limit",
			limit:      7200,
			remaining:  10,
			requests:   3,
			wantSleeps: []time.Duration{500 * time.Millisecond},
		},
		{
			name:      "pacing starts once the budget falls below the reserve",
			limit:     100,
			remaining: 12, // the reserve is 10; replies say 12, 11, 10, 9, ...
			requests:  6,
			// Request 5 is the first to see 9 (below 10) and takes the first slot at once;
			// request 6 waits one refill interval (1h/100).
			wantSleeps: []time.Duration{36 * time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := budgetServer(t, tc.limit, tc.remaining+1)
			tr := newTransport(http.DefaultTransport, DefaultReserve)
			ft := &fakeTime{now: time.Unix(1000, 0)}
			ft.install(tr)
			for range tc.requests {
				get(t, tr, srv.URL+"/v1/servers")
			}
			if diff := cmp.Diff(tc.wantSleeps, ft.sleeps); diff != "" {
				t.Errorf("sleeps mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransport_contextEndsWhileHeldBack(t *testing.T) {
	srv := budgetServer(t, 3600, 1)
	tr := newTransport(http.DefaultTransport, DefaultReserve)
	get(t, tr, srv.URL) // learns remaining 0
	get(t, tr, srv.URL) // first paced slot: no wait

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) { //nolint:bodyclose // no response: the context ended
		t.Fatalf("RoundTrip() error = %v, want context.Canceled", err)
	}
}

// TestTransport_estimate: requests sent before any reply arrives count the budget down, so a
// concurrent burst is paced too: below the reserve one request per refill interval goes.
func TestTransport_estimate(t *testing.T) {
	tr := newTransport(http.DefaultTransport, DefaultReserve)
	ft := &fakeTime{now: time.Unix(1000, 0)}
	ft.install(tr)
	tr.observe(http.Header{"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"12"}})
	var got []time.Duration
	for range 6 {
		d, _ := tr.delay()
		got = append(got, d)
	}
	ft.advance(36 * time.Second)
	for range 2 {
		d, _ := tr.delay()
		got = append(got, d)
	}
	// 12, 11 and 10 are not below the reserve of 10; 9 takes the first paced slot; the others
	// wait for the next one, 36s later, which only one of them gets.
	want := []time.Duration{0, 0, 0, 0, 36 * time.Second, 36 * time.Second, 0, 36 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays mismatch (-want +got):\n%s", diff)
	}
}

// TestTransport_heldBackRequestsHoldNoSlots: requests that time out while held back do not
// push the next request further out; it waits one refill interval at most.
func TestTransport_heldBackRequestsHoldNoSlots(t *testing.T) {
	tr := newTransport(http.DefaultTransport, DefaultReserve)
	ft := &fakeTime{now: time.Unix(1000, 0), timeout: 10 * time.Second}
	ft.install(tr)
	tr.observe(http.Header{"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"0"}})
	if d, _ := tr.delay(); d != 0 {
		t.Fatalf("first paced request waits %s, want 0", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for range 50 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/v1/servers", nil)
		if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) { //nolint:bodyclose // no response: the context ended
			t.Fatalf("RoundTrip() with an ended context = %v, want context.Canceled", err)
		}
	}
	ft.advance(20 * time.Second)
	if d, _ := tr.delay(); d != 16*time.Second {
		t.Fatalf("delay after 50 abandoned requests = %s, want the rest of one refill interval (16s)", d)
	}
}

// TestTransport_neverWaitsPastReset: a request held back waits until RateLimit-Reset at most;
// from then on the budget counts as full.
func TestTransport_neverWaitsPastReset(t *testing.T) {
	tr := newTransport(http.DefaultTransport, DefaultReserve)
	ft := &fakeTime{now: time.Unix(1000, 0)}
	ft.install(tr)
	tr.observe(http.Header{"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"1004"}})
	var got []time.Duration
	for range 2 {
		d, _ := tr.delay()
		got = append(got, d)
	}
	ft.advance(5 * time.Second)
	for range 3 {
		d, _ := tr.delay()
		got = append(got, d)
	}
	// The first paced request goes; the next would wait 36s but the reset is 5s away (the
	// header's whole second rounded up); after
	// the reset the budget counts as full (100, reserve 10), so requests go unpaced.
	want := []time.Duration{0, 5 * time.Second, 0, 0, 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays mismatch (-want +got):\n%s", diff)
	}
}

// TestTransport_answerEndsPacing: an answer that reports enough budget wakes a request held
// back for a long refill interval (6 minutes at 10 per hour), with the real clock.
func TestTransport_answerEndsPacing(t *testing.T) {
	srv := budgetServer(t, 10, 11)
	tr := newTransport(http.DefaultTransport, DefaultReserve)
	tr.observe(http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"0"}})
	get(t, tr, srv.URL) // takes the first paced slot
	tr.observe(http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"0"}})
	done := make(chan error)
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the request was not held back (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	tr.observe(http.Header{"Ratelimit-Limit": {"10"}, "Ratelimit-Remaining": {"10"}})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request is still held back after an answer reported a full budget")
	}
}
