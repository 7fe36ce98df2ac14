package ciplan

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// ErrWriteRefused is returned for any request of StateFromAPI's client that is not a read.
var ErrWriteRefused = fmt.Errorf("plan --from-api: refused a request that is not GET or HEAD (plan only reads)")

// readOnly is an http.RoundTripper that sends GET and HEAD requests and refuses every other
// method before it leaves the process. It is what makes --from-api read-only, whatever the
// token may do: TestStateFromAPI_ZeroWrites checks it against the emulator.
type readOnly struct{ next http.RoundTripper }

func (t readOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, ErrWriteRefused)
	}
	return t.next.RoundTrip(r)
}

// StateFromAPI reads the current load balancers from the Hetzner Cloud API with the token and
// endpoint of cfg (HCLOUD_TOKEN, HCLOUD_ENDPOINT): GET /v1/load_balancers, every page. Its
// client refuses any request but GET and HEAD (readOnly), so it makes no write; a read-only
// API token is enough and recommended.
func StateFromAPI(ctx context.Context, cfg config.HCloud) (State, error) {
	if cfg.Token == "" {
		return State{}, fmt.Errorf("plan --from-api: HCLOUD_TOKEN is not set (a read-only API token of the project is enough)")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	opts := []hcloud.ClientOption{
		hcloud.WithToken(cfg.Token),
		hcloud.WithApplication("hcloud-policy-ccm-plan", ""),
		hcloud.WithHTTPClient(&http.Client{Timeout: timeout, Transport: readOnly{next: http.DefaultTransport}}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Second), MaxRetries: 2}),
	}
	if cfg.Endpoint != "" {
		opts = append(opts, hcloud.WithEndpoint(cfg.Endpoint))
	}
	lbs, err := hcloud.NewClient(opts...).LoadBalancer.All(ctx)
	if err != nil {
		return State{}, fmt.Errorf("plan --from-api: list load balancers: %w", err)
	}
	return State{LoadBalancers: lbs}, nil
}
