package ccm_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
)

// The wall "only ccm/executor writes to Hetzner" is kept by the compiler: every other package
// takes small read-only interfaces (loadbalancer.Readers, routes.NetworkReader,
// servercache.ServerLister), so it has no value on which a mutating hcloud-go method could be
// called. This test keeps the wall standing: outside these files and packages, no production
// code may get hold of a client that can write.
var (
	// allowedPackages may hold the client: the executor writes, hcloudclient builds it.
	allowedPackages = []string{"ccm/executor", "ccm/executor/internal/writeclient", "ccm/hcloudclient"}
	// allowedFiles wire the client's read-only parts into the other packages.
	allowedFiles = []string{}
)

const (
	hcloudImport       = "github.com/hetznercloud/hcloud-go/v2/hcloud"
	hcloudclientImport = "github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)

// readOnlyPrefixes are the method name prefixes of hcloud-go client methods that only read;
// every other method (Create, Update, Delete, Add..., Attach..., Change..., Poweroff, ...)
// counts as mutating.
var readOnlyPrefixes = []string{"Get", "List", "All", "WaitFor", "Watch"}

// writingClientTypes returns the hcloud-go client types (the fields of hcloud.Client) with at
// least one mutating method, e.g. LoadBalancerClient; read-only ones (ActionClient,
// LoadBalancerTypeClient, ...) are left out.
func writingClientTypes(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	ct := reflect.TypeFor[hcloud.Client]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		if !f.IsExported() || !strings.HasSuffix(f.Type.Name(), "Client") {
			continue
		}
		pt := reflect.PointerTo(f.Type)
		for j := range pt.NumMethod() {
			name := pt.Method(j).Name
			if !slices.ContainsFunc(readOnlyPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
				out[f.Type.Name()] = true
				break
			}
		}
	}
	if !out["LoadBalancerClient"] || !out["NetworkClient"] || out["ActionClient"] || len(out) < 5 {
		t.Fatalf("writing client types = %v: the classification is broken", out)
	}
	return out
}

// TestOnlyTheExecutorCanWriteToHetzner parses every non-test Go file of the module and fails
// when a package other than ccm/executor and ccm/hcloudclient (or the wiring in ccm/cloud.go)
// names hcloud.Client, hcloud.NewClient, hcloudclient.New, or an hcloud-go client type with a
// mutating method (hcloud.LoadBalancerClient, hcloud.NetworkClient, ...), under any import
// name. Such a package could write to Hetzner past the policy gate.
func TestOnlyTheExecutorCanWriteToHetzner(t *testing.T) {
	writing := writingClientTypes(t)
	root := ".."
	var scanned int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || isOtherModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			slices.Contains(allowedFiles, rel) || slices.Contains(allowedPackages, filepath.ToSlash(filepath.Dir(rel))) {
			return nil
		}
		scanned++
		for _, v := range clientUses(t, path, writing) {
			t.Errorf("%s: %s outside %v: take a read-only interface (see loadbalancer.Readers) and leave writes to the executor", rel, v, allowedPackages)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d files: the walk is broken", scanned)
	}
}

// isOtherModule reports whether dir holds a go.mod of its own (test/tools).
func isOtherModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// clientUses returns where the file at path names a way to write to Hetzner: hcloud.Client,
// hcloud.NewClient, a client type in writing, or hcloudclient.New, whatever the import is
// called; a dot import of either package counts too.
func clientUses(t *testing.T, path string, writing map[string]bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != hcloudImport && p != hcloudclientImport {
			continue
		}
		local := filepath.Base(p)
		if imp.Name != nil {
			local = imp.Name.Name
		}
		if local == "." {
			out = append(out, fmt.Sprintf("line %d: dot import of %s", fset.Position(imp.Pos()).Line, p))
		}
		names[local] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		name := sel.Sel.Name
		switch names[pkg.Name] {
		case hcloudImport:
			if name == "Client" || name == "NewClient" || writing[name] {
				out = append(out, fmt.Sprintf("line %d: hcloud.%s", fset.Position(sel.Pos()).Line, name))
			}
		case hcloudclientImport:
			if name == "ClientOptions" {
				out = append(out, fmt.Sprintf("line %d: hcloudclient.Conn.ClientOptions", fset.Position(sel.Pos()).Line))
			}
		}
		return true
	})
	return out
}

// TestClientUses_SeesThroughAliases: the check cannot be bypassed by renaming the import or by
// holding a single client instead of the whole one.
func TestClientUses_SeesThroughAliases(t *testing.T) {
	writing := writingClientTypes(t)
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"the whole client", `import "github.com/hetznercloud/hcloud-go/v2/hcloud"
var c *hcloud.Client`, 1},
		{"a renamed import holding one writing client", `import hc "github.com/hetznercloud/hcloud-go/v2/hcloud"
type x struct{ lbs *hc.LoadBalancerClient }`, 1},
		{"building a client", `import "github.com/hetznercloud/hcloud-go/v2/hcloud"
var c = hcloud.NewClient()`, 1},
		{"a dot import", `import . "github.com/hetznercloud/hcloud-go/v2/hcloud"
var c *Client`, 1},
		{"read-only types and clients are fine", `import "github.com/hetznercloud/hcloud-go/v2/hcloud"
var a *hcloud.LoadBalancer
var b *hcloud.ActionClient
var d *hcloud.LoadBalancerTypeClient`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.go")
			writeFile(t, path, "package x\n\n"+tc.src+"\n")
			if got := clientUses(t, path, writing); len(got) != tc.want {
				t.Errorf("clientUses() = %v, want %d finding(s)", got, tc.want)
			}
		})
	}
}
