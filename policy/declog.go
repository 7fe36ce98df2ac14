package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Decision log levels: which decisions a [DecisionLog] writes. The names are the values of the
// CCM's --policy-decision-log flag; they MUST not change.
const (
	// DecisionLogOff writes nothing.
	DecisionLogOff = "off"
	// DecisionLogDeny writes the decisions that are not a plain allow: denied, denied in dry
	// run (allowed), and failed evaluations (Err or WarnErr set). It is the CCM's default.
	DecisionLogDeny = "deny"
	// DecisionLogAll writes every decision.
	DecisionLogAll = "all"
)

// Decision log bounds. A logged input holds no annotation value longer than
// MaxLoggedAnnotationValue bytes, and no input longer than MaxLoggedInput bytes of JSON: a
// longer one first loses input.inventory.load_balancers (listed in "erased"; the totals stay),
// and if still longer is replaced by {"truncated": true, "bytes": N, "action": ...,
// "operation": ...} and listed in "erased". Enforced by boundedInput (TestDecisionLog_bounds).
const (
	MaxLoggedAnnotationValue = 512
	MaxLoggedInput           = 16 << 10
)

// sensitiveKey matches the annotation and label keys whose values a decision log never holds:
// they are replaced by "[redacted]" and listed in "masked" (TestDecisionLog_bounds). The CCM
// puts no token and no certificate material in an Input (a Certificate holds only domains and
// labels); this covers what a user may put in a Service's annotations or labels.
var sensitiveKey = regexp.MustCompile(`(?i)token|secret|passw|credential|cert|private|apikey|api-key|api_key`)

// DecisionLog writes decisions as JSON lines in OPA's decision log event shape (EventV1 of
// OPA's v1/plugins/logs: decision_id, labels, bundles, path, input, result, masked, erased,
// timestamp, metrics), so that a pipeline that ingests OPA's decision logs ingests them
// unchanged. It is safe for concurrent use: one line is written at a time.
type DecisionLog struct {
	level  string
	labels map[string]string

	mu sync.Mutex
	w  io.Writer
}

// NewDecisionLog returns a log of the decisions selected by level (DecisionLogOff,
// DecisionLogDeny or DecisionLogAll) written to w; labels (for example app, version and the
// policy mode) go into every line. An unknown level is an error naming the accepted values.
func NewDecisionLog(level string, w io.Writer, labels map[string]string) (*DecisionLog, error) {
	switch level {
	case DecisionLogOff, DecisionLogDeny, DecisionLogAll:
	default:
		return nil, fmt.Errorf("invalid decision log level %q: want %q, %q or %q", level, DecisionLogOff, DecisionLogDeny, DecisionLogAll)
	}
	if w == nil {
		w = os.Stdout
	}
	return &DecisionLog{level: level, labels: labels, w: w}, nil
}

// DecisionLogPath is the path of every logged decision: the Rego package the CCM queries.
const DecisionLogPath = "ccm"

// DecisionLogLine is one line of a decision log; its field names and JSON shape are those of
// OPA's EventV1 (TestDecisionLog_lineShape compares them with OPA's own type).
type DecisionLogLine struct {
	Labels     map[string]string     `json:"labels"`
	DecisionID string                `json:"decision_id"`
	Bundles    map[string]BundleInfo `json:"bundles,omitempty"`
	Path       string                `json:"path,omitempty"`
	Input      *json.RawMessage      `json:"input,omitempty"`
	Result     *EvalResult           `json:"result,omitempty"`
	Masked     []string              `json:"masked,omitempty"`
	Erased     []string              `json:"erased,omitempty"`
	Timestamp  time.Time             `json:"timestamp"`
	Metrics    map[string]any        `json:"metrics,omitempty"`
}

// BundleInfo is the revision of one bundle in a [DecisionLogLine]; the CCM's one bundle is
// "ccm", the policy revision in force.
type BundleInfo struct {
	Revision string `json:"revision,omitempty"`
}

// wants reports whether l writes a decision with the given result (resultOf).
func (l *DecisionLog) wants(result string) bool {
	if l == nil {
		return false
	}
	switch l.level {
	case DecisionLogAll:
		return true
	case DecisionLogDeny:
		return result == resultDeny || result == resultDryRunDeny || result == resultError
	}
	return false
}

// write logs one decision. A failure to write is returned; the caller logs it (a decision
// never fails because its log line could not be written).
func (l *DecisionLog) write(in input.Input, d Decision, at time.Time, elapsed time.Duration) error {
	raw, masked, erased, err := boundedInput(in)
	if err != nil {
		return fmt.Errorf("decision log: encode input: %w", err)
	}
	res := evalResult(d)
	line := DecisionLogLine{
		Labels:     l.labels,
		DecisionID: d.ID,
		Bundles:    map[string]BundleInfo{"ccm": {Revision: d.Revision}},
		Path:       DecisionLogPath,
		Input:      &raw,
		Result:     &res,
		Masked:     masked,
		Erased:     erased,
		Timestamp:  at.UTC(),
		Metrics:    map[string]any{"timer_rego_query_eval_ns": elapsed.Nanoseconds()},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("decision log: encode line: %w", err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("decision log: write: %w", err)
	}
	return nil
}

// boundedInput is the JSON of in as a decision log holds it: sensitive annotation and label
// values redacted, long annotation values cut, beyond MaxLoggedInput the inventory's list of
// load balancers left out (its totals stay), and the whole replaced by a stub if still beyond. masked and erased are JSON pointers into the line ("/input/...").
func boundedInput(in input.Input) (raw json.RawMessage, masked, erased []string, err error) {
	if in.Service != nil {
		s := *in.Service
		s.Annotations, masked = boundMap(s.Annotations, "/input/service/annotations/", MaxLoggedAnnotationValue, masked)
		s.Labels, masked = boundMap(s.Labels, "/input/service/labels/", MaxLoggedAnnotationValue, masked)
		in.Service = &s
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(b) > MaxLoggedInput && in.Inventory != nil && len(in.Inventory.LoadBalancers) > 0 {
		// A cluster's inventory is most of a large input: drop its list, keep the totals.
		inv := *in.Inventory
		inv.LoadBalancers = nil
		in.Inventory = &inv
		if b, err = json.Marshal(in); err != nil {
			return nil, nil, nil, err
		}
		erased = []string{"/input/inventory/load_balancers"}
	}
	if len(b) > MaxLoggedInput {
		stub, err := json.Marshal(map[string]any{"truncated": true, "bytes": len(b), "action": in.Action, "operation": in.Operation})
		if err != nil {
			return nil, nil, nil, err
		}
		return stub, nil, []string{"/input"}, nil
	}
	return b, masked, erased, nil
}

// boundMap returns a copy of m with sensitive values redacted and values longer than limit cut,
// and appends their JSON pointers (prefix + key) to masked, sorted.
func boundMap(m map[string]string, prefix string, limit int, masked []string) (map[string]string, []string) {
	if m == nil {
		return nil, masked
	}
	out := make(map[string]string, len(m))
	var changed []string
	for k, v := range m {
		switch {
		case sensitiveKey.MatchString(k):
			out[k] = "[redacted]"
			changed = append(changed, prefix+pointerEscape(k))
		case len(v) > limit:
			n := limit
			for n > 0 && !utf8.RuneStart(v[n]) {
				n-- // cut on a character boundary
			}
			out[k] = v[:n] + fmt.Sprintf("…[%d bytes cut]", len(v)-n)
			changed = append(changed, prefix+pointerEscape(k))
		default:
			out[k] = v
		}
	}
	sort.Strings(changed)
	return out, append(masked, changed...)
}

// pointerEscape escapes a key for a JSON pointer (RFC 6901).
func pointerEscape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// evalResult is the JSON result of d, as `policy eval` prints it and a decision log holds it.
func evalResult(d Decision) EvalResult {
	res := EvalResult{Allowed: d.Allowed, DryRun: d.DryRun, Revision: d.Revision, Deny: d.Deny, Warn: d.Warn}
	if res.Deny == nil {
		res.Deny = []Message{}
	}
	if res.Warn == nil {
		res.Warn = []Message{}
	}
	if d.Err != nil {
		res.Error = d.Err.Error()
	}
	if d.WarnErr != nil {
		res.WarnError = d.WarnErr.Error()
	}
	return res
}

// newDecisionID returns a random UUID (version 4), as OPA's decision IDs are.
func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (documented since Go 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ErrReplayDiffers is wrapped by the error of [ReplayDecisionLogLine] when the replayed result
// is not the logged one.
var ErrReplayDiffers = errors.New("the replayed decision differs from the logged one")

// ReplayDecisionLogLine evaluates the input of one decision log line (read from lineFile, "-"
// for standard input) with the policies of policyDir, in the mode and failure mode of the
// line's labels (policy_mode, failure_mode; o's when absent), writes the replayed result as
// indented JSON and one verdict line to w, and returns an error wrapping ErrReplayDiffers when
// the result differs from the logged one. It is the CLI's `policy eval --decision-log-line`.
//
// A line whose input was cut (erased) cannot be replayed: that is an error. A line with masked
// values is replayed with the masked values, and the verdict says so.
func ReplayDecisionLogLine(ctx context.Context, policyDir, lineFile string, w io.Writer, o Options) error {
	var b []byte
	var err error
	if lineFile == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(lineFile)
	}
	if err != nil {
		return fmt.Errorf("read decision log line: %w", err)
	}
	b = bytes.TrimSpace(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return fmt.Errorf("read decision log line %s: it holds more than one line: pass one line (for example with grep DECISION_ID)", lineFile)
	}
	var line DecisionLogLine
	if err := json.Unmarshal(b, &line); err != nil {
		return fmt.Errorf("read decision log line %s: %w", lineFile, err)
	}
	if line.Input == nil || line.Result == nil {
		return fmt.Errorf("read decision log line %s: no \"input\" or no \"result\": not a line of --policy-decision-log", lineFile)
	}
	if len(line.Erased) > 0 {
		return fmt.Errorf("replay decision %s: its input was cut from the log (erased %v, beyond %d bytes): it cannot be replayed", line.DecisionID, line.Erased, MaxLoggedInput)
	}
	var in input.Input
	dec := json.NewDecoder(bytes.NewReader(*line.Input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("replay decision %s: decode input: %w", line.DecisionID, err)
	}
	if m := line.Labels["policy_mode"]; m != "" {
		o.Mode = Mode(m)
	}
	if f := line.Labels["failure_mode"]; f != "" {
		o.FailureMode = FailureMode(f)
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("replay decision %s: %w", line.DecisionID, err)
	}
	e, err := loadDir(ctx, policyDir, o)
	if err != nil {
		return err
	}
	if e.Revision() == "" {
		return fmt.Errorf("replay decision %s: no .rego file in %s", line.DecisionID, policyDir)
	}
	res := evalResult(e.Decide(ctx, in))
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("write decision: %w", err)
	}
	logged := line.Bundles["ccm"].Revision
	got, err1 := json.Marshal(res)
	want, err2 := json.Marshal(line.Result)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("compare decisions: %w", err)
	}
	note := ""
	if len(line.Masked) > 0 {
		note = fmt.Sprintf(" (replayed with the redacted or cut values of %v)", line.Masked)
	}
	if bytes.Equal(got, want) {
		fmt.Fprintf(w, "decision %s: same result as logged (revision %s)%s\n", line.DecisionID, res.Revision, note)
		return nil
	}
	why := ""
	if logged != res.Revision {
		why = fmt.Sprintf(": logged with revision %s, replayed with %s", logged, res.Revision)
	}
	fmt.Fprintf(w, "decision %s: result DIFFERS from the logged one%s%s\nlogged:   %s\nreplayed: %s\n", line.DecisionID, why, note, want, got)
	return fmt.Errorf("decision %s%s: %w", line.DecisionID, why, ErrReplayDiffers)
}
