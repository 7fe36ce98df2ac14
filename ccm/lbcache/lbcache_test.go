package lbcache_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbcache"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

const maxAge = time.Minute

// env is an emulator with n labelled load balancers (uid-1 … uid-n), a cache over it with a
// clock the test moves, and a writing client for changes behind the cache's back.
type env struct {
	t     *testing.T
	emu   *hcloudemu.Emulator
	cache *lbcache.Cache
	ids   map[string]int64
	write *hcloud.Client
	now   time.Time
	mu    sync.Mutex
}

func newEnv(t *testing.T, n int, age time.Duration) *env {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t)
	e := &env{t: t, emu: emu, ids: map[string]int64{}, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := range n {
		uid := fmt.Sprintf("uid-%d", i+1)
		id, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "lb-" + uid, Labels: map[string]string{lbplan.LabelServiceUID: uid}})
		if err != nil {
			t.Fatal(err)
		}
		e.ids[uid] = id
	}
	// One load balancer that is not ours: the list by the label key must leave it out.
	if _, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "not-ours"}); err != nil {
		t.Fatal(err)
	}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	e.cache, err = lbcache.New(lbcache.Options{LoadBalancers: conn.LoadBalancers(), MaxAge: age})
	if err != nil {
		t.Fatal(err)
	}
	lbcache.SetClock(e.cache, e.clock)
	e.write = hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()))
	emu.ResetRequests()
	return e
}

func (e *env) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = e.now.Add(d)
}

// get returns the IDs and names of uid's load balancers as "id:name" strings.
func (e *env) get(uid string) []string {
	e.t.Helper()
	lbs, _, err := e.cache.Get(context.Background(), uid)
	if err != nil {
		e.t.Fatalf("Get(%s): %v", uid, err)
	}
	return describe(lbs)
}

func describe(lbs []*lbplan.Actual) []string {
	out := []string{}
	for _, a := range lbs {
		out = append(out, fmt.Sprintf("%d:%s", a.ID, a.Name))
	}
	return out
}

// requests summarises the emulator's log since the last call as "GET path?selector page".
func (e *env) requests() []string {
	out := []string{}
	for _, r := range e.emu.Requests() {
		q, _ := url.ParseQuery(r.Query)
		out = append(out, fmt.Sprintf("%s %s?%s page=%s", r.Method, r.Path, q.Get("label_selector"), q.Get("page")))
	}
	e.emu.ResetRequests()
	return out
}

func (e *env) wantRequests(step string, want ...string) {
	e.t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := e.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		e.t.Errorf("%s: requests\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (e *env) want(step string, got []string, want ...string) {
	e.t.Helper()
	if want == nil {
		want = []string{}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		e.t.Errorf("%s: got %v, want %v", step, got, want)
	}
}

func (e *env) lb(uid string) string { return fmt.Sprintf("%d:lb-%s", e.ids[uid], uid) }

const (
	listPage1 = "GET /v1/load_balancers?hcloud-ccm/service-uid page=1"
	listPage2 = "GET /v1/load_balancers?hcloud-ccm/service-uid page=2"
	listPage3 = "GET /v1/load_balancers?hcloud-ccm/service-uid page=3"
	groupRead = "GET /v1/load_balancers?hcloud-policy-ccm.io/load-balancer-group=web,hcloud-policy-ccm.io/cluster=kubernetes page="
)

func TestCache(t *testing.T) {
	tests := []struct {
		name string
		lbs  int
		age  time.Duration
		run  func(e *env)
	}{
		{"a round of Gets costs one list of ceil(n/50) pages, a Get within the max age none", 120, maxAge, func(e *env) {
			for i := range 120 {
				uid := fmt.Sprintf("uid-%d", i+1)
				e.want("round 1", e.get(uid), e.lb(uid))
			}
			e.want("a Service without a load balancer", e.get("uid-none"))
			e.wantRequests("round 1", listPage1, listPage2, listPage3)
			e.advance(maxAge)
			e.want("at the max age", e.get("uid-7"), e.lb("uid-7"))
			e.wantRequests("at the max age")
			e.advance(time.Second)
			e.want("after the max age", e.get("uid-7"), e.lb("uid-7"))
			e.wantRequests("after the max age", listPage1, listPage2, listPage3)
		}},
		{"drift behind the cache's back is seen after the max age, however often the CCM writes", 2, maxAge, func(e *env) {
			lbs, at, err := e.cache.Get(context.Background(), "uid-1")
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := e.write.LoadBalancer.Update(context.Background(), &hcloud.LoadBalancer{ID: e.ids["uid-1"]}, hcloud.LoadBalancerUpdateOpts{Name: "renamed"}); err != nil {
				t.Fatal(err)
			}
			e.requests()
			for range 5 { // the CCM writes, planned from the data read at `at`
				e.advance(10 * time.Second)
				e.cache.Put("uid-1", lbs[0], at)
				e.want("after our write", e.get("uid-1"), e.lb("uid-1"))
			}
			e.wantRequests("our writes")
			e.advance(11 * time.Second)
			e.want("after the max age", e.get("uid-1"), fmt.Sprintf("%d:renamed", e.ids["uid-1"]))
			e.wantRequests("after the max age", listPage1)
		}},
		{"a Put wins over an older list and a deleted load balancer leaves the cache", 2, maxAge, func(e *env) {
			_, at, err := e.cache.Get(context.Background(), "uid-1")
			if err != nil {
				t.Fatal(err)
			}
			e.cache.Put("uid-1", &lbplan.Actual{ID: 99, Name: "ours"}, at)
			e.cache.Put("uid-2", nil, at)
			e.want("put", e.get("uid-1"), "99:ours")
			e.want("deleted", e.get("uid-2"))
			e.wantRequests("served from the writes", listPage1)
		}},
		{"after Forget the next Get reads that Service alone, once", 2, maxAge, func(e *env) {
			e.get("uid-1")
			e.cache.Forget("uid-1")
			e.want("forgotten", e.get("uid-1"), e.lb("uid-1"))
			e.want("again", e.get("uid-1"), e.lb("uid-1"))
			e.want("another Service", e.get("uid-2"), e.lb("uid-2"))
			e.wantRequests("forget", listPage1, "GET /v1/load_balancers?hcloud-ccm/service-uid=uid-1 page=")
		}},
		{"Read always reads, and a Get within the max age uses what it read", 2, maxAge, func(e *env) {
			for range 2 {
				lbs, _, err := e.cache.Read(context.Background(), "uid-2")
				if err != nil {
					t.Fatal(err)
				}
				e.want("read", describe(lbs), e.lb("uid-2"))
			}
			e.want("get", e.get("uid-2"), e.lb("uid-2"))
			e.wantRequests("read", "GET /v1/load_balancers?hcloud-ccm/service-uid=uid-2 page=", "GET /v1/load_balancers?hcloud-ccm/service-uid=uid-2 page=")
		}},
		{"two load balancers with one UID label are both returned", 1, maxAge, func(e *env) {
			id, err := e.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "dup", Labels: map[string]string{lbplan.LabelServiceUID: "uid-1"}})
			if err != nil {
				t.Fatal(err)
			}
			e.want("non-unique", e.get("uid-1"), e.lb("uid-1"), fmt.Sprintf("%d:dup", id))
		}},
		{"a negative max age caches nothing", 1, -1, func(e *env) {
			e.get("uid-1")
			e.cache.Put("uid-1", nil, e.clock())
			e.want("after a put", e.get("uid-1"), e.lb("uid-1"))
			e.wantRequests("no cache", "GET /v1/load_balancers?hcloud-ccm/service-uid=uid-1 page=", "GET /v1/load_balancers?hcloud-ccm/service-uid=uid-1 page=")
		}},
		{"a group is read alone by its labels, then served from its entry within the max age; a list never holds it", 2, maxAge, func(e *env) {
			id, err := e.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "kubernetes-group-web", Labels: lbgroup.GroupLabels("web", "kubernetes")})
			if err != nil {
				t.Fatal(err)
			}
			group := func(step string) []string {
				lbs, _, err := e.cache.GetGroup(context.Background(), "web", "kubernetes")
				if err != nil {
					t.Fatalf("%s: GetGroup: %v", step, err)
				}
				return describe(lbs)
			}
			lb := fmt.Sprintf("%d:kubernetes-group-web", id)
			e.want("first", group("first"), lb)
			e.want("again", group("again"), lb)
			e.get("uid-1") // a list of the UID label does not replace the group's entry
			e.want("after a list", group("after a list"), lb)
			e.wantRequests("reads", groupRead, listPage1)
			e.advance(maxAge + time.Second)
			e.want("after the max age", group("after the max age"), lb)
			e.wantRequests("after the max age", groupRead)
		}},
		{"a group's PutGroup is served without a read, ForgetGroup reads it again, ReadGroup always reads", 0, maxAge, func(e *env) {
			_, at, err := e.cache.GetGroup(context.Background(), "web", "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			e.cache.PutGroup("web", "kubernetes", &lbplan.Actual{ID: 7, Name: "created"}, at)
			lbs, _, err1 := e.cache.GetGroup(context.Background(), "web", "kubernetes")
			e.want("put", describe(lbs), "7:created")
			other, _, err2 := e.cache.GetGroup(context.Background(), "web", "other-cluster")
			e.want("another cluster's group", describe(other))
			e.cache.ForgetGroup("web", "kubernetes")
			forgotten, _, err3 := e.cache.GetGroup(context.Background(), "web", "kubernetes")
			e.want("forgotten", describe(forgotten))
			if _, _, err := e.cache.ReadGroup(context.Background(), "web", "kubernetes"); err != nil || err1 != nil || err2 != nil || err3 != nil {
				t.Fatal(err, err1, err2, err3)
			}
			e.wantRequests("put and forget", groupRead, "GET /v1/load_balancers?hcloud-policy-ccm.io/load-balancer-group=web,hcloud-policy-ccm.io/cluster=other-cluster page=", groupRead, groupRead)
		}},
		{"ListGroups lists every group of the cluster by page and keeps each as its group's entry", 1, maxAge, func(e *env) {
			var want []string
			for i := range 51 { // two pages
				g := fmt.Sprintf("g%02d", i)
				id, err := e.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "kubernetes-group-" + g, Labels: lbgroup.GroupLabels(g, "kubernetes")})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%d:kubernetes-group-%s", id, g))
			}
			if _, err := e.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "other-group-x", Labels: lbgroup.GroupLabels("x", "other")}); err != nil {
				t.Fatal(err)
			}
			e.requests()
			lbs, _, err := e.cache.ListGroups(context.Background(), "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			e.want("listed: this cluster's groups only, not a Service's", describe(lbs), want...)
			const list = "GET /v1/load_balancers?hcloud-policy-ccm.io/load-balancer-group,hcloud-policy-ccm.io/cluster=kubernetes page="
			e.wantRequests("list", list+"1", list+"2")
			got, _, err := e.cache.GetGroup(context.Background(), "g07", "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			e.want("a group from the list", describe(got), want[7])
			e.wantRequests("served from the list")
			e.cache.PutGroup("g08", "kubernetes", nil, e.clock())
			e.advance(time.Second)
			if _, _, err := e.cache.ListGroups(context.Background(), "kubernetes"); err != nil {
				t.Fatal(err)
			}
			e.requests()
			got, _, err = e.cache.GetGroup(context.Background(), "g08", "kubernetes")
			if err != nil {
				t.Fatal(err)
			}
			e.want("a write before the list is replaced by it", describe(got), want[8])
			e.wantRequests("served from the entry")
		}},
		{"concurrent Gets share one list", 60, maxAge, func(e *env) {
			e.emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/load_balancers", Delay: 50 * time.Millisecond})
			var wg sync.WaitGroup
			errs := make(chan error, 100)
			for g := range 100 {
				wg.Go(func() {
					uid := fmt.Sprintf("uid-%d", g%60+1)
					lbs, _, err := e.cache.Get(context.Background(), uid)
					if err == nil && (len(lbs) != 1 || lbs[0].ID != e.ids[uid]) {
						err = fmt.Errorf("Get(%s) = %v", uid, describe(lbs))
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
			e.wantRequests("concurrent", listPage1, listPage2)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(newEnv(t, tt.lbs, tt.age))
		})
	}
}

func TestNew_requiresReader(t *testing.T) {
	if _, err := lbcache.New(lbcache.Options{}); err == nil || !strings.Contains(err.Error(), "Options.LoadBalancers") {
		t.Errorf("New without a reader: err = %v, want one naming Options.LoadBalancers", err)
	}
}

func TestGet_listErrorIsWrapped(t *testing.T) {
	e := newEnv(t, 1, maxAge)
	e.emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/load_balancers", Status: 403, Code: "forbidden"})
	_, _, err := e.cache.Get(context.Background(), "uid-1")
	if err == nil || !strings.Contains(err.Error(), "lbcache.Get") || !strings.Contains(err.Error(), "page 1") {
		t.Errorf("Get with a failing list: err = %v, want it to name lbcache.Get and the page", err)
	}
}

// TestCache_metrics: an operator sees what the cache saves and costs. A first Get lists (a
// miss and a list refresh), a second within the max age is a hit with no request, and a Read
// counts as a uid refresh.
func TestCache_metrics(t *testing.T) {
	e := newEnv(t, 2, maxAge)
	metric := func(name, label, value string) float64 {
		return testutil.Metric(t, name, map[string]string{label: value})
	}
	hits, misses := metric("hcloud_ccm_load_balancer_cache_requests_total", "result", "hit"), metric("hcloud_ccm_load_balancer_cache_requests_total", "result", "miss")
	lists, uids := metric("hcloud_ccm_load_balancer_cache_refreshes_total", "kind", "list"), metric("hcloud_ccm_load_balancer_cache_refreshes_total", "kind", "uid")
	e.get("uid-1")
	e.get("uid-2")
	if _, _, err := e.cache.Read(context.Background(), "uid-1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, label, value string
		before, want       float64
	}{
		{"hcloud_ccm_load_balancer_cache_requests_total", "result", "hit", hits, 1},
		{"hcloud_ccm_load_balancer_cache_requests_total", "result", "miss", misses, 1},
		{"hcloud_ccm_load_balancer_cache_refreshes_total", "kind", "list", lists, 1},
		{"hcloud_ccm_load_balancer_cache_refreshes_total", "kind", "uid", uids, 1},
	} {
		if got := metric(tc.name, tc.label, tc.value) - tc.before; got != tc.want {
			t.Errorf("%s{%s=%q} grew by %v, want %v", tc.name, tc.label, tc.value, got, tc.want)
		}
	}
}

// TestRefresh: Refresh lists now, even while the snapshot is fresh (⌈n/50⌉ pages), answers by
// UID with the list's start, and the Gets after it answer from that list without a request.
func TestRefresh(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		wantPages int
	}{
		{"no load balancer is one page", 0, 1},
		{"50 load balancers are one page", 50, 1},
		{"51 load balancers are two pages", 51, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.n, maxAge)
			ctx := context.Background()
			if tt.n > 0 {
				e.get("uid-1") // a fresh snapshot: Refresh lists anyway
			}
			e.requests()
			byUID, at, err := e.cache.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(e.requests()); got != tt.wantPages {
				t.Errorf("Refresh sent %d requests, want %d", got, tt.wantPages)
			}
			if len(byUID) != tt.n || !at.Equal(e.clock()) {
				t.Errorf("Refresh = %d Services at %s, want %d at %s", len(byUID), at, tt.n, e.clock())
			}
			if tt.n > 0 {
				e.want("Get after Refresh", e.get("uid-1"), e.lb("uid-1"))
				e.wantRequests("Get after Refresh")
			}
		})
	}
}

func TestRefresh_errorIsWrapped(t *testing.T) {
	e := newEnv(t, 1, maxAge)
	e.emu.AddFault(hcloudemu.Fault{Method: "GET", Pattern: "/v1/load_balancers", Status: 403, Code: "forbidden"})
	if _, _, err := e.cache.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "lbcache.Refresh") {
		t.Errorf("Refresh with a failing list: err = %v, want it to name lbcache.Refresh", err)
	}
}

// TestCache_All: All answers from what the cache holds, without a request: nothing known
// before a list (incomplete), the list after one, a Service's load balancer replaced by a Put,
// gone after a Put of none, its last known one kept after a Forget, and a group's entry.
func TestCache_All(t *testing.T) {
	e := newEnv(t, 3, maxAge)
	names := func() []string {
		t.Helper()
		lbs, _ := e.cache.All()
		var out []string
		for _, a := range lbs {
			out = append(out, a.Name)
		}
		slices.Sort(out)
		return out
	}
	if lbs, complete := e.cache.All(); len(lbs) != 0 || complete {
		t.Fatalf("All before a list = %d load balancers, complete %v; want none, incomplete", len(lbs), complete)
	}
	if _, _, err := e.cache.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, complete := e.cache.All(); !complete {
		t.Error("All after a list is incomplete")
	}
	before := len(e.emu.Requests())
	e.advance(time.Second)
	e.cache.Put("uid-1", &lbplan.Actual{ID: e.ids["uid-1"], Name: "renamed", Labels: map[string]string{lbplan.LabelServiceUID: "uid-1"}}, e.clock())
	e.cache.Put("uid-2", nil, e.clock())
	e.cache.Forget("uid-3")
	e.cache.PutGroup("web", "k8s", &lbplan.Actual{ID: 99, Name: "group-web"}, e.clock())
	if got, want := names(), []string{"group-web", "lb-uid-3", "renamed"}; !slices.Equal(got, want) {
		t.Errorf("All = %v, want %v", got, want)
	}
	if n := len(e.emu.Requests()) - before; n != 0 {
		t.Errorf("All sent %d requests, want 0", n)
	}
}
