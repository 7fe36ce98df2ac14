package executor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// TestKinds_EveryMutationTypeHasAnEntry parses ccm/lbplan: every type with an Operation method
// (a mutation kind) must have an entry in the table, or the executor would refuse plans that
// hold it ("no executor table entry").
func TestKinds_EveryMutationTypeHasAnEntry(t *testing.T) {
	files, err := filepath.Glob("../lbplan/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var mutations []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Operation" {
				continue
			}
			if id, ok := fn.Recv.List[0].Type.(*ast.Ident); ok {
				mutations = append(mutations, id.Name)
			}
		}
	}
	if len(mutations) < 10 {
		t.Fatalf("found %d mutation types in ccm/lbplan (%v): the parser missed them", len(mutations), mutations)
	}
	var inTable []string
	for typ := range kinds {
		inTable = append(inTable, typ.Name())
	}
	for _, m := range mutations {
		if !slices.Contains(inTable, m) {
			t.Errorf("lbplan.%s has no entry in the executor's table (kinds.go)", m)
		}
	}
	if len(inTable) != len(mutations) {
		t.Errorf("table has %d entries %v, lbplan has %d mutation types %v", len(inTable), inTable, len(mutations), mutations)
	}
}

// unlisted is a mutation kind without a table entry.
type unlisted struct{}

func (unlisted) Action() string                        { return "loadbalancer.update" }
func (unlisted) Operation() string                     { return "unlisted" }
func (unlisted) Label() string                         { return "unlisted(1)" }
func (unlisted) Apply(a *lbplan.Actual) *lbplan.Actual { return a }

func TestKindOf_AKindWithoutAnEntryIsAnErrorNamingIt(t *testing.T) {
	if _, err := kindOf(unlisted{}); err == nil || !strings.Contains(err.Error(), "unlisted(1): no executor table entry") {
		t.Errorf("kindOf(unlisted) error = %v, want one naming the mutation and the missing entry", err)
	}
	if _, err := createOpts(lbplan.Create{Name: "web"}, []lbplan.Mutation{lbplan.ChangeType{Type: "lb21"}}, 0); err == nil ||
		!strings.Contains(err.Error(), "change_type(lb21) cannot ride along with create(web)") {
		t.Errorf("createOpts with a kind that has no inline = %v, want a clear error", err)
	}
}
