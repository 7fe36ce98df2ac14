package hcloudemu

import (
	"fmt"
	"os"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/robotemu"
)

// Seed is initial state, loadable from YAML or JSON (LoadSeedFile). Catalog
// entries replace the default entry of the same name or are added; networks
// are created before servers, servers before load balancers.
//
// Here's an example (YAML):
//
//	networks:
//	  - id: 1
//	    name: k8s
//	    ip_range: 10.0.0.0/8
//	    subnets: [{ip_range: 10.0.0.0/16, network_zone: eu-central}]
//	servers:
//	  - name: node-1
//	    location: fsn1
//	    networks: [{network_id: 1}]
type Seed struct {
	Locations         []schema.Location         `json:"locations,omitempty"`
	ServerTypes       []schema.ServerType       `json:"server_types,omitempty"`
	LoadBalancerTypes []schema.LoadBalancerType `json:"load_balancer_types,omitempty"`
	Networks          []NetworkSpec             `json:"networks,omitempty"`
	Servers           []ServerSpec              `json:"servers,omitempty"`
	LoadBalancers     []LoadBalancerSpec        `json:"load_balancers,omitempty"`
	// MetadataServer is the name or ID of the server the metadata service
	// answers for (see SetMetadataServer); "" leaves it as it is.
	MetadataServer string `json:"metadata_server,omitempty"`
	// Robot seeds the Robot webservice emulator served beside this one (package robotemu);
	// this emulator ignores it.
	Robot *robotemu.Seed `json:"robot,omitempty"`
}

// LoadSeedFile reads a seed from a YAML or JSON file; unknown fields are
// errors, so typos do not pass silently.
func LoadSeedFile(path string) (Seed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Seed{}, fmt.Errorf("load seed file: %w", err)
	}
	var s Seed
	if err := yaml.UnmarshalStrict(b, &s); err != nil {
		return Seed{}, fmt.Errorf("load seed file %s: %w", path, err)
	}
	return s, nil
}

// ApplySeed adds a seed to the current state (the admin endpoint POST
// /_emu/seed uses it). It stops at the first entry that fails.
func (e *Emulator) ApplySeed(s Seed) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applySeedLocked(s)
}

func (e *Emulator) applySeedLocked(s Seed) error {
	for _, l := range s.Locations {
		if l.ID == 0 || l.Name == "" {
			return fmt.Errorf("apply seed: location needs id and name, got %+v", l)
		}
		e.st.locations = upsert(e.st.locations, l, func(x schema.Location) string { return x.Name })
	}
	for _, t := range s.ServerTypes {
		if t.ID == 0 || t.Name == "" {
			return fmt.Errorf("apply seed: server type needs id and name, got %q", t.Name)
		}
		if t.Prices == nil {
			t.Prices = []schema.PricingServerTypePrice{}
		}
		if t.Locations == nil {
			t.Locations = []schema.ServerTypeLocation{}
		}
		e.st.serverTypes = upsert(e.st.serverTypes, t, func(x schema.ServerType) string { return x.Name })
	}
	for _, t := range s.LoadBalancerTypes {
		if t.ID == 0 || t.Name == "" {
			return fmt.Errorf("apply seed: load balancer type needs id and name, got %q", t.Name)
		}
		if t.Prices == nil {
			t.Prices = []schema.PricingLoadBalancerTypePrice{}
		}
		e.st.lbTypes = upsert(e.st.lbTypes, t, func(x schema.LoadBalancerType) string { return x.Name })
	}
	for _, n := range s.Networks {
		if _, err := e.addNetworkLocked(n); err != nil {
			return fmt.Errorf("apply seed: %w", err)
		}
	}
	for _, srv := range s.Servers {
		if _, err := e.addServerLocked(srv); err != nil {
			return fmt.Errorf("apply seed: %w", err)
		}
	}
	for _, lb := range s.LoadBalancers {
		if _, err := e.addLoadBalancerLocked(lb); err != nil {
			return fmt.Errorf("apply seed: %w", err)
		}
	}
	if s.MetadataServer != "" {
		e.st.metadataServer = s.MetadataServer
	}
	return nil
}

func upsert[T any](list []T, v T, name func(T) string) []T {
	for i := range list {
		if name(list[i]) == name(v) {
			list[i] = v
			return list
		}
	}
	return append(list, v)
}
