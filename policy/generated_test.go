package policy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/internal/inputdoc"
)

// TestGeneratedCurrent regenerates the input reference and schema and compares them with the
// committed files: run `make generate` (go generate ./...) after changing input/input.go or a
// mutation kind.
func TestGeneratedCurrent(t *testing.T) {
	src, err := os.ReadFile("input/input.go")
	if err != nil {
		t.Fatal(err)
	}
	md, schema, err := inputdoc.Generate(src, policy.Operations())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{inputdoc.MarkdownPath: md, inputdoc.SchemaPath: schema, inputdoc.SchemaGoPath: inputdoc.SchemaGo(schema)} {
		got, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatalf("%v: run `make generate` (go generate ./...)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date: run `make generate` (go generate ./...)", path)
		}
	}
}

// TestGeneratedSchema_acceptsSampleInputs checks the schema against the sample inputs with
// OPA's json.match_schema, and that it rejects an input of the wrong shape.
func TestGeneratedSchema_acceptsSampleInputs(t *testing.T) {
	schema, err := os.ReadFile(filepath.Join("..", inputdoc.SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	pq, err := rego.New(
		rego.Query("[ok, errs] := json.match_schema(input.doc, input.schema)"),
	).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	match := func(doc any) (bool, any) {
		t.Helper()
		rs, err := pq.Eval(context.Background(), rego.EvalInput(map[string]any{"doc": doc, "schema": string(schema)}))
		if err != nil || len(rs) != 1 {
			t.Fatalf("json.match_schema: %v, %v", rs, err)
		}
		return rs[0].Bindings["ok"].(bool), rs[0].Bindings["errs"]
	}
	paths, err := filepath.Glob(filepath.Join(examplesDir, "inputs", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no sample inputs: %v", err)
	}
	for _, p := range paths {
		in, err := readSample(p)
		if err != nil {
			t.Fatal(err)
		}
		if ok, errs := match(in); !ok {
			t.Errorf("%s does not match the schema: %v", p, errs)
		}
	}
	if ok, _ := match(map[string]any{"version": "v1", "action": "loadbalancer.explode"}); ok {
		t.Error("the schema accepts an unknown action and missing fields")
	}
}

// TestGeneratedSchema_opaCheckTypesNested compiles with the committed schema as `opa check
// --schema docs/policy-input.schema.json` does: a misspelt field below a nullable object is a
// type error, a correct one is not.
func TestGeneratedSchema_opaCheckTypesNested(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", inputdoc.SchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := util.UnmarshalJSON(raw, &schema); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref     string
		wantErr bool
	}{
		{"input.route.destinaton", true},
		{"input.cluster.network.ip_rang", true},
		{"input.load_balancer.listeners", true},
		{"input.final.services[_].listen_port", false},
		{"input.route.destination", false},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			ss := ast.NewSchemaSet()
			ss.Put(ast.SchemaRootRef, schema)
			m := ast.MustParseModuleWithOpts("package ccm\n\nx if "+tt.ref+"\n", ast.ParserOptions{RegoVersion: ast.RegoV1})
			c := ast.NewCompiler().WithSchemas(ss)
			c.Compile(map[string]*ast.Module{"p.rego": m})
			if got := c.Failed(); got != tt.wantErr {
				t.Errorf("type error = %v (%v), want %v", got, c.Errors, tt.wantErr)
			}
		})
	}
}
