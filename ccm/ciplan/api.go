package ciplan

import (
	"context"
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)

// StateFromAPI reads the current load balancers from the Hetzner Cloud API with the token and
// endpoint of cfg (HCLOUD_TOKEN, HCLOUD_ENDPOINT): GET /v1/load_balancers, every page, through
// hcloudclient.ListLoadBalancersReadOnly, whose client refuses any request but GET and HEAD, so
// it makes no write (TestStateFromAPI_ZeroWrites); a read-only API token is enough and
// recommended.
func StateFromAPI(ctx context.Context, cfg config.HCloud) (State, error) {
	lbs, err := hcloudclient.ListLoadBalancersReadOnly(ctx, cfg, "hcloud-policy-ccm-plan")
	if err != nil {
		return State{}, fmt.Errorf("plan --from-api: %w", err)
	}
	return State{LoadBalancers: lbs}, nil
}
