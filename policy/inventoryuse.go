package policy

import "github.com/open-policy-agent/opa/v1/ast"

// inventoryFields are the input fields whose use makes the CCM price load balancers.
var inventoryFields = map[ast.String]bool{"inventory": true, "cost": true}

// namesInventory reports whether module m names input.inventory or input.cost: any string term
// "inventory" or "cost" (input.inventory.cluster, object.get(input, ["cost", "delta"], {}),
// a rule comparing the strings counts too). A policy that reaches those fields only through a
// computed key (input[k], walk(input)) is not seen; docs/policy.md asks it to name the field.
func namesInventory(m *ast.Module) bool {
	found := false
	ast.WalkTerms(m, func(t *ast.Term) bool {
		if s, ok := t.Value.(ast.String); ok && inventoryFields[s] {
			found = true
		}
		return found
	})
	return found
}

// ReadsInventory reports whether the revision in force names input.inventory or input.cost
// (namesInventory). Without such a revision the CCM builds no inventory and sends none of the
// reads it needs: a policy that does not use it costs what it cost before (TestAllowAllPolicyEqualsNoPolicy
// in ccm).
func (e *Engine) ReadsInventory() bool {
	c := e.active.Load()
	return c != nil && c.readsInventory
}
