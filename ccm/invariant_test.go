package ccm_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// mutatingMethods are the hcloud-go client methods that write to Hetzner Cloud, by client.
var mutatingMethods = map[string][]string{
	"LoadBalancer": {"Create", "Update", "Delete", "DeleteWithResult", "AddService", "UpdateService",
		"DeleteService", "AddServerTarget", "RemoveServerTarget", "AddIPTarget", "RemoveIPTarget",
		"AddLabelSelectorTarget", "RemoveLabelSelectorTarget", "AttachToNetwork", "DetachFromNetwork",
		"EnablePublicInterface", "DisablePublicInterface", "ChangeAlgorithm", "ChangeType",
		"ChangeDNSPtr", "ChangeProtection"},
	"Network":     {"Create", "Update", "Delete", "AddRoute", "DeleteRoute", "AddSubnet", "DeleteSubnet", "ChangeIPRange", "ChangeProtection"},
	"Certificate": {"Create", "CreateCertificate", "Update", "Delete", "RetryIssuance"},
	"Server":      {"Create", "Update", "Delete", "DeleteWithResult", "Poweroff", "Poweron", "Reboot", "Reset", "Shutdown"},
}

// TestOnlyTheExecutorWritesToHetzner guards the design invariant that no mutating Hetzner API
// request can bypass the policy gate: outside ccm/executor, no production code of the CCM calls a
// mutating hcloud-go method.
func TestOnlyTheExecutorWritesToHetzner(t *testing.T) {
	roots := []string{".", "../cmd/hcloud-policy-ccm", "../policy", "../plugins"}
	var found, scanned int
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if filepath.Base(path) == "executor" || filepath.Base(path) == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			scanned++
			for _, call := range mutatingCalls(t, path) {
				found++
				t.Errorf("%s calls %s outside ccm/executor: route the mutation through the executor so the policy gate decides it", path, call)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if scanned < 20 {
		t.Fatalf("scanned only %d files: the walk is broken", scanned)
	}
}

// mutatingCalls returns the calls like client.LoadBalancer.Create in the file at path.
func mutatingCalls(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		method, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		client, ok := method.X.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		for _, m := range mutatingMethods[client.Sel.Name] {
			if m == method.Sel.Name {
				calls = append(calls, client.Sel.Name+"."+m)
			}
		}
		return true
	})
	return calls
}

func TestMutatingCallsDetectsADirectWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.go")
	writeFile(t, path, "package bad\n\nfunc f(c *client) { c.LoadBalancer.AddService(nil, nil, opts) }\n")
	if got := mutatingCalls(t, path); len(got) != 1 || got[0] != "LoadBalancer.AddService" {
		t.Fatalf("mutatingCalls() = %v, want [LoadBalancer.AddService]", got)
	}
}
