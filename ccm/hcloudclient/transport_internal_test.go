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

// fakeTime makes the transport's clock stand still and records its sleeps.
type fakeTime struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (f *fakeTime) install(tr *Transport) {
	tr.now = func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
	tr.sleep = func(ctx context.Context, d time.Duration) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sleeps = append(f.sleeps, d)
		return ctx.Err()
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
			// The first request learns the budget; the second starts at once and reserves the
			// next slot; the others wait for their slots (the fake clock stands still).
			wantSleeps: []time.Duration{time.Second, 2 * time.Second},
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
			tr := NewTransport(http.DefaultTransport, DefaultReserve)
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
	tr := NewTransport(http.DefaultTransport, DefaultReserve)
	get(t, tr, srv.URL) // learns remaining 0
	get(t, tr, srv.URL) // first paced slot: no wait

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip() error = %v, want context.Canceled", err)
	}
}

// TestTransport_estimate: requests sent before any reply arrives count the budget down, so a
// concurrent burst is paced too.
func TestTransport_estimate(t *testing.T) {
	tr := NewTransport(http.DefaultTransport, DefaultReserve)
	ft := &fakeTime{now: time.Unix(1000, 0)}
	ft.install(tr)
	tr.observe(http.Header{"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"12"}})
	var got []time.Duration
	for range 6 {
		got = append(got, tr.delay())
	}
	// 12, 11 and 10 are not below the reserve of 10; 9 takes the first slot; then 36s each.
	want := []time.Duration{0, 0, 0, 0, 36 * time.Second, 72 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays mismatch (-want +got):\n%s", diff)
	}
}
