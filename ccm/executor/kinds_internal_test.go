package executor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
