package robot_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/robot"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
)

var seed = robotemu.Seed{Servers: []robotemu.Server{
	{Number: 321, Name: "bm-1", IP: "203.0.113.5", IPv6Net: "2001:db8:1::", Product: "AX41-NVMe", DC: "FSN1-DC16"},
	{Number: 322, Name: "bm-2", IP: "203.0.113.6", OperatingStatus: "shut off"},
}}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newClient returns a client of a fresh emulator holding s, both on the same fake clock.
func newClient(t *testing.T, s robotemu.Seed, cfg config.Robot) (*robot.Client, *robotemu.Emulator, *clock) {
	t.Helper()
	emu, endpoint := robotemu.NewTestServer(t, s)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	emu.SetClock(clk.now)
	if cfg.User == "" {
		cfg.User, cfg.Password = emu.User(), emu.Password()
	}
	if cfg.CacheTimeout == 0 {
		cfg.CacheTimeout = 5 * time.Minute
	}
	cfg.Endpoint = endpoint
	c, err := robot.New(robot.Options{Config: cfg, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	return c, emu, clk
}

func TestClient_Server(t *testing.T) {
	c, emu, _ := newClient(t, seed, config.Robot{})
	ctx := context.Background()
	s, err := c.Server(ctx, 321)
	if err != nil {
		t.Fatal(err)
	}
	want := robot.Server{Number: 321, Name: "bm-1", IP: "203.0.113.5", IPv6Net: "2001:db8:1::", Product: "AX41-NVMe", DC: "FSN1-DC16", Status: "ready"}
	if s != want {
		t.Errorf("Server(321) = %+v, want %+v", s, want)
	}
	if _, err := c.Server(ctx, 999); !errors.Is(err, robot.ErrNotFound) {
		t.Errorf("Server(999) error = %v, want ErrNotFound", err)
	}
	reqs := emu.Requests()
	if reqs["GET /server"] != 1 || reqs["GET /server/{n}"] != 0 {
		t.Errorf("requests = %v, want one GET /server and no GET /server/{n} (lookups are served from the list)", reqs)
	}
}

func TestClient_Servers_cache(t *testing.T) {
	c, emu, clk := newClient(t, seed, config.Robot{CacheTimeout: time.Minute})
	ctx := context.Background()
	steps := []struct {
		name      string
		advance   time.Duration
		wantLists int
	}{
		{"the first call lists", 0, 1},
		{"a call within the timeout is served from the cache", 59 * time.Second, 1},
		{"a call after the timeout lists again", 2 * time.Second, 2},
	}
	for _, st := range steps {
		clk.add(st.advance)
		list, err := c.Servers(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("%s: Servers() = %d servers, %v", st.name, len(list), err)
		}
		if got := emu.Requests()["GET /server"]; got != st.wantLists {
			t.Errorf("%s: GET /server = %d, want %d", st.name, got, st.wantLists)
		}
	}
}

func TestClient_ServerByName_forcedRefresh(t *testing.T) {
	c, emu, clk := newClient(t, seed, config.Robot{CacheTimeout: time.Minute})
	ctx := context.Background()
	if s, ok, err := c.ServerByName(ctx, "bm-2", true); err != nil || !ok || s.Number != 322 {
		t.Fatalf("ServerByName(bm-2) = %+v, %t, %v", s, ok, err)
	}
	// A server ordered after the list was cached: the miss forces one refresh.
	if err := emu.AddServer(robotemu.Server{Number: 400, Name: "bm-new", IP: "203.0.113.9"}); err != nil {
		t.Fatal(err)
	}
	if s, ok, err := c.ServerByName(ctx, "bm-new", true); err != nil || !ok || s.Number != 400 {
		t.Fatalf("ServerByName(bm-new) = %+v, %t, %v; want the new server after a forced refresh", s, ok, err)
	}
	if _, ok, err := c.ServerByName(ctx, "not-a-server", true); err != nil || ok {
		t.Fatalf("ServerByName(not-a-server) = %t, %v", ok, err)
	}
	if _, ok, _ := c.ServerByName(ctx, "not-a-server", true); ok {
		t.Fatal("ServerByName(not-a-server) found a server")
	}
	if _, ok, err := c.ServerByName(ctx, "other-missing", false); err != nil || ok {
		t.Fatalf("ServerByName(other-missing, no refresh) = %t, %v", ok, err)
	}
	if got := emu.Requests()["GET /server"]; got != 3 {
		t.Errorf("GET /server = %d, want 3 (first list, one forced refresh per missing name, none for a repeated miss or without refreshOnMiss)", got)
	}
	clk.add(time.Minute + time.Second)
	_, _, _ = c.ServerByName(ctx, "not-a-server", true)
	if got := emu.Requests()["GET /server"]; got != 5 {
		t.Errorf("GET /server = %d, want 5 (a stale list is refreshed, and the name may force again in a new window)", got)
	}
}

func TestClient_rateLimitWait(t *testing.T) {
	s := seed
	s.RateLimit = 1
	c, emu, clk := newClient(t, s, config.Robot{CacheTimeout: time.Minute, RateLimitWaitTime: 10 * time.Minute})
	ctx := context.Background()
	if _, err := c.Servers(ctx); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		advance   time.Duration
		wantErr   bool
		wantLists int
	}{
		{"a fresh list is served even though the budget is spent", 30 * time.Second, false, 1},
		{"a stale list asks Robot, which answers RATE_LIMIT_EXCEEDED", time.Minute, true, 2},
		{"during the wait no request is sent", 5 * time.Minute, true, 2},
		{"after the wait Robot is asked again (and its hour is not over)", 5 * time.Minute, true, 3},
		{"after Robot's hour and the wait the list is fetched", time.Hour, false, 4},
	}
	for _, st := range steps {
		clk.add(st.advance)
		_, err := c.Servers(ctx)
		if (err != nil) != st.wantErr || (err != nil && !errors.Is(err, robot.ErrRateLimited)) {
			t.Errorf("%s: error = %v, want rate-limited %t", st.name, err, st.wantErr)
		}
		if got := emu.Requests()["GET /server"]; got != st.wantLists {
			t.Errorf("%s: GET /server = %d, want %d", st.name, got, st.wantLists)
		}
	}
}

func TestClient_errors(t *testing.T) {
	tests := []struct {
		name        string
		cfg         config.Robot
		seed        robotemu.Seed
		wantCode    string
		wantServers int
	}{
		{"wrong credentials are UNAUTHORIZED, without the password in the error", config.Robot{User: "robot-user", Password: "s3cr3t-wrong"}, seed, robot.CodeUnauthorized, 0},
		{"an account without servers is an empty list", config.Robot{}, robotemu.Seed{}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newClient(t, tc.seed, tc.cfg)
			list, err := c.Servers(context.Background())
			var apiErr *robot.APIError
			switch {
			case tc.wantCode == "" && err != nil:
				t.Fatalf("Servers() error = %v", err)
			case tc.wantCode != "" && (!errors.As(err, &apiErr) || apiErr.Code != tc.wantCode):
				t.Fatalf("Servers() error = %v, want code %s", err, tc.wantCode)
			}
			if err != nil && (strings.Contains(err.Error(), "s3cr3t") || errors.Is(err, robot.ErrRateLimited)) {
				t.Errorf("error %q leaks the password or counts as a rate limit", err)
			}
			if len(list) != tc.wantServers {
				t.Errorf("Servers() = %d servers, want %d", len(list), tc.wantServers)
			}
			if strings.Contains(c.String(), "s3cr3t") || strings.Contains(c.String(), "robot-password") {
				t.Errorf("String() leaks the password: %s", c)
			}
		})
	}
}

func TestClient_OperatingStatus(t *testing.T) {
	c, emu, clk := newClient(t, seed, config.Robot{})
	ctx := context.Background()
	steps := []struct {
		name      string
		advance   time.Duration
		setStatus string
		want      string
		wantGets  int
	}{
		{"the first call asks Robot", 0, "", "shut off", 1},
		{"within a minute the answer is reused", 59 * time.Second, "running", "shut off", 1},
		{"after a minute Robot is asked again", 2 * time.Second, "", "running", 2},
	}
	for _, st := range steps {
		clk.add(st.advance)
		if st.setStatus != "" {
			if err := emu.SetOperatingStatus(322, st.setStatus); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.OperatingStatus(ctx, 322)
		if err != nil || got != st.want {
			t.Fatalf("%s: OperatingStatus(322) = %q, %v; want %q", st.name, got, err, st.want)
		}
		if n := emu.Requests()["GET /reset/{n}"]; n != st.wantGets {
			t.Errorf("%s: GET /reset/{n} = %d, want %d", st.name, n, st.wantGets)
		}
	}
	if _, err := c.OperatingStatus(ctx, 999); !errors.Is(err, robot.ErrNotFound) {
		t.Errorf("OperatingStatus(999) error = %v, want ErrNotFound", err)
	}
}

// TestClient_badAnswers: answers that are not the webservice's JSON are errors naming the
// request, never a panic or a silently empty list; a bare 403 or 429 counts as a rate limit.
func TestClient_badAnswers(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		want        string
		rateLimited bool
	}{
		{"a 200 that is not JSON", 200, "<html>", "robot: GET /server: decoding the answer", false},
		{"a 500 with an HTML page", 500, "<html>oops</html>", "robot webservice responded with status code 500", false},
		{"a bare 403", 403, "", "status code 403", true},
		{"a bare 429", 429, "Too Many Requests", "status code 429", true},
		{"a 403 with another code is no rate limit", 403, `{"error":{"status":403,"code":"FORBIDDEN","message":"no access"}}`, "no access (FORBIDDEN, status 403)", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			c, err := robot.New(robot.Options{Config: config.Robot{User: "u", Password: "p", CacheTimeout: time.Minute, RateLimitWaitTime: time.Minute, Endpoint: srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			list, err := c.Servers(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || list != nil {
				t.Fatalf("Servers() = %v, %v; want an error containing %q", list, err, tc.want)
			}
			if errors.Is(err, robot.ErrRateLimited) != tc.rateLimited {
				t.Errorf("errors.Is(err, ErrRateLimited) = %t, want %t", !tc.rateLimited, tc.rateLimited)
			}
		})
	}
}

// TestClient_negativeDurations: negative ROBOT_CACHE_TIMEOUT and ROBOT_RATE_LIMIT_WAIT_TIME,
// which the configuration accepts as the official CCM does, mean what they mean there: no
// cache (every call lists), and no wait after a rate-limit error (the next call asks again).
func TestClient_negativeDurations(t *testing.T) {
	s := seed
	s.RateLimit = 1
	c, emu, _ := newClient(t, s, config.Robot{CacheTimeout: -time.Second, RateLimitWaitTime: -time.Second})
	ctx := context.Background()
	steps := []struct {
		name      string
		wantErr   bool
		wantLists int
	}{
		{"the first call lists", false, 1},
		{"a second call at the same instant lists again: nothing is cached", true, 2},
		{"after the rate-limit error the next call asks Robot at once: there is no wait", true, 3},
	}
	for _, st := range steps {
		_, err := c.Servers(ctx)
		if (err != nil) != st.wantErr || (err != nil && !errors.Is(err, robot.ErrRateLimited)) {
			t.Errorf("%s: error = %v, want rate-limited %t", st.name, err, st.wantErr)
		}
		if got := emu.Requests()["GET /server"]; got != st.wantLists {
			t.Errorf("%s: GET /server = %d, want %d", st.name, got, st.wantLists)
		}
	}
}

func TestNew_errors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     config.Robot
		wantErr string
	}{
		{"no credentials", config.Robot{Enabled: true}, "robot.New: no credentials: set ROBOT_USER and ROBOT_PASSWORD"},
		{"no password", config.Robot{Enabled: true, User: "u"}, "robot.New: no credentials: set ROBOT_USER and ROBOT_PASSWORD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := robot.New(robot.Options{Config: tc.cfg}); err == nil || err.Error() != tc.wantErr {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
