package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown/print"
	"github.com/open-policy-agent/opa/v1/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// Mode says whether deny messages block mutations.
type Mode string

// Modes. The names are flag values; they MUST not change.
const (
	// ModeEnforce blocks a mutation with at least one deny message.
	ModeEnforce Mode = "enforce"
	// ModeDryRun reports deny messages (Decision.Deny, DryRun=true) but allows the mutation.
	ModeDryRun Mode = "dryrun"
)

// FailureMode says how a decision whose evaluation failed (error, timeout, malformed message)
// resolves.
type FailureMode string

// Failure modes. The names are flag values; they MUST not change.
const (
	// FailClosed denies a mutation whose decision failed. It is the default.
	FailClosed FailureMode = "closed"
	// FailOpen allows a mutation whose decision failed.
	FailOpen FailureMode = "open"
)

// DefaultTimeout is the evaluation deadline of one decision when Options.Timeout is zero.
const DefaultTimeout = time.Second

// Event reasons on the policy ConfigMap. They MUST not change: alerts match on them.
const (
	// ReasonPolicyLoaded (Normal) names the revision that came into force.
	ReasonPolicyLoaded = "PolicyLoaded"
	// ReasonPolicyRejected (Warning) lists the problems of a rejected revision.
	ReasonPolicyRejected = "PolicyRejected"
)

// Options configure an [Engine]. The zero value is valid: enforce, fail closed, 1 s timeout,
// no events.
type Options struct {
	// Mode is ModeEnforce (default when empty) or ModeDryRun.
	Mode Mode
	// FailureMode is FailClosed (default when empty) or FailOpen.
	FailureMode FailureMode
	// Timeout bounds the evaluation of one decision; 0 means DefaultTimeout.
	Timeout time.Duration
	// Recorder receives PolicyLoaded and PolicyRejected events for sources with an object
	// (see [Source]); nil means no events.
	Recorder record.EventRecorder
	// OnLoad, if set, is called with the revision each time Load puts a new revision in force
	// (not for a rejected one, nor for the revision already in force), after it is in force
	// and while Load still holds its lock: it must return quickly.
	OnLoad func(revision string)
	// DecisionLog, if set, receives the decisions its level selects, as JSON lines in OPA's
	// decision log shape (see [DecisionLog]); nil logs none.
	DecisionLog *DecisionLog
}

// Validate reports every invalid field of o, naming the field and the accepted values.
func (o Options) Validate() error {
	var errs []error
	switch o.Mode {
	case "", ModeEnforce, ModeDryRun:
	default:
		errs = append(errs, fmt.Errorf("invalid policy mode %q: want %q or %q", o.Mode, ModeEnforce, ModeDryRun))
	}
	switch o.FailureMode {
	case "", FailClosed, FailOpen:
	default:
		errs = append(errs, fmt.Errorf("invalid policy failure mode %q: want %q or %q", o.FailureMode, FailClosed, FailOpen))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("invalid policy timeout %s: want a positive duration, or 0 for %s", o.Timeout, DefaultTimeout))
	}
	return errors.Join(errs...)
}

// Source describes where a revision comes from, for logs and events.
type Source struct {
	// Name is shown in logs and events, e.g. "dir /etc/ccm-policy" or "configmap kube-system/ccm-policy".
	Name string
	// Object receives the PolicyLoaded and PolicyRejected events (usually the ConfigMap);
	// nil means no events.
	Object runtime.Object
}

// Engine decides mutations with the policy revision in force. It is safe for concurrent use:
// Decide runs in parallel with itself and with Load.
//
// Here's an example:
//
//	e := policy.NewEngine(policy.Options{Mode: policy.ModeEnforce})
//	if err := policy.WatchDir(ctx, e, "/etc/ccm-policy"); err != nil {
//		return err // the first revision was rejected; err is a *policy.LoadError
//	}
//	d := e.Decide(ctx, in)
//
// # Notes
//
//   - Before the first good revision, every mutation is allowed (logged once): a CCM without a
//     policy behaves like the official one.
//   - A rejected revision never replaces a good one.
type Engine struct {
	opts    Options
	optsErr error

	active atomic.Pointer[compiled]

	mu           sync.Mutex // serializes Load
	lastRejected *LoadError

	noPolicyOnce sync.Once

	// evalSlots bounds the evaluations that run at once (see evalOnOwnStack): GOMAXPROCS, as
	// an evaluation only computes.
	evalSlots chan struct{}
}

var _ Decider = (*Engine)(nil)

// compiled is one accepted revision.
type compiled struct {
	pq rego.PreparedEvalQuery // deny and warn (gateQuery)
	// pqDeny evaluates deny alone (denyQuery), only after pq failed.
	pqDeny   rego.PreparedEvalQuery
	revision string
	// readsInventory is set when a module names input.inventory or input.cost (inventoryuse.go).
	readsInventory bool
}

// NewEngine returns an engine without a revision.
//
// # Errors
//
// Options are checked with [Options.Validate]; call it before. Invalid options do not panic:
// the engine then rejects every Load and fails every decision closed, both with the
// validation error.
func NewEngine(o Options) *Engine {
	registerMetrics()
	e := &Engine{opts: o, optsErr: o.Validate(), evalSlots: newEvalSlots()}
	if e.opts.Mode == "" {
		e.opts.Mode = ModeEnforce
	}
	if e.opts.FailureMode == "" {
		e.opts.FailureMode = FailClosed
	}
	if e.opts.Timeout == 0 {
		e.opts.Timeout = DefaultTimeout
	}
	return e
}

// Revision returns the revision in force, "" before the first good one.
func (e *Engine) Revision() string {
	if c := e.active.Load(); c != nil {
		return c.revision
	}
	return ""
}

// Load compiles files as one revision, vets it, and puts it in force.
//
// files maps flat file names (ConfigMap keys, or base names of a directory's files) to contents:
//   - names starting with "." are ignored (a mounted ConfigMap's "..data" and the like), as
//     are names without a known extension;
//   - "*_test.rego" files are the revision's Rego tests: they are run before the revision is
//     put in force, and are not part of the policy;
//   - "*.rego" files are Rego v1 modules; at least one must declare "package ccm". Without any
//     .rego file (an empty ConfigMap) there is no policy: before the first good revision Load
//     returns no error and the engine keeps allowing everything; after it, such a revision is
//     rejected like any revision without package ccm;
//   - "*.json", "*.yaml" and "*.yml" files each hold one object that is merged at the root of
//     data, as `opa test DIR` does for the files of DIR: {"config": {...}} becomes data.config.
//
// Before it is put in force, the compiled revision decides every shipped sample input
// ([SampleInputs]); an evaluation error for any of them rejects it. Then its Rego tests run with
// the production sandbox (data.inputs holds the sample inputs unless the revision's data
// defines it); a failing or erroneous test rejects it.
//
// The revision is the first 12 hex digits of the SHA-256 over the selected files (tests
// included) in name order, each hashed as name, NUL, content, NUL. Loading the revision
// already in force does nothing.
//
// Feed one engine from one source: two sources would replace each other's revision on every
// change.
//
// # Errors
//
// A revision that does not parse or compile (strict mode, sandbox capabilities, input fields
// type checked against the input schema: see typecheck.go), fails on a
// sample input, or fails its own tests is rejected with a *LoadError that lists file, row and message of every problem; the revision in force
// stays. Each rejection is logged, counted, flagged in hcloud_ccm_policy_revision_rejected
// (until the source holds a revision that loads, or the one in force, again) and reported as a
// Warning event PolicyRejected on from.Object; an accepted revision gets a Normal event PolicyLoaded. Loading the same
// rejected revision again returns the same error without a second event.
func (e *Engine) Load(ctx context.Context, files map[string][]byte, from Source) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()

	policies, data, tests := selectFiles(files)
	rev := revisionOf(policies, data, tests)
	if cur := e.active.Load(); cur != nil && cur.revision == rev {
		revisionRejected.Set(0)
		return rev, nil
	}
	if len(policies) == 0 && e.active.Load() == nil && e.optsErr == nil {
		revisionRejected.Set(0)
		klog.InfoS("Policy source holds no .rego file: no policy in force, every mutation is allowed", "source", from.Name)
		return rev, nil
	}
	if e.lastRejected != nil && e.lastRejected.Revision == rev {
		klog.V(2).InfoS("Policy revision already rejected", "revision", rev, "source", from.Name)
		revisionRejected.Set(1)
		return rev, e.lastRejected
	}

	start := time.Now()
	c, problems := e.compile(ctx, rev, policies, data)
	if len(problems) == 0 {
		problems = e.vet(ctx, c, policies, data, tests)
	}
	if len(problems) > 0 {
		lerr := &LoadError{Revision: rev, Problems: problems}
		e.reject(from, lerr)
		return rev, lerr
	}
	e.active.Store(c)
	e.lastRejected = nil
	reloadsTotal.WithLabelValues("success").Inc()
	revisionRejected.Set(0)
	revisionInfo.Reset()
	revisionInfo.WithLabelValues(rev).Set(1)
	klog.InfoS("Policy revision loaded", "revision", rev, "source", from.Name,
		"modules", len(policies), "dataFiles", len(data), "testFiles", len(tests), "duration", time.Since(start))
	e.event(from, corev1.EventTypeNormal, ReasonPolicyLoaded, "Policy revision %s loaded from %s (%d modules, %d data files, %d test files)",
		rev, from.Name, len(policies), len(data), len(tests))
	if e.opts.OnLoad != nil {
		e.opts.OnLoad(rev)
	}
	return rev, nil
}

// reject logs, counts and reports a rejected revision.
func (e *Engine) reject(from Source, lerr *LoadError) {
	e.lastRejected = lerr
	reloadsTotal.WithLabelValues("failure").Inc()
	revisionRejected.Set(1)
	inForce := e.Revision()
	for _, p := range lerr.Problems {
		klog.ErrorS(nil, "Policy revision rejected", "revision", lerr.Revision, "source", from.Name,
			"file", p.File, "row", p.Row, "col", p.Col, "code", p.Code, "msg", p.Message, "inForce", inForce)
	}
	if inForce == "" {
		inForce = "none"
	}
	lines := make([]string, len(lerr.Problems))
	for i, p := range lerr.Problems {
		lines[i] = p.String()
	}
	e.event(from, corev1.EventTypeWarning, ReasonPolicyRejected, "Policy revision %s from %s rejected, revision %s stays in force: %s",
		lerr.Revision, from.Name, inForce, strings.Join(lines, "; "))
}

// maxEventMessage keeps event messages below the API server's 1 KiB limit.
const maxEventMessage = 1000

func (e *Engine) event(from Source, eventType, reason, format string, args ...any) {
	if e.opts.Recorder == nil || from.Object == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxEventMessage {
		msg = strings.ToValidUTF8(msg[:maxEventMessage-3], "") + "..."
	}
	e.opts.Recorder.Event(from.Object, eventType, reason, msg)
}

// selectFiles splits files into Rego modules, data files and Rego test files and drops
// everything else.
func selectFiles(files map[string][]byte) (policies, data, tests map[string][]byte) {
	policies, data, tests = map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	for name, content := range files {
		base := path.Base(name)
		switch {
		case strings.HasPrefix(base, "."):
		case strings.HasSuffix(base, "_test.rego"):
			tests[name] = content
		case strings.HasSuffix(base, ".rego"):
			policies[name] = content
		case strings.HasSuffix(base, ".json"), strings.HasSuffix(base, ".yaml"), strings.HasSuffix(base, ".yml"):
			data[name] = content
		default:
			klog.V(1).InfoS("Ignoring policy file without a known extension", "file", name)
		}
	}
	return policies, data, tests
}

// revisionOf hashes the selected files; see Load.
func revisionOf(sets ...map[string][]byte) string {
	all := map[string][]byte{}
	for _, set := range sets {
		for k, v := range set {
			all[k] = v
		}
	}
	h := sha256.New()
	for _, name := range sortedKeys(all) {
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(all[name])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compile parses and prepares one revision; it returns problems instead of an error so that
// every problem of every file is reported at once.
func (e *Engine) compile(ctx context.Context, rev string, policies, data map[string][]byte) (*compiled, []Problem) {
	if e.optsErr != nil {
		return nil, []Problem{{Code: "ccm_options_error", Message: e.optsErr.Error()}}
	}
	var problems []Problem
	opts := []func(*rego.Rego){
		rego.Query(gateQuery),
		rego.Module(gateFile, gateModule),
		rego.Strict(true),
		// A built-in error (division by zero, to_number("web"), a bad regex) is an evaluation
		// error resolved by the failure mode, not an undefined rule that would allow.
		rego.StrictBuiltinErrors(true),
		rego.Capabilities(Capabilities()),
		rego.EnablePrintStatements(true),
		rego.PrintHook(printHook{revision: rev}),
	}
	keySchema, err := objectGetSchema()
	if err != nil {
		return nil, []Problem{{Code: "ccm_schema_error", Message: err.Error()}}
	}
	var keyProblems []Problem // literal object.get keys on input that the schema lacks (objectget.go)
	hasCCM, readsInventory := false, false
	for _, name := range sortedKeys(policies) {
		m, err := ast.ParseModuleWithOpts(name, string(policies[name]), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			problems = append(problems, problemsFrom(err)...)
			continue
		}
		switch pkg := m.Package.Path.String(); {
		case pkg == "data.ccm":
			hasCCM = true
		case pkg == "data.ccm_gate" || strings.HasPrefix(pkg, "data.ccm_gate."):
			problems = append(problems, Problem{File: name, Row: m.Package.Location.Row, Code: "ccm_reserved_package",
				Message: "package ccm_gate is reserved for the CCM's wrapper module: rename the package"})
			continue
		}
		keyProblems = append(keyProblems, objectGetKeyProblems(m, keySchema)...)
		readsInventory = readsInventory || namesInventory(m)
		opts = append(opts, rego.ParsedModule(m))
	}
	if !hasCCM && len(problems) == 0 {
		problems = append(problems, Problem{Code: "ccm_missing_package",
			Message: "no module declares package ccm: the CCM decides with data.ccm.deny and data.ccm.warn, so a revision without package ccm would allow everything"})
	}
	doc, dataProblems := mergeData(data)
	problems = append(problems, dataProblems...)
	if len(problems) > 0 {
		return nil, problems
	}
	// Type check against the input schema (typecheck.go): a misspelt input field is a
	// rego_type_error that rejects the revision, like a parse error; a misspelt literal key of
	// object.get on input is a ccm_type_error (objectget.go).
	schema, err := inputSchema()
	if err != nil {
		return nil, []Problem{{Code: "ccm_schema_error", Message: err.Error()}}
	}
	var compiler *ast.Compiler // the compiler rego.New makes, kept for the deny-only query
	opts = append(opts, rego.Data(doc), rego.Schemas(schema), rego.CompilerHook(func(c *ast.Compiler) { compiler = c }))
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, sortProblems(append(problemsFrom(err), keyProblems...))
	}
	if len(keyProblems) > 0 {
		return nil, keyProblems
	}
	// The deny-only query, to tell a failing warn rule from a failing deny rule (see
	// Engine.eval), on the compiler of pq as it is: given a compiler and no modules, rego
	// compiles only the query, so a revision's modules are compiled and kept once, not twice
	// (docs/performance.md § Memory). Evaluations only read the compiler, as concurrent
	// evaluations of pq already do.
	pqDeny, err := rego.New(rego.Query(denyQuery), rego.Compiler(compiler), rego.Data(doc),
		rego.StrictBuiltinErrors(true), rego.Capabilities(Capabilities()), rego.PrintHook(printHook{revision: rev}),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, problemsFrom(err)
	}
	return &compiled{pq: pq, pqDeny: pqDeny, revision: rev, readsInventory: readsInventory}, nil
}

// mergeData merges the data files at the root of data; a value defined by two files is a problem.
func mergeData(data map[string][]byte) (map[string]any, []Problem) {
	doc := map[string]any{}
	origin := map[string]string{} // top-level key path -> file, for conflict messages
	var problems []Problem
	for _, name := range sortedKeys(data) {
		raw := data[name]
		if !strings.HasSuffix(name, ".json") {
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				problems = append(problems, Problem{File: name, Code: "ccm_data_error", Message: fmt.Sprintf("parse YAML: %v", err)})
				continue
			}
			raw = j
		}
		var v any
		if err := util.UnmarshalJSON(raw, &v); err != nil {
			problems = append(problems, Problem{File: name, Code: "ccm_data_error", Message: fmt.Sprintf("parse JSON: %v", err)})
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			problems = append(problems, Problem{File: name, Code: "ccm_data_error",
				Message: fmt.Sprintf("a data file must hold one object (merged at the root of data), got %T", v)})
			continue
		}
		if err := mergeInto(doc, obj, "data", name, origin); err != nil {
			problems = append(problems, Problem{File: name, Code: "ccm_data_error", Message: err.Error()})
		}
	}
	return doc, problems
}

func mergeInto(dst, src map[string]any, at, file string, origin map[string]string) error {
	for k, sv := range src {
		p := at + "." + k
		dv, exists := dst[k]
		if !exists {
			dst[k] = sv
			origin[p] = file
			continue
		}
		dobj, ok1 := dv.(map[string]any)
		sobj, ok2 := sv.(map[string]any)
		if !ok1 || !ok2 {
			return fmt.Errorf("%s is defined again (first defined by %s): keep the keys of data files apart", p, originOf(origin, p))
		}
		if err := mergeInto(dobj, sobj, p, file, origin); err != nil {
			return err
		}
	}
	return nil
}

// originOf returns the file that defined p or the nearest enclosing path.
func originOf(origin map[string]string, p string) string {
	for p != "" {
		if f, ok := origin[p]; ok {
			return f
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return "another file"
}

// printHook sends Rego print() output to the log.
type printHook struct{ revision string }

func (h printHook) Print(pctx print.Context, msg string) error {
	loc := ""
	if pctx.Location != nil {
		loc = pctx.Location.String()
	}
	klog.V(2).InfoS("Rego print", "location", loc, "revision", h.revision, "msg", msg)
	return nil
}
