package config_test

import (
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// Read the environment (here a map; os.LookupEnv in production), then validate it.
func ExampleRead() {
	vars := map[string]string{
		"HCLOUD_TOKEN":                    "my-token",
		"HCLOUD_NETWORK":                  "k8s",
		"HCLOUD_INSTANCES_ADDRESS_FAMILY": "ipv5",
		"ROBOT_ENABLED":                   "true",
	}
	cfg, err := config.Read(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("network:", cfg.Network.NameOrID, "routes:", cfg.Network.RoutesEnabled, "cache:", cfg.ServerCache.Mode, cfg.ServerCache.MaxAge)
	fmt.Println(cfg.Validate())
	// Output:
	// network: k8s routes: true cache: all 10s
	// invalid value for "HCLOUD_INSTANCES_ADDRESS_FAMILY": "ipv5" (expect one of: ipv4, ipv6, dualstack)
	// using routes with Robot is not supported: set HCLOUD_NETWORK_ROUTES_ENABLED=false or unset ROBOT_ENABLED
}
