package ccm_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tables the gate and the executor trust (the mutation kinds, the endpoints, the group
// settings) are closed by construction (issue 41 §5, issue 30's spoof: a type that embedded
// lbplan.Update, appended to the exported lbplan.Kinds from another package's init, got an
// allowed decision and renamed the load balancer):
//
//   - the compiler: each table is an unexported variable of its package; the package hands out
//     copies (lbplan.Kinds, routeplan.Kinds, apireq.Endpoints, lbgroup.GroupSettings) and only its
//     own inits register (lbplan's register);
//   - TestTrustedPackagesExportNoTable: no package the gate or the executor trusts exports a
//     variable but an error sentinel;
//   - TestNoWriteToAnotherPackagesVariable: no package of the module assigns, appends to,
//     increments, or takes the address of a package-level variable of another package of the
//     module (an error sentinel such as lbplan.ErrProtected included). Upstream registries that
//     are meant to be written (k8s.io/cloud-provider's app.AllWebhooks, in cmd/) are not the
//     module's and not checked.
//
// What these do not see: reflection and package unsafe (as for the wall, invariant_test.go),
// and a method with a pointer receiver called on another package's exported variable (none of
// the trusted packages exports one: the first test).

// trustedPackages are the packages whose tables the gate and the executor trust.
var trustedPackages = []string{
	modulePath + "/ccm/lbplan", modulePath + "/ccm/routeplan", modulePath + "/ccm/apireq",
	modulePath + "/ccm/executor", modulePath + "/ccm/gate", modulePath + "/ccm/lbgroup", modulePath + "/ccm/lbservice", modulePath + "/policy", modulePath + "/policy/input", modulePath + "/ccm/inventory",
}

func TestTrustedPackagesExportNoTable(t *testing.T) {
	pkgs, err := module()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range pkgs {
		if !slices.Contains(trustedPackages, p.PkgPath) {
			continue
		}
		seen++
		for _, v := range exportedTables(p.Types) {
			t.Errorf("%s exports the variable %s: a table the gate or the executor trusts must be unexported, handed out as a copy", p.PkgPath, v)
		}
	}
	if seen != len(trustedPackages) {
		t.Fatalf("found %d of the %d trusted packages", seen, len(trustedPackages))
	}
}

// exportedTables are the exported package-level variables of pkg that are not of type error.
func exportedTables(pkg *types.Package) []string {
	errType := types.Universe.Lookup("error").Type()
	var out []string
	for _, name := range pkg.Scope().Names() {
		v, ok := pkg.Scope().Lookup(name).(*types.Var)
		if ok && v.Exported() && !types.Identical(v.Type(), errType) {
			out = append(out, fmt.Sprintf("%s (%s)", name, v.Type()))
		}
	}
	return out
}

func TestNoWriteToAnotherPackagesVariable(t *testing.T) {
	pkgs, err := module()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Syntax {
			rel, _ := filepath.Rel(root, p.Fset.File(f.Pos()).Name())
			for _, w := range foreignVarWrites(p.Fset, p.Types, f, p.TypesInfo, modulePath+"/") {
				t.Errorf("%s:%s", filepath.ToSlash(rel), w)
			}
		}
	}
}

// foreignVarWrites returns "line: ..." for each write in f to a package-level variable of
// another package than pkg whose path starts with scope: an assignment (=, op=, also to an
// element or a field of it), ++ or --, or its address taken.
func foreignVarWrites(fset *token.FileSet, pkg *types.Package, f *ast.File, info *types.Info, scope string) []string {
	var out []string
	report := func(e ast.Expr, how string) {
		if v := foreignVar(pkg, e, info); v != nil && strings.HasPrefix(v.Pkg().Path(), scope) {
			out = append(out, fmt.Sprintf("%d: %s %s.%s, a variable of another package", fset.Position(e.Pos()).Line, how, v.Pkg().Path(), v.Name()))
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE {
				for _, l := range n.Lhs {
					report(l, "assigns")
				}
			}
		case *ast.IncDecStmt:
			report(n.X, "changes")
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				report(n.X, "takes the address of")
			}
		case *ast.RangeStmt:
			if n.Tok == token.ASSIGN {
				report(n.Key, "assigns")
				if n.Value != nil {
					report(n.Value, "assigns")
				}
			}
		}
		return true
	})
	return out
}

// foreignVar returns the package-level variable of another package than pkg that e is, or whose
// element or field e is; nil for any other expression.
func foreignVar(pkg *types.Package, e ast.Expr, info *types.Info) *types.Var {
	for e != nil {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			if v := packageVar(info.Uses[x.Sel]); v != nil {
				return foreign(pkg, v)
			}
			e = x.X
		case *ast.Ident:
			return foreign(pkg, packageVar(info.Uses[x]))
		default:
			return nil
		}
	}
	return nil
}

// packageVar is obj when it is a package-level variable.
func packageVar(obj types.Object) *types.Var {
	v, ok := obj.(*types.Var)
	if !ok || v.Pkg() == nil || v.Parent() != v.Pkg().Scope() {
		return nil
	}
	return v
}

// foreign is v when it belongs to another package than pkg.
func foreign(pkg *types.Package, v *types.Var) *types.Var {
	if v == nil || v.Pkg() == pkg {
		return nil
	}
	return v
}

// TestForeignVarWrites: the check finds the spoof of issue 30 (append to another package's
// kinds from an init) and every other write to another package's variable, and passes reads and
// writes to a package's own variables.
func TestForeignVarWrites(t *testing.T) {
	fset := token.NewFileSet()
	check := func(path, src string, imp types.Importer) (*types.Package, *ast.File, *types.Info) {
		t.Helper()
		f, err := parser.ParseFile(fset, path+".go", src, 0)
		if err != nil {
			t.Fatal(err)
		}
		info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
		p, err := (&types.Config{Importer: imp}).Check(path, fset, []*ast.File{f}, info)
		if err != nil {
			t.Fatal(err)
		}
		return p, f, info
	}
	table, _, _ := check("example.com/table", `package table
type Kind interface{ Op() string }
var Kinds []Kind
var Err error
var Count int
type S struct{ N int }
var Conf S`, importer.Default())
	imp := importerFunc(func(path string) (*types.Package, error) {
		if path == "example.com/table" {
			return table, nil
		}
		return importer.Default().Import(path)
	})
	pkg, f, info := check("example.com/spoof", `package spoof
import "example.com/table"
type rename struct{}
func (rename) Op() string { return "update" }
var own []int
func init() {
	table.Kinds = append(table.Kinds, rename{})
	table.Kinds[0] = rename{}
	table.Err = nil
	table.Count++
	table.Conf.N = 1
	p := &table.Count
	_ = p
	own = append(own, len(table.Kinds))
	x := table.Count
	_ = x
}`, imp)
	findings := foreignVarWrites(fset, pkg, f, info, "example.com/")
	got := strings.Join(findings, "\n")
	for _, want := range []string{
		"7: assigns example.com/table.Kinds", "8: assigns example.com/table.Kinds", "9: assigns example.com/table.Err",
		"10: changes example.com/table.Count", "11: assigns example.com/table.Conf", "12: takes the address of example.com/table.Count",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("findings lack %q:\n%s", want, got)
		}
	}
	if n := len(findings); n != 6 {
		t.Errorf("%d findings, want 6 (reads and the package's own variable are fine):\n%s", n, got)
	}
}

// TestGateIsPure: ccm/gate, which `plan`, the webhook and the audit decide through, imports
// neither the executor (the one writer) nor ccm/hcloudclient (the readers), directly or through
// another package of the module: it holds no client, so deciding sends nothing. Making a client
// of its own is what TestOnlyTheExecutorCanWriteToHetzner (invariant_test.go) refuses anywhere.
func TestGateIsPure(t *testing.T) {
	pkgs, err := module()
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{modulePath + "/ccm/executor", modulePath + "/ccm/hcloudclient", modulePath + "/ccm/loadbalancer"}
	for _, p := range pkgs {
		if p.PkgPath != modulePath+"/ccm/gate" {
			continue
		}
		seen := map[*types.Package]bool{}
		var walk func(pkg *types.Package, via string)
		walk = func(pkg *types.Package, via string) {
			if seen[pkg] {
				return
			}
			seen[pkg] = true
			if slices.Contains(forbidden, pkg.Path()) {
				t.Errorf("ccm/gate imports %s (via %s): the gate must hold no client", pkg.Path(), via)
			}
			for _, i := range pkg.Imports() {
				if strings.HasPrefix(i.Path(), modulePath+"/") {
					walk(i, via+" -> "+i.Path())
				}
			}
		}
		walk(p.Types, p.PkgPath)
		return
	}
	t.Fatal("ccm/gate not found in the module")
}

// TestEveryRunIsPriced: pricing travels with the plan (ccm/gate.Inputs). Every call of the
// executor's Run, RunDetached or Decide in ccm/loadbalancer passes its plan through l.priced, so a
// policy that reads input.inventory or input.cost sees them on every plan the CCM runs; the
// executor calls back into no one for them.
func TestEveryRunIsPriced(t *testing.T) {
	pkgs, err := module()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, p := range pkgs {
		if p.PkgPath != modulePath+"/ccm/loadbalancer" {
			continue
		}
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Run" && sel.Sel.Name != "RunDetached" && sel.Sel.Name != "Decide") {
					return true
				}
				if recv, ok := sel.X.(*ast.SelectorExpr); !ok || recv.Sel.Name != "exec" {
					return true
				}
				calls++
				if len(call.Args) < 3 || !isPricedCall(call.Args[2]) {
					t.Errorf("%s: %s is called with a plan not passed through l.priced", p.Fset.Position(call.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
	if calls < 5 {
		t.Fatalf("found %d calls of the executor's Run and RunDetached in ccm/loadbalancer, want 5 or more", calls)
	}
}

// isPricedCall reports whether e is a call of a method named priced.
func isPricedCall(e ast.Expr) bool {
	c, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := c.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "priced"
}

// TestOnlyTheRunnersUseTheExecutor: in ccm/loadbalancer only the functions that run a plan
// (reconcile, runDetached, ensureDeleted, shrinkGroup, sweepOrphan) or wait for a run (settle,
// settleGroup) touch the executor. Planning (plan and all it calls), Preview, the audit and a
// denial's replay plan with the same LoadBalancers as a sync, so this list is what keeps them
// from writing: a function added here must run a plan, never plan one.
func TestOnlyTheRunnersUseTheExecutor(t *testing.T) {
	allowed := []string{"reconcile", "runDetached", "ensureDeleted", "shrinkGroup", "sweepOrphan", "settle", "settleGroup"}
	pkgs, err := module()
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, p := range pkgs {
		if p.PkgPath != modulePath+"/ccm/loadbalancer" {
			continue
		}
		for _, f := range p.Syntax {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "exec" {
						users = append(users, fn.Name.Name)
						return false
					}
					return true
				})
			}
		}
	}
	if len(users) == 0 {
		t.Fatal("no function of ccm/loadbalancer uses the executor: the test lost its subject")
	}
	for _, u := range users {
		if !slices.Contains(allowed, u) {
			t.Errorf("ccm/loadbalancer's %s uses the executor: only the functions that run a plan may (%v)", u, allowed)
		}
	}
}
