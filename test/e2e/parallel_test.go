//go:build e2e

package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryTestRunsInParallel keeps the suite inside CI's time (issue 33): every test of this
// package owns its apiserver, etcd, emulator and CCM, so each one starts with t.Parallel() and
// `make e2e` runs E2E_PARALLEL of them at once. A test that cannot share the machine must be
// added to serial with the reason.
func TestEveryTestRunsInParallel(t *testing.T) {
	t.Parallel()
	serial := map[string]string{} // test name: why it must run alone
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			checked++
			if _, ok := serial[fn.Name.Name]; ok {
				continue
			}
			if !startsWithParallel(fn) {
				t.Errorf("%s (%s): the first statement must be t.Parallel(), or the test needs an entry in serial with the reason", fn.Name.Name, fset.Position(fn.Pos()))
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d tests, want all of the package's (50 or more)", checked)
	}
}

// startsWithParallel reports whether fn's first statement is t.Parallel().
func startsWithParallel(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	expr, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := expr.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "t" && sel.Sel.Name == "Parallel" && len(call.Args) == 0
}
