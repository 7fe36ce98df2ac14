package servercache_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// maxAge is the cache's max age in the budget tests, the default of HCLOUD_SERVER_CACHE_MAX_AGE.
const maxAge = 10 * time.Second

// newBudgetEnv returns an emulator with n servers and a mode-all cache with a 10s max age and
// the given budget, on a fake clock.
func newBudgetEnv(t *testing.T, n, budget int) (*hcloudemu.Emulator, *servercache.Cache, []int64, *hcloudemu.FakeClock) {
	t.Helper()
	emu, c, ids := newCacheEnv(t, n, config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: maxAge, BudgetPerHour: budget})
	clock := hcloudemu.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	servercache.SetClock(c, clock.Now)
	return emu, c, ids, clock
}

// lists returns the number of list pages and of single-server reads in the emulator's log.
func lists(emu *hcloudemu.Emulator) (pages, single int) {
	for _, r := range requests(emu) {
		if len(r) > len("GET /v1/servers?page=") && r[:len("GET /v1/servers?page=")] == "GET /v1/servers?page=" {
			pages++
		} else {
			single++
		}
	}
	return pages, single
}

// The list is kept for pages × 1h / (budget/2), so the steady cost per hour is budget/2
// whatever the number of servers.
func TestCache_budgetListAge(t *testing.T) {
	tests := []struct {
		servers, budget int
		keep            time.Duration // how long one list is kept
	}{
		{servers: 10, budget: 60, keep: 2 * time.Minute},      // 1 page
		{servers: 120, budget: 60, keep: 6 * time.Minute},     // 3 pages
		{servers: 120, budget: 360, keep: time.Minute},        // a larger budget refreshes sooner
		{servers: 120, budget: 36000, keep: 10 * time.Second}, // never below the max age
		{servers: 501, budget: 60, keep: 22 * time.Minute},    // 11 pages
		{servers: 2000, budget: 60, keep: 80 * time.Minute},   // 40 pages: still 30 requests per hour
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d servers, %d per hour", tt.servers, tt.budget), func(t *testing.T) {
			emu, c, ids, clock := newBudgetEnv(t, tt.servers, tt.budget)
			lookup := func() {
				t.Helper()
				if s, err := c.ByID(t.Context(), ids[len(ids)-1]); err != nil || s == nil {
					t.Fatalf("ByID() = %v, %v", s, err)
				}
			}
			lookup()
			if got := testutil.Metric(t, "hcloud_ccm_server_cache_list_keep_seconds", nil); got != tt.keep.Seconds() {
				t.Errorf("list_keep_seconds = %v, want %v", got, tt.keep.Seconds())
			}
			first, _ := lists(emu)
			if want := (tt.servers + 49) / 50; first != want {
				t.Fatalf("first lookup read %d pages, want %d", first, want)
			}
			clock.Advance(tt.keep)
			lookup()
			if got, _ := lists(emu); got != first {
				t.Errorf("a lookup %s after the list read %d more pages, want none", tt.keep, got-first)
			}
			clock.Advance(time.Second)
			lookup()
			if got, _ := lists(emu); got != 2*first {
				t.Errorf("a lookup %s after the list read %d more pages, want a new list of %d", tt.keep+time.Second, got-first, first)
			}
		})
	}
}

// Live lookups (the lifecycle controller's questions about NotReady nodes) see a shutdown and
// a deletion within the max age by reading the one server, and do not list.
func TestCache_live(t *testing.T) {
	emu, c, ids, clock := newBudgetEnv(t, 120, 60)
	ctx := t.Context()
	live := servercache.Live(ctx)
	if _, err := c.ByID(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	pages, _ := lists(emu)

	// Within the max age of the list: answered from it.
	clock.Advance(maxAge)
	if s, err := c.ByID(live, ids[0]); err != nil || s == nil || s.Status != hcloud.ServerStatusRunning {
		t.Fatalf("live ByID() = %v, %v", s, err)
	}
	if p, single := lists(emu); p != pages || single != 0 {
		t.Fatalf("a live lookup within the max age cost %d pages and %d reads, want none", p-pages, single)
	}

	// The server is switched off: the next live lookup after the max age reads it alone.
	if err := emu.SetServerStatus(ids[0], "off"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if s, err := c.ByID(live, ids[0]); err != nil || s == nil || s.Status != hcloud.ServerStatusOff {
		t.Fatalf("live ByID() after shutdown = %v, %v, want status off", s, err)
	}
	// The single read is newer than the list: periodic lookups see it too, at no cost.
	if s, err := c.ByID(ctx, ids[0]); err != nil || s == nil || s.Status != hcloud.ServerStatusOff {
		t.Fatalf("ByID() after the live read = %v, %v, want status off", s, err)
	}
	if p, single := lists(emu); p != pages || single != 1 {
		t.Fatalf("shutdown detection cost %d pages and %d reads, want 0 and 1", p-pages, single)
	}

	// The server is deleted: seen by the next live read, and left out of All.
	if err := emu.DeleteServer(ids[0]); err != nil {
		t.Fatal(err)
	}
	clock.Advance(maxAge + time.Second)
	if s, err := c.ByID(live, ids[0]); err != nil || s != nil {
		t.Fatalf("live ByID() after deletion = %v, %v, want nil, nil", s, err)
	}
	all, err := c.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.ID == ids[0] {
			t.Errorf("All() holds the deleted server %d", s.ID)
		}
	}
	if len(all) != 119 {
		t.Errorf("All() = %d servers, want 119", len(all))
	}
	if p, single := lists(emu); p != pages || single != 2 {
		t.Errorf("deletion detection cost %d pages and %d reads, want 0 and 2", p-pages, single)
	}

	// Periodic lookups do not take the deleted server from the older list either.
	clock.Advance(servercache.MinMissRefreshInterval)
	if s, err := c.ByID(ctx, ids[0]); err != nil || s != nil {
		t.Errorf("ByID() after the live read found the deletion = %v, %v, want nil, nil", s, err)
	}
}

// Live reads spend at most half the budget: a bucket of budget/2, refilled at budget/2 per
// hour; when it is empty, live lookups are answered from older data.
func TestCache_liveBudget(t *testing.T) {
	const budget = 10 // a bucket of 5
	emu, c, ids, clock := newBudgetEnv(t, 3, budget)
	live := servercache.Live(t.Context())
	if _, err := c.ByID(t.Context(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := emu.SetServerStatus(ids[1], "off"); err != nil {
		t.Fatal(err)
	}
	reads := func() int { _, single := lists(emu); return single }
	deferred := testutil.Metric(t, "hcloud_ccm_server_cache_budget_deferred_total", nil)
	for i := range 8 {
		clock.Advance(maxAge + time.Second)
		s, err := c.ByID(live, ids[1])
		if err != nil || s == nil {
			t.Fatalf("live ByID() #%d = %v, %v", i, s, err)
		}
	}
	if got := reads(); got != budget/2 {
		t.Errorf("8 live lookups 31s apart made %d reads, want %d (the bucket)", got, budget/2)
	}
	if got := testutil.Metric(t, "hcloud_ccm_server_cache_budget_deferred_total", nil) - deferred; got != 3 {
		t.Errorf("budget_deferred_total grew by %v, want 3 (the lookups without a read)", got)
	}
	// The stale answers are the last data read: status off.
	if s, _ := c.ByID(live, ids[1]); s == nil || s.Status != hcloud.ServerStatusOff {
		t.Errorf("stale live answer = %v, want the last read (off)", s)
	}
	// After an hour the bucket is refilled.
	clock.Advance(time.Hour)
	if _, err := c.ByID(live, ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := reads(); got != budget/2+1 {
		t.Errorf("a live lookup after an hour made %d reads in all, want %d", got, budget/2+1)
	}
}

// A server missing from the list is read alone while the single reads since the list are fewer
// than its pages (each new server read once), then the next miss lists again; every new server
// is then part of All. Issue 24: 10 new nodes at 500 servers cost 10 requests, not 9 single
// reads and an 11-page list.
func TestCache_missReadsAlone(t *testing.T) {
	tests := []struct {
		name          string
		servers, news int
		// wantPages are the list pages read after the first list, wantSingle the single reads.
		wantPages, wantSingle int
	}{
		{"3 new servers at 120 (3 pages): each read once", 120, 3, 0, 3},
		{"4 new servers at 120: 3 read once, the 4th lists (3 pages)", 120, 4, 3, 3},
		{"10 new servers at 500 (10 pages): each read once", 500, 10, 0, 10},
		{"2 new servers at 50 (1 page): 1 read once, the 2nd lists (2 pages: 52 servers)", 50, 2, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emu, c, ids, clock := newBudgetEnv(t, tt.servers, 60)
			ctx := t.Context()
			if _, err := c.ByID(ctx, ids[0]); err != nil {
				t.Fatal(err)
			}
			firstPages, _ := lists(emu)
			var added []int64
			for i := range tt.news {
				id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("new-%d", i)})
				if err != nil {
					t.Fatal(err)
				}
				added = append(added, id)
			}
			for i, id := range added {
				clock.Advance(servercache.MinMissRefreshInterval)
				// The cloud node controller asks by name first, then by the provider ID.
				if s, err := c.ByName(ctx, fmt.Sprintf("new-%d", i)); err != nil || s == nil || s.ID != id {
					t.Fatalf("ByName(new %d) = %v, %v", i, s, err)
				}
				if s, err := c.ByID(ctx, id); err != nil || s == nil || s.ID != id {
					t.Fatalf("ByID(new %d) = %v, %v", i, s, err)
				}
			}
			p, single := lists(emu)
			if p-firstPages != tt.wantPages || single != tt.wantSingle {
				t.Errorf("%d new servers: %d more pages, %d single reads; want %d, %d", tt.news, p-firstPages, single, tt.wantPages, tt.wantSingle)
			}
			all, err := c.All(ctx)
			if err != nil || len(all) != tt.servers+tt.news {
				t.Errorf("All() = %d servers, %v, want %d", len(all), err, tt.servers+tt.news)
			}
		})
	}
}

func TestCache_singleReadInAll(t *testing.T) {
	emu, c, ids, clock := newBudgetEnv(t, 120, 60)
	ctx := t.Context()
	if _, err := c.ByID(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "new"})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(servercache.MinMissRefreshInterval)
	if s, err := c.ByName(ctx, "new"); err != nil || s == nil {
		t.Fatalf("ByName(new) = %v, %v", s, err)
	}
	all, err := c.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range all {
		found = found || s.ID == id
	}
	if !found || len(all) != 121 {
		t.Errorf("All() = %d servers, new server found %v; want 121 with it", len(all), found)
	}
}
