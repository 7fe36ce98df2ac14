package ccm_test

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"
)

// The checks of the wall for writes that go around hcloud-go: a request built by hand with
// net/http, and the token any such request needs. They apply to the packages the CCM binary
// links (cmd/hcloud-policy-ccm and what it imports of the module), the process that holds the
// token; the emulator, the demo runner and the test helpers are not linked and write to the
// emulator as a person with a token would.
//
// Reach. net/http gives a request its method in four ways, and each is checked: the request
// constructors (http.NewRequest, http.NewRequestWithContext and httptest's), whose method must
// be the constant GET or HEAD; the shortcuts that write or parse any method (http.Post,
// http.PostForm, Client.Post, Client.PostForm, http.ReadRequest); a literal http.Request with a
// Method that is not the constant GET or HEAD; and an assignment to, or the address of, a
// request's Method. A constructor or shortcut used as a value (f := http.NewRequest) is a
// finding too. A write through any other client (a raw connection, client-go's REST client
// pointed at the API) still needs the token, so the token is followed by name: the field
// config.HCloud.Token and a constant string that names its variables (HCLOUD_TOKEN,
// HCLOUD_TOKEN_FILE) outside ccm/config and ccm/hcloudclient, and the whole environment
// (os.Environ, syscall.Environ). The readers' answers do not carry it
// (hcloudclient.ReadOnlyTransport).
//
// Outside the reach: reflection (reflect can set an exported field such as Request.Method),
// package unsafe (the token in the memory of a client), a variable name or a file path built
// at run time, and a token that arrives from outside the process.

// methodArg are the request constructors of net/http, by types.Func.FullName, with the index of
// their method argument.
var methodArg = map[string]int{
	"net/http.NewRequest": 0, "net/http.NewRequestWithContext": 1,
	"net/http/httptest.NewRequest": 0, "net/http/httptest.NewRequestWithContext": 1,
}

// writers are the functions of net/http that send, or parse, a request of a method other than
// GET or HEAD.
var writers = []string{"net/http.Post", "net/http.PostForm", "(*net/http.Client).Post", "(*net/http.Client).PostForm", "net/http.ReadRequest"}

// environment are the functions that return the whole environment, the token among it.
var environment = []string{"os.Environ", "syscall.Environ"}

// tokenVariables are the names of the environment variables of the token (ccm/config).
var tokenVariables = []string{"HCLOUD_TOKEN", "HCLOUD_TOKEN_FILE"}

// handBuiltFinding is one finding of handBuilt.
type handBuiltFinding struct {
	pos token.Pos
	msg string
}

// handBuilt returns the places of f, a file of the package pkgPath, that build a request of a
// method other than GET or HEAD with net/http, or reach the token by name (see the reach
// above).
func handBuilt(f *ast.File, info *types.Info, pkgPath string) []handBuiltFinding {
	var out []handBuiltFinding
	add := func(pos token.Pos, format string, args ...any) {
		out = append(out, handBuiltFinding{pos, fmt.Sprintf(format, args...) + ": only ccm/executor writes to Hetzner, through its client"})
	}
	reads := map[*ast.Ident]bool{} // constructors called with GET or HEAD
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if id := calleeIdent(n.Fun); id != nil {
				if fn, ok := info.Uses[id].(*types.Func); ok {
					if i, ok := methodArg[fn.FullName()]; ok && i < len(n.Args) && isReadMethod(info, n.Args[i]) {
						reads[id] = true
					}
				}
			}
		case *ast.Ident:
			checkHandBuiltUse(info, n, pkgPath, reads[n], add)
		case *ast.CompositeLit:
			if method := literalMethod(info, n); method != nil && !isReadMethod(info, method) {
				add(n.Pos(), "an http.Request literal with the method %s", types.ExprString(method))
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if isRequestMethod(info, lhs) && (n.Tok != token.ASSIGN || len(n.Lhs) != len(n.Rhs) || !isReadMethod(info, n.Rhs[i])) {
					add(lhs.Pos(), "sets the method of an http.Request to something other than GET or HEAD")
				}
			}
		case *ast.UnaryExpr:
			if n.Op == token.AND && isRequestMethod(info, n.X) {
				add(n.Pos(), "takes the address of an http.Request's method")
			}
		}
		if e, ok := n.(ast.Expr); ok && pkgPath != configPath && pkgPath != clientPath {
			if tv, ok := info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String &&
				slices.Contains(tokenVariables, strings.ToUpper(constant.StringVal(tv.Value))) {
				add(e.Pos(), "names the token's variable %s", constant.StringVal(tv.Value))
			}
		}
		return true
	})
	return out
}

// checkHandBuiltUse reports a use of a request constructor that is not a call with GET or HEAD
// (read), of a writing shortcut, of the whole environment, and of config.HCloud.Token outside
// ccm/config and ccm/hcloudclient.
func checkHandBuiltUse(info *types.Info, id *ast.Ident, pkgPath string, read bool, add func(token.Pos, string, ...any)) {
	switch obj := info.Uses[id].(type) {
	case *types.Func:
		name := obj.FullName()
		if _, ok := methodArg[name]; ok && !read {
			add(id.Pos(), "%s with a method other than the constant GET or HEAD, or as a value", name)
		}
		if slices.Contains(writers, name) {
			add(id.Pos(), "%s sends or parses a request of another method than GET or HEAD", name)
		}
		if slices.Contains(environment, name) {
			add(id.Pos(), "%s reads the whole environment, the token among it", name)
		}
	case *types.Var:
		if obj.IsField() && obj.Name() == "Token" && obj.Pkg() != nil && obj.Pkg().Path() == configPath && pkgPath != configPath && pkgPath != clientPath {
			add(id.Pos(), "reads the Hetzner token (config.HCloud.Token): only ccm/hcloudclient may")
		}
	}
}

// calleeIdent is the identifier a call's function expression names: f of f(...), Sel of
// x.f(...); nil for other expressions.
func calleeIdent(fun ast.Expr) *ast.Ident {
	switch fun := ast.Unparen(fun).(type) {
	case *ast.Ident:
		return fun
	case *ast.SelectorExpr:
		return fun.Sel
	case *ast.IndexExpr: // an instantiation, f[T](...)
		return calleeIdent(fun.X)
	}
	return nil
}

// isReadMethod reports whether e is the constant GET, HEAD or "" (GET).
func isReadMethod(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[e]
	if !ok || tv.Value == nil || tv.Value.Kind() != constant.String {
		return false
	}
	switch constant.StringVal(tv.Value) {
	case "", "GET", "HEAD":
		return true
	}
	return false
}

// isHTTPRequest reports whether t is net/http's Request.
func isHTTPRequest(t types.Type) bool {
	named, ok := types.Unalias(t).(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "net/http" && named.Obj().Name() == "Request"
}

// literalMethod returns the Method of an http.Request literal, nil when lit is no such literal
// or sets no method (GET).
func literalMethod(info *types.Info, lit *ast.CompositeLit) ast.Expr {
	if !isHTTPRequest(info.TypeOf(lit)) {
		return nil
	}
	for i, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			if i == 0 { // unkeyed: Method is the first field
				return elt
			}
			continue
		}
		if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Method" {
			return kv.Value
		}
	}
	return nil
}

// isRequestMethod reports whether e is the Method field of an http.Request (r.Method).
func isRequestMethod(info *types.Info, e ast.Expr) bool {
	sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
	if !ok {
		return false
	}
	v, ok := info.Uses[sel.Sel].(*types.Var)
	return ok && v.IsField() && v.Name() == "Method" && v.Pkg() != nil && v.Pkg().Path() == "net/http"
}

// TestHandBuiltFindings: each way to build a write with net/http, and to reach the token by
// name, is a finding; reads and the package that owns the token are not.
func TestHandBuiltFindings(t *testing.T) {
	tests := []struct {
		name string
		pkg  string // the package path the snippet is checked as; "" for example.com/x
		src  string
		want []string // substrings of the findings; none for clean code
	}{
		{
			name: "issue 30: a DELETE built by hand with HCLOUD_TOKEN",
			src: `import (
	"net/http"
	"os"
)
func f() {
	req, _ := http.NewRequest(http.MethodDelete, "https://api.hetzner.cloud/v1/load_balancers/1", nil)
	req.Header.Set("Authorization", "Bearer "+os.Getenv("HCLOUD_TOKEN"))
	_, _ = http.DefaultClient.Do(req)
}`,
			want: []string{"x.go:8: net/http.NewRequest with a method other than the constant GET or HEAD", "x.go:9: names the token's variable HCLOUD_TOKEN"},
		},
		{
			name: "a method that is not a constant, and the constructor as a value",
			src: `import (
	"context"
	"net/http"
)
func f(ctx context.Context, m string) {
	_, _ = http.NewRequestWithContext(ctx, m, "/", nil)
	build := http.NewRequest
	_, _ = build("GET", "/", nil)
}`,
			want: []string{"x.go:8: net/http.NewRequestWithContext with a method", "x.go:9: net/http.NewRequest with a method other than the constant GET or HEAD, or as a value"},
		},
		{
			name: "the writing shortcuts",
			src: `import (
	"bufio"
	"net/http"
	"strings"
)
func f(c *http.Client) {
	_, _ = http.Post("/", "", nil)
	_, _ = c.PostForm("/", nil)
	_, _ = http.ReadRequest(bufio.NewReader(strings.NewReader("DELETE / HTTP/1.1\r\n\r\n")))
}`,
			want: []string{"x.go:9: net/http.Post sends", "x.go:10: (*net/http.Client).PostForm sends", "x.go:11: net/http.ReadRequest sends or parses"},
		},
		{
			name: "a request literal, its method set, its method's address",
			src: `import "net/http"
func f(r *http.Request) {
	_ = &http.Request{Method: "PUT"}
	r.Method = "DELETE"
	r.Method += ""
	p := &r.Method
	_ = p
}`,
			want: []string{"x.go:5: an http.Request literal with the method \"PUT\"", "x.go:6: sets the method", "x.go:7: sets the method", "x.go:8: takes the address"},
		},
		{
			name: "the token by field, by constant and from the whole environment",
			src: `import (
	"os"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)
const name = "HCLOUD_" + "TOKEN_FILE"
func f(c config.Config) (string, []string, string) { return c.HCloud.Token, os.Environ(), config.EnvHCloudToken }`,
			want: []string{"x.go:8: names the token's variable HCLOUD_TOKEN_FILE", "x.go:9: reads the Hetzner token (config.HCloud.Token)",
				"x.go:9: os.Environ reads the whole environment", "x.go:9: names the token's variable HCLOUD_TOKEN"},
		},
		{
			name: "the package that owns the token reads it",
			pkg:  configPath,
			src: `import "github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
const env = "HCLOUD_TOKEN"
func f(c config.HCloud, lookup func(string) (string, bool)) string { v, _ := lookup(env); return v + c.Token }`,
		},
		{
			name: "reads are fine",
			src: `import (
	"context"
	"net/http"
)
func f(ctx context.Context, r *http.Request) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://robot-ws.your-server.de/server", nil)
	if err != nil {
		return "", err
	}
	_, _ = http.NewRequest("HEAD", "/", nil)
	_ = &http.Request{Method: http.MethodGet}
	r.Method = http.MethodHead
	_, _ = http.Get("/")
	return req.Method + r.Method, nil
}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkFindings(t, tc.src, tc.pkg, tc.want)
		})
	}
}
