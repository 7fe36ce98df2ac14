package policy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// files builds a revision from name/content pairs.
func files(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}

func mustLoad(t *testing.T, e *policy.Engine, fs map[string][]byte) string {
	t.Helper()
	rev, err := e.Load(context.Background(), fs, policy.Source{Name: "test"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return rev
}

const denyLB31 = `package ccm

deny contains {"msg": sprintf("type %s is not allowed", [input.load_balancer.type]), "code": "type"} if {
	input.load_balancer.type == "lb31"
}

warn contains "lb21 is expensive" if input.load_balancer.type == "lb21"
`

func lbInput(typ string) input.Input {
	return input.Input{
		Version:      input.InputVersion,
		Action:       input.ActionLoadBalancerCreate,
		Operation:    "create",
		Service:      &input.Service{Namespace: "default", Name: "web"},
		LoadBalancer: &input.LoadBalancer{Name: "web", Type: typ, Location: "fsn1"},
	}
}

func TestOptions_Validate(t *testing.T) {
	tests := []struct {
		name    string
		opts    policy.Options
		wantErr string
	}{
		{name: "The zero value is valid", opts: policy.Options{}},
		{name: "Explicit values are valid", opts: policy.Options{Mode: policy.ModeDryRun, FailureMode: policy.FailOpen, Timeout: time.Second}},
		{name: "An unknown mode names the accepted values", opts: policy.Options{Mode: "audit"}, wantErr: `invalid policy mode "audit": want "enforce" or "dryrun"`},
		{name: "An unknown failure mode names the accepted values", opts: policy.Options{FailureMode: "maybe"}, wantErr: `invalid policy failure mode "maybe": want "closed" or "open"`},
		{name: "A negative timeout is invalid", opts: policy.Options{Timeout: -time.Second}, wantErr: "invalid policy timeout -1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate() = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestEngine_Load_rejects(t *testing.T) {
	tests := []struct {
		name  string
		files map[string][]byte
		want  policy.Problem // Message is matched as a substring
	}{
		{
			name:  "A parse error names file and row",
			files: files("lb.rego", "package ccm\n\ndeny[msg] { msg := \"x\" }\n"),
			want:  policy.Problem{File: "lb.rego", Row: 3, Code: "rego_parse_error", Message: "`if` keyword is required"},
		},
		{
			name:  "An unsafe variable names file and row",
			files: files("lb.rego", "package ccm\n\ndeny contains msg if {\n\tmsg := y\n}\n"),
			want:  policy.Problem{File: "lb.rego", Row: 4, Code: "rego_unsafe_var_error", Message: "var y is unsafe"},
		},
		{
			name:  "Strict mode rejects an unused assignment",
			files: files("lb.rego", "package ccm\n\ndeny contains \"x\" if {\n\tz := 1\n\tinput.a == 1\n}\n"),
			want:  policy.Problem{File: "lb.rego", Row: 4, Code: "rego_compile_error", Message: "assigned var z unused"},
		},
		{
			name:  "http.send is rejected at load with a sandbox hint",
			files: files("net.rego", "package ccm\n\ndeny contains \"x\" if {\n\thttp.send({\"method\": \"GET\", \"url\": \"http://example.com\"}).status_code == 200\n}\n"),
			want:  policy.Problem{File: "net.rego", Row: 4, Code: "rego_type_error", Message: "undefined function http.send (network, host and random built-ins are disabled"},
		},
		{
			name:  "net.lookup_ip_addr is rejected at load",
			files: files("dns.rego", "package ccm\n\ndeny contains \"x\" if {\n\tcount(net.lookup_ip_addr(\"example.com\")) > 0\n}\n"),
			want:  policy.Problem{File: "dns.rego", Row: 4, Code: "rego_type_error", Message: "undefined function net.lookup_ip_addr"},
		},
		{
			name:  "opa.runtime is rejected at load",
			files: files("rt.rego", "package ccm\n\ndeny contains \"x\" if {\n\topa.runtime().env.HOME != \"\"\n}\n"),
			want:  policy.Problem{File: "rt.rego", Row: 4, Code: "rego_type_error", Message: "undefined function opa.runtime"},
		},
		{
			name:  "rand.intn is rejected at load",
			files: files("rand.rego", "package ccm\n\ndeny contains \"x\" if {\n\trand.intn(\"k\", 2) == 1\n}\n"),
			want:  policy.Problem{File: "rand.rego", Row: 4, Code: "rego_type_error", Message: "undefined function rand.intn"},
		},
		{
			name:  "A revision without package ccm is rejected",
			files: files("other.rego", "package other\n\ndeny contains \"x\" if input.a == 1\n"),
			want:  policy.Problem{Code: "ccm_missing_package", Message: "no module declares package ccm"},
		},
		{
			name:  "Data files without package ccm are rejected",
			files: files("config.json", `{"a": 1}`, "other.rego", "package other\n\nx := 1\n"),
			want:  policy.Problem{Code: "ccm_missing_package", Message: "no module declares package ccm"},
		},
		{
			name:  "The wrapper's package is reserved",
			files: files("a.rego", denyLB31, "gate.rego", "package ccm_gate\n\nx := 1\n"),
			want:  policy.Problem{File: "gate.rego", Row: 1, Code: "ccm_reserved_package", Message: "package ccm_gate is reserved"},
		},
		{
			name:  "A data file that is not JSON names the file",
			files: files("a.rego", denyLB31, "data.json", "{not json"),
			want:  policy.Problem{File: "data.json", Code: "ccm_data_error", Message: "parse JSON"},
		},
		{
			name:  "A data file that is not an object names the file",
			files: files("a.rego", denyLB31, "list.json", "[1, 2]"),
			want:  policy.Problem{File: "list.json", Code: "ccm_data_error", Message: "a data file must hold one object"},
		},
		{
			name:  "A data file that is not YAML names the file",
			files: files("a.rego", denyLB31, "config.yaml", "a: [1\n"),
			want:  policy.Problem{File: "config.yaml", Code: "ccm_data_error", Message: "parse YAML"},
		},
		{
			name:  "Two data files defining the same value conflict",
			files: files("a.rego", denyLB31, "a.json", `{"config": {"x": 1}}`, "b.yaml", "config:\n  x: 2\n"),
			want:  policy.Problem{File: "b.yaml", Code: "ccm_data_error", Message: "data.config.x is defined again (first defined by a.json)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := policy.NewEngine(policy.Options{})
			rev, err := e.Load(context.Background(), tc.files, policy.Source{Name: "test"})
			var lerr *policy.LoadError
			if !errors.As(err, &lerr) {
				t.Fatalf("Load() error = %v, want a *LoadError", err)
			}
			if lerr.Revision != rev || len(rev) != 12 {
				t.Errorf("LoadError.Revision = %q, returned revision %q; want the same 12 hex digits", lerr.Revision, rev)
			}
			for _, p := range lerr.Problems {
				if p.File == tc.want.File && p.Row == tc.want.Row && p.Code == tc.want.Code && strings.Contains(p.Message, tc.want.Message) {
					if e.Revision() != "" {
						t.Errorf("Revision() = %q after a rejected first load, want \"\"", e.Revision())
					}
					return
				}
			}
			t.Fatalf("problems = %+v\nwant one like %+v", lerr.Problems, tc.want)
		})
	}
}

func TestEngine_Load_keepsLastGoodRevision(t *testing.T) {
	ctx := context.Background()
	e := policy.NewEngine(policy.Options{})
	good := mustLoad(t, e, files("lb.rego", denyLB31))

	bad, err := e.Load(ctx, files("lb.rego", "package ccm\n\ndeny contains msg if msg := y\n"), policy.Source{Name: "test"})
	if err == nil {
		t.Fatal("Load(bad) = nil error, want a *LoadError")
	}
	if bad == good {
		t.Fatalf("bad revision %q equals the good one", bad)
	}
	if got := e.Revision(); got != good {
		t.Fatalf("Revision() = %q after a rejected reload, want the last good %q", got, good)
	}
	d := e.Decide(ctx, lbInput("lb31"))
	if d.Allowed || d.Revision != good || len(d.Deny) != 1 {
		t.Fatalf("Decide after a rejected reload = %+v, want a denial by revision %s", d, good)
	}
}

func TestEngine_Load_revision(t *testing.T) {
	e := policy.NewEngine(policy.Options{})
	rev := mustLoad(t, e, files("lb.rego", denyLB31))
	h := sha256.Sum256([]byte("lb.rego\x00" + denyLB31 + "\x00"))
	if want := hex.EncodeToString(h[:])[:12]; rev != want {
		t.Fatalf("revision = %q, want %q: the first 12 hex of sha256 over name, NUL, content, NUL", rev, want)
	}
	ignored := files("lb.rego", denyLB31, "..data", "x", ".hidden.rego", "garbage", "README.md", "# notes")
	if got := mustLoad(t, e, ignored); got != rev {
		t.Errorf("revision with ignored files = %q, want %q: dotfiles and unknown extensions do not count", got, rev)
	}
	if got := mustLoad(t, e, files("lb.rego", denyLB31, "lb_test.rego", "package ccm_test\n\ntest_ok if true\n")); got == rev {
		t.Errorf("revision did not change with a test file: a fixed test must give a new revision")
	}
	if got := mustLoad(t, e, files("lb.rego", denyLB31+"\n")); got == rev {
		t.Errorf("revision did not change with the content")
	}
	if got := mustLoad(t, e, files("lb2.rego", denyLB31)); got == rev {
		t.Errorf("revision did not change with the file name")
	}
}

func TestEngine_Load_dataFiles(t *testing.T) {
	const rules = `package ccm

deny contains msg if {
	not input.load_balancer.type in data.config.types
	msg := sprintf("type %s not in %v (max %d)", [input.load_balancer.type, data.config.types, data.limits.max])
}
`
	e := policy.NewEngine(policy.Options{})
	mustLoad(t, e, files(
		"lb.rego", rules,
		"config.json", `{"config": {"types": ["lb11"]}}`,
		"more.yaml", "config:\n  extra: true\nlimits:\n  max: 3\n",
	))
	if d := e.Decide(context.Background(), lbInput("lb11")); !d.Allowed || d.Err != nil {
		t.Fatalf("Decide(lb11) = %+v, want allowed", d)
	}
	d := e.Decide(context.Background(), lbInput("lb21"))
	want := []policy.Message{{Msg: `type lb21 not in ["lb11"] (max 3)`}}
	if diff := cmp.Diff(want, d.Deny); diff != "" {
		t.Fatalf("Decide(lb21).Deny mismatch (-want +got):\n%s", diff)
	}
}

func TestEngine_Decide(t *testing.T) {
	slow := `package ccm

deny contains "slow" if {
	input.load_balancer.type == "lb99"
	count([x | some x in numbers.range(1, 100000000); x % 7 == 3]) > 0
}
`
	badMessage := "package ccm\n\ndeny contains 42 if input.load_balancer.type == \"lb99\"\n"
	badCode := "package ccm\n\ndeny contains {\"msg\": \"m\", \"code\": 7} if input.load_balancer.type == \"lb99\"\n"
	noMsg := "package ccm\n\ndeny contains {\"message\": \"m\"} if input.load_balancer.type == \"lb99\"\n"
	// Built-in errors, only for lb99 so that the revision passes its vetting on the sample inputs.
	divZero := "package ccm\n\ndeny contains \"d\" if {\n\tinput.load_balancer.type == \"lb99\"\n\t10 / (count(input.service.name) - 3) > 1\n}\n"
	toNumber := "package ccm\n\ndeny contains \"n\" if {\n\tinput.load_balancer.type == \"lb99\"\n\tto_number(input.service.name) > 1\n}\n"
	badRegex := "package ccm\n\ndeny contains \"r\" if {\n\tinput.load_balancer.type == \"lb99\"\n\tregex.match(concat(\"\", [\"(\", input.service.name]), \"x\")\n}\n"

	// Warn rules that fail, and deny messages with their own enforcement, only for lb99.
	warnDivZero := "package ccm\n\nwarn contains \"w\" if {\n\tinput.load_balancer.type == \"lb99\"\n\t10 / (count(input.service.name) - 3) > 1\n}\n"
	warnBadMessage := "package ccm\n\nwarn contains 42 if input.load_balancer.type == \"lb99\"\n"
	denyLB99 := "package ccm\n\ndeny contains \"no lb99\" if input.load_balancer.type == \"lb99\"\n"
	dryRunLB99 := "package ccm\n\ndeny contains {\"msg\": \"lb99 soon denied\", \"code\": \"new\", \"enforcement\": \"dryrun\"} if input.load_balancer.type == \"lb99\"\n"
	enforceLB99 := "package ccm\n\ndeny contains {\"msg\": \"lb99 denied\", \"enforcement\": \"enforce\"} if input.load_balancer.type == \"lb99\"\n"
	typoLB99 := "package ccm\n\ndeny contains {\"msg\": \"lb99\", \"enforcement\": \"dry-run\"} if input.load_balancer.type == \"lb99\"\n"
	warnEnforcement := "package ccm\n\nwarn contains {\"msg\": \"careful\", \"enforcement\": \"anything\"} if input.load_balancer.type == \"lb99\"\n"

	tests := []struct {
		name        string
		opts        policy.Options
		files       map[string][]byte // nil: no revision loaded
		typ         string
		want        policy.Decision // Revision, Err and WarnErr are checked separately
		wantErr     string
		wantWarnErr string
		revIsLoad   bool
	}{
		{
			name:        "A warn rule that divides by zero does not block",
			files:       files("lb.rego", warnDivZero),
			typ:         "lb99",
			want:        policy.Decision{Allowed: true},
			wantWarnErr: "divide by zero",
		},
		{
			name:        "A warn rule that divides by zero leaves the deny rules in force",
			files:       files("lb.rego", warnDivZero, "deny.rego", denyLB99),
			typ:         "lb99",
			want:        policy.Decision{Allowed: false, Deny: []policy.Message{{Msg: "no lb99"}}},
			wantWarnErr: "divide by zero",
		},
		{
			name:    "A deny rule that divides by zero blocks even when a warn rule fails too",
			files:   files("lb.rego", warnDivZero, "deny.rego", divZero),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: "divide by zero",
		},
		{
			name:        "A malformed warn message does not block",
			files:       files("lb.rego", warnBadMessage),
			typ:         "lb99",
			want:        policy.Decision{Allowed: true},
			wantWarnErr: "a data.ccm.warn message is json.Number",
		},
		{
			name:  "A warn message ignores an enforcement key",
			files: files("lb.rego", warnEnforcement),
			typ:   "lb99",
			want:  policy.Decision{Allowed: true, Warn: []policy.Message{{Msg: "careful"}}},
		},
		{
			name:  "A deny message with enforcement dryrun is reported but does not block in enforce mode",
			files: files("lb.rego", dryRunLB99),
			typ:   "lb99",
			want:  policy.Decision{Allowed: true, DryRun: true, Deny: []policy.Message{{Msg: "lb99 soon denied", Code: "new", Enforcement: "dryrun"}}},
		},
		{
			name:  "A dry-run deny message does not stop another deny message from blocking",
			files: files("lb.rego", dryRunLB99, "deny.rego", denyLB99),
			typ:   "lb99",
			want: policy.Decision{Allowed: false, DryRun: true, Deny: []policy.Message{
				{Msg: "no lb99"}, {Msg: "lb99 soon denied", Code: "new", Enforcement: "dryrun"}}},
		},
		{
			name:  "enforcement enforce is the default, stored as empty",
			files: files("lb.rego", enforceLB99),
			typ:   "lb99",
			want:  policy.Decision{Allowed: false, Deny: []policy.Message{{Msg: "lb99 denied"}}},
		},
		{
			name:  "enforcement enforce does not override dry-run mode",
			opts:  policy.Options{Mode: policy.ModeDryRun},
			files: files("lb.rego", enforceLB99),
			typ:   "lb99",
			want:  policy.Decision{Allowed: true, DryRun: true, Deny: []policy.Message{{Msg: "lb99 denied"}}},
		},
		{
			name:    "An unknown enforcement value fails closed",
			files:   files("lb.rego", typoLB99),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: `"enforcement": dry-run: want "dryrun" or "enforce"`,
		},
		{
			name: "Without a revision every mutation is allowed",
			typ:  "lb31",
			want: policy.Decision{Allowed: true},
		},
		{
			name:  "An input no rule matches is allowed",
			files: files("lb.rego", denyLB31),
			typ:   "lb11",
			want:  policy.Decision{Allowed: true},
		},
		{
			name:  "A deny message blocks in enforce mode",
			files: files("lb.rego", denyLB31),
			typ:   "lb31",
			want:  policy.Decision{Allowed: false, Deny: []policy.Message{{Msg: "type lb31 is not allowed", Code: "type"}}},
		},
		{
			name:  "A deny message is reported but does not block in dry-run mode",
			opts:  policy.Options{Mode: policy.ModeDryRun},
			files: files("lb.rego", denyLB31),
			typ:   "lb31",
			want:  policy.Decision{Allowed: true, DryRun: true, Deny: []policy.Message{{Msg: "type lb31 is not allowed", Code: "type"}}},
		},
		{
			name:  "Dry-run mode without deny messages is not marked dry run",
			opts:  policy.Options{Mode: policy.ModeDryRun},
			files: files("lb.rego", denyLB31),
			typ:   "lb11",
			want:  policy.Decision{Allowed: true},
		},
		{
			name:  "A warning as a plain string does not block",
			files: files("lb.rego", denyLB31),
			typ:   "lb21",
			want:  policy.Decision{Allowed: true, Warn: []policy.Message{{Msg: "lb21 is expensive"}}},
		},
		{
			name:  "Rules in many files of package ccm merge",
			files: files("a.rego", denyLB31, "b.rego", "package ccm\n\ndeny contains \"second\" if input.load_balancer.type == \"lb31\"\n"),
			typ:   "lb31",
			want:  policy.Decision{Deny: []policy.Message{{Msg: "second"}, {Msg: "type lb31 is not allowed", Code: "type"}}},
		},
		{
			name:    "A message that is neither string nor object fails closed",
			files:   files("lb.rego", badMessage),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: "a data.ccm.deny message is json.Number",
		},
		{
			name:    "A message object without msg fails closed",
			files:   files("lb.rego", noMsg),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: `has no string "msg"`,
		},
		{
			name:    "A message object with a code that is not a string fails open when configured",
			opts:    policy.Options{FailureMode: policy.FailOpen},
			files:   files("lb.rego", badCode),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true},
			wantErr: `"code" that is not a string`,
		},
		{
			name:    "An evaluation past the deadline fails closed",
			opts:    policy.Options{Timeout: 50 * time.Millisecond},
			files:   files("slow.rego", slow),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: "evaluation cancelled",
		},
		{
			name:    "An evaluation past the deadline fails open when configured",
			opts:    policy.Options{Timeout: 50 * time.Millisecond, FailureMode: policy.FailOpen},
			files:   files("slow.rego", slow),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true},
			wantErr: "evaluation cancelled",
		},
		{
			name:    "A division by zero fails closed instead of leaving deny undefined",
			files:   files("lb.rego", divZero),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: "divide by zero",
		},
		{
			name:    "to_number of a non-number fails closed",
			files:   files("lb.rego", toNumber),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: "to_number",
		},
		{
			name:    "A bad regular expression fails closed",
			files:   files("lb.rego", badRegex),
			typ:     "lb99",
			want:    policy.Decision{Allowed: false},
			wantErr: "regex.match",
		},
		{
			name:    "A built-in error fails open when configured",
			opts:    policy.Options{FailureMode: policy.FailOpen},
			files:   files("lb.rego", toNumber),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true},
			wantErr: "to_number",
		},
		{
			name:    "A built-in error in dry-run mode is allowed and reported as dry run (failure mode closed)",
			opts:    policy.Options{Mode: policy.ModeDryRun, FailureMode: policy.FailClosed},
			files:   files("lb.rego", toNumber),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true, DryRun: true},
			wantErr: "to_number",
		},
		{
			name:    "A built-in error in dry-run mode with failure mode open is allowed by the failure mode",
			opts:    policy.Options{Mode: policy.ModeDryRun, FailureMode: policy.FailOpen},
			files:   files("lb.rego", toNumber),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true},
			wantErr: "to_number",
		},
		{
			name:    "An evaluation past the deadline in dry-run mode does not block",
			opts:    policy.Options{Mode: policy.ModeDryRun, Timeout: 50 * time.Millisecond},
			files:   files("slow.rego", slow),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true, DryRun: true},
			wantErr: "evaluation cancelled",
		},
		{
			name:    "A malformed deny message in dry-run mode does not block",
			opts:    policy.Options{Mode: policy.ModeDryRun},
			files:   files("lb.rego", badMessage),
			typ:     "lb99",
			want:    policy.Decision{Allowed: true, DryRun: true},
			wantErr: "a data.ccm.deny message is json.Number",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := policy.NewEngine(tc.opts)
			rev := ""
			if tc.files != nil {
				rev = mustLoad(t, e, tc.files)
			}
			start := time.Now()
			d := e.Decide(context.Background(), lbInput(tc.typ))
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Decide took %s, want the timeout to bound it", took)
			}
			if d.Revision != rev {
				t.Errorf("Revision = %q, want %q", d.Revision, rev)
			}
			switch {
			case tc.wantErr == "" && d.Err != nil:
				t.Errorf("Err = %v, want nil", d.Err)
			case tc.wantErr != "" && (d.Err == nil || !strings.Contains(d.Err.Error(), tc.wantErr)):
				t.Errorf("Err = %v, want it to contain %q", d.Err, tc.wantErr)
			}
			switch {
			case tc.wantWarnErr == "" && d.WarnErr != nil:
				t.Errorf("WarnErr = %v, want nil", d.WarnErr)
			case tc.wantWarnErr != "" && (d.WarnErr == nil || !strings.Contains(d.WarnErr.Error(), tc.wantWarnErr)):
				t.Errorf("WarnErr = %v, want it to contain %q", d.WarnErr, tc.wantWarnErr)
			}
			if d.ID == "" {
				t.Error("ID is empty, want a decision ID")
			}
			d.Revision, d.Err, d.WarnErr, d.ID = "", nil, nil, ""
			if diff := cmp.Diff(tc.want, d); diff != "" {
				t.Errorf("Decide mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEngine_invalidOptionsFailClosed: an engine with invalid options loads nothing and every
// decision fails (Err), closed, except in dry-run mode, which never blocks.
func TestEngine_invalidOptionsFailClosed(t *testing.T) {
	tests := []struct {
		name        string
		opts        policy.Options
		wantAllowed bool
	}{
		{name: "An invalid mode fails closed", opts: policy.Options{Mode: "audit"}},
		{name: "An invalid failure mode fails closed in enforce mode", opts: policy.Options{FailureMode: "ajar"}},
		{name: "An invalid failure mode does not block in dry-run mode", opts: policy.Options{Mode: policy.ModeDryRun, FailureMode: "ajar"}, wantAllowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := policy.NewEngine(tc.opts)
			if _, err := e.Load(context.Background(), files("lb.rego", denyLB31), policy.Source{Name: "test"}); err == nil {
				t.Fatal("Load with invalid options = nil error, want the validation error")
			}
			if d := e.Decide(context.Background(), lbInput("lb11")); d.Allowed != tc.wantAllowed || d.Err == nil || d.DryRun != tc.wantAllowed {
				t.Fatalf("Decide with invalid options = %+v, want Allowed and DryRun %v with Err", d, tc.wantAllowed)
			}
		})
	}
}

func TestEngine_Load_events(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ccm-policy"}}
	rec := record.NewFakeRecorder(10)
	e := policy.NewEngine(policy.Options{Recorder: rec})
	ctx := context.Background()

	good, err := e.Load(ctx, files("lb.rego", denyLB31), policy.ConfigMapSource(cm))
	if err != nil {
		t.Fatal(err)
	}
	bad, err := e.Load(ctx, files("lb.rego", "package ccm\n\ndeny contains msg if msg := y\n"), policy.ConfigMapSource(cm))
	if err == nil {
		t.Fatal("Load(bad) = nil error")
	}
	// The same rejected revision again: no second event.
	if _, err := e.Load(ctx, files("lb.rego", "package ccm\n\ndeny contains msg if msg := y\n"), policy.ConfigMapSource(cm)); err == nil {
		t.Fatal("Load(bad) again = nil error")
	}
	// A source without object: no event.
	if _, err := e.Load(ctx, files("lb.rego", denyLB31+"\n"), policy.DirSource("/policies")); err != nil {
		t.Fatal(err)
	}
	close(rec.Events)
	var got []string
	for ev := range rec.Events {
		got = append(got, ev)
	}
	want := []string{
		"Normal PolicyLoaded Policy revision " + good + " loaded from configmap kube-system/ccm-policy (1 modules, 0 data files, 0 test files)",
		"Warning PolicyRejected Policy revision " + bad + " from configmap kube-system/ccm-policy rejected, revision " + good +
			" stays in force: lb.rego:3:22: rego_unsafe_var_error: var y is unsafe",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events mismatch (-want +got):\n%s", diff)
	}
}

func TestHammerEngine_DecideDuringLoad(t *testing.T) {
	e := policy.NewEngine(policy.Options{})
	mustLoad(t, e, files("lb.rego", denyLB31))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			_, _ = e.Load(ctx, files("lb.rego", denyLB31+strings.Repeat("\n", i%3)), policy.Source{Name: "test"})
		}
	}()
	for range 200 {
		if d := e.Decide(ctx, lbInput("lb31")); d.Allowed || d.Err != nil {
			t.Fatalf("Decide during reloads = %+v, want denied", d)
		}
	}
	cancel()
	<-done
}

func TestEngine_Load_emptyRevision(t *testing.T) {
	ctx := context.Background()
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(ctx, files("README.md", "# nothing yet", "data.json", `{"config": {}}`), policy.Source{Name: "test"}); err != nil {
		t.Fatalf("Load(no .rego) before any revision = %v, want nil: no policy", err)
	}
	if d := e.Decide(ctx, lbInput("lb31")); !d.Allowed || d.Revision != "" || e.Revision() != "" {
		t.Fatalf("Decide without policy = %+v (revision %q), want allowed without revision", d, e.Revision())
	}
	good := mustLoad(t, e, files("lb.rego", denyLB31))
	_, err := e.Load(ctx, files(), policy.Source{Name: "test"})
	var lerr *policy.LoadError
	if !errors.As(err, &lerr) || lerr.Problems[0].Code != "ccm_missing_package" {
		t.Fatalf("Load(empty) after a good revision = %v, want a ccm_missing_package rejection", err)
	}
	if e.Revision() != good {
		t.Fatalf("Revision() = %q, want %q to stay in force", e.Revision(), good)
	}
}
