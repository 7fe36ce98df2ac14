// Package hcloudclient is the CCM's connection to the Hetzner Cloud API: token, endpoint,
// timeouts, action polling and retries from [config.HCloud], and one transport that reads the
// API's RateLimit-* headers and slows the CCM down before the project's budget runs out.
//
// It hands out read-only wrappers ([LoadBalancerReader], [ServerReader], [NetworkReader],
// [CertificateReader], [LoadBalancerTypeReader]): structs with an unexported hcloud-go client
// and only Get/List/All methods, so no type assertion or conversion of them finds a write
// method (the compiler keeps that). Their client sends through [ReadOnlyTransport], so a
// write that reaches it anyway (package unsafe) is refused before it leaves the process, and
// their answers do not carry the token (TestReaders_refuseWrites). The one client that writes
// is built by ccm/executor/internal/writeclient from [Conn.ClientOptions]; the compiler keeps
// every package outside ccm/executor from importing writeclient, and
// TestOnlyTheExecutorCanWriteToHetzner (ccm/invariant_test.go) keeps every package but the
// executor from importing it, calling ClientOptions or building an hcloud-go client of its
// own; reflection and package unsafe are outside what it sees. Reads and writes share the one pacing transport, so they share the API budget.
package hcloudclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// ApplicationName is sent in the User-Agent of every API request.
const ApplicationName = "hcloud-policy-ccm"

// Backoff bounds. The poll cap keeps a long action from being polled rarely; the retry
// values are hcloud-go's defaults (which the official CCM uses).
const (
	pollCap         = 2 * time.Second
	retryCap        = time.Minute
	retryMaxRetries = 5
)

// Options configure [New]. Config is required.
type Options struct {
	// Config is the token, endpoint, intervals, timeout and debug flag (HCLOUD_*).
	Config config.HCloud
	// Registerer, if not nil, gets hcloud-go's own request metrics (hcloud_api_*); registering
	// twice on the same registry reuses the collectors.
	Registerer prometheus.Registerer
	// Version is the CCM version sent in the User-Agent ("hcloud-policy-ccm/<version>");
	// empty means "unknown".
	Version string
	// BaseTransport is the transport under the rate-limit transport; nil means
	// [http.DefaultTransport].
	BaseTransport http.RoundTripper
	// Reserve is the fraction of the rate limit (0 to 1) below which requests are paced; 0
	// means [DefaultReserve].
	Reserve float64
	// ClientOptions are hcloud-go options applied after the ones New derives from Config, so
	// they win (tests use them for short constant backoffs). An hcloud.WithHTTPClient among
	// them applies to the writing client only: the readers always send through
	// ReadOnlyTransport over the Conn's Transport (BaseTransport goes under both).
	ClientOptions []hcloud.ClientOption
}

// Conn is a connection to the Hetzner Cloud API: the settings every client of the CCM uses
// and the one pacing [Transport] they share. It reads through the wrappers its methods return;
// it has no write method. Build it with [New].
type Conn struct {
	// recipe are the hcloud-go options of every client on this connection, without the HTTP
	// client (each client gets its own http.Client over transport: hcloud-go wraps the HTTP
	// client's transport with its metrics when it builds a client).
	recipe    []hcloud.ClientOption
	transport *Transport
	timeout   time.Duration
	reg       prometheus.Registerer
	// read serves the reader wrappers; it sends through ReadOnlyTransport over transport and
	// never leaves this package.
	read *hcloud.Client
}

// New returns a connection for o.Config (cfg below).
//
// Its clients send the token and the User-Agent "hcloud-policy-ccm/<version>", talk to
// cfg.Endpoint (the public API when empty) with an HTTP timeout of cfg.Timeout, poll actions
// with an exponential backoff starting at cfg.PollInterval (doubling, capped at 2s or the
// interval if larger), retry with an exponential backoff starting at cfg.RetryInterval
// (doubling, jitter, capped at 1m, 5 retries), and write requests to stderr when cfg.Debug.
// Every request goes through one [Transport] that paces requests when the rate limit runs low.
// A non-nil reg gets hcloud-go's own request metrics (hcloud_api_*); registering twice on the
// same registry reuses the collectors.
//
// # Errors
//
// An empty token, an endpoint that is not an http(s) URL, a non-positive interval or timeout
// and a reserve outside 0..1 are errors naming the setting; they are reported together.
func New(o Options) (*Conn, error) {
	const op = "hcloudclient.New"
	cfg, reg := o.Config, o.Registerer
	if o.Version == "" {
		o.Version = "unknown"
	}
	if o.BaseTransport == nil {
		o.BaseTransport = http.DefaultTransport
	}
	if o.Reserve == 0 {
		o.Reserve = DefaultReserve
	}

	var errs []error
	if cfg.Token == "" {
		errs = append(errs, fmt.Errorf("empty token: set %s", config.EnvHCloudToken))
	}
	if cfg.Endpoint != "" {
		if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("invalid endpoint %q: expect an http or https URL", cfg.Endpoint))
		}
	}
	if cfg.PollInterval <= 0 || cfg.RetryInterval <= 0 || cfg.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("poll interval %s, retry interval %s and timeout %s must be positive", cfg.PollInterval, cfg.RetryInterval, cfg.Timeout))
	}
	if o.Reserve < 0 || o.Reserve > 1 {
		errs = append(errs, fmt.Errorf("rate limit reserve %v: expect a fraction from 0 to 1", o.Reserve))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}

	recipe := []hcloud.ClientOption{
		hcloud.WithToken(cfg.Token),
		hcloud.WithApplication(ApplicationName, o.Version),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ExponentialBackoffWithOpts(hcloud.ExponentialBackoffOpts{
			Base: cfg.PollInterval, Multiplier: 2, Cap: max(pollCap, cfg.PollInterval),
		})}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{
			BackoffFunc: hcloud.ExponentialBackoffWithOpts(hcloud.ExponentialBackoffOpts{
				Base: cfg.RetryInterval, Multiplier: 2, Cap: max(retryCap, cfg.RetryInterval), Jitter: true,
			}),
			MaxRetries: retryMaxRetries,
		}),
	}
	if cfg.Endpoint != "" {
		recipe = append(recipe, hcloud.WithEndpoint(cfg.Endpoint))
	}
	if cfg.Debug {
		recipe = append(recipe, hcloud.WithDebugWriter(os.Stderr))
	}
	recipe = append(recipe, o.ClientOptions...)
	c := &Conn{recipe: recipe, transport: newTransport(o.BaseTransport, o.Reserve), timeout: cfg.Timeout, reg: reg}
	readOnly := &http.Client{Timeout: c.timeout, Transport: ReadOnlyTransport{Next: c.transport}}
	c.read = hcloud.NewClient(append(c.ClientOptions(), hcloud.WithHTTPClient(readOnly))...)
	return c, nil
}

// ClientOptions returns the hcloud-go options of a client on c: the settings of [New] and a
// fresh http.Client over c's one [Transport], so every client built from them shares the API
// budget with c's readers.
//
// It is for ccm/executor/internal/writeclient alone, which builds the one client that writes;
// TestOnlyTheExecutorCanWriteToHetzner fails on any other caller (the compiler cannot keep an
// exported method from other packages).
func (c *Conn) ClientOptions() []hcloud.ClientOption {
	out := make([]hcloud.ClientOption, 0, len(c.recipe)+2)
	// The HTTP client comes first so that an Options.ClientOptions entry hcloud.WithHTTPClient(...)
	// in the recipe still wins, as it did when the options were one list.
	out = append(out, hcloud.WithHTTPClient(&http.Client{Timeout: c.timeout, Transport: c.transport}))
	out = append(out, c.recipe...)
	if c.reg != nil {
		out = append(out, hcloud.WithInstrumentation(c.reg))
	}
	return out
}
