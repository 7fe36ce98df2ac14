package lbservice

import (
	"errors"
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"

	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CheckService makes the checks of svc that come before any plan, in the CCM's order: the
// node selector annotation parses (the official CCM reads it first, so a bad one fails before
// any warning), and the name annotation, when set, passes validName. The CCM (ccm/loadbalancer)
// and `plan` (ccm/ciplan) both call it, so they refuse the same Services with the same errors:
// the node selector's error, or an *annotation.InvalidError naming annotation.LBName.
//
// validName is the CCM's one name rule, plugins.ValidateLoadBalancerName; it is passed in
// because package plugins links wazero, which the planners must not (TestPlannersAreLight).
func CheckService(svc *corev1.Service, validName func(string) error) error {
	if _, err := annotation.LBNodeSelector.Selector(svc); err != nil && !errors.Is(err, annotation.ErrNotSet) {
		return err
	}
	if n, ok := annotation.LBName.Value(svc); ok && validName(n) != nil {
		return &annotation.InvalidError{Name: annotation.LBName, Value: n, Accepted: "1 to 128 characters without leading or trailing whitespace"}
	}
	return nil
}

// IsNameError reports whether err is CheckService's error about the name annotation.
func IsNameError(err error) bool {
	var ie *annotation.InvalidError
	return errors.As(err, &ie) && ie.Name == annotation.LBName
}

// ReservedNameError is CheckName's error: the name is the default name of another load
// balancer group's load balancer ("<cluster>-group-<group>", GroupLoadBalancerName), which is
// reserved for that group, whether or not it exists yet, so that no Service can take it
// before the group does or after its load balancer was lost (issue 40 §6).
type ReservedNameError struct {
	Name, Group string
}

func (e *ReservedNameError) Error() string {
	return fmt.Sprintf("load balancer name %q is reserved for load balancer group %s (a group's load balancer is called <cluster name>-group-<group>): nothing changed; set %q to another name, or join the group with %q: %s",
		e.Name, e.Group, annotation.LBName, annotation.LBGroup, e.Group)
}

// CheckName refuses name for the load balancer of group ("" for a Service's own) in cluster
// when it is the reserved name of another group (a *ReservedNameError). The CCM
// (ccm/loadbalancer) and `plan` (ccm/ciplan) both call it before any write.
func CheckName(name, cluster, group string) error {
	g, ok := strings.CutPrefix(name, cluster+"-group-")
	if !ok || g == "" || g == group || lbplan.GroupLoadBalancerName(cluster, group) == name && group != "" {
		return nil
	}
	return &ReservedNameError{Name: name, Group: g}
}
