package lbplan

import (
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
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
