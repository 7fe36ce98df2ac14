package robotemu_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
)

var seed = robotemu.Seed{Servers: []robotemu.Server{
	{Number: 321, Name: "bm-1", IP: "203.0.113.5", IPv6Net: "2001:db8:1::", Product: "AX41-NVMe", DC: "FSN1-DC16"},
	{Number: 322, Name: "bm-2", IP: "203.0.113.6", OperatingStatus: "shut off"},
}}

func get(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEmulator_Handler(t *testing.T) {
	emu, url := robotemu.NewTestServer(t, seed)
	u, p := emu.User(), emu.Password()
	tests := []struct {
		name       string
		path, user string
		password   string
		wantStatus int
		wantBody   []string
	}{
		{"the list wraps every server in a server object", "/server", u, p, 200,
			[]string{`[{"server":{`, `"server_number":321`, `"server_name":"bm-1"`, `"dc":"FSN1-DC16"`, `"server_number":322`}},
		{"one server is a server object", "/server/321", u, p, 200,
			[]string{`{"server":{`, `"server_ip":"203.0.113.5"`, `"server_ipv6_net":"2001:db8:1::"`, `"product":"AX41-NVMe"`, `"status":"ready"`}},
		{"an unknown server is 404 SERVER_NOT_FOUND", "/server/999", u, p, 404, []string{`"code":"SERVER_NOT_FOUND"`, `"status":404`}},
		{"the reset status reports the operating status", "/reset/322", u, p, 200, []string{`{"reset":{`, `"operating_status":"shut off"`}},
		{"a wrong password is 401 UNAUTHORIZED", "/server", u, "wrong", 401, []string{`"code":"UNAUTHORIZED"`}},
		{"no credentials is 401 UNAUTHORIZED", "/server", "", "", 401, []string{`"code":"UNAUTHORIZED"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, url+tc.path, tc.user, tc.password)
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d (body %s)", status, tc.wantStatus, body)
			}
			for _, w := range tc.wantBody {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not contain %s", body, w)
				}
			}
		})
	}
	if got := emu.Requests()["GET /server"]; got != 3 {
		t.Errorf(`Requests()["GET /server"] = %d, want 3`, got)
	}
}

func TestEmulator_rateLimit(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		wantStatus int
	}{
		{"Robot's documented 403", 0, http.StatusForbidden},
		{"429 when the seed asks for it", http.StatusTooManyRequests, http.StatusTooManyRequests},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := seed
			s.RateLimit, s.RateLimitInterval, s.RateLimitStatus = 2, "1h", tc.status
			emu, url := robotemu.NewTestServer(t, s)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			emu.SetClock(func() time.Time { return now })
			for i := range 2 {
				if status, body := get(t, url+"/server", emu.User(), emu.Password()); status != 200 {
					t.Fatalf("request %d: status %d (%s), want 200", i, status, body)
				}
			}
			status, body := get(t, url+"/server/321", emu.User(), emu.Password())
			if status != tc.wantStatus {
				t.Fatalf("third request: status %d, want %d", status, tc.wantStatus)
			}
			var e struct {
				Error struct {
					Code       string `json:"code"`
					MaxRequest int    `json:"max_request"`
					Interval   int    `json:"interval"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != "RATE_LIMIT_EXCEEDED" || e.Error.MaxRequest != 2 || e.Error.Interval != 3600 {
				t.Errorf("rate-limit body %s (err %v), want RATE_LIMIT_EXCEEDED, max_request 2, interval 3600", body, err)
			}
			now = now.Add(time.Hour + time.Second)
			if status, _ := get(t, url+"/server", emu.User(), emu.Password()); status != 200 {
				t.Errorf("after the interval: status %d, want 200", status)
			}
		})
	}
}

func TestNew_rejectsBadSeeds(t *testing.T) {
	tests := []struct {
		name string
		seed robotemu.Seed
		want string
	}{
		{"a server without name", robotemu.Seed{Servers: []robotemu.Server{{Number: 1}}}, "needs server_number > 0 and server_name"},
		{"a duplicate number", robotemu.Seed{Servers: []robotemu.Server{{Number: 1, Name: "a"}, {Number: 1, Name: "b"}}}, "server_number 1 is used twice"},
		{"a bad interval", robotemu.Seed{RateLimitInterval: "hourly"}, `rate_limit_interval "hourly"`},
		{"a bad status", robotemu.Seed{RateLimitStatus: 500}, "rate_limit_status 500 is not 403 or 429"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := robotemu.New(tc.seed)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEmulator_emptyAccount(t *testing.T) {
	emu, url := robotemu.NewTestServer(t, robotemu.Seed{})
	if status, body := get(t, url+"/server", emu.User(), emu.Password()); status != 404 || !strings.Contains(body, "SERVER_NOT_FOUND") {
		t.Errorf("GET /server without servers = %d %s, want 404 SERVER_NOT_FOUND", status, body)
	}
}

func TestBeside(t *testing.T) {
	emu, err := robotemu.New(seed)
	if err != nil {
		t.Fatal(err)
	}
	cloud := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "cloud "+r.URL.Path) })
	srv := httptest.NewServer(robotemu.Beside(cloud, emu))
	t.Cleanup(srv.Close)
	endpoint := robotemu.EndpointBeside(srv.URL + "/v1")
	if endpoint != srv.URL+"/robot" {
		t.Fatalf("EndpointBeside = %s, want %s/robot", endpoint, srv.URL)
	}
	if status, body := get(t, endpoint+"/server/321", emu.User(), emu.Password()); status != 200 || !strings.Contains(body, `"server_name":"bm-1"`) {
		t.Errorf("robot path: %d %s", status, body)
	}
	if _, body := get(t, srv.URL+"/v1/servers", "", ""); body != "cloud /v1/servers" {
		t.Errorf("cloud path: %s", body)
	}
}

func TestEmulator_RemoveServer(t *testing.T) {
	emu, url := robotemu.NewTestServer(t, seed)
	if err := emu.RemoveServer(321); err != nil {
		t.Fatal(err)
	}
	if status, _ := get(t, url+"/server/321", emu.User(), emu.Password()); status != 404 {
		t.Errorf("GET /server/321 after RemoveServer = %d, want 404", status)
	}
	if err := emu.RemoveServer(321); err == nil {
		t.Error("removing a missing server succeeded")
	}
}
