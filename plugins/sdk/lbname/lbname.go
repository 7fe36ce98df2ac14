// Package lbname implements the load_balancer_name hook for Go plugins: importing it exports
// ccm_lb_name from the module, and Handle registers the function that answers it.
//
// Here's an example:
//
//	func init() {
//		lbname.Handle(func(in sdk.LoadBalancerNameInput) (string, error) {
//			return in.Service.Namespace + "-" + in.Service.Name, nil
//		})
//	}
//
// # Notes
//
//   - The host validates the name (docs/plugins.md) with Hetzner's rule: 1 to 128 characters,
//     no leading or trailing whitespace.
//   - The name must be a pure function of the input: the CCM renames a load balancer whose
//     computed name changes.
//   - A returned error becomes the reply {"error": "..."}; the CCM then uses the default name
//     and records a Warning event.
package lbname

import "github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"

var handler func(sdk.LoadBalancerNameInput) (string, error)

// Handle registers f as the load_balancer_name hook. Call it once, from init.
func Handle(f func(sdk.LoadBalancerNameInput) (string, error)) { handler = f }

// Serve answers one raw request with the registered handler, exactly as the export does.
// Plugin tests use it to check the JSON path on the host.
func Serve(req []byte) []byte {
	return sdk.Serve(req, handler, func(n string) any { return sdk.LoadBalancerNameReply{Name: n} })
}
