package policy_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// This example loads a one-rule policy and decides two load balancer creations.
func ExampleEngine_Decide() {
	ctx := context.Background()
	e := policy.NewEngine(policy.Options{Mode: policy.ModeEnforce})
	_, err := e.Load(ctx, map[string][]byte{
		"types.rego": []byte(`package ccm

deny contains {"msg": msg, "code": "lb_type"} if {
	not input.load_balancer.type in data.config.types
	msg := sprintf("load balancer type %q is not allowed", [input.load_balancer.type])
}
`),
		"data.json": []byte(`{"config": {"types": ["lb11", "lb21"]}}`),
	}, policy.DirSource("example"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, typ := range []string{"lb11", "lb31"} {
		d := e.Decide(ctx, input.Input{
			Version:      input.InputVersion,
			Action:       input.ActionLoadBalancerCreate,
			Operation:    "create",
			Service:      &input.Service{Namespace: "default", Name: "web"},
			LoadBalancer: &input.LoadBalancer{Type: typ, Location: "fsn1"},
		})
		fmt.Println(typ, "allowed:", d.Allowed)
		for _, m := range d.Deny {
			fmt.Printf("  deny: %s (%s)\n", m.Msg, m.Code)
		}
	}
	// Output:
	// lb11 allowed: true
	// lb31 allowed: false
	//   deny: load balancer type "lb31" is not allowed (lb_type)
}

// This example shows how a rejected revision reports file, row and message.
func ExampleLoadError() {
	e := policy.NewEngine(policy.Options{})
	_, err := e.Load(context.Background(), map[string][]byte{
		"net.rego": []byte("package ccm\n\ndeny contains \"down\" if http.send({\"method\": \"GET\", \"url\": \"http://x\"}).status_code != 200\n"),
	}, policy.DirSource("example"))
	var lerr *policy.LoadError
	if errors.As(err, &lerr) {
		for _, p := range lerr.Problems {
			fmt.Printf("%s:%d %s\n", p.File, p.Row, p.Message)
		}
	}
	// Output:
	// net.rego:3 undefined function http.send (network, host and random built-ins are disabled in the CCM policy sandbox: http.send, net.lookup_ip_addr, opa.runtime, rand.intn, uuid.rfc4122)
}
