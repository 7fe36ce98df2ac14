package lbplan_test

import (
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
)

// TestKinds_EveryKindIsListed type-checks ccm/lbplan (the compiler's export data, from go list
// -export): every type of the package that implements Mutation must be in lbplan.Kinds (the
// policy contract's operations and the executor's request golden are built from it), once.
func TestKinds_EveryKindIsListed(t *testing.T) {
	const path = "github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	out, err := exec.Command("go", "list", "-export", "-f", "{{.Export}}", path).Output()
	if err != nil {
		t.Fatalf("go list -export %s: %v", path, err)
	}
	export := strings.TrimSpace(string(out))
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(p string) (io.ReadCloser, error) {
		if p != path {
			return nil, fmt.Errorf("only %s is looked up, not %s", path, p)
		}
		return os.Open(export)
	})
	pkg, err := imp.Import(path)
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	iface, ok := pkg.Scope().Lookup("Mutation").Type().Underlying().(*types.Interface)
	if !ok {
		t.Fatal("lbplan.Mutation is not an interface")
	}
	listed := map[string]int{}
	for _, k := range lbplan.Kinds() {
		listed[strings.TrimPrefix(fmt.Sprintf("%T", k), "lbplan.")]++
	}
	var kinds []string
	for _, name := range pkg.Scope().Names() {
		tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
		if !ok || types.IsInterface(tn.Type()) || !types.Implements(tn.Type(), iface) {
			continue
		}
		kinds = append(kinds, name)
		if listed[name] != 1 {
			t.Errorf("lbplan.%s implements Mutation and is listed %d times in lbplan.Kinds, want once (add it in the init of its file)", name, listed[name])
		}
	}
	if len(kinds) != len(lbplan.Kinds()) {
		t.Errorf("lbplan has %d kinds %v, Kinds lists %d", len(kinds), kinds, len(lbplan.Kinds()))
	}
}
