package lbplan

import (
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
)

// OpChangeProtection is ChangeProtection's operation, as in input.Input.Operation. It MUST
// not change: policies match on it.
const OpChangeProtection = "change_protection"

func init() { register(ChangeProtection{}) }

// ChangeProtection turns the Hetzner delete protection of the load balancer on or off (the
// annotation LBDeleteProtection). Its policy input shows the protection before and after as
// current.protected and load_balancer.protected. A protected load balancer is one that
// ComputeDelete refuses to delete (*ProtectedError).
type ChangeProtection struct {
	update
	Delete bool
}

func (ChangeProtection) Operation() string { return OpChangeProtection }
func (m ChangeProtection) Label() string {
	return fmt.Sprintf("change_protection(delete=%t)", m.Delete)
}

// FieldAnnotation names the annotation of the field delete of a refusal of its request (the
// executor's refusal hints); "" for the others.
func (ChangeProtection) FieldAnnotation(key string) annotation.Name {
	if key == "delete" {
		return annotation.LBDeleteProtection
	}
	return ""
}

// Apply sets the protection.
func (m ChangeProtection) Apply(a *Actual) *Actual {
	return a.with(func(c *Actual) { c.Protected = m.Delete })
}

// Request is the change_protection action, as hcloud-go's ChangeProtection sends it.
func (m ChangeProtection) Request(a *Actual, _ int64) (apireq.Request, error) {
	return action(a, OpChangeProtection, schema.LoadBalancerActionChangeProtectionRequest{Delete: new(m.Delete)})
}

// planProtection is the planner rule of ChangeProtection: the protection d asks for, when it
// asks for one (nil leaves it alone, so without the annotation nothing is planned, as the
// official CCM plans nothing) and a has another.
func planProtection(d Desired, a *Actual) []Mutation {
	if d.DeleteProtection == nil || *d.DeleteProtection == a.Protected {
		return nil
	}
	return []Mutation{ChangeProtection{Delete: *d.DeleteProtection}}
}
