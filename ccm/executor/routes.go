package executor

import (
	"context"
	"fmt"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// Route operations, as in policy.Input.Operation.
const (
	OpAddRoute    = "add_route"
	OpDeleteRoute = "delete_route"
)

// AddRoute adds route to network for the node nodeName after a policy decision (action
// route.create, operation add_route) and waits for the action.
//
// # Errors
//
// A denial puts a Warning event PolicyDenied on the Node and returns an error wrapping
// policy.ErrDenied; locked or conflict (another change runs on the network) gives a wrapped
// *api.RetryError.
func (x *Executor) AddRoute(ctx context.Context, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string) error {
	return x.route(ctx, policy.ActionRouteCreate, OpAddRoute, network, route, nodeName, func() (*hcloud.Action, error) {
		a, _, err := x.client.Network.AddRoute(ctx, network, hcloud.NetworkAddRouteOpts{Route: route})
		return a, err
	})
}

// DeleteRoute deletes route from network after a policy decision (action route.delete,
// operation delete_route) and waits for the action. A route that is already gone (not_found)
// counts as deleted. Errors as AddRoute.
func (x *Executor) DeleteRoute(ctx context.Context, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string) error {
	return x.route(ctx, policy.ActionRouteDelete, OpDeleteRoute, network, route, nodeName, func() (*hcloud.Action, error) {
		a, _, err := x.client.Network.DeleteRoute(ctx, network, hcloud.NetworkDeleteRouteOpts{Route: route})
		if hcloud.IsError(err, hcloud.ErrorCodeNotFound) {
			return nil, nil
		}
		return a, err
	})
}

func (x *Executor) route(ctx context.Context, action, op string, network *hcloud.Network, route hcloud.NetworkRoute, nodeName string, call func() (*hcloud.Action, error)) error {
	if network == nil || route.Destination == nil || route.Gateway == nil {
		return fmt.Errorf("%s: network, destination and gateway are required", op)
	}
	pr := &policy.Route{Destination: route.Destination.String(), Gateway: route.Gateway.String(), Node: nodeName}
	label := fmt.Sprintf("%s(%s via %s)", op, pr.Destination, pr.Gateway)
	d := x.decider.Decide(ctx, policy.Input{
		Version: policy.InputVersion, Action: action, Operation: op, Cluster: x.cluster, Route: pr,
	})
	ref := nodeRef(nodeName)
	if w := decisionWarnings(d); len(w) > 0 {
		x.recorder.Event(ref, corev1.EventTypeWarning, ReasonPolicyWarning, strings.Join(messages(label, w), "; "))
	}
	if !d.Allowed {
		countMutation(action, op, resultDenied)
		msg := strings.Join(messages(label, denyMessages(d)), "; ")
		x.recorder.Event(ref, corev1.EventTypeWarning, ReasonPolicyDenied, "nothing changed: "+msg)
		// Use %w deliberately: callers match policy.ErrDenied; the route controller retries.
		return fmt.Errorf("%s: %w", msg, policy.ErrDenied)
	}
	if len(d.Deny) > 0 {
		x.recorder.Event(ref, corev1.EventTypeWarning, ReasonPolicyDryRunDenied, "would be denied (dry run): "+strings.Join(messages(label, d.Deny), "; "))
	}
	klog.InfoS("executing", "op", label, "network", network.ID, "node", nodeName)
	a, err := call()
	if err == nil {
		err = x.client.Action.WaitFor(ctx, a)
	}
	if err != nil {
		countMutation(action, op, resultError)
		return wrapAPIError(label, err)
	}
	countMutation(action, op, resultSuccess)
	return nil
}
