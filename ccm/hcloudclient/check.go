package hcloudclient

import (
	"context"
	"fmt"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// checkAttempts is how often Check asks the API before it gives up.
const checkAttempts = 3

// Check proves the token and the endpoint with one cheap request (GET /locations, as the
// official CCM does at startup), so that a wrong endpoint or token stops the CCM at start
// instead of failing every reconcile later.
//
// It asks at most 3 times. Each attempt is bounded by cfg.Timeout (HCLOUD_HTTP_TIMEOUT), with
// hcloud-go's own retries inside that bound, and waits cfg.RetryInterval, doubled each time,
// before the next; so the whole check ends after about 3 × cfg.Timeout plus 3 × cfg.RetryInterval
// (about 48 s with the defaults) even against an endpoint that never answers. Each attempt is
// logged with the endpoint, and each failure with its error.
//
// # Errors
//
// An invalid token is reported at once with the variable to fix (HCLOUD_TOKEN). Any other
// failure after the last attempt is reported with the endpoint and the variable that sets it
// (HCLOUD_ENDPOINT), and the last error. ctx ending stops the check with ctx's error.
func Check(ctx context.Context, conn *Conn, cfg config.HCloud) error {
	const op = "hcloudclient.Check"
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = hcloud.Endpoint
	}
	start := time.Now()
	backoff := cfg.RetryInterval
	var err error
	for attempt := 1; attempt <= checkAttempts; attempt++ {
		klog.InfoS("Checking the Hetzner Cloud API and token", "endpoint", endpoint, "attempt", attempt, "attempts", checkAttempts, "timeout", cfg.Timeout)
		actx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		_, err = conn.read.Location.All(actx)
		cancel()
		if err == nil {
			klog.InfoS("Hetzner Cloud API answered", "endpoint", endpoint, "attempt", attempt, "duration", time.Since(start))
			return nil
		}
		if hcloud.IsError(err, hcloud.ErrorCodeUnauthorized) {
			return fmt.Errorf("%s: the API at %s rejected the token: check %s: %w", op, endpoint, config.EnvHCloudToken, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		klog.ErrorS(err, "Hetzner Cloud API check failed", "endpoint", endpoint, "attempt", attempt, "attempts", checkAttempts, "elapsed", time.Since(start))
		if attempt == checkAttempts {
			break
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", op, context.Cause(ctx))
		}
		backoff *= 2
	}
	return fmt.Errorf("%s: no good answer from the Hetzner Cloud API at %s after %d attempts in %s: check %s (empty for %s) and that the CCM can reach it: %w",
		op, endpoint, checkAttempts, time.Since(start).Round(time.Millisecond), config.EnvHCloudEndpoint, hcloud.Endpoint, err)
}

// Network returns the network named by nameOrID (HCLOUD_NETWORK): an ID if it is a number
// and a network with that ID exists, a name otherwise.
//
// # Errors
//
// An API error, or no such network.
func Network(ctx context.Context, conn *Conn, nameOrID string) (*hcloud.Network, error) {
	const op = "hcloudclient.Network"
	n, _, err := conn.Networks().Get(ctx, nameOrID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if n == nil {
		return nil, fmt.Errorf("%s: network %q not found: check %s", op, nameOrID, config.EnvHCloudNetwork)
	}
	return n, nil
}
