// Package hcloudclient builds the hcloud-go client of the CCM: token, endpoint, timeouts,
// action polling and retries from [config.HCloud], and a transport that reads the API's
// RateLimit-* headers and slows the CCM down before the project's budget runs out.
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

// Option configures [New].
type Option func(*options)

type options struct {
	version       string
	base          http.RoundTripper
	reserve       float64
	clientOptions []hcloud.ClientOption
}

// WithVersion sets the CCM version sent in the User-Agent ("hcloud-policy-ccm/<version>").
func WithVersion(version string) Option {
	return func(o *options) { o.version = version }
}

// WithBaseTransport sets the transport under the rate-limit transport; the default is
// [http.DefaultTransport].
func WithBaseTransport(rt http.RoundTripper) Option {
	return func(o *options) { o.base = rt }
}

// WithReserve sets the fraction of the rate limit (0 to 1) below which requests are paced;
// the default is [DefaultReserve].
func WithReserve(fraction float64) Option {
	return func(o *options) { o.reserve = fraction }
}

// WithClientOptions appends hcloud-go options after the ones New derives from the config, so
// they win (tests use it for zero backoffs).
func WithClientOptions(opts ...hcloud.ClientOption) Option {
	return func(o *options) { o.clientOptions = append(o.clientOptions, opts...) }
}

// New returns an hcloud-go client for cfg.
//
// The client sends the token and the User-Agent "hcloud-policy-ccm/<version>", talks to
// cfg.Endpoint (the public API when empty) with an HTTP timeout of cfg.Timeout, polls actions
// with an exponential backoff starting at cfg.PollInterval (doubling, capped at 2s or the
// interval if larger), retries with an exponential backoff starting at cfg.RetryInterval
// (doubling, jitter, capped at 1m, 5 retries), and writes requests to stderr when cfg.Debug.
// Every request goes through a [Transport] that paces requests when the rate limit runs low.
// A non-nil reg gets hcloud-go's own request metrics (hcloud_api_*); registering twice on the
// same registry reuses the collectors.
//
// # Errors
//
// New fails when the token is empty, the endpoint is not an http(s) URL, or an interval or
// the timeout is not positive ([config.Config.Validate] reports the same problems).
func New(cfg config.HCloud, reg prometheus.Registerer, opts ...Option) (*hcloud.Client, error) {
	const op = "hcloudclient.New"
	o := options{version: "unknown", base: http.DefaultTransport, reserve: DefaultReserve}
	for _, opt := range opts {
		opt(&o)
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
	if o.reserve < 0 || o.reserve > 1 {
		errs = append(errs, fmt.Errorf("rate limit reserve %v: expect a fraction from 0 to 1", o.reserve))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}

	clientOpts := []hcloud.ClientOption{
		hcloud.WithToken(cfg.Token),
		hcloud.WithApplication(ApplicationName, o.version),
		hcloud.WithHTTPClient(&http.Client{Timeout: cfg.Timeout, Transport: NewTransport(o.base, o.reserve)}),
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
		clientOpts = append(clientOpts, hcloud.WithEndpoint(cfg.Endpoint))
	}
	if reg != nil {
		clientOpts = append(clientOpts, hcloud.WithInstrumentation(reg))
	}
	if cfg.Debug {
		clientOpts = append(clientOpts, hcloud.WithDebugWriter(os.Stderr))
	}
	clientOpts = append(clientOpts, o.clientOptions...)
	return hcloud.NewClient(clientOpts...), nil
}
