package ciplan

import (
	"context"
	"fmt"
	"os"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
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

// PricesFromAPI reads the load balancer prices from the Hetzner Cloud API with the token and
// endpoint of cfg: GET /v1/load_balancer_types, read-only as StateFromAPI reads.
func PricesFromAPI(ctx context.Context, cfg config.HCloud) (inventory.Prices, error) {
	types, err := hcloudclient.ListLoadBalancerTypesReadOnly(ctx, cfg, "hcloud-policy-ccm-plan")
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("plan --from-api: %w", err)
	}
	prices, err := lbplan.TypePrices(types)
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("plan --from-api: %w", err)
	}
	return prices, nil
}

// ReadPrices reads a --prices file: the JSON body of GET /v1/load_balancer_types.
func ReadPrices(path string) (inventory.Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("--prices: %w", err)
	}
	prices, err := inventory.ParsePrices(data)
	if err != nil {
		return inventory.Prices{}, fmt.Errorf("--prices %s: %w", path, err)
	}
	return prices, nil
}
