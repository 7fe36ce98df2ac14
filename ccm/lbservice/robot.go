package lbservice

import (
	"fmt"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"

	"k8s.io/apimachinery/pkg/labels"

	"slices"
	"strings"
)

// robotTarget returns the IP target of Robot node n, or "" with a problem, by the official
// CCM's rules (internal/hcops ReconcileHCLBTargets): with Robot API access the server's
// server_ip, or with use-private-ip the node's InternalIP (falling back to server_ip with
// InternalIPNotConfigured); without API access only the InternalIP, with use-private-ip.
func robotTarget(name string, n lbplan.RobotNode, usePrivate bool) (string, *lbplan.TargetProblem) {
	serverNotFound := &lbplan.TargetProblem{Node: name, Reason: lbplan.ReasonServerNotFound,
		Message: fmt.Sprintf("No server with id %d was found in Robot", n.Number)}
	switch {
	case n.NoAPI && usePrivate && n.InternalIP == "":
		return "", &lbplan.TargetProblem{Node: name, Reason: lbplan.ReasonInternalIPNotConfigured,
			Message: fmt.Sprintf("no InternalIP found for Robot node %s (id=%d), cannot add as LB target without Robot credentials; skipping", name, n.Number)}
	case n.NoAPI && usePrivate:
		return n.InternalIP, nil
	case n.NoAPI, n.PublicIP == "":
		return "", serverNotFound
	case usePrivate && n.InternalIP == "":
		return n.PublicIP, &lbplan.TargetProblem{Node: name, Reason: lbplan.ReasonInternalIPNotConfigured,
			Message: fmt.Sprintf("use-private-ip is set, but no InternalIP found for node %s: continuing with ExternalIP %s", name, n.PublicIP)}
	case usePrivate:
		return n.InternalIP, nil
	}
	return n.PublicIP, nil
}

// desiredIPTargets adds the IP targets of the Robot nodes among in.Nodes that sel selects
// and that are not excluded, sorted by IP; one IP is wanted once.
func desiredIPTargets(d *lbplan.Desired, in DesiredInput, usePrivate bool, sel labels.Selector) {
	seen := map[string]bool{}
	for _, n := range in.Nodes {
		if n.Robot == nil || !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		if _, excluded := n.Labels[lbplan.LabelExcludeFromLB]; excluded {
			continue
		}
		ip, problem := robotTarget(n.Name, *n.Robot, usePrivate)
		if problem != nil {
			d.TargetProblems = append(d.TargetProblems, *problem)
		}
		if ip == "" || seen[ip] {
			continue
		}
		seen[ip] = true
		d.IPTargets = append(d.IPTargets, lbplan.IPTarget{IP: ip, Node: n.Name})
	}
	slices.SortFunc(d.IPTargets, func(a, b lbplan.IPTarget) int { return strings.Compare(a.IP, b.IP) })
}
