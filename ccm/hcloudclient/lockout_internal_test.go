package hcloudclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestTransport_noLockoutAfter429Storm reproduces the lockout of issue 10: at 100 requests per
// hour (a 36 s refill interval), another client empties the project's budget, and the CCM keeps
// sending requests whose HTTP timeout (10 s) is shorter than the refill interval, as a busy
// controller with several workers does. The emulator and the transport share one fake clock.
//
// Pacing must keep requests reaching the API at about the refill rate, never hold one back
// longer than the reset the API announced, and end once the budget is back.
func TestTransport_noLockoutAfter429Storm(t *testing.T) {
	ft := &fakeTime{now: time.Unix(1_800_000_000, 0), timeout: 10 * time.Second}
	emu := hcloudemu.New(hcloudemu.WithRateLimit(100), hcloudemu.WithClock(ft))
	srv := httptest.NewServer(emu.Handler())
	t.Cleanup(srv.Close)
	tr := newTransport(http.DefaultTransport, DefaultReserve)
	ft.install(tr)

	send := func(rt http.RoundTripper) (int, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/v1/locations", nil)
		req.Header.Set("Authorization", "Bearer "+emu.Token())
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Another client of the project spends the whole budget.
	for range 100 {
		if code, err := send(http.DefaultTransport); err != nil || code != http.StatusOK {
			t.Fatalf("draining the budget: %d, %v", code, err)
		}
	}

	// Two hours of CCM traffic: 1000 attempts, each held back at most its 10 s timeout.
	reached, tooMany, heldBackTimeouts := 0, 0, 0
	for range 1000 {
		code, err := send(tr)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			heldBackTimeouts++
		case err != nil:
			t.Fatal(err)
		case code == http.StatusTooManyRequests:
			reached++
			tooMany++
		default:
			reached++
		}
	}
	elapsed := ft.Now().Sub(time.Unix(1_800_000_000, 0))
	refills := int(elapsed / (36 * time.Second))
	t.Logf("%s of fake time (%d refill intervals): %d requests reached the API (%d answered 429), %d timed out held back",
		elapsed, refills, reached, tooMany, heldBackTimeouts)
	if reached < refills*9/10 {
		t.Errorf("%d requests reached the API in %d refill intervals, want about one per interval: pacing locked the CCM out", reached, refills)
	}
	for _, d := range ft.sleeps {
		if d > time.Hour {
			t.Fatalf("a request was held back for %s, longer than any reset the API can announce", d)
		}
	}

	// The other client stops and the CCM is idle until its budget is full again: the next
	// requests go at once.
	ft.advance(time.Hour)
	before := len(ft.sleeps)
	for range 20 {
		if code, err := send(tr); err != nil || code != http.StatusOK {
			t.Fatalf("after the budget refilled: %d, %v", code, err)
		}
	}
	if n := len(ft.sleeps) - before; n != 0 {
		t.Errorf("%d of 20 requests were held back after the budget refilled, want 0", n)
	}
}
