package lbplan

import (
	"fmt"
	"net"
	"slices"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Event reasons of Robot targets, as the official CCM names them. They MUST not change.
const (
	// ReasonInternalIPNotConfigured: use-private-ip is wanted but a Robot node has no
	// InternalIP (Warning on the Service).
	ReasonInternalIPNotConfigured = "InternalIPNotConfigured"
	// ReasonServerNotFound: a Robot node's server is not in the Robot account, or there is no
	// Robot API access to find its IP (Warning on the Node).
	ReasonServerNotFound = "ServerNotFound"
)

// RobotNode is what the planner knows of a Robot dedicated server node (provider ID
// hrobot://<n>); the caller resolves it with the Robot API, if it has access.
type RobotNode struct {
	// Number is the Robot server number.
	Number int
	// NoAPI is set when the CCM has no Robot credentials (ROBOT_ENABLED without ROBOT_USER
	// and ROBOT_PASSWORD): only InternalIP can be used.
	NoAPI bool
	// PublicIP is the server's server_ip from the Robot API; "" with NoAPI or when the
	// account has no such server.
	PublicIP string
	// InternalIP is the node's first InternalIP address; "" when it has none.
	InternalIP string
}

// IPTarget is an IP target: the address of a Robot node.
type IPTarget struct {
	IP   string
	Node string // node name, for events; not compared
}

// TargetProblem is a Robot node that is not an IP target, or not with the IP wanted, as the
// official CCM reports it: Reason is ReasonInternalIPNotConfigured (an event on the Service)
// or ReasonServerNotFound (an event on the Node).
type TargetProblem struct {
	Node    string
	Reason  string
	Message string
}

// keptIPTargets counts the IP targets of a that d wants.
func keptIPTargets(d Desired, a *Actual) int {
	n := 0
	for _, ip := range a.IPTargets {
		if slices.ContainsFunc(d.IPTargets, func(t IPTarget) bool { return t.IP == ip }) {
			n++
		}
	}
	return n
}

// planIPTargets removes every IP target that is not wanted (also those of Robot nodes that
// left, or that switched to another IP), and adds the wanted ones missing, while count (the
// targets the load balancer has after the removals and the server targets' adds, kept IP
// targets included) is below limit (0: no limit).
func planIPTargets(d Desired, a *Actual, count, limit int) (removes, adds []Mutation, skipped []IPTarget) {
	want := map[string]bool{}
	for _, t := range d.IPTargets {
		want[t.IP] = true
	}
	have := map[string]bool{}
	for _, ip := range a.IPTargets {
		if want[ip] {
			have[ip] = true
			continue
		}
		removes = append(removes, RemoveIPTarget{IP: ip})
	}
	for _, t := range d.IPTargets {
		if have[t.IP] {
			continue
		}
		if limit > 0 && count >= limit {
			skipped = append(skipped, t)
			continue
		}
		adds = append(adds, AddIPTarget{Target: t})
		count++
	}
	return removes, adds, skipped
}

func init() { register(AddIPTarget{}) }

// AddIPTarget adds an IP target (a Robot node).
type AddIPTarget struct {
	update
	Target IPTarget
}

func (AddIPTarget) Operation() string { return OpAddTarget }
func (m AddIPTarget) Label() string   { return fmt.Sprintf("add_target(ip:%s)", m.Target.IP) }

// Apply adds the address to the IP targets (kept sorted; an address already there stays once).
func (m AddIPTarget) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) {
		if i, found := slices.BinarySearch(c.IPTargets, m.Target.IP); !found {
			c.IPTargets = slices.Insert(c.IPTargets, i, m.Target.IP)
		}
	})
}

// Request adds the IP target. As with server targets, one beyond the type's limit is skipped
// (MaxTargetsReached); one a concurrent reconcile of the same Service added first (upstream's
// node sync runs beside the service sync) is done.
func (m AddIPTarget) Request(a *Actual, _ int64) (apireq.Request, error) {
	ip := net.ParseIP(m.Target.IP)
	if ip == nil {
		return apireq.Request{}, fmt.Errorf("%s: %q is not an IP address", m.Label(), m.Target.IP)
	}
	req, err := action(a, OpAddTarget, schema.LoadBalancerActionAddTargetRequest{
		Type: string(hcloud.LoadBalancerTargetTypeIP), IP: &schema.LoadBalancerActionAddTargetRequestIP{IP: ip.String()},
	})
	if err != nil {
		return req, err
	}
	req.Outcomes = []apireq.Outcome{
		{Code: hcloud.ErrorCodeTargetAlreadyDefined, Then: apireq.Done, Log: "IP target already defined"},
		targetLimitReached(a, "IP "+m.Target.IP, m.Target.Node),
	}
	return req, nil
}

// TargetMutation is implemented by the mutations that add or remove one target; PolicyTarget
// is that target as the policy input's "target" shows it.
type TargetMutation interface {
	Mutation
	PolicyTarget() input.LBTarget
}

var _ = []TargetMutation{AddTarget{}, RemoveTarget{}, AddIPTarget{}, RemoveIPTarget{}}

// PolicyTarget is the server target added.
func (m AddTarget) PolicyTarget() input.LBTarget { return policyTarget(m.Target) }

// PolicyTarget is the server target removed.
func (m RemoveTarget) PolicyTarget() input.LBTarget { return policyTarget(m.Target) }

// PolicyTarget is the IP target added.
func (m AddIPTarget) PolicyTarget() input.LBTarget {
	return input.LBTarget{Type: string(hcloud.LoadBalancerTargetTypeIP), IP: m.Target.IP}
}

// PolicyTarget is the IP target removed.
func (m RemoveIPTarget) PolicyTarget() input.LBTarget {
	return input.LBTarget{Type: string(hcloud.LoadBalancerTargetTypeIP), IP: m.IP}
}
