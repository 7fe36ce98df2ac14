package ccm_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"golang.org/x/tools/go/packages"
)

// The wall "only ccm/executor writes to Hetzner" has three guards (docs/rationale.md, "What
// keeps the executor the only code that writes to Hetzner?").
//
//   - The compiler: the one writing client is built in ccm/executor/internal/writeclient, which
//     no package outside ccm/executor can import, and every other package reads through the
//     wrapper structs of ccm/hcloudclient (LoadBalancerReader, ServerReader, ...), whose method
//     sets hold no write, so neither a method call nor a type assertion of a reader can write.
//   - The readers' client sends through hcloudclient.ReadOnlyTransport: a write that reaches
//     it anyway is refused at run time (TestReaders_refuseWrites).
//   - This test, for what the compiler cannot refuse: it type-checks every non-test package of
//     the module (go/packages, so the import name does not matter) and fails, outside
//     ccm/executor and ccm/executor/internal/writeclient, on each finding of wallFindings:
//     hcloud-go's clients, client options and write interfaces however they are reached
//     (type assertions and conversions, also through type parameters), the writing client's
//     package and recipe, executor.New outside the composition root, and, in the packages of
//     the CCM binary, HTTP requests built by hand with a method other than GET or HEAD and
//     the token by name (handbuilt_test.go).
//
// Reflection and package unsafe are outside what the compiler and this test see; the
// read-only transport refuses what they do with a reader's client, nothing else.

const (
	modulePath      = "github.com/policy-ccm/hcloud-policy-ccm"
	hcloudGoPath    = "github.com/hetznercloud/hcloud-go/v2"
	hcloudPath      = hcloudGoPath + "/hcloud"
	executorPath    = modulePath + "/ccm/executor"
	writeclientPath = executorPath + "/internal/writeclient"
	clientPath      = modulePath + "/ccm/hcloudclient"
	configPath      = modulePath + "/ccm/config"
	ccmPath         = modulePath + "/ccm"
	// ccmBinaryPath is the CCM's main package: the packages it links get the checks of
	// handbuilt_test.go.
	ccmBinaryPath = modulePath + "/cmd/hcloud-policy-ccm"
)

// hcloudAllowlist are the identifiers of package hcloud that packages outside ccm/executor may
// use: data types, their constants, request option structs and the pure SchemaFrom* converters
// from them to wire types (lbplan builds requests as data),
// error codes and helpers. No client, client constructor, client option or I*Client interface
// belongs here (TestHCloudAllowlist_hasNoClient). ccm/hcloudclient may use every identifier: it
// builds the readers' client and the recipe of the writing one, and is checked by its exported
// API instead (TestOnlyTheExecutorCanWriteToHetzner).
var hcloudAllowlist = map[string]bool{}

func init() {
	for _, name := range strings.Fields(`
		Action ActionError ActionListOpts ActionStatus ActionStatusError ActionStatusRunning ActionStatusSuccess
		Certificate CertificateCreateOpts CertificateListOpts CertificateStatusTypeCompleted CertificateStatusTypePending
		DeprecatableResource
		CertificateType CertificateTypeManaged CertificateTypeUploaded CertificateUpdateOpts
		Endpoint Error ErrorCode ErrorCodeConflict ErrorCodeIPNotAvailable ErrorCodeInvalidInput
		ErrorCodeInvalidLoadBalancerType ErrorCodeLoadBalancerNotAttachedToNetwork ErrorCodeLocked ErrorCodeMaintenance
		ErrorCodeNoSubnetAvailable ErrorCodeNotFound ErrorCodeProtected ErrorCodeRateLimitExceeded
		ErrorCodeResourceLimitExceeded ErrorCodeServerError ErrorCodeServerNotAttachedToNetwork
		ErrorCodeTargetAlreadyDefined ErrorCodeTargetsWithoutUsePrivateIP ErrorCodeUnauthorized ErrorCodeUniquenessError
		ErrorDetailsInvalidInput ErrorDetailsInvalidInputField IsError ListOpts
		LoadBalancer LoadBalancerAddIPTargetOpts LoadBalancerAddLabelSelectorTargetOpts LoadBalancerAddServerTargetOpts
		LoadBalancerAddServiceOpts LoadBalancerAddServiceOptsHTTP LoadBalancerAddServiceOptsHealthCheck
		LoadBalancerAddServiceOptsHealthCheckHTTP LoadBalancerAlgorithm LoadBalancerAlgorithmType
		LoadBalancerAlgorithmTypeLeastConnections LoadBalancerAlgorithmTypeRoundRobin LoadBalancerAttachToNetworkOpts
		LoadBalancerChangeAlgorithmOpts LoadBalancerChangeProtectionOpts LoadBalancerChangeTypeOpts LoadBalancerCreateOpts
		LoadBalancerCreateOptsService LoadBalancerCreateOptsServiceHTTP LoadBalancerCreateOptsServiceHealthCheck
		LoadBalancerCreateOptsServiceHealthCheckHTTP LoadBalancerCreateOptsTarget LoadBalancerCreateOptsTargetServer
		LoadBalancerDetachFromNetworkOpts LoadBalancerFromSchema LoadBalancerListOpts LoadBalancerPrivateNet
		LoadBalancerProtection LoadBalancerPublicNet LoadBalancerPublicNetIPv4 LoadBalancerPublicNetIPv6
		LoadBalancerService LoadBalancerServiceHTTP LoadBalancerServiceHealthCheck LoadBalancerServiceHealthCheckHTTP
		LoadBalancerServiceProtocol LoadBalancerServiceProtocolHTTP LoadBalancerServiceProtocolHTTPS
		LoadBalancerServiceProtocolTCP LoadBalancerTarget LoadBalancerTargetHealthStatusStatusHealthy LoadBalancerTargetIP
		LoadBalancerTargetServer LoadBalancerTargetType LoadBalancerTargetTypeIP LoadBalancerTargetTypeServer
		LoadBalancerType LoadBalancerUpdateOpts LoadBalancerUpdateServiceOpts LoadBalancerUpdateServiceOptsHTTP
		LoadBalancerUpdateServiceOptsHealthCheck LoadBalancerUpdateServiceOptsHealthCheckHTTP
		Location Network NetworkAddRouteOpts NetworkChangeProtectionOpts NetworkDeleteRouteOpts NetworkListOpts
		NetworkRoute NetworkSubnet NetworkSubnetType NetworkUpdateOpts NetworkZone NetworkZoneEUCentral
		Ptr Response SchemaFromLoadBalancer SchemaFromLoadBalancerAddServiceOpts
		SchemaFromLoadBalancerCreateOpts SchemaFromLoadBalancerUpdateServiceOpts Server ServerListOpts ServerPrivateNet ServerPublicNet ServerPublicNetIPv4
		ServerPublicNetIPv6 ServerStatus ServerStatusOff ServerStatusRunning ServerType
	`) {
		hcloudAllowlist[name] = true
	}
}

// freeHCloudGoPackages are hcloud-go packages whose identifiers are all allowed: the API's
// wire types, and the client of the server's own metadata service (it cannot reach the API).
var freeHCloudGoPackages = []string{hcloudPath + "/schema", hcloudPath + "/metadata"}

// writeWords are the leading words of method names that count as a write: those of hcloud-go's
// client methods that change something, and hcloud.Client's NewRequest and Do. A method named
// Request alone is not one: lbplan's mutations build their request as data with it (only the
// executor sends it); hcloud-go's RequestConsole is.
var writeWords = []string{
	"Create", "Delete", "Update", "Add", "Remove", "Change", "Attach", "Detach", "Enable", "Disable",
	"Set", "Assign", "Unassign", "Poweron", "Poweroff", "Power", "Reboot", "Reset", "Shutdown",
	"Rebuild", "Rescale", "RequestConsole", "Move", "Upload", "Do", "New",
}

// isWriteMethod reports whether a method name starts with one of writeWords as a whole word:
// "Delete" and "DeleteRoute" do, "Settled" and "Done" do not.
func isWriteMethod(name string) bool {
	return slices.ContainsFunc(writeWords, func(w string) bool {
		rest, ok := strings.CutPrefix(name, w)
		return ok && (rest == "" || unicode.IsUpper(rune(rest[0])))
	})
}

// isClientType reports whether a named type of hcloud-go is a client (Client, LoadBalancerClient,
// ILoadBalancerClient, ResourceActionClient, ...) or a client option: a value of one can write,
// or build something that can. The metadata package's Client reads the server's own metadata.
func isClientType(obj *types.TypeName) bool {
	if obj == nil || obj.Pkg() == nil || !strings.HasPrefix(obj.Pkg().Path(), hcloudGoPath) || obj.Pkg().Path() == hcloudPath+"/metadata" {
		return false
	}
	return strings.HasSuffix(obj.Name(), "Client") || obj.Name() == "ClientOption"
}

// isWritingClient is isClientType without client options: a type whose values can call the API.
func isWritingClient(obj *types.TypeName) bool {
	return isClientType(obj) && obj.Name() != "ClientOption"
}

// clientIn returns the first named type for which is reports true (isClientType or
// isWritingClient) that t is built from, through pointers, slices, arrays, maps, channels,
// function signatures and unnamed structs, or nil. It does not look inside named types:
// hcloudclient.LoadBalancerReader holds a client in an unexported field, which is the point
// of it.
func clientIn(t types.Type, is func(*types.TypeName) bool, seen map[types.Type]bool) *types.TypeName {
	if t == nil || seen[t] {
		return nil
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if is(t.Obj()) {
			return t.Obj()
		}
		for i := range t.TypeArgs().Len() {
			if c := clientIn(t.TypeArgs().At(i), is, seen); c != nil {
				return c
			}
		}
	case *types.Alias:
		return clientIn(types.Unalias(t), is, seen)
	case *types.Pointer:
		return clientIn(t.Elem(), is, seen)
	case *types.Slice:
		return clientIn(t.Elem(), is, seen)
	case *types.Array:
		return clientIn(t.Elem(), is, seen)
	case *types.Chan:
		return clientIn(t.Elem(), is, seen)
	case *types.Map:
		if c := clientIn(t.Key(), is, seen); c != nil {
			return c
		}
		return clientIn(t.Elem(), is, seen)
	case *types.Tuple:
		for i := range t.Len() {
			if c := clientIn(t.At(i).Type(), is, seen); c != nil {
				return c
			}
		}
	case *types.Signature:
		if c := clientIn(t.Params(), is, seen); c != nil {
			return c
		}
		return clientIn(t.Results(), is, seen)
	case *types.Struct:
		for i := range t.NumFields() {
			if c := clientIn(t.Field(i).Type(), is, seen); c != nil {
				return c
			}
		}
	}
	return nil
}

// writeMethodOf returns the first write method of the interface type t, or "".
func writeMethodOf(t types.Type) string {
	it, ok := t.Underlying().(*types.Interface)
	if !ok {
		return ""
	}
	for i := range it.NumMethods() {
		if name := it.Method(i).Name(); isWriteMethod(name) {
			return name
		}
	}
	return ""
}

// checkedFile is one type-checked file of a package.
type checkedFile struct {
	path string // as reported, e.g. ccm/loadbalancer/loadbalancer.go
	file *ast.File
}

// wallFindings returns where the files of the package pkgPath break the wall; fset, files and
// info are its type-checked syntax, and linked says that the CCM binary links the package (the
// checks of handbuilt_test.go apply). ccm/executor and its internal/writeclient may do
// anything; any other package, also one below ccm/executor, may not.
func wallFindings(fset *token.FileSet, pkgPath string, files []checkedFile, info *types.Info, linked bool) []string {
	if pkgPath == executorPath || pkgPath == writeclientPath {
		return nil
	}
	inClient := pkgPath == clientPath
	var out []string
	report := func(f checkedFile, pos token.Pos, format string, args ...any) {
		msg := fmt.Sprintf("%s:%d: %s", f.path, fset.Position(pos).Line, fmt.Sprintf(format, args...))
		if !slices.Contains(out, msg) {
			out = append(out, msg)
		}
	}
	checkUse := func(f checkedFile, id *ast.Ident, obj types.Object) {
		p := obj.Pkg().Path()
		switch {
		case p == clientPath && obj.Name() == "ClientOptions" && !inClient:
			report(f, id.Pos(), "hcloudclient.Conn.ClientOptions is the recipe of the writing client: only ccm/executor/internal/writeclient may use it")
		case p == executorPath && obj.Name() == "New" && obj.Parent() == obj.Pkg().Scope() && pkgPath != ccmPath:
			report(f, id.Pos(), "executor.New outside the composition root (package ccm, which passes the policy engine or, with no policy source, policy.AllowAll)")
		case inClient || !strings.HasPrefix(p, hcloudGoPath) || slices.Contains(freeHCloudGoPackages, p):
		case p == hcloudPath && obj.Parent() == obj.Pkg().Scope() && hcloudAllowlist[obj.Name()]:
		case obj.Parent() != obj.Pkg().Scope() && !isFuncOrType(obj):
			// a field of a data type (lb.Name); a field holding a client is a value of a client
			// type, which the type check reports
		case isMethodOfAllowed(obj):
		default:
			report(f, id.Pos(), "hcloud-go's %s.%s is not on the allowlist of ccm/invariant_test.go: read through the ccm/hcloudclient readers and leave writes to the executor", obj.Pkg().Name(), obj.Name())
		}
	}
	for _, f := range files {
		ast.Inspect(f.file, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				if obj := info.Uses[id]; obj != nil && obj.Pkg() != nil {
					checkUse(f, id, obj)
				}
			}
			if e, ok := n.(ast.Expr); ok && !inClient {
				// Function values are skipped: their calls are the values that count.
				if tv, ok := info.Types[e]; ok && !tv.IsType() && !isSignature(tv.Type) {
					if c := clientIn(tv.Type, isClientType, map[types.Type]bool{}); c != nil {
						report(f, e.Pos(), "a value of hcloud-go's %s.%s (%s): only ccm/executor may hold a client", c.Pkg().Name(), c.Name(), tv.Type)
					}
				}
			}
			return true
		})
		for _, a := range assertions(f.file, info) {
			if m := writeMethodOf(a.to); m != "" {
				report(f, a.pos, "%s to %s, an interface with the write method %s: readers have no write method, and only ccm/executor writes", a.kind, a.to, m)
			}
		}
		for _, imp := range f.file.Imports {
			if strings.Trim(imp.Path.Value, `"`) == writeclientPath {
				report(f, imp.Pos(), "imports ccm/executor/internal/writeclient, the writing client: only ccm/executor may")
			}
		}
		for _, i := range typeArguments(f.file, info) {
			if m := writeMethodOf(i.arg); m != "" {
				if c := clientSatisfying(i.arg); c != "" {
					report(f, i.pos, "type argument %s of %s, an interface with the write method %s that hcloud-go's %s has: an assertion through a type parameter reaches it as a plain one does", i.arg, i.of, m, c)
				}
			}
		}
		if linked {
			for _, h := range handBuilt(f.file, info, pkgPath) {
				report(f, h.pos, "%s", h.msg)
			}
		}
	}
	slices.Sort(out)
	return out
}

// hcloudClients are the pointers to hcloud-go's client types (Client, LoadBalancerClient, ...;
// not the generic ones, whose methods read and wait), loaded once.
var hcloudClients = sync.OnceValue(func() []*types.Pointer {
	pkgs, err := module()
	if err != nil {
		return nil
	}
	var hcloudPkg *types.Package
	seen := map[*types.Package]bool{}
	var find func(p *types.Package)
	find = func(p *types.Package) {
		if seen[p] || hcloudPkg != nil {
			return
		}
		seen[p] = true
		if p.Path() == hcloudPath {
			hcloudPkg = p
			return
		}
		for _, i := range p.Imports() {
			find(i)
		}
	}
	for _, p := range pkgs {
		find(p.Types)
	}
	if hcloudPkg == nil {
		return nil
	}
	var out []*types.Pointer
	for _, name := range hcloudPkg.Scope().Names() {
		tn, ok := hcloudPkg.Scope().Lookup(name).(*types.TypeName)
		if !ok || !isWritingClient(tn) || types.IsInterface(tn.Type()) {
			continue
		}
		if named, ok := tn.Type().(*types.Named); ok && named.TypeParams().Len() == 0 {
			out = append(out, types.NewPointer(named))
		}
	}
	return out
})

// clientSatisfying returns the first hcloud-go client whose pointer implements the interface t,
// "" when none does (or t is no interface).
func clientSatisfying(t types.Type) string {
	it, ok := t.Underlying().(*types.Interface)
	if !ok {
		return ""
	}
	for _, c := range hcloudClients() {
		if types.Implements(c, it) {
			return "*hcloud." + c.Elem().(*types.Named).Obj().Name()
		}
	}
	return ""
}

// typeArgument is a type argument of an instantiation.
type typeArgument struct {
	pos token.Pos
	of  string // the generic function or type
	arg types.Type
}

// typeArguments returns the type arguments, written or inferred, of every instantiation of a
// generic function or type in f.
func typeArguments(f *ast.File, info *types.Info) []typeArgument {
	var out []typeArgument
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			if inst, ok := info.Instances[id]; ok {
				for i := range inst.TypeArgs.Len() {
					out = append(out, typeArgument{id.Pos(), id.Name, inst.TypeArgs.At(i)})
				}
			}
		}
		return true
	})
	return out
}

// isSignature reports whether t is a function type.
func isSignature(t types.Type) bool {
	_, ok := t.Underlying().(*types.Signature)
	return ok
}

// isFuncOrType reports whether obj is a function (or method) or a type name.
func isFuncOrType(obj types.Object) bool {
	switch obj.(type) {
	case *types.Func, *types.TypeName:
		return true
	}
	return false
}

// isMethodOfAllowed reports whether obj is a method of an allowed hcloud data type
// (action.Error(), err.Error()) that is not a write.
func isMethodOfAllowed(obj types.Object) bool {
	fn, ok := obj.(*types.Func)
	if !ok {
		return false
	}
	sig, _ := fn.Type().(*types.Signature)
	if sig == nil || sig.Recv() == nil || isWriteMethod(fn.Name()) {
		return false
	}
	recv := sig.Recv().Type()
	if p, ok := recv.(*types.Pointer); ok {
		recv = p.Elem()
	}
	named, ok := types.Unalias(recv).(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == hcloudPath && hcloudAllowlist[named.Obj().Name()]
}

// assertion is a type assertion, a type switch case or a conversion to an interface.
type assertion struct {
	kind string
	pos  token.Pos
	to   types.Type
}

// assertions returns the type assertions (x.(T)), type switch cases and conversions (T(x)) of f
// whose target is an interface type.
func assertions(f *ast.File, info *types.Info) []assertion {
	var out []assertion
	isIface := func(t types.Type) bool { _, ok := t.Underlying().(*types.Interface); return t != nil && ok }
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeAssertExpr:
			if n.Type != nil { // x.(type) is handled by its cases
				if t := info.TypeOf(n.Type); isIface(t) {
					out = append(out, assertion{"type assertion", n.Pos(), t})
				}
			}
		case *ast.TypeSwitchStmt:
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if t := info.TypeOf(e); t != nil && isIface(t) {
						out = append(out, assertion{"type switch case", e.Pos(), t})
					}
				}
			}
		case *ast.CallExpr:
			if tv, ok := info.Types[n.Fun]; ok && tv.IsType() && isIface(tv.Type) {
				out = append(out, assertion{"conversion", n.Pos(), tv.Type})
			}
		}
		return true
	})
	return out
}

// module is the type-checked module, loaded once.
var module = sync.OnceValues(func() ([]*packages.Package, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports,
		Dir:  "..",
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading the module: %s", strings.Join(errs, "; "))
	}
	return pkgs, nil
})

// TestOnlyTheExecutorCanWriteToHetzner type-checks every non-test package of the module and
// fails on each place outside ccm/executor that could write to Hetzner past the policy gate
// (see wallFindings), naming the file and line.
func TestOnlyTheExecutorCanWriteToHetzner(t *testing.T) {
	pkgs, err := module()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	linked := linkedBy(pkgs, ccmBinaryPath)
	if !linked[ccmPath] || !linked[clientPath] || linked[modulePath+"/internal/hcloudemu"] {
		t.Fatalf("the packages of the CCM binary are wrong: %v", linked)
	}
	var scanned int
	for _, p := range pkgs {
		files := make([]checkedFile, 0, len(p.Syntax))
		for _, f := range p.Syntax {
			rel, _ := filepath.Rel(root, p.Fset.File(f.Pos()).Name())
			files = append(files, checkedFile{path: filepath.ToSlash(rel), file: f})
		}
		scanned += len(files)
		for _, v := range wallFindings(p.Fset, p.PkgPath, files, p.TypesInfo, linked[p.PkgPath]) {
			t.Error(v)
		}
		if p.PkgPath == clientPath {
			for _, v := range exportedClients(p.Types) {
				t.Errorf("ccm/hcloudclient: %s: its exported API must hand out readers, never an hcloud-go client", v)
			}
		}
	}
	if scanned < 100 {
		t.Fatalf("type-checked only %d files: the load is broken", scanned)
	}
}

// linkedBy returns the paths of the module's packages that the package root imports, itself
// included, directly or through other packages of the module.
func linkedBy(pkgs []*packages.Package, root string) map[string]bool {
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
	}
	out := map[string]bool{}
	var visit func(path string)
	visit = func(path string) {
		p := byPath[path]
		if p == nil || out[path] {
			return
		}
		out[path] = true
		for _, imp := range p.Imports {
			visit(imp.PkgPath)
		}
	}
	visit(root)
	return out
}

// exportedClients returns the exported functions, methods, variables and fields of pkg that
// hand out an hcloud-go client: in a result, in what a callback parameter receives, or as a
// value. Client options (Conn.ClientOptions, the recipe of the writing client, and
// Options.ClientOptions) are not clients: a package outside ccm/executor can use them only
// with hcloud.NewClient, and wallFindings reports both them and their callers.
func exportedClients(pkg *types.Package) []string {
	var out []string
	check := func(name string, t types.Type) {
		handsOut := []types.Type{t}
		if sig, ok := t.Underlying().(*types.Signature); ok {
			handsOut = []types.Type{sig.Results()}
			for i := range sig.Params().Len() {
				if cb, ok := sig.Params().At(i).Type().Underlying().(*types.Signature); ok {
					handsOut = append(handsOut, cb.Params())
				}
			}
		}
		for _, h := range handsOut {
			if c := clientIn(h, isWritingClient, map[types.Type]bool{}); c != nil {
				out = append(out, fmt.Sprintf("%s (%s) hands out %s.%s", name, t, c.Pkg().Name(), c.Name()))
				return
			}
		}
	}
	for _, name := range pkg.Scope().Names() {
		obj := pkg.Scope().Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok {
			check(name, obj.Type())
			continue
		}
		if st, ok := tn.Type().Underlying().(*types.Struct); ok {
			for i := range st.NumFields() {
				if f := st.Field(i); f.Exported() {
					check(name+"."+f.Name(), f.Type())
				}
			}
		}
		ms := types.NewMethodSet(types.NewPointer(tn.Type()))
		for i := range ms.Len() {
			if m := ms.At(i).Obj(); m.Exported() {
				check(name+"."+m.Name(), m.Type())
			}
		}
	}
	return out
}

// TestHCloudAllowlist_hasNoClient: nothing on the allowlist can write or build a client.
func TestHCloudAllowlist_hasNoClient(t *testing.T) {
	for name := range hcloudAllowlist {
		if strings.HasSuffix(name, "Client") || strings.HasPrefix(name, "With") || name == "ClientOption" || name == "NewClient" {
			t.Errorf("hcloudAllowlist has %s: clients, client options and constructors stay in ccm/executor", name)
		}
	}
}

// TestWallFindings: the check sees through import names, fields, assertions, conversions and
// type parameters, exempts no package below ccm/executor but the two, and passes code that
// only reads.
func TestWallFindings(t *testing.T) {
	tests := []struct {
		name string
		pkg  string // the package path the snippet is checked as; "" for example.com/x
		src  string
		want []string // substrings of the findings (file:line: ...); none for clean code
	}{
		{
			name: "an aliased import holding a writing client",
			src: `import hc "github.com/hetznercloud/hcloud-go/v2/hcloud"
type x struct{ lbs *hc.LoadBalancerClient }`,
			want: []string{"x.go:4: hcloud-go's hcloud.LoadBalancerClient is not on the allowlist"},
		},
		{
			name: "a dot import building a client",
			src: `import . "github.com/hetznercloud/hcloud-go/v2/hcloud"
var c = NewClient(WithToken("t"))`,
			want: []string{"x.go:4: a value of hcloud-go's hcloud.Client", "x.go:4: hcloud-go's hcloud.NewClient is not on the allowlist", "x.go:4: hcloud-go's hcloud.WithToken is not on the allowlist"},
		},
		{
			name: "an I*Client field",
			src: `import "github.com/hetznercloud/hcloud-go/v2/hcloud"
type x struct{ lbs hcloud.ILoadBalancerClient }`,
			want: []string{"x.go:4: hcloud-go's hcloud.ILoadBalancerClient is not on the allowlist"},
		},
		{
			name: "a reader asserted to an interface with Delete",
			src: `import (
	"context"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)
func f(ctx context.Context, r *hcloudclient.LoadBalancerReader, lb *hcloud.LoadBalancer) {
	var v any = r
	if d, ok := v.(interface {
		Delete(context.Context, *hcloud.LoadBalancer) (*hcloud.Response, error)
	}); ok {
		_, _ = d.Delete(ctx, lb)
	}
}`,
			want: []string{"x.go:11: type assertion to interface{Delete(", "with the write method Delete"},
		},
		{
			name: "a type switch case and a conversion to writing interfaces",
			src: `type deleter interface{ Delete() error }
type adder interface{ AddTarget() }
func f(v any) {
	switch v.(type) {
	case deleter:
	}
	_ = adder(nil)
}`,
			want: []string{"x.go:7: type switch case to example.com/x.deleter", "x.go:9: conversion to example.com/x.adder"},
		},
		{
			name: "issue 30: an assertion through a type parameter, written or inferred",
			src: `import (
	"context"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)
type deleter interface {
	Delete(context.Context, *hcloud.LoadBalancer) (*hcloud.Response, error)
}
func as[T any](v any) (T, bool) { t, ok := v.(T); return t, ok }
func into[T any](v any, to *T) { *to, _ = v.(T) }
func f(ctx context.Context, r *hcloudclient.LoadBalancerReader, lb *hcloud.LoadBalancer) {
	if d, ok := as[deleter](r); ok {
		_, _ = d.Delete(ctx, lb)
	}
	var d deleter
	into(r, &d)
}`,
			want: []string{"x.go:15: type argument example.com/x.deleter of as, an interface with the write method Delete that hcloud-go's *hcloud.LoadBalancerClient has: an assertion through a type parameter",
				"x.go:19: type argument example.com/x.deleter of into"},
		},
		{
			name: "a type parameter constrained to a write",
			src: `type deleter interface{ Delete() error }
func as[T deleter](v any) T { return v.(T) }`,
			want: []string{"x.go:4: type assertion to T, an interface with the write method Delete"},
		},
		{
			name: "issue 30: a package below ccm/executor that imports its writing client",
			pkg:  executorPath + "/sneaky",
			src: `import (
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor/internal/writeclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)
func f(c *hcloudclient.Conn) { _ = writeclient.New(c) }`,
			want: []string{"x.go:4: imports ccm/executor/internal/writeclient", "x.go:7: a value of hcloud-go's hcloud.Client"},
		},
		{
			name: "an executor built outside the composition root",
			src: `import (
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)
func f() { _, _ = executor.New(executor.Options{Decider: policy.AllowAll{}}) }`,
			want: []string{"x.go:7: executor.New outside the composition root"},
		},
		{
			name: "the recipe of the writing client",
			src: `import "github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
func f(c *hcloudclient.Conn) { _ = c.ClientOptions() }`,
			want: []string{"x.go:4: hcloudclient.Conn.ClientOptions is the recipe of the writing client", "x.go:4: a value of hcloud-go's hcloud.ClientOption"},
		},
		{
			name: "reads and data types are fine",
			src: `import (
	"context"
	"fmt"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)
type reader interface{ GetByID(context.Context, int64) (*hcloud.LoadBalancer, *hcloud.Response, error) }
func f(ctx context.Context, r *hcloudclient.LoadBalancerReader, err error) (string, error) {
	var v any = r
	if rr, ok := v.(reader); ok {
		lb, _, err := rr.GetByID(ctx, 1)
		if hcloud.IsError(err, hcloud.ErrorCodeNotFound) || lb == nil {
			return "", err
		}
		return lb.Name + fmt.Sprint(lb.Targets, schema.LoadBalancer{}.ID, hcloud.Ptr(1)), nil
	}
	_ = fmt.Stringer(nil)
	return "", err
}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFindings(t, tc.src, tc.pkg, tc.want)
		})
	}
}

// findingsOf type-checks src as the file x.go of a package example.com/x and returns its
// findings as if the package were pkgPath ("" for example.com/x) and the CCM binary linked it.
func findingsOf(src, pkgPath string) ([]string, error) {
	fset, f, pkg, info, err := checkSnippet(src)
	if err != nil {
		return nil, err
	}
	if pkgPath == "" {
		pkgPath = pkg.Path()
	}
	return wallFindings(fset, pkgPath, []checkedFile{{path: "x.go", file: f}}, info, true), nil
}

// checkSnippet type-checks src as the file x.go of a package example.com/x; it may import what
// the module imports.
func checkSnippet(src string) (*token.FileSet, *ast.File, *types.Package, *types.Info, error) {
	pkgs, err := module()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	imported := map[string]*types.Package{}
	var add func(p *types.Package)
	add = func(p *types.Package) {
		if imported[p.Path()] != nil {
			return
		}
		imported[p.Path()] = p
		for _, i := range p.Imports() {
			add(i)
		}
	}
	for _, p := range pkgs {
		add(p.Types)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{},
		Instances: map[*ast.Ident]types.Instance{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importerFunc(func(path string) (*types.Package, error) {
		if p := imported[path]; p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("%s is not imported by the module", path)
	})}
	pkg, err := conf.Check("example.com/x", fset, []*ast.File{f}, info)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return fset, f, pkg, info, nil
}

// TestExportedClients: an exported API that hands out a client, in a result, a callback, a
// field or a variable, is found; one that takes options in is not.
func TestExportedClients(t *testing.T) {
	const imp = "import \"github.com/hetznercloud/hcloud-go/v2/hcloud\"\n"
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"a result", imp + "func Writer() *hcloud.Client { return nil }", 1},
		{"a method result", imp + "type Conn struct{}\nfunc (Conn) LBs() (*hcloud.LoadBalancerClient, error) { return nil, nil }", 1},
		{"a callback", imp + "func Each(f func(hcloud.INetworkClient)) {}", 1},
		{"an exported field", imp + "type Conn struct{ Client *hcloud.Client }", 1},
		{"a variable", imp + "var Default = hcloud.NewClient()", 1},
		{"options taken in, readers handed out", imp + "type R struct{ c *hcloud.LoadBalancerClient }\nfunc With(o ...hcloud.ClientOption) R { return R{} }", 0},
		{"client options are not a client", imp + "type Conn struct{ Opts []hcloud.ClientOption }\nfunc (*Conn) ClientOptions() []hcloud.ClientOption { return nil }", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, pkg, _, err := checkSnippet("package x\n\n" + tc.src + "\n")
			if err != nil {
				t.Fatal(err)
			}
			if got := exportedClients(pkg); len(got) != tc.want {
				t.Errorf("exportedClients() = %v, want %d finding(s)", got, tc.want)
			}
		})
	}
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// checkFindings runs the wall's checks (findingsOf) on src as a file of package pkg: with want
// empty there must be no finding; otherwise a finding must contain each string of want.
func checkFindings(t *testing.T, src, pkg string, want []string) {
	t.Helper()
	got, err := findingsOf("package x\n\n"+src+"\n", pkg)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(got, "\n")
	if len(want) == 0 && len(got) > 0 {
		t.Errorf("findings = \n%s\nwant none", joined)
	}
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("findings = \n%s\nwant one with %q", joined, w)
		}
	}
}
