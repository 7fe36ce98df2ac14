package plugins_test

import (
	"context"
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

func ExampleLoadBytes() {
	ctx := context.Background()
	wasm, _ := fixtures.ReadFile("testdata/good.wasm") // or plugins.Load(ctx, "/plugins/labels.wasm.gz", ...)
	p, err := plugins.LoadBytes(ctx, "good.wasm", wasm, plugins.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	fmt.Println(p.Hooks())

	name, err := p.LoadBalancerName(ctx, plugins.LoadBalancerNameInput{
		ClusterName: "prod",
		Service:     plugins.Service{Namespace: "shop", Name: "web", UID: "u-1"},
	})
	fmt.Println(name, err)
	// Output:
	// [node_labels load_balancer_name]
	// wat-lb <nil>
}

func ExampleReason() {
	ctx := context.Background()
	wasm, _ := fixtures.ReadFile("testdata/loop.wasm")
	p, err := plugins.LoadBytes(ctx, "loop.wasm", wasm, plugins.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close(ctx)
	_, err = p.NodeLabels(ctx, plugins.NodeInput{NodeName: "worker-1"})
	fmt.Println(plugins.Reason(err))
	// Output:
	// timeout
}

func ExampleValidateLabels() {
	err := plugins.ValidateLabels(map[string]string{
		"example.com/pool":    "db",
		"kubernetes.io/arch":  "arm64",
		"example.com/bad key": "x",
	})
	fmt.Println(err)
	// Output:
	// label key "example.com/bad key": name part "bad key": character ' ' not allowed: only ASCII letters and digits, '-', '_' and '.' are allowed; label key "kubernetes.io/arch": prefixes kubernetes.io and k8s.io (and their subdomains) are reserved
}
