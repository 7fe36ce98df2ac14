package hcloudclient

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// ErrWriteRefused is returned for any request of a read-only client that is not a read.
var ErrWriteRefused = fmt.Errorf("refused a request that is not GET or HEAD (this client only reads)")

// ReadOnlyTransport is an http.RoundTripper that sends GET and HEAD requests and refuses every
// other method before it leaves the process (TestReadOnlyTransport in ccm/ciplan). The readers
// of a [Conn] send through it.
type ReadOnlyTransport struct{ Next http.RoundTripper }

// RoundTrip sends r through Next when it is a GET or HEAD, and refuses it otherwise. The
// answer's Request is a copy of r without the Authorization header: hcloud-go hands the
// answer out (hcloud.Response, hcloud.Error.Response), and the token in it would let its
// receiver write by hand.
func (t ReadOnlyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, ErrWriteRefused)
	}
	resp, err := t.Next.RoundTrip(r)
	if resp != nil && resp.Request != nil {
		req := resp.Request.Clone(resp.Request.Context())
		req.Header.Del("Authorization")
		resp.Request = req
	}
	return resp, err
}

// ListLoadBalancersReadOnly lists every load balancer of the project (GET /v1/load_balancers,
// every page) with the token and endpoint of cfg, for offline tools such as `plan --from-api`.
// It reads through a [LoadBalancerReader] whose client sends through ReadOnlyTransport, so it
// makes no write whatever the token may do (TestReadOnlyTransport), and the client never
// leaves this function.
func ListLoadBalancersReadOnly(ctx context.Context, cfg config.HCloud, application string) ([]*hcloud.LoadBalancer, error) {
	client, err := readOnlyClient(cfg, application)
	if err != nil {
		return nil, fmt.Errorf("list load balancers: %w", err)
	}
	lbs, err := (&LoadBalancerReader{&client.LoadBalancer}).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list load balancers: %w", err)
	}
	return lbs, nil
}

// ListLoadBalancerTypesReadOnly lists every load balancer type with its prices per location
// (GET /v1/load_balancer_types, every page), read as ListLoadBalancersReadOnly reads, for
// `plan --from-api`.
func ListLoadBalancerTypesReadOnly(ctx context.Context, cfg config.HCloud, application string) ([]*hcloud.LoadBalancerType, error) {
	client, err := readOnlyClient(cfg, application)
	if err != nil {
		return nil, fmt.Errorf("list load balancer types: %w", err)
	}
	types, err := (&LoadBalancerTypeReader{&client.LoadBalancerType}).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("list load balancer types: %w", err)
	}
	return types, nil
}

// readOnlyClient is a client with the token and endpoint of cfg that sends through
// ReadOnlyTransport; callers keep it to themselves.
func readOnlyClient(cfg config.HCloud, application string) (*hcloud.Client, error) {
	if cfg.Token == "" {
		return nil, fmt.Errorf("HCLOUD_TOKEN is not set (a read-only API token of the project is enough)")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	opts := []hcloud.ClientOption{
		hcloud.WithToken(cfg.Token),
		hcloud.WithApplication(application, ""),
		hcloud.WithHTTPClient(&http.Client{Timeout: timeout, Transport: ReadOnlyTransport{Next: http.DefaultTransport}}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Second), MaxRetries: 2}),
	}
	if cfg.Endpoint != "" {
		opts = append(opts, hcloud.WithEndpoint(cfg.Endpoint))
	}
	return hcloud.NewClient(opts...), nil
}
