// Package plugins runs the CCM's WebAssembly plugins: the host side of plugin ABI v1 on wazero.
//
// A plugin computes node labels (hook node_labels) or load balancer names (hook
// load_balancer_name). Start with Load (or Watch, which also reloads the file when it changes),
// then call NodeLabels or LoadBalancerName; every reply is validated before it is returned, and
// every failure is an error naming the plugin, the hook and the reason (see Reason), so the
// caller can fall back to its built-in behaviour and count or report the failure.
//
// Here's an example:
//
//	p, err := plugins.Load(ctx, "/plugins/labels.wasm.gz", plugins.Options{CallTimeout: 100 * time.Millisecond})
//	if err != nil {
//		return err
//	}
//	defer p.Close(ctx)
//	labels, err := p.NodeLabels(ctx, plugins.NodeInput{NodeName: "worker-1", Server: server})
//	if err != nil {
//		// use the built-in labels; record plugins.Reason(err)
//	}
//
// The ABI (abi.go) and the plugin author's guide are in docs/plugins.md; the guest SDK for Go
// plugins is plugins/sdk, with one package per hook (plugins/sdk/nodelabels, plugins/sdk/lbname).
//
// # Notes
//
//   - This package and the SDK import no Kubernetes packages; the SDK does not import this
//     package, so a plugin does not link wazero.
//   - Events and metrics for plugin failures are the caller's: this package returns errors.
package plugins
