package policy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestSchema_typesNested loads revisions that read input fields, at the top and nested below
// nullable objects, through variables and iteration: a field the input does not have rejects
// the revision with file, line, column and the field it could have meant; a field it has loads.
func TestSchema_typesNested(t *testing.T) {
	tests := []struct {
		name string
		body string   // the body of a deny rule, from line 4 column 5 of lb.rego
		want []string // substrings of the single problem; nil: the revision loads
	}{
		{"top-level typo", `input.acton == "x"`,
			[]string{"lb.rego:4:5", "rego_type_error", `input has no field "acton"`, `did you mean "action"?`}},
		{"typo below a nullable object", `input.route.destinaton == "x"`,
			[]string{"lb.rego:4:5", `input.route has no field "destinaton"`, `did you mean "destination"?`}}, //nolint:misspell // the misspelling is what is tested
		{"two levels below nullable objects", `input.cluster.network.ip_rang == "x"`,
			[]string{`input.cluster.network has no field "ip_rang"`, `did you mean "ip_range"?`}},
		{"a field that exists nowhere: every field listed, no guess", `input.load_balancer.listeners`,
			[]string{`input.load_balancer has no field "listeners"`, "services", "targets", "opa check --schema docs/policy-input.schema.json"}},
		{"through a variable", "r := input.route\n    r.gatway == \"x\"", []string{`r has no field "gatway"`, `did you mean "gateway"?`}},
		{"through iteration with some ... in", "some s in input.final.services\n    s.listen_prot == 22", []string{`s has no field "listen_prot"`, `did you mean "listen_port"?`}},
		{"list element by index", `input.load_balancer.targets[_].server == 1`,
			[]string{`has no field "server"`, `did you mean "server_id"?`}},
		{"existing nested field", `input.route.destination == "x"`, nil},
		{"map of labels takes any key", `input.service.namespace_labels["team"] == "x"`, nil},
		{"omitted-when-zero field", `input.target.ip == "10.0.0.1"`, nil},
		{"inventory namespace totals", `input.inventory.namespaces["team-a"].load_balancers >= 3`, nil},
		{"inventory per-type count in the cluster", `input.inventory.cluster.by_type.lb31 >= 2`, nil},
		{"inventory entry owner and price", "some lb in input.inventory.load_balancers\n    lb.owner.namespace == \"a\"\n    lb.price.monthly_gross > 1.5", nil},
		{"cost delta", `input.cost.delta.monthly_net > 0`, nil},
		{"typo below the inventory", `input.inventory.cluster.load_balancer > 1`,
			[]string{`has no field "load_balancer"`, `did you mean "load_balancers"?`}},
		{"typo below the cost", `input.cost.delta.monthly > 1`, []string{`has no field "monthly"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package ccm\n\ndeny contains \"x\" if {\n    " + tt.body + "\n}\n"
			e := checkOneProblem(t, src, tt.want)
			if tt.want != nil && e.Revision() != "" {
				t.Errorf("revision %s is in force after a type error", e.Revision())
			}
		})
	}
}

// TestSchema_lastGoodStays: a revision with a misspelt input field is rejected like a parse
// error; the revision in force stays.
func TestSchema_lastGoodStays(t *testing.T) {
	e := policy.NewEngine(policy.Options{})
	good := mustLoad(t, e, files("lb.rego", "package ccm\n\ndeny contains \"x\" if input.route.destination == \"0.0.0.0/0\"\n"))
	_, err := e.Load(context.Background(), files("lb.rego", "package ccm\n\ndeny contains \"x\" if input.route.destinaton == \"0.0.0.0/0\"\n"), policy.Source{Name: "test"})
	if err == nil || !strings.Contains(err.Error(), "lb.rego:3:") {
		t.Fatalf("Load of the typo = %v, want a rejection at lb.rego:3", err)
	}
	if e.Revision() != good {
		t.Errorf("revision in force = %q, want %q", e.Revision(), good)
	}
}

// TestSchema_objectGetKeys: a literal key (or path of keys) of object.get on an input reference
// is checked against the input schema, as a field in a reference is: a key the input does not
// have rejects the revision with file, line, column and the field it could have meant; a key it
// has, a key of a map, and keys the check cannot tell load.
func TestSchema_objectGetKeys(t *testing.T) {
	tests := []struct {
		name string
		body string   // the body of a deny rule, from line 4 column 5 of lb.rego
		want []string // substrings of the single problem; nil: the revision loads
	}{
		{"typo in the key", `object.get(input.load_balancer, "locaton", "") == "x"`,
			[]string{"lb.rego:4:37", "ccm_type_error", `object.get key "locaton": input.load_balancer has no field "locaton"; did you mean "location"?`}},
		{"correct key", "input.load_balancer != null\n    object.get(input.load_balancer, \"location\", \"\") == \"x\"", nil},
		{"typo at the top of input", `object.get(input, "acton", "") == "x"`,
			[]string{"lb.rego:4:23", `input has no field "acton"; did you mean "action"?`}},
		{"typo in a path", `object.get(input.cluster, ["network", "ip_rang"], "") == "x"`,
			[]string{`input.cluster.network has no field "ip_rang"; did you mean "ip_range"?`}},
		{"correct path", `object.get(input.cluster, ["network", "ip_range"], "") == "x"`, nil},
		{"typo below an array element", `object.get(input.load_balancer.services[0], "listen_prot", 0) == 22`,
			[]string{`input.load_balancer.services[0] has no field "listen_prot"; did you mean "listen_port"?`}},
		{"typo below an iterated element", `object.get(input.load_balancer.targets[_], "server", 0) == 1`,
			[]string{`has no field "server"; did you mean "server_id"?`}},
		{"a key that exists nowhere: every field listed, no guess", `object.get(input.route, "listeners", "") == "x"`,
			[]string{`input.route has no field "listeners" (fields of input.route, closest first:`, "destination", "gateway"}},
		{"as an expression with an output", "object.get(input.route, \"gatway\", \"\", gw)\n    gw == \"x\"",
			[]string{`input.route has no field "gatway"; did you mean "gateway"?`}},
		{"inside a rule's value", "x := {\"loc\": object.get(input.load_balancer, \"locaton\", \"\")}\n    x.loc == \"y\"",
			[]string{`did you mean "location"?`}},
		{"map of labels takes any key", `object.get(input.service.annotations, "anything", "") == "x"`, nil},
		{"through an import of input", `object.get(lb, "locaton", "") == "x"`, []string{`input.load_balancer has no field "locaton"; did you mean "location"?`}},
		{"through an import below it", `object.get(lb.network, "ip_rang", "") == "x"`, []string{`input.load_balancer.network has no field "ip_rang"`}},
		{"map path takes any key", "input.service != null\n    object.get(input.service, [\"namespace_labels\", \"team\"], \"\") == \"x\"", nil},
		{"an object not read from input is not checked", `object.get({"a": 1}, "b", 0) == 1`, nil},
		{"a variable key is not checked", "input.load_balancer != null\n    some k in [\"locaton\"]\n    object.get(input.load_balancer, k, \"\") == \"x\"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package ccm\n\ndeny contains \"x\" if {\n    " + tt.body + "\n}\n"
			if strings.Contains(tt.body, "object.get(lb") { // the import rows (strict mode: an unused import is an error)
				src += "\nimport input.load_balancer as lb\n" // after the rule, which Rego allows: the rule's lines stay
			}
			checkOneProblem(t, src, tt.want)
		})
	}
}

// TestSchema_objectGetKeysWithCompileErrors: a misspelt object.get key is reported with the
// compiler's errors, in file and line order.
func TestSchema_objectGetKeysWithCompileErrors(t *testing.T) {
	src := "package ccm\n\ndeny contains \"x\" if input.route.destinaton == \"x\"\n\ndeny contains \"y\" if object.get(input.route, \"gatway\", \"\") == \"x\"\n"
	_, err := policy.NewEngine(policy.Options{}).Load(context.Background(), files("a.rego", src), policy.Source{Name: "test"})
	var lerr *policy.LoadError
	if !errors.As(err, &lerr) || len(lerr.Problems) != 2 {
		t.Fatalf("Load = %v, want two problems", err)
	}
	if p := lerr.Problems; p[0].Row != 3 || p[0].Code != "rego_type_error" || p[1].Row != 5 || p[1].Code != "ccm_type_error" {
		t.Errorf("problems = %v, want the type error of line 3, then the object.get key of line 5", p)
	}
}

// checkOneProblem loads src as lb.rego: with want nil it must load; otherwise it must be refused
// with exactly one problem that contains every string of want. It returns the engine.
func checkOneProblem(t *testing.T, src string, want []string) *policy.Engine {
	t.Helper()
	e := policy.NewEngine(policy.Options{})
	_, err := e.Load(context.Background(), files("lb.rego", src), policy.Source{Name: "test"})
	if want == nil {
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		return e
	}
	var lerr *policy.LoadError
	if !errors.As(err, &lerr) {
		t.Fatalf("Load error = %v, want a *LoadError", err)
	}
	if len(lerr.Problems) != 1 {
		t.Fatalf("problems = %v, want one", lerr.Problems)
	}
	got := lerr.Problems[0].String()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("problem %q\nlacks %q", got, w)
		}
	}
	return e
}
