// Package robotemu is an in-memory emulator of the parts of the Hetzner Robot webservice that
// the CCM reads: GET /server, GET /server/{server-number} and GET /reset/{server-number}, with
// HTTP basic auth and Robot's per-hour request limit. It answers with the JSON shapes and error
// codes of the real webservice (as read by github.com/syself/hrobot-go, the official CCM's
// client), so the CCM's Robot client can be tested without Robot credentials.
//
// Start with [NewTestServer] in tests, or serve [Emulator.Handler] under a path such as /robot
// beside the cloud emulator (cmd/hcloud-emulator, cmd/ccm-demo do this).
//
// Here's an example:
//
//	emu, endpoint := robotemu.NewTestServer(t, robotemu.Seed{Servers: []robotemu.Server{{Number: 321, Name: "bm-1", IP: "203.0.113.5"}}})
//	// ROBOT_ENDPOINT=endpoint ROBOT_USER=emu.User() ROBOT_PASSWORD=emu.Password()
package robotemu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Default credentials and limits. Robot allows 200 GET /server requests per hour; the
// emulator applies one limit to every path.
const (
	DefaultUser          = "robot-user"
	DefaultPassword      = "robot-password"
	DefaultRateLimit     = 200
	DefaultRateLimitTime = time.Hour
)

// Seed is the Robot part of the emulator seed file (the "robot:" section of
// hcloudemu.Seed). Every field is optional.
//
// Here's an example (YAML):
//
//	robot:
//	  servers:
//	    - {server_number: 321, server_name: bm-1, server_ip: 203.0.113.5, product: AX41-NVMe, dc: FSN1-DC16}
type Seed struct {
	// User and Password are the accepted basic-auth credentials; empty means the defaults.
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// RateLimit is the number of requests allowed per RateLimitInterval; 0 means the default,
	// a negative value turns the limit off.
	RateLimit int `json:"rate_limit,omitempty"`
	// RateLimitInterval is the window of RateLimit, a Go duration; empty means 1h.
	RateLimitInterval string `json:"rate_limit_interval,omitempty"`
	// RateLimitStatus is the HTTP status of a rate-limited answer: 403 (what Robot documents,
	// the default) or 429.
	RateLimitStatus int      `json:"rate_limit_status,omitempty"`
	Servers         []Server `json:"servers,omitempty"`
}

// Server is a dedicated server as GET /server shows it (the subset of fields the CCM reads,
// plus status).
type Server struct {
	Number  int    `json:"server_number"`
	Name    string `json:"server_name"`
	IP      string `json:"server_ip"`
	IPv6Net string `json:"server_ipv6_net,omitempty"`
	Product string `json:"product,omitempty"`
	DC      string `json:"dc,omitempty"`
	// Status is "ready" (the default) or "in process".
	Status string `json:"status,omitempty"`
	// OperatingStatus is what GET /reset/{n} reports: "running" (the default), "shut off" or
	// "not supported".
	OperatingStatus string `json:"operating_status,omitempty"`
}

// Emulator is the Robot webservice state. It is safe for concurrent use.
type Emulator struct {
	mu       sync.Mutex
	user     string
	password string
	limit    int
	interval time.Duration
	status   int
	servers  []Server
	now      func() time.Time
	// window holds the times of the requests counted against the limit.
	window   []time.Time
	requests map[string]int
}

// New returns an emulator holding seed. A seed with a duplicate server number, a server
// without number or name, a bad interval or rate-limit status is an error.
func New(seed Seed) (*Emulator, error) {
	e := &Emulator{
		user: seed.User, password: seed.Password, limit: seed.RateLimit, interval: DefaultRateLimitTime,
		status: seed.RateLimitStatus, now: time.Now, requests: map[string]int{},
	}
	if e.user == "" {
		e.user = DefaultUser
	}
	if e.password == "" {
		e.password = DefaultPassword
	}
	if e.limit == 0 {
		e.limit = DefaultRateLimit
	}
	if seed.RateLimitInterval != "" {
		d, err := time.ParseDuration(seed.RateLimitInterval)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("robot seed: rate_limit_interval %q is not a positive duration such as 1h", seed.RateLimitInterval)
		}
		e.interval = d
	}
	switch e.status {
	case 0:
		e.status = http.StatusForbidden
	case http.StatusForbidden, http.StatusTooManyRequests:
	default:
		return nil, fmt.Errorf("robot seed: rate_limit_status %d is not 403 or 429", e.status)
	}
	for _, s := range seed.Servers {
		if err := e.AddServer(s); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// AddServer adds a server; its number must be positive and unused and its name set.
func (e *Emulator) AddServer(s Server) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.Number <= 0 || s.Name == "" {
		return fmt.Errorf("robot seed: a server needs server_number > 0 and server_name, got %+v", s)
	}
	if slices.ContainsFunc(e.servers, func(x Server) bool { return x.Number == s.Number }) {
		return fmt.Errorf("robot seed: server_number %d is used twice", s.Number)
	}
	if s.Status == "" {
		s.Status = "ready"
	}
	if s.OperatingStatus == "" {
		s.OperatingStatus = "running"
	}
	e.servers = append(e.servers, s)
	return nil
}

// SetOperatingStatus sets what GET /reset/{n} reports for server n ("running", "shut off").
func (e *Emulator) SetOperatingStatus(n int, status string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.servers {
		if e.servers[i].Number == n {
			e.servers[i].OperatingStatus = status
			return nil
		}
	}
	return fmt.Errorf("robot emulator: no server %d", n)
}

// RemoveServer removes server n from the account (a cancelled server).
func (e *Emulator) RemoveServer(n int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := slices.IndexFunc(e.servers, func(s Server) bool { return s.Number == n })
	if i < 0 {
		return fmt.Errorf("robot emulator: no server %d", n)
	}
	e.servers = slices.Delete(e.servers, i, i+1)
	return nil
}

// SetClock replaces the clock of the rate limit (time.Now by default).
func (e *Emulator) SetClock(now func() time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.now = now
}

// User returns the accepted basic-auth user.
func (e *Emulator) User() string { return e.user }

// Password returns the accepted basic-auth password.
func (e *Emulator) Password() string { return e.password }

// Requests returns how many requests each "METHOD /path-pattern" received (authorised or
// not), for example "GET /server" or "GET /server/{n}".
func (e *Emulator) Requests() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int, len(e.requests))
	for k, v := range e.requests {
		out[k] = v
	}
	return out
}

// Handler returns the HTTP handler of the webservice, rooted at "/" (mount it with
// http.StripPrefix to serve it under a path).
func (e *Emulator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /server", e.listServers)
	mux.HandleFunc("GET /server/{n}", e.getServer)
	mux.HandleFunc("GET /reset/{n}", e.getReset)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "Not found")
	})
	return e.guard(mux)
}

// guard counts the request, then checks basic auth and the rate limit.
func (e *Emulator) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.requests[r.Method+" "+pattern(r.URL.Path)]++
		e.mu.Unlock()
		user, password, ok := r.BasicAuth()
		if !ok || user != e.user || password != e.password {
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "Unable to authenticate")
			return
		}
		if e.limited() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(e.status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"status": e.status, "code": "RATE_LIMIT_EXCEEDED", "message": "Rate limit exceeded",
				"max_request": e.limit, "interval": int(e.interval.Seconds()),
			}})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limited records a request in the sliding window and reports whether it is over the limit.
func (e *Emulator) limited() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.limit < 0 {
		return false
	}
	now := e.now()
	cut := 0
	for cut < len(e.window) && !e.window[cut].After(now.Add(-e.interval)) {
		cut++
	}
	e.window = e.window[cut:]
	if len(e.window) >= e.limit {
		return true
	}
	e.window = append(e.window, now)
	return false
}

func pattern(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 2 && (parts[0] == "server" || parts[0] == "reset") {
		return "/" + parts[0] + "/{n}"
	}
	return path
}

func (e *Emulator) listServers(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	out := make([]map[string]any, 0, len(e.servers))
	for _, s := range e.servers {
		out = append(out, map[string]any{"server": serverJSON(s)})
	}
	e.mu.Unlock()
	if len(out) == 0 {
		// Robot answers an account without servers with 404 SERVER_NOT_FOUND.
		writeError(w, http.StatusNotFound, "SERVER_NOT_FOUND", "No server found")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (e *Emulator) getServer(w http.ResponseWriter, r *http.Request) {
	s, ok := e.server(r.PathValue("n"))
	if !ok {
		writeError(w, http.StatusNotFound, "SERVER_NOT_FOUND", "Server not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"server": serverJSON(s)})
}

func (e *Emulator) getReset(w http.ResponseWriter, r *http.Request) {
	s, ok := e.server(r.PathValue("n"))
	if !ok {
		writeError(w, http.StatusNotFound, "SERVER_NOT_FOUND", "Server not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"reset": map[string]any{
		"server_ip": s.IP, "server_ipv6_net": s.IPv6Net, "server_number": s.Number,
		"type": []string{"sw", "hw", "man"}, "operating_status": s.OperatingStatus,
	}})
}

func (e *Emulator) server(n string) (Server, bool) {
	num, err := strconv.Atoi(n)
	if err != nil {
		return Server{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.servers {
		if s.Number == num {
			return s, true
		}
	}
	return Server{}, false
}

// serverJSON is the server object of the webservice, with the fields hrobot-go reads.
func serverJSON(s Server) map[string]any {
	ips := []string{}
	if s.IP != "" {
		ips = append(ips, s.IP)
	}
	return map[string]any{
		"server_ip": s.IP, "server_ipv6_net": s.IPv6Net, "server_number": s.Number, "server_name": s.Name,
		"product": s.Product, "dc": s.DC, "traffic": "unlimited", "status": s.Status, "cancelled": false,
		"paid_until": "2030-12-31", "ip": ips, "subnet": []any{},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"status": status, "code": code, "message": message}})
}

// NewTestServer starts an emulator holding seed on an httptest server on 127.0.0.1 and
// returns it with its base URL (for ROBOT_ENDPOINT). The server is closed by t.Cleanup; a bad
// seed fails the test.
func NewTestServer(t testing.TB, seed Seed) (*Emulator, string) {
	t.Helper()
	e, err := New(seed)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	return e, srv.URL
}

// PathPrefix is the path under which [Beside] serves the Robot webservice, so that one
// listener serves both APIs: ROBOT_ENDPOINT is the cloud emulator's address plus this prefix.
const PathPrefix = "/robot"

// Beside returns a handler serving robot under [PathPrefix] and everything else with cloud
// (the cloud emulator's handler).
func Beside(cloud http.Handler, robot *Emulator) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(PathPrefix+"/", http.StripPrefix(PathPrefix, robot.Handler()))
	mux.Handle("/", cloud)
	return mux
}

// EndpointBeside returns the Robot endpoint served by [Beside] on the listener of the cloud
// endpoint (http://ADDR/v1 → http://ADDR/robot).
func EndpointBeside(cloudEndpoint string) string {
	return strings.TrimSuffix(strings.TrimSuffix(cloudEndpoint, "/"), "/v1") + PathPrefix
}
