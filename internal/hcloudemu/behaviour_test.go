package hcloudemu_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

var epoch = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func TestLocks_RunningActionLocksTheLoadBalancerUntilItCompletes(t *testing.T) {
	clock := hcloudemu.NewFakeClock(epoch)
	w := newWorld(t, hcloudemu.WithClock(clock), hcloudemu.WithActionDelay(time.Minute))
	c := w.client
	res, _, err := c.LoadBalancer.Create(ctx(t), hcloud.LoadBalancerCreateOpts{
		Name: "locked", LoadBalancerType: &hcloud.LoadBalancerType{Name: "lb11"}, Location: &hcloud.Location{Name: "fsn1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Action.Status != hcloud.ActionStatusRunning || res.Action.Command != "create_load_balancer" {
		t.Errorf("create action = %+v", res.Action)
	}
	_, _, err = c.LoadBalancer.AddService(ctx(t), res.LoadBalancer, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80)})
	if !hcloud.IsError(err, hcloud.ErrorCodeLocked) {
		t.Fatalf("mutation during running action: err = %v, want locked", err)
	}
	if got, _ := w.emu.LoadBalancer(res.LoadBalancer.ID); len(got.Services) != 0 {
		t.Errorf("locked request changed the load balancer: %+v", got.Services)
	}

	// WaitFor keeps polling until the clock passes the action's end.
	waited := make(chan error, 1)
	go func() { waited <- c.Action.WaitFor(ctx(t), res.Action) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-waited:
		t.Fatalf("WaitFor returned before the action completed: %v", err)
	default:
	}
	clock.Advance(time.Minute)
	if err := <-waited; err != nil {
		t.Fatalf("WaitFor: %v", err)
	}
	if _, _, err := c.LoadBalancer.AddService(ctx(t), res.LoadBalancer, hcloud.LoadBalancerAddServiceOpts{Protocol: "tcp", ListenPort: hcloud.Ptr(80)}); err != nil {
		t.Fatalf("mutation after completion: %v", err)
	}
}

func TestLocks_RouteChangeDuringRunningActionIsConflictAndRetried(t *testing.T) {
	clock := hcloudemu.NewFakeClock(epoch)
	w := newWorld(t, hcloudemu.WithClock(clock), hcloudemu.WithCommandDelay("add_route", 10*time.Second))
	nw := &hcloud.Network{ID: w.network}
	a, _, err := w.client.Network.AddRoute(ctx(t), nw, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{
		Destination: mustCIDR(t, "10.244.0.0/24"), Gateway: mustIP(t, "10.0.0.2")}})
	if err != nil {
		t.Fatal(err)
	}
	w.emu.ResetRequests()
	_, _, err = w.client.Network.AddRoute(ctx(t), nw, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{
		Destination: mustCIDR(t, "10.244.1.0/24"), Gateway: mustIP(t, "10.0.0.3")}})
	if !hcloud.IsError(err, hcloud.ErrorCodeConflict) {
		t.Fatalf("second route: err = %v, want conflict", err)
	}
	if got := w.emu.Counts()["POST /v1/networks/{id}/actions/add_route"]; got != 4 {
		t.Errorf("add_route requests = %d, want 1 + 3 retries", got)
	}
	clock.Advance(10 * time.Second)
	if err := w.client.Action.WaitFor(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	a2, _, err := w.client.Network.AddRoute(ctx(t), nw, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{
		Destination: mustCIDR(t, "10.244.1.0/24"), Gateway: mustIP(t, "10.0.0.3")}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	mustWait(t, w.client, a2, nil, nil)
	a3, _, err := w.client.Network.DeleteRoute(ctx(t), nw, hcloud.NetworkDeleteRouteOpts{Route: hcloud.NetworkRoute{
		Destination: mustCIDR(t, "10.244.0.0/24"), Gateway: mustIP(t, "10.0.0.2")}})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	mustWait(t, w.client, a3, nil, nil)
	got, _ := w.emu.Network(w.network)
	want := []schema.NetworkRoute{{Destination: "10.244.1.0/24", Gateway: "10.0.0.3"}}
	if diff := cmp.Diff(want, got.Routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

func TestActions_FailActionFaultEndsInErrorAndChangesNothing(t *testing.T) {
	w := newWorld(t)
	lb := createLB(t, w, "failing")
	w.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true, Times: 1})
	a, _, err := w.client.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}})
	if err != nil {
		t.Fatal(err)
	}
	err = w.client.Action.WaitFor(ctx(t), a)
	var actionErr hcloud.ActionError
	if !errors.As(err, &actionErr) || actionErr.Code != "action_failed" {
		t.Fatalf("WaitFor err = %v, want ActionError action_failed", err)
	}
	if got, _ := w.emu.LoadBalancer(lb.ID); len(got.Targets) != 0 {
		t.Errorf("failed action applied its change: %+v", got.Targets)
	}
	a, _, err = w.client.LoadBalancer.AddServerTarget(ctx(t), lb, hcloud.LoadBalancerAddServerTargetOpts{Server: &hcloud.Server{ID: w.servers[0]}})
	mustWait(t, w.client, a, nil, err)
}

func TestActions_GetActionsNeedsID(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	status, body, _ := rawRequest(t, emu, "GET", endpoint+"/actions", "")
	if status != 422 || !strings.Contains(body, `"invalid_input"`) {
		t.Errorf("GET /actions without id = %d %s", status, body)
	}
}

func TestRateLimit_EmptyBucketAnswers429AndRefillsWithTheClock(t *testing.T) {
	clock := hcloudemu.NewFakeClock(epoch)
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithClock(clock), hcloudemu.WithRateLimit(5))
	c := newClient(endpoint, emu.Token())
	for i := range 5 {
		_, resp, err := c.Location.List(ctx(t), hcloud.LocationListOpts{})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		rl := resp.Meta.Ratelimit
		if rl.Limit != 5 || rl.Remaining != 4-i {
			t.Errorf("request %d: ratelimit = %+v", i, rl)
		}
		wantReset := epoch.Add(time.Duration(i+1) * 720 * time.Second)
		if !rl.Reset.Equal(wantReset) {
			t.Errorf("request %d: reset = %v, want %v", i, rl.Reset, wantReset)
		}
	}
	_, _, err := c.Location.List(ctx(t), hcloud.LocationListOpts{})
	if !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
		t.Fatalf("sixth request: err = %v, want rate_limit_exceeded", err)
	}
	if got := emu.Counts()["GET /v1/locations"]; got != 5+4 {
		t.Errorf("requests = %d, want 5 + 1 rejected + 3 retries", got)
	}
	clock.Advance(720 * time.Second) // refill rate is 5/3600 per second: one token
	if _, _, err := c.Location.List(ctx(t), hcloud.LocationListOpts{}); err != nil {
		t.Errorf("after refill: %v", err)
	}
}

func TestRateLimit_UnauthenticatedRequestsCountToo(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithRateLimit(2))
	bad := newClient(endpoint, "wrong")
	for range 2 {
		if _, err := bad.Location.All(ctx(t)); !hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
			t.Fatalf("err = %v, want unauthorized", err)
		}
	}
	if _, err := newClient(endpoint, emu.Token()).Location.All(ctx(t)); !hcloud.IsError(err, hcloud.ErrorCodeRateLimitExceeded) {
		t.Fatalf("err = %v, want rate_limit_exceeded", err)
	}
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fault     hcloudemu.Fault
		timeout   time.Duration
		wantCode  string // "" = success expected
		wantErr   bool   // a non-API error (status code, EOF)
		wantCalls int
	}{
		{"A JSON API error is returned as hcloud.Error and not retried", hcloudemu.Fault{Pattern: "/v1/servers", Code: "unavailable"}, 0, "unavailable", false, 1},
		{"A JSON conflict is retried by hcloud-go until it clears", hcloudemu.Fault{Pattern: "/v1/servers", Code: "conflict", Times: 2}, 0, "", false, 3},
		{"A raw 502 is retried by hcloud-go", hcloudemu.Fault{Pattern: "/v1/servers", Raw: true, Status: 502, Times: 2}, 0, "", false, 3},
		{"A raw 504 is retried by hcloud-go", hcloudemu.Fault{Pattern: "/v1/servers", Raw: true, Status: 504, Times: 1}, 0, "", false, 2},
		{"A raw 503 is a plain status error, not retried", hcloudemu.Fault{Pattern: "/v1/servers", Raw: true, Status: 503}, 0, "", true, 1},
		{"Added latency trips the client timeout, which hcloud-go retries", hcloudemu.Fault{Pattern: "/v1/servers", Delay: 300 * time.Millisecond, Times: 1}, 100 * time.Millisecond, "", false, 2},
		{"A dropped connection is an EOF, not retried", hcloudemu.Fault{Pattern: "/v1/servers", Drop: true}, 0, "", true, 1},
		{"Skip lets the first matching requests through", hcloudemu.Fault{Pattern: "/v1/ser*", Code: "server_error", Skip: 1}, 0, "", false, 1},
		{"A method that does not match leaves the request alone", hcloudemu.Fault{Method: "POST", Pattern: "/v1/servers", Code: "server_error"}, 0, "", false, 1},
		{"A trailing star matches every sub-path", hcloudemu.Fault{Pattern: "/v1/*", Code: "maintenance"}, 0, "maintenance", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t)
			if _, err := emu.AddServer(hcloudemu.ServerSpec{Name: "s1"}); err != nil {
				t.Fatal(err)
			}
			emu.AddFault(tc.fault)
			opts := []hcloud.ClientOption{
				hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
				hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
			}
			if tc.timeout > 0 {
				opts = append(opts, hcloud.WithHTTPClient(&http.Client{Timeout: tc.timeout}))
			}
			servers, _, err := hcloud.NewClient(opts...).Server.List(ctx(t), hcloud.ServerListOpts{})
			switch {
			case tc.wantCode != "":
				if !hcloud.IsError(err, hcloud.ErrorCode(tc.wantCode)) {
					t.Errorf("err = %v, want %s", err, tc.wantCode)
				}
			case tc.wantErr:
				if err == nil || hcloud.IsError(err) {
					t.Errorf("err = %v, want a non-API error", err)
				}
			default:
				if err != nil || len(servers) != 1 {
					t.Errorf("List = %d servers, %v", len(servers), err)
				}
			}
			if got := emu.Counts()["GET /v1/servers"]; got != tc.wantCalls {
				t.Errorf("requests = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestFaults_ProbabilityFiresOnAboutThatShare(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	emu.AddFault(hcloudemu.Fault{Pattern: "/v1/locations", Code: "server_error", Probability: 0.3})
	failed := 0
	for range 200 {
		if status, _, _ := rawRequest(t, emu, "GET", endpoint+"/locations", ""); status == 500 {
			failed++
		}
	}
	if failed < 35 || failed > 85 {
		t.Errorf("failed %d of 200, want about 60", failed)
	}
	emu.ClearFaults()
	if status, _, _ := rawRequest(t, emu, "GET", endpoint+"/locations", ""); status != 200 {
		t.Errorf("after ClearFaults status = %d", status)
	}
}

// rawRequest sends one request with the emulator's token.
func rawRequest(t *testing.T, emu *hcloudemu.Emulator, method, url, body string) (int, string, http.Header) {
	t.Helper()
	return rawRequestAs(t, emu.Token(), method, url, body)
}

// rawRequestAs sends one request with the given bearer token.
func rawRequestAs(t *testing.T, token, method, url, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func TestWire_EveryJSONReplyHasContentTypeAndErrorShape(t *testing.T) {
	w := newWorld(t)
	base := strings.TrimSuffix(w.endpoint, "/v1")
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"A list answers 200", "GET", "/v1/servers", "", 200, ""},
		{"A missing resource answers 404 not_found", "GET", "/v1/servers/4242", "", 404, "not_found"},
		{"A non-numeric ID answers 404 not_found", "GET", "/v1/load_balancers/abc", "", 404, "not_found"},
		{"An unknown endpoint answers 404 not_found", "GET", "/v1/volumes", "", 404, "not_found"},
		{"A wrong method answers 405 method_not_allowed", "PATCH", "/v1/servers", "", 405, "method_not_allowed"},
		{"Malformed JSON answers 400 json_error", "POST", "/v1/load_balancers", `{"name":`, 400, "json_error"},
		{"An empty body answers 400 json_error", "POST", "/v1/load_balancers", ``, 400, "json_error"},
		{"A wrongly typed field answers 400 json_error", "POST", "/v1/load_balancers", `{"name":5}`, 400, "json_error"},
		{"A bad label selector answers 422 invalid_input", "GET", "/v1/load_balancers?label_selector=a%3D%3D%3D", "", 422, "invalid_input"},
		{"A bad page answers 422 invalid_input", "GET", "/v1/servers?page=0", "", 422, "invalid_input"},
		{"An unknown sort field answers 422 invalid_input", "GET", "/v1/servers?sort=size", "", 422, "invalid_input"},
		{"An unknown action verb answers 404 not_found", "POST", "/v1/load_balancers/1/actions/explode", "{}", 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, h := rawRequest(t, w.emu, tc.method, base+tc.path, tc.body)
			if status != tc.status {
				t.Errorf("status = %d, want %d (%s)", status, tc.status, body)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tc.code == "" {
				return
			}
			var e struct {
				Error struct {
					Code    string          `json:"code"`
					Message string          `json:"message"`
					Details json.RawMessage `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != tc.code || e.Error.Message == "" || len(e.Error.Details) == 0 {
				t.Errorf("error body = %s, want code %s with message and details", body, tc.code)
			}
		})
	}
}

func TestWire_PaginationMetaSendsNullsAndLinks(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := emu.AddServer(hcloudemu.ServerSpec{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	_, body, h := rawRequest(t, emu, "GET", endpoint+"/servers?per_page=2", "")
	var got struct {
		Servers []struct {
			Name string `json:"name"`
		} `json:"servers"`
		Meta struct {
			Pagination map[string]any `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"page": 1.0, "per_page": 2.0, "previous_page": nil, "next_page": 2.0, "last_page": 2.0, "total_entries": 3.0}
	if diff := cmp.Diff(want, got.Meta.Pagination); diff != "" {
		t.Errorf("pagination (-want +got):\n%s", diff)
	}
	if len(got.Servers) != 2 || !strings.Contains(h.Get("Link"), `rel="next"`) {
		t.Errorf("servers = %v, Link = %q", got.Servers, h.Get("Link"))
	}
	_, body, _ = rawRequest(t, emu, "GET", endpoint+"/servers?per_page=2&page=2&sort=name:desc", "")
	if !strings.Contains(body, `"next_page":null`) || !strings.Contains(body, `"name":"a"`) {
		t.Errorf("page 2 sorted by name desc = %s", body)
	}
}
