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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "package ccm\n\ndeny contains \"x\" if {\n    " + tt.body + "\n}\n"
			e := policy.NewEngine(policy.Options{})
			_, err := e.Load(context.Background(), files("lb.rego", src), policy.Source{Name: "test"})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			var lerr *policy.LoadError
			if !errors.As(err, &lerr) {
				t.Fatalf("Load error = %v, want a *LoadError", err)
			}
			if len(lerr.Problems) != 1 {
				t.Fatalf("problems = %v, want one", lerr.Problems)
			}
			got := lerr.Problems[0].String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("problem %q\nlacks %q", got, w)
				}
			}
			if e.Revision() != "" {
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
