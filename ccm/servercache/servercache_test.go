package servercache_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// newEnv returns an emulator with n servers named node-1 … node-n and a cache over it.
func newEnv(t *testing.T, n int, mode string, maxAge time.Duration) (*hcloudemu.Emulator, *servercache.Cache, []int64) {
	t.Helper()
	return newCacheEnv(t, n, config.ServerCache{Mode: mode, MaxAge: maxAge})
}

// newCacheEnv is newEnv with a whole cache configuration.
func newCacheEnv(t *testing.T, n int, cfg config.ServerCache) (*hcloudemu.Emulator, *servercache.Cache, []int64) {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t)
	ids := make([]int64, n)
	for i := range n {
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}, ClientOptions: []hcloud.ClientOption{hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 2})}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := servercache.New(servercache.Options{Servers: conn.Servers(), Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	emu.ResetRequests()
	return emu, c, ids
}

// requests summarises the emulator's log as "METHOD path?query" strings with the page
// parameters only, so lists and name lookups can be told apart.
func requests(emu *hcloudemu.Emulator) []string {
	var out []string
	for _, r := range emu.Requests() {
		q, _ := url.ParseQuery(r.Query)
		s := r.Method + " " + r.Path
		if q.Has("name") {
			s += "?name=" + q.Get("name")
		} else if q.Has("page") {
			s += "?page=" + q.Get("page")
		}
		out = append(out, s)
	}
	return out
}

func TestHammerServerCache(t *testing.T) {
	const servers, goroutines = 120, 100
	emu, c, ids := newEnv(t, servers, config.ServerCacheModeAll, time.Minute)
	// Slow lists down so every goroutine arrives while the first list runs.
	emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/servers", Delay: 50 * time.Millisecond})

	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			var s *hcloud.Server
			var err error
			if g%2 == 0 {
				s, err = c.ByID(t.Context(), ids[g])
			} else {
				s, err = c.ByName(t.Context(), fmt.Sprintf("node-%d", g+1))
			}
			if err == nil && (s == nil || s.Name != fmt.Sprintf("node-%d", g+1)) {
				err = fmt.Errorf("goroutine %d got %v", g, s)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// One list of 120 servers is ceil(120/50) = 3 pages.
	want := []string{"GET /v1/servers?page=1", "GET /v1/servers?page=2", "GET /v1/servers?page=3"}
	if got := requests(emu); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests = %v, want exactly one list: %v", got, want)
	}
}

func TestCache_modeAll(t *testing.T) {
	emu, c, ids := newEnv(t, 3, config.ServerCacheModeAll, time.Minute)
	ctx := t.Context()

	if s, err := c.ByID(ctx, ids[0]); err != nil || s == nil || s.Name != "node-1" {
		t.Fatalf("ByID() = %v, %v", s, err)
	}
	if s, err := c.ByName(ctx, "node-2"); err != nil || s == nil || s.ID != ids[1] {
		t.Fatalf("ByName() = %v, %v", s, err)
	}
	all, err := c.All(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("All() = %d servers, %v", len(all), err)
	}
	if got := requests(emu); len(got) != 1 {
		t.Fatalf("three lookups within max age cost %v, want one list", got)
	}

	// Right after a list, a missing server costs nothing.
	if s, err := c.ByID(ctx, 999999); err != nil || s != nil {
		t.Fatalf("ByID(missing) = %v, %v, want nil, nil", s, err)
	}
	if got := requests(emu); len(got) != 1 {
		t.Fatalf("a miss right after the list cost %v, want no request", got)
	}

	// A second later, a missing server is read alone (1 page: one single read costs no more
	// than a list), and repeated misses within a second are not.
	time.Sleep(servercache.MinMissRefreshInterval)
	for range 5 {
		if s, err := c.ByID(ctx, 999999); err != nil || s != nil {
			t.Fatalf("ByID(missing) = %v, %v, want nil, nil", s, err)
		}
	}
	if got := requests(emu); len(got) != 2 {
		t.Errorf("five misses cost %v, want one extra request", got)
	}

	// A server added after the list is found by a new list, once a second has passed: a
	// server was already read alone since the list (as many as the list has pages).
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "node-new"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(servercache.MinMissRefreshInterval)
	if s, err := c.ByID(ctx, id); err != nil || s == nil || s.Name != "node-new" {
		t.Fatalf("ByID(new) = %v, %v", s, err)
	}
	if got := requests(emu); len(got) != 3 {
		t.Errorf("requests = %v, want a third list for the new server", got)
	}
}

func TestCache_modeAllMaxAge(t *testing.T) {
	emu, c, ids := newEnv(t, 2, config.ServerCacheModeAll, 0)
	for range 3 {
		if _, err := c.ByID(t.Context(), ids[0]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if got := requests(emu); len(got) != 3 {
		t.Errorf("max age 0 gave requests %v, want one list per lookup", got)
	}
}

func TestCache_modeOne(t *testing.T) {
	emu, c, ids := newEnv(t, 3, config.ServerCacheModeOne, time.Minute)
	ctx := t.Context()
	for range 3 {
		if s, err := c.ByID(ctx, ids[0]); err != nil || s == nil || s.Name != "node-1" {
			t.Fatalf("ByID() = %v, %v", s, err)
		}
	}
	// Found by ID, so its name is cached too.
	if s, err := c.ByName(ctx, "node-1"); err != nil || s == nil {
		t.Fatalf("ByName(node-1) = %v, %v", s, err)
	}
	if s, err := c.ByName(ctx, "node-2"); err != nil || s == nil || s.ID != ids[1] {
		t.Fatalf("ByName(node-2) = %v, %v", s, err)
	}
	for range 3 {
		if s, err := c.ByID(ctx, 424242); err != nil || s != nil {
			t.Fatalf("ByID(missing) = %v, %v", s, err)
		}
	}
	want := fmt.Sprint([]string{fmt.Sprintf("GET /v1/servers/%d", ids[0]), "GET /v1/servers?name=node-2", "GET /v1/servers/424242"})
	if got := fmt.Sprint(requests(emu)); got != want {
		t.Errorf("requests = %v, want %v", got, want)
	}
}

func TestCache_modeOff(t *testing.T) {
	emu, c, ids := newEnv(t, 2, config.ServerCacheModeOff, time.Minute)
	ctx := t.Context()
	for range 2 {
		if s, err := c.ByID(ctx, ids[0]); err != nil || s == nil {
			t.Fatalf("ByID() = %v, %v", s, err)
		}
	}
	if s, err := c.ByName(ctx, "node-2"); err != nil || s == nil {
		t.Fatalf("ByName() = %v, %v", s, err)
	}
	if all, err := c.All(ctx); err != nil || len(all) != 2 {
		t.Fatalf("All() = %v, %v", all, err)
	}
	want := fmt.Sprint([]string{
		fmt.Sprintf("GET /v1/servers/%d", ids[0]), fmt.Sprintf("GET /v1/servers/%d", ids[0]),
		"GET /v1/servers?name=node-2", "GET /v1/servers?page=1",
	})
	if got := fmt.Sprint(requests(emu)); got != want {
		t.Errorf("requests = %v, want %v", got, want)
	}
}

func TestCache_errors(t *testing.T) {
	emu, c, ids := newEnv(t, 1, config.ServerCacheModeAll, time.Minute)
	emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/servers", Code: "server_error", Times: 1})
	if _, err := c.ByID(t.Context(), ids[0]); err == nil {
		t.Fatal("ByID() with a failing list returned no error")
	} else if want := fmt.Sprintf("servercache.ByID: server %d: ", ids[0]); len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("error = %q, want the prefix %q", err, want)
	}
	// The failure is not cached: the next lookup lists again and succeeds.
	if s, err := c.ByID(t.Context(), ids[0]); err != nil || s == nil {
		t.Fatalf("ByID() after the fault = %v, %v", s, err)
	}
}

func TestNew_errors(t *testing.T) {
	servers := &hcloudclient.ServerReader{}
	tests := []struct {
		name string
		o    servercache.Options
		want string
	}{
		{"a missing reader is an error", servercache.Options{Config: config.ServerCache{Mode: "all"}}, "servercache.New: Options.Servers is required: pass the server reader of hcloudclient.Conn"},
		{"an unknown mode is an error", servercache.Options{Servers: servers, Config: config.ServerCache{Mode: "some"}}, `servercache.New: invalid mode "some" (expect one of: all, one, off)`},
		{"a negative max age is an error", servercache.Options{Servers: servers, Config: config.ServerCache{Mode: "all", MaxAge: -time.Second}}, "servercache.New: invalid max age -1s (expect 0s or more)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := servercache.New(tc.o); err == nil || err.Error() != tc.want {
				t.Errorf("New() error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCache_callerGivesUp: a lookup whose context ends returns at once; the list it started
// still completes and serves the others.
func TestCache_callerGivesUp(t *testing.T) {
	emu, c, ids := newEnv(t, 2, config.ServerCacheModeAll, time.Minute)
	emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/servers", Delay: 200 * time.Millisecond, Times: 1})

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.ByID(ctx, ids[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ByID() with an expiring context = %v, want DeadlineExceeded", err)
	}
	if s, err := c.ByID(t.Context(), ids[1]); err != nil || s == nil {
		t.Fatalf("ByID() = %v, %v", s, err)
	}
	if got := requests(emu); len(got) != 1 {
		t.Errorf("requests = %v, want the one list both callers shared", got)
	}
}

func TestCache_metrics(t *testing.T) {
	_, c, ids := newEnv(t, 2, config.ServerCacheModeAll, time.Minute)
	hits, misses, lists := metric(t, "requests", "hit"), metric(t, "requests", "miss"), metric(t, "refreshes", "list")
	for range 3 {
		if _, err := c.ByID(t.Context(), ids[0]); err != nil {
			t.Fatal(err)
		}
	}
	got := []float64{metric(t, "requests", "hit") - hits, metric(t, "requests", "miss") - misses, metric(t, "refreshes", "list") - lists}
	if want := []float64{2, 1, 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hits, misses, lists = %v, want %v", got, want)
	}
}

// metric returns hcloud_ccm_server_cache_<name>_total with its one label set to value.
func metric(t *testing.T, name, value string) float64 {
	label := map[string]string{"requests": "result", "refreshes": "kind"}[name]
	return testutil.Metric(t, "hcloud_ccm_server_cache_"+name+"_total", map[string]string{label: value})
}

// TestCache_liveMissReadsAlone: a liveness lookup (Live) of a server missing from a list made
// a moment ago reads that server alone, whenever the list was made: the list may have started
// just before the server was created, and "not found" for a liveness question deletes the Node
// (the node lifecycle controller deleted a joining Node on that in the benchmark's churn).
func TestCache_liveMissReadsAlone(t *testing.T) {
	emu, c, _ := newCacheEnv(t, 2, config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: time.Minute, BudgetPerHour: 120})
	ctx := t.Context()
	if _, err := c.All(ctx); err != nil { // the list, before the new server exists
		t.Fatal(err)
	}
	id, err := emu.AddServer(hcloudemu.ServerSpec{Name: "node-new"})
	if err != nil {
		t.Fatal(err)
	}
	emu.ResetRequests()
	if s, err := c.ByID(servercache.Live(ctx), id); err != nil || s == nil || s.Name != "node-new" {
		t.Fatalf("live ByID(new) within a second of the list = %v, %v; want node-new", s, err)
	}
	if got := requests(emu); len(got) != 1 || got[0] != fmt.Sprintf("GET /v1/servers/%d", id) {
		t.Errorf("requests = %v, want the one server read alone", got)
	}
}
