// Package robot is the CCM's client of the Hetzner Robot webservice (dedicated servers), built
// on the standard library. It reads what the official hcloud-cloud-controller-manager reads
// through github.com/syself/hrobot-go: the server list (GET /server) and a server's reset
// status (GET /reset/{server-number}), with the official CCM's two protections against
// Robot's small request budget:
//
//   - Cache (ROBOT_CACHE_TIMEOUT): the server list is fetched at most once per timeout; a
//     lookup by server number is served from the list, never by GET /server/{n}. A lookup by
//     name that misses may force one refresh per node name and timeout window, so a new
//     server is found without waiting for the timeout.
//   - Reset status: GET /reset/{n} (shutdown detection) is reused for ResetStatusMaxAge; the
//     official CCM does not cache it.
//   - Rate-limit wait (ROBOT_RATE_LIMIT_WAIT_TIME): after Robot answers RATE_LIMIT_EXCEEDED
//     (or a bare HTTP 403/429), no request is sent for the wait time; calls that would need
//     one fail with [ErrRateLimited] instead.
//
// Unlike the official CCM, a fresh cached list is still served during the wait (the official
// wrapper refuses every call), and an account without servers (Robot answers 404
// SERVER_NOT_FOUND to GET /server) is an empty list, not an error.
//
// The credentials are sent as HTTP basic auth and appear in no error, log line or String.
package robot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// requests counts the Robot webservice requests, and the calls the rate-limit wait refused
// (code "wait"). Its name MUST not change: operators alert on it.
var requests = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "hcloud_ccm_robot_requests_total",
	Help:           "Robot webservice requests by path (/server, /reset/{n}) and HTTP status code; \"error\" for transport errors, \"wait\" for calls refused during ROBOT_RATE_LIMIT_WAIT_TIME.",
	StabilityLevel: metrics.ALPHA,
}, []string{"path", "code"})

var registerOnce sync.Once

// DefaultEndpoint is the base URL of the Robot webservice (hrobot-go's default).
const DefaultEndpoint = "https://robot-ws.your-server.de"

// Error codes of the webservice that the CCM branches on.
const (
	CodeServerNotFound    = "SERVER_NOT_FOUND"
	CodeRateLimitExceeded = "RATE_LIMIT_EXCEEDED"
	CodeUnauthorized      = "UNAUTHORIZED"
)

// Sentinels. Errors of this package wrap them where they apply.
var (
	// ErrNotFound is wrapped when a server number is not in the account.
	ErrNotFound = errors.New("robot server not found")
	// ErrRateLimited is wrapped when Robot rate-limited the CCM, or while the wait after that
	// (ROBOT_RATE_LIMIT_WAIT_TIME) lasts.
	ErrRateLimited = errors.New("robot rate limit exceeded")
)

// APIError is an error answer of the webservice: {"error":{"status":..,"code":..,"message":..}}.
// Code is empty when the body was not such an object.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("robot webservice responded with status code %d", e.Status)
	}
	return fmt.Sprintf("robot webservice: %s (%s, status %d)", e.Message, e.Code, e.Status)
}

// Is makes errors.Is(err, ErrRateLimited) true for a rate-limit answer: code
// RATE_LIMIT_EXCEEDED, or a bare 403 or 429 (the official CCM also treats a bare 403 so).
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrRateLimited:
		return e.Code == CodeRateLimitExceeded || (e.Code == "" && (e.Status == http.StatusForbidden || e.Status == http.StatusTooManyRequests))
	case ErrNotFound:
		return e.Code == CodeServerNotFound
	}
	return false
}

// Server is a dedicated server as the CCM needs it.
type Server struct {
	Number  int    `json:"server_number"`
	Name    string `json:"server_name"`
	IP      string `json:"server_ip"`
	IPv6Net string `json:"server_ipv6_net"`
	Product string `json:"product"`
	DC      string `json:"dc"`
	Status  string `json:"status"`
}

// Client reads the Robot webservice with a cached server list and a rate-limit wait. It is
// safe for concurrent use.
type Client struct {
	http     *http.Client
	endpoint string
	user     string
	password string
	timeout  time.Duration // cache lifetime
	wait     time.Duration // rate-limit wait
	now      func() time.Time

	mu           sync.Mutex
	servers      []Server
	byNumber     map[int]Server
	loadedAt     time.Time
	loaded       bool
	forced       map[string]time.Time // node name → time of its forced refresh
	resets       map[int]resetStatus
	limitedUntil time.Time
}

// Options configure [New]. Config with credentials is required.
type Options struct {
	// Config is the endpoint (DefaultEndpoint when empty), credentials, cache lifetime
	// (CacheTimeout) and rate-limit wait (RateLimitWaitTime): ROBOT_*.
	Config config.Robot
	// HTTPClient replaces the HTTP client; nil means a 15s timeout, as the official CCM.
	HTTPClient *http.Client
	// Now replaces time.Now, for tests of the cache and the wait.
	Now func() time.Time
}

// New returns a client for o.Config. It sends no request.
//
// # Errors
//
// Missing credentials are an error naming ROBOT_USER and ROBOT_PASSWORD.
func New(o Options) (*Client, error) {
	cfg := o.Config
	if !cfg.HasCredentials() {
		return nil, errors.New("robot.New: no credentials: set ROBOT_USER and ROBOT_PASSWORD")
	}
	c := &Client{
		http:     &http.Client{Timeout: 15 * time.Second},
		endpoint: strings.TrimSuffix(cfg.Endpoint, "/"),
		user:     cfg.User,
		password: cfg.Password,
		timeout:  cfg.CacheTimeout,
		wait:     cfg.RateLimitWaitTime,
		now:      time.Now,
		forced:   map[string]time.Time{},
		resets:   map[int]resetStatus{},
	}
	if c.endpoint == "" {
		c.endpoint = DefaultEndpoint
	}
	registerOnce.Do(func() {
		if err := legacyregistry.Register(requests); err != nil {
			klog.ErrorS(err, "registering metric", "name", "hcloud_ccm_robot_requests_total")
		}
	})
	if o.HTTPClient != nil {
		c.http = o.HTTPClient
	}
	if o.Now != nil {
		c.now = o.Now
	}
	return c, nil
}

// String describes the client without its credentials.
func (c *Client) String() string {
	return fmt.Sprintf("robot.Client{endpoint: %s, cache: %s, rateLimitWait: %s}", c.endpoint, c.timeout, c.wait)
}

// Servers returns every server of the account, from the cache while it is younger than the
// cache timeout. The slice is shared: do not modify it.
//
// # Errors
//
// A failed refresh is returned (wrapping [ErrRateLimited] for a rate limit, or an
// [*APIError]); the stale list is not served.
func (c *Client) Servers(ctx context.Context) ([]Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refreshIfStaleLocked(ctx); err != nil {
		return nil, err
	}
	return c.servers, nil
}

// Server returns the server with number n from the cached list (refreshed when stale).
//
// # Errors
//
// A wrapped [ErrNotFound] when the account has no such server; refresh errors as [Servers].
func (c *Client) Server(ctx context.Context, n int) (Server, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refreshIfStaleLocked(ctx); err != nil {
		return Server{}, err
	}
	s, ok := c.byNumber[n]
	if !ok {
		return Server{}, fmt.Errorf("robot: server %d: %w", n, ErrNotFound)
	}
	return s, nil
}

// ServerByName returns the server named name, or ok false. With refreshOnMiss, when the
// (fresh) cached list has no such server, the list is refreshed once per name and cache
// timeout window, as the official CCM does, so a newly ordered server is found before the
// cache expires.
func (c *Client) ServerByName(ctx context.Context, name string, refreshOnMiss bool) (s Server, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.refreshIfStaleLocked(ctx); err != nil {
		return Server{}, false, err
	}
	if s, ok := c.findLocked(name); ok || !refreshOnMiss {
		return s, ok, nil
	}
	if at, done := c.forced[name]; done && c.now().Before(at.Add(c.timeout)) {
		return Server{}, false, nil
	}
	if err := c.refreshLocked(ctx); err != nil {
		return Server{}, false, err
	}
	c.forced[name] = c.now()
	s, ok = c.findLocked(name)
	return s, ok, nil
}

func (c *Client) findLocked(name string) (Server, bool) {
	for _, s := range c.servers {
		if s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// ResetStatusMaxAge is how long OperatingStatus answers from its cache. The official CCM reads
// GET /reset/{n} on every call; the node lifecycle controller asks every 5 s for each NotReady
// node, which alone would spend Robot's hourly budget, so this CCM keeps an answer a minute.
const ResetStatusMaxAge = time.Minute

// OperatingStatus returns the operating status of server n from GET /reset/{n}: "shut off"
// for a powered-off server, "running", or "not supported" for tower models. An answer is
// reused for ResetStatusMaxAge.
func (c *Client) OperatingStatus(ctx context.Context, n int) (string, error) {
	var body struct {
		Reset struct {
			OperatingStatus string `json:"operating_status"`
		} `json:"reset"`
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.resets[n]; ok && c.now().Before(r.at.Add(ResetStatusMaxAge)) {
		return r.status, nil
	}
	if err := c.getLocked(ctx, "/reset/"+strconv.Itoa(n), &body); err != nil {
		return "", err
	}
	c.resets[n] = resetStatus{status: body.Reset.OperatingStatus, at: c.now()}
	return body.Reset.OperatingStatus, nil
}

// resetStatus is a cached answer of GET /reset/{n}.
type resetStatus struct {
	status string
	at     time.Time
}

func (c *Client) refreshIfStaleLocked(ctx context.Context) error {
	if c.loaded && c.now().Before(c.loadedAt.Add(c.timeout)) {
		return nil
	}
	return c.refreshLocked(ctx)
}

func (c *Client) refreshLocked(ctx context.Context) error {
	var list []struct {
		Server Server `json:"server"`
	}
	err := c.getLocked(ctx, "/server", &list)
	if errors.Is(err, ErrNotFound) {
		list, err = nil, nil // Robot's answer for an account without servers
	}
	if err != nil {
		return err
	}
	c.servers = make([]Server, 0, len(list))
	c.byNumber = make(map[int]Server, len(list))
	for _, e := range list {
		c.servers = append(c.servers, e.Server)
		c.byNumber[e.Server.Number] = e.Server
	}
	c.loadedAt, c.loaded = c.now(), true
	return nil
}

// getLocked sends GET path and decodes the JSON answer into dst, honouring and setting the
// rate-limit wait. c.mu is held, so concurrent callers wait instead of sending duplicates.
func (c *Client) getLocked(ctx context.Context, path string, dst any) error {
	op := "robot: GET " + path
	metricPath := path
	if strings.HasPrefix(path, "/reset/") {
		metricPath = "/reset/{n}"
	}
	if now := c.now(); now.Before(c.limitedUntil) {
		requests.WithLabelValues(metricPath, "wait").Inc()
		return fmt.Errorf("%s: %w: next try at %s (%s)", op, ErrRateLimited, c.limitedUntil.UTC().Format(time.RFC3339), config.EnvRobotRateLimitWaitTime)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+path, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.SetBasicAuth(c.user, c.password)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		requests.WithLabelValues(metricPath, "error").Inc()
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	requests.WithLabelValues(metricPath, strconv.Itoa(resp.StatusCode)).Inc()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	if resp.StatusCode != http.StatusOK {
		apiErr := &APIError{Status: resp.StatusCode}
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil {
			apiErr.Code, apiErr.Message = e.Error.Code, e.Error.Message
		}
		if errors.Is(apiErr, ErrRateLimited) && c.wait > 0 {
			c.limitedUntil = c.now().Add(c.wait)
		}
		// %w deliberately: callers test for ErrNotFound and ErrRateLimited.
		return fmt.Errorf("%s: %w", op, apiErr)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("%s: decoding the answer: %w", op, err)
	}
	return nil
}
