package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/compatmetrics"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/inventory"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// typeCache holds the load balancer type list for maxAge (one paginated list per hour).
type typeCache struct {
	list    *hcloudclient.LoadBalancerTypeReader
	maxAge  time.Duration
	now     func() time.Time
	mu      sync.Mutex
	types   []*hcloud.LoadBalancerType
	fetched time.Time
	// priced is the prices of types as of fetched (inventory.go), built once per read.
	priced struct {
		fetched time.Time
		types   []*hcloud.LoadBalancerType
		prices  inventory.Prices
	}
}

// refresh reads the type list now (one paginated list) and keeps it.
func (c *typeCache) refresh(ctx context.Context) error {
	types, err := c.list.All(ctx)
	if err != nil {
		return fmt.Errorf("read load balancer types: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.types, c.fetched = types, c.now()
	return nil
}

// get returns the type called name (nil if unknown) and the known names.
func (c *typeCache) get(ctx context.Context, name string) (*hcloud.LoadBalancerType, []string, error) {
	type found struct {
		t     *hcloud.LoadBalancerType
		known []string
	}
	r, err := read(ctx, "load balancer type "+name, func() (found, error) {
		t, known, err := c.lookup(ctx, name)
		return found{t, known}, err
	})
	if errors.Is(err, errNotRecorded) && heldOnly(ctx) {
		return c.held(name)
	}
	return r.t, r.known, err
}

// held is lookup from the list held, whatever its age, without a request: for the audit's
// replay (heldOnly). It wraps errNotRecorded when no list is held.
func (c *typeCache) held(name string) (*hcloud.LoadBalancerType, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.types == nil {
		return nil, nil, fmt.Errorf("load balancer types: %w", errNotRecorded)
	}
	t, known := c.find(name)
	return t, known, nil
}

// lookup is get without the record of reads (reads.go).
func (c *typeCache) lookup(ctx context.Context, name string) (*hcloud.LoadBalancerType, []string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	result := compatmetrics.ResultHit
	if c.types == nil || c.now().Sub(c.fetched) > c.maxAge {
		result = compatmetrics.ResultMiss
		types, err := c.list.All(ctx)
		if err != nil {
			return nil, nil, err
		}
		c.types, c.fetched = types, c.now()
	}
	compatmetrics.LoadBalancerTypeCache("all", result)
	found, known := c.find(name)
	return found, known, nil
}

// find returns the type called name among those held (nil if unknown) and the known names,
// sorted. c.mu must be held.
func (c *typeCache) find(name string) (*hcloud.LoadBalancerType, []string) {
	var known []string
	var found *hcloud.LoadBalancerType
	for _, t := range c.types {
		known = append(known, t.Name)
		if t.Name == name {
			found = t
		}
	}
	slices.Sort(known)
	return found, known
}

// limits returns the max_services of every known type.
func (c *typeCache) limits(ctx context.Context) ([]lbplan.TypeLimit, error) {
	if _, _, err := c.get(ctx, ""); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]lbplan.TypeLimit, 0, len(c.types))
	for _, t := range c.types {
		out = append(out, lbplan.TypeLimit{Name: t.Name, MaxServices: t.MaxServices})
	}
	return out, nil
}
