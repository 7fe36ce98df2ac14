package monitoring

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ccmMain is the package of the CCM binary whose linked packages declare the exported metrics.
const ccmMain = "./cmd/hcloud-policy-ccm"

// optsTypes are the option types a metric is declared with, in prometheus/client_golang and in
// k8s.io/component-base/metrics alike, mapped to whether the metric is a histogram or summary
// (whose series carry the suffixes of histogramSuffixes).
var optsTypes = map[string]bool{"CounterOpts": false, "GaugeOpts": false, "HistogramOpts": true, "SummaryOpts": true}

// histogramSuffixes are the series a histogram or summary adds to its name.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// metricDecl is what a declaration says about one metric (one series name).
type metricDecl struct {
	// labels are the label names of its series (a histogram's _bucket series has le too);
	// valid only when labelsKnown.
	labels map[string]bool
	// labelsKnown is false when the declaration's label names are not constant strings in the
	// call that declares it.
	labelsKnown bool
}

var (
	exportedOnce sync.Once
	exported     map[string]metricDecl
	exportedErr  error
)

// exportedMetrics returns the metrics that the packages linked into the CCM binary declare, by
// name (see declaredMetrics), computed once per test binary.
func exportedMetrics(t *testing.T) map[string]metricDecl {
	t.Helper()
	exportedOnce.Do(func() {
		var pkgs map[string]*goPackage
		pkgs, exportedErr = linkedPackages(repoRoot(t), ccmMain)
		if exportedErr == nil {
			exported = declaredMetrics(pkgs)
		}
	})
	if exportedErr != nil {
		t.Fatal(exportedErr)
	}
	return exported
}

// goPackage is one package linked into the binary: its directory and the Go files the build
// uses (build tags applied, tests left out).
type goPackage struct {
	dir   string
	files []string

	once   sync.Once
	name   string
	asts   []*ast.File
	consts map[string]string // package-level string constants
}

// linkedPackages lists the packages main links (`go list -deps`, with this process' GOFLAGS,
// so with the build tags of the Makefile), keyed by import path; the standard library is left
// out.
func linkedPackages(root, main string) (map[string]*goPackage, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}	{{.Dir}}	{{join .GoFiles " "}}{{end}}`, main)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w\n%s", main, err, stderr.String())
	}
	pkgs := map[string]*goPackage{}
	for line := range strings.SplitSeq(string(out), "\n") {
		fields := strings.Split(line, "\t")
		if len(fields) != 3 {
			continue
		}
		pkgs[fields[0]] = &goPackage{dir: fields[1], files: strings.Fields(fields[2])}
	}
	return pkgs, nil
}

// declaredMetrics returns the metrics declared in pkgs: every composite literal of an optsTypes
// type whose Namespace, Subsystem and Name fields are constant strings (literals, constants of
// the package or of a package it imports, and their concatenations), joined as
// prometheus.BuildFQName joins them; a histogram's or summary's also with its histogramSuffixes.
// Its label names are known when the literal is the first argument of a call (NewCounterVec
// and the like) whose second argument is a []string of constant strings, or the only argument.
// A declaration whose name does not resolve is left out, so a metric declared that way reads as
// missing: the check errs on the side of failing.
func declaredMetrics(pkgs map[string]*goPackage) map[string]metricDecl {
	decls := map[string]metricDecl{}
	for _, p := range pkgs {
		if !p.mayDeclareMetrics() {
			continue
		}
		p.parse()
		for _, f := range p.asts {
			labelsOf := map[*ast.CompositeLit][]string{} // opts literal -> label names, when known
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if lit, labels, ok := labelsOfCall(pkgs, p, f, n); ok {
						labelsOf[lit] = labels
					}
				case *ast.CompositeLit:
					histogram, ok := optsTypes[typeName(n.Type)]
					if !ok {
						return true
					}
					name, ok := fqName(pkgs, p, f, n)
					if !ok {
						return true
					}
					labels, known := labelsOf[n]
					decls[name] = newDecl(labels, known)
					if histogram {
						for _, s := range histogramSuffixes {
							decls[name+s] = newDecl(labels, known)
						}
						if known {
							decls[name+"_bucket"].labels["le"] = true
						}
					}
				}
				return true
			})
		}
	}
	return decls
}

// newDecl is the declaration of a metric with labels (valid when known).
func newDecl(labels []string, known bool) metricDecl {
	d := metricDecl{labels: map[string]bool{}, labelsKnown: known}
	for _, l := range labels {
		d.labels[l] = true
	}
	return d
}

// labelsOfCall recognises call(opts) and call(opts, []string{labels...}) in file f of p, with
// opts an optsTypes literal (or its address) and constant label names, and returns the literal
// and the label names.
func labelsOfCall(pkgs map[string]*goPackage, p *goPackage, f *ast.File, call *ast.CallExpr) (*ast.CompositeLit, []string, bool) {
	if len(call.Args) == 0 || len(call.Args) > 2 {
		return nil, nil, false
	}
	first := call.Args[0]
	if u, ok := first.(*ast.UnaryExpr); ok && u.Op == token.AND {
		first = u.X
	}
	lit, ok := first.(*ast.CompositeLit)
	if !ok {
		return nil, nil, false
	}
	if _, ok := optsTypes[typeName(lit.Type)]; !ok {
		return nil, nil, false
	}
	if len(call.Args) == 1 {
		return lit, nil, true
	}
	list, ok := call.Args[1].(*ast.CompositeLit)
	if !ok {
		return nil, nil, false
	}
	labels := make([]string, 0, len(list.Elts))
	for _, e := range list.Elts {
		v, ok := evalString(e, importedConst(pkgs, f), p.consts)
		if !ok {
			return nil, nil, false
		}
		labels = append(labels, v)
	}
	return lit, labels, true
}

// mayDeclareMetrics reports whether a file of p mentions an optsTypes type: only those packages
// are parsed whole.
func (p *goPackage) mayDeclareMetrics() bool {
	for _, f := range p.files {
		src, err := os.ReadFile(filepath.Join(p.dir, f))
		if err != nil {
			continue
		}
		for typ := range optsTypes {
			if bytes.Contains(src, []byte(typ+"{")) {
				return true
			}
		}
	}
	return false
}

// parse parses the files of p once and collects its package-level string constants. Files that
// do not parse are skipped (the build would have failed first).
func (p *goPackage) parse() {
	p.once.Do(func() {
		fset := token.NewFileSet()
		p.consts = map[string]string{}
		var specs []*ast.ValueSpec
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				continue
			}
			p.name = f.Name.Name
			p.asts = append(p.asts, f)
			for _, d := range f.Decls {
				if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
					for _, s := range gd.Specs {
						specs = append(specs, s.(*ast.ValueSpec))
					}
				}
			}
		}
		// Constants may refer to each other in any order: resolve until nothing changes.
		for changed := true; changed; {
			changed = false
			for _, s := range specs {
				for i, id := range s.Names {
					if _, done := p.consts[id.Name]; done || i >= len(s.Values) {
						continue
					}
					if v, ok := p.localString(s.Values[i]); ok {
						p.consts[id.Name] = v
						changed = true
					}
				}
			}
		}
	})
}

// localString evaluates e to a string with the constants of p only.
func (p *goPackage) localString(e ast.Expr) (string, bool) {
	return evalString(e, func(*ast.SelectorExpr) (string, bool) { return "", false }, p.consts)
}

// typeName is the name of a composite literal's type: Name for Name and pkg.Name.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}

// importedConst resolves pkg.Const in file f: a string constant of a package f imports.
func importedConst(pkgs map[string]*goPackage, f *ast.File) func(*ast.SelectorExpr) (string, bool) {
	return func(sel *ast.SelectorExpr) (string, bool) {
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return "", false
		}
		dep := importedPackage(pkgs, f, x.Name)
		if dep == nil {
			return "", false
		}
		dep.parse()
		v, ok := dep.consts[sel.Sel.Name]
		return v, ok
	}
}

// fqName resolves the name of the metric lit declares in file f of p.
func fqName(pkgs map[string]*goPackage, p *goPackage, f *ast.File, lit *ast.CompositeLit) (string, bool) {
	imported := importedConst(pkgs, f)
	parts := map[string]string{}
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
			continue
		}
		v, ok := evalString(kv.Value, imported, p.consts)
		if !ok {
			return "", false
		}
		parts[key.Name] = v
	}
	if parts["Name"] == "" {
		return "", false
	}
	var nonEmpty []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if parts[k] != "" {
			nonEmpty = append(nonEmpty, parts[k])
		}
	}
	return strings.Join(nonEmpty, "_"), true
}

// importedPackage returns the package that file f imports under name, or nil.
func importedPackage(pkgs map[string]*goPackage, f *ast.File, name string) *goPackage {
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		dep := pkgs[path]
		if dep == nil {
			continue
		}
		if imp.Name != nil {
			if imp.Name.Name == name {
				return dep
			}
			continue
		}
		dep.parse()
		if dep.name == name {
			return dep
		}
	}
	return nil
}

// evalString evaluates a constant string expression: a literal, a constant of consts, pkg.Const
// through imported, a parenthesised or concatenated one.
func evalString(e ast.Expr, imported func(*ast.SelectorExpr) (string, bool), consts map[string]string) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(v.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[v.Name]
		return s, ok
	case *ast.SelectorExpr:
		return imported(v)
	case *ast.ParenExpr:
		return evalString(v.X, imported, consts)
	case *ast.BinaryExpr:
		if v.Op != token.ADD {
			return "", false
		}
		l, ok := evalString(v.X, imported, consts)
		if !ok {
			return "", false
		}
		r, ok := evalString(v.Y, imported, consts)
		return l + r, ok
	}
	return "", false
}

// TestDeclaredMetrics: the scanner finds metrics declared in each way the CCM's packages and its
// dependencies declare them, and nothing the CCM does not export. A scanner that found nothing
// (or everything) would let TestMetricsExported pass vacuously (or never).
func TestDeclaredMetrics(t *testing.T) {
	got := exportedMetrics(t)
	tests := []struct {
		name   string
		metric string
		want   bool
		labels []string // the declared label names, when want
	}{
		{name: "Namespace, Subsystem and Name literals (policy)", metric: "hcloud_ccm_policy_decisions_total", want: true, labels: []string{"action", "result", "source"}},
		{name: "a histogram's bucket series (policy)", metric: "hcloud_ccm_policy_decision_duration_seconds_bucket", want: true, labels: []string{"action", "le", "source"}},
		{name: "a histogram's count series (policy)", metric: "hcloud_ccm_policy_decision_duration_seconds_count", want: true, labels: []string{"action", "source"}},
		{name: "a Name literal (ccm/executor)", metric: "hcloud_ccm_mutations_total", want: true, labels: []string{"action", "operation", "result"}},
		{name: "a gauge without labels (hcloudclient)", metric: "hcloud_ccm_api_ratelimit_remaining", want: true, labels: []string{}},
		{name: "a label name constant (compatmetrics)", metric: "cloud_controller_manager_server_cache_requests_total", want: true, labels: []string{"subsystem", "mode", "result"}},
		{name: "prometheus.CounterOpts (plugins)", metric: "hcloud_ccm_plugin_failures_total", want: true, labels: []string{"hook"}},
		{name: "a histogram of prometheus.HistogramOpts (plugins)", metric: "hcloud_ccm_plugin_call_duration_seconds_count", want: true, labels: []string{"hook"}},
		{name: "constants of the package (client-go workqueue metrics of component-base)", metric: "workqueue_retries_total", want: true, labels: []string{"name"}},
		{name: "a Subsystem constant (cloud-provider's service controller)", metric: "service_controller_nodesync_error_total", want: true, labels: []string{}},
		{name: "cloud-provider's route controller", metric: "route_controller_route_sync_total", want: true, labels: []string{"outcome", "trigger"}},
		{name: "a name nobody declares", metric: "hcloud_ccm_no_such_metric_total", want: false},
		{name: "a metric of the kubelet, not linked into the CCM", metric: "kubelet_running_pods", want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := got[tc.metric]
			if ok != tc.want {
				t.Fatalf("declared %s = %v, want %v (%d metrics declared)", tc.metric, ok, tc.want, len(got))
			}
			if !ok {
				return
			}
			if !d.labelsKnown {
				t.Fatalf("%s: label names not found", tc.metric)
			}
			if diff := cmp.Diff(tc.labels, slices.Sorted(maps.Keys(d.labels)), cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: label names (-want +got):\n%s", tc.metric, diff)
			}
		})
	}
}
