package policy

import (
	"context"
	"errors"
	"slices"

	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// ErrDenied is wrapped by errors of mutations a policy denied; callers test it with errors.Is.
var ErrDenied = errors.New("denied by policy")

// The policy input schema lives in the leaf package policy/input, which the pure planners
// (ccm/lbplan, ccm/lbservice, ccm/lbgroup, ccm/routeplan) import without linking the engine:
// input.Input and its parts have that one name everywhere (issue 41: they had a second one
// here, as aliases).

// Message is one message of a decision: a deny reason or a warning.
type Message struct {
	Msg  string `json:"msg"`
	Code string `json:"code,omitempty"`
	// Enforcement is EnforcementDryRun for a deny message whose object asked for it
	// ("enforcement": "dryrun"): the CCM reports it (PolicyDryRunDenied) and does not block on
	// it. "" for every other message: a deny message then blocks unless --policy-mode is dryrun.
	// Always "" for warn messages.
	Enforcement string `json:"enforcement,omitempty"`
}

// Per-message enforcement values (Message.Enforcement, the "enforcement" key of a deny message
// object). They MUST not change: operators' policies emit them.
const (
	// EnforcementDryRun reports a deny message without blocking, whatever --policy-mode says:
	// a single rule can be rolled out in dry run while the others are enforced (Gatekeeper's
	// enforcementAction: dryrun).
	EnforcementDryRun = "dryrun"
	// EnforcementEnforce is the default: the deny message blocks unless --policy-mode is dryrun.
	// A message may state it explicitly; it is then stored as "".
	EnforcementEnforce = "enforce"
)

// EvaluationFailedPrefix starts the message that reports a failed evaluation in place of deny
// messages (Decision.NotEnforced, and the CCM's PolicyDenied and plan output).
const EvaluationFailedPrefix = "policy evaluation failed: "

// Decision is the result of deciding one Input.
type Decision struct {
	// ID is the decision's random UUID: the decision_id of its decision log line, also named in
	// the PolicyDenied event and the plan output. "" for decisions without an engine
	// (AllowAll).
	ID string
	// Allowed is false when a deny message is enforced (mode enforce, and the message is not
	// EnforcementDryRun) or evaluation failed closed in mode enforce. In dry-run mode it is
	// always true: dry run never blocks, whatever the failure mode.
	Allowed bool
	// Deny holds the deny messages, also those that do not block (dry-run mode, or a message
	// with Enforcement EnforcementDryRun); see Blocking and NotEnforced.
	Deny []Message
	// Warn holds the warnings.
	Warn []Message
	// Revision is the policy revision that decided ("" when no policy is configured).
	Revision string
	// DryRun is true when deny messages were reported but not enforced (all of them in dry-run
	// mode, the EnforcementDryRun ones otherwise), and when an evaluation failure that the
	// failure mode would have blocked was allowed because the mode is dry run (Err set, no
	// messages; NotEnforced reports the failure).
	DryRun bool
	// Err is set when the evaluation of deny failed (or the whole decision did: deadline,
	// undefined); Allowed then follows the failure mode (in enforce mode; dry-run mode allows,
	// see DryRun) and there are no messages.
	Err error
	// WarnErr is set when deny evaluated but warn did not (a built-in error or a malformed
	// message in a warn rule). It never blocks: Allowed and Deny come from deny alone, and the
	// CCM reports WarnErr as a warning (event PolicyWarning, metric result "error").
	WarnErr error
}

// Blocking returns the deny messages that block the mutation: none when d is allowed, else
// those not marked EnforcementDryRun. An evaluation failure that denies has none; callers
// report d.Err instead.
func (d Decision) Blocking() []Message {
	if d.Allowed {
		return nil
	}
	var out []Message
	for _, m := range d.Deny {
		if m.Enforcement != EnforcementDryRun {
			out = append(out, m)
		}
	}
	return out
}

// NotEnforced returns the deny messages reported without blocking: all of them when d is
// allowed (dry-run mode, or every message is EnforcementDryRun), else the EnforcementDryRun
// ones. An evaluation failure that dry-run mode allowed instead of blocking (Err and DryRun
// set) is one message, "policy evaluation failed: <Err>", so that it is reported like a deny
// the dry run did not enforce.
func (d Decision) NotEnforced() []Message {
	if d.Allowed && d.DryRun && d.Err != nil {
		return append(slices.Clone(d.Deny), Message{Msg: EvaluationFailedPrefix + d.Err.Error()})
	}
	if d.Allowed {
		return d.Deny
	}
	var out []Message
	for _, m := range d.Deny {
		if m.Enforcement == EnforcementDryRun {
			out = append(out, m)
		}
	}
	return out
}

// Decider decides mutations. Implementations are safe for concurrent use.
//
// Decide never returns an error: evaluation failures are reported in Decision.Err and resolved to
// allow or deny by the configured failure mode.
type Decider interface {
	Decide(ctx context.Context, in input.Input) Decision
}

// DecideFunc is a Decider of one function, as http.HandlerFunc is a Handler.
type DecideFunc func(ctx context.Context, in input.Input) Decision

// Decide calls f.
func (f DecideFunc) Decide(ctx context.Context, in input.Input) Decision { return f(ctx, in) }

// InputFailer is implemented by deciders that can resolve a decision whose input the CCM could
// not complete (a field it could not read, such as the labels of the Service's namespace). The
// CCM never decides such an input with the field null: a rule keyed on the field would then
// silently not apply, which is fail-open.
type InputFailer interface {
	// DecideFailed resolves the decision of in, whose input is incomplete for the reason err,
	// like an evaluation error: by the failure mode (closed: denied; open: allowed), with Err
	// set, counted as result "error" and logged. Without a policy revision in force it allows,
	// as Decide does.
	DecideFailed(ctx context.Context, in input.Input, err error) Decision
}

// AllowAll is the Decider used when no policy is configured: every mutation is allowed.
type AllowAll struct{}

// Decide allows in.
func (AllowAll) Decide(context.Context, input.Input) Decision { return Decision{Allowed: true} }
