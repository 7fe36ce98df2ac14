package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbgroup"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/cache"
)

// typeCache holds the load balancer type list with its prices for the max age (one paginated
// list per hour): an instance of internal/cache, counted in the official CCM's type cache
// series.
type typeCache struct {
	*cache.Cache[typeList]
	now func() time.Time
}

// typeList is one read of the load balancer types, with their prices (inventory.go).
type typeList struct {
	types  []*hcloud.LoadBalancerType
	prices inventory.Prices
}

func newTypeCache(r *hcloudclient.LoadBalancerTypeReader, maxAge time.Duration) *typeCache {
	load := func(ctx context.Context) (typeList, error) {
		types, err := r.All(ctx)
		if err != nil {
			return typeList{}, err
		}
		p, err := lbplan.TypePrices(types)
		if err != nil {
			klog.ErrorS(err, "Load balancer type prices not understood; policy inputs price load balancers as unknown")
		}
		return typeList{types, p}, nil
	}
	lookups := func(result string) { compatmetrics.LoadBalancerTypeCache("all", result) }
	return &typeCache{Cache: cache.New(cache.Options[typeList]{Load: load, MaxAge: maxAge, Lookups: lookups}), now: time.Now}
}

// refresh reads the type list now (one paginated list) and keeps it.
func (c *typeCache) refresh(ctx context.Context) error {
	if _, _, err := c.Refresh(ctx); err != nil {
		return fmt.Errorf("read load balancer types: %w", err)
	}
	return nil
}

// get returns the type called name (nil if unknown) and the known names.
func (c *typeCache) get(ctx context.Context, name string) (*hcloud.LoadBalancerType, []string, error) {
	type found struct {
		t     *hcloud.LoadBalancerType
		known []string
	}
	r, err := read(ctx, "load balancer type "+name, func() (found, error) {
		list, _, err := c.Get(ctx)
		t, known := list.find(name)
		return found{t, known}, err
	})
	if errors.Is(err, errNotRecorded) && heldOnly(ctx) {
		return c.held(name)
	}
	return r.t, r.known, err
}

// held is get from the list held, whatever its age, without a request: for the audit's
// replay (heldOnly). It wraps errNotRecorded when no list is held.
func (c *typeCache) held(name string) (*hcloud.LoadBalancerType, []string, error) {
	list, _, ok := c.Held()
	if !ok {
		return nil, nil, fmt.Errorf("load balancer types: %w", errNotRecorded)
	}
	t, known := list.find(name)
	return t, known, nil
}

// find returns the type called name (nil if unknown) and the known names, sorted.
func (l typeList) find(name string) (*hcloud.LoadBalancerType, []string) {
	var known []string
	var found *hcloud.LoadBalancerType
	for _, t := range l.types {
		known = append(known, t.Name)
		if t.Name == name {
			found = t
		}
	}
	slices.Sort(known)
	return found, known
}

// limits returns the max_services of every known type.
func (c *typeCache) limits(ctx context.Context) ([]lbgroup.TypeLimit, error) {
	if _, _, err := c.get(ctx, ""); err != nil {
		return nil, err
	}
	list, _, _ := c.Held()
	out := make([]lbgroup.TypeLimit, 0, len(list.types))
	for _, t := range list.types {
		out = append(out, lbgroup.TypeLimit{Name: t.Name, MaxServices: t.MaxServices})
	}
	return out, nil
}
