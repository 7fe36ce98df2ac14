package gate

import (
	"fmt"
	"strings"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// DecisionWarnings are the warnings of d (as the PolicyWarning event and plan show them), plus
// an evaluation failure that the failure mode resolved to allow and a failure of the warn rules
// alone (neither may pass silently). A failure that only dry-run mode allowed is not a warning:
// d.NotEnforced reports it (PolicyDryRunDenied).
func DecisionWarnings(d policy.Decision) []policy.Message {
	out := d.Warn
	if d.Err != nil && d.Allowed && !d.DryRun {
		out = append(append([]policy.Message{}, out...), policy.Message{Msg: "policy evaluation failed, allowed by the failure mode: " + d.Err.Error()})
	}
	if d.WarnErr != nil {
		out = append(append([]policy.Message{}, out...), policy.Message{Msg: d.WarnErr.Error()})
	}
	return out
}

// DenyMessages are the messages that deny d (as the PolicyDenied event and plan show them): its
// blocking deny messages, else its evaluation failure.
func DenyMessages(d policy.Decision) []policy.Message {
	if b := d.Blocking(); len(b) > 0 {
		return b
	}
	if d.Err != nil {
		return []policy.Message{{Msg: policy.EvaluationFailedPrefix + d.Err.Error()}}
	}
	return []policy.Message{{Msg: "denied"}}
}

// WithDecisionID is label followed by the decision ID, which traces a denial from kubectl to
// its decision log line; label alone when the decider gives no ID.
func WithDecisionID(label, id string) string {
	if id == "" {
		return label
	}
	return label + " (decision " + id + ")"
}

// Messages collects policy messages of one kind (deny, warn, dry run) across the steps of a
// plan, for an event. Identical messages become one entry naming every step they came from, so
// that one deny rule matching ten targets is one line, not ten. The zero value is empty.
type Messages struct {
	order  []string            // message texts in first-seen order
	labels map[string][]string // text -> step labels
}

// Add records ms for the step label.
func (g *Messages) Add(label string, ms []policy.Message) {
	if g.labels == nil {
		g.labels = map[string][]string{}
	}
	for _, m := range ms {
		text := m.Msg
		if m.Code != "" {
			text += " (" + m.Code + ")"
		}
		if _, seen := g.labels[text]; !seen {
			g.order = append(g.order, text)
		}
		g.labels[text] = append(g.labels[text], label)
	}
}

// Len is the number of distinct messages.
func (g *Messages) Len() int { return len(g.order) }

// String joins the messages with "; ", each as "text: for step, step", and truncates the whole
// to an event message's size.
func (g *Messages) String() string {
	parts := make([]string, 0, len(g.order))
	for _, text := range g.order {
		parts = append(parts, text+": for "+ListLabels(g.labels[text]))
	}
	return truncate.String(strings.Join(parts, "; "), truncate.EventMessage)
}

// maxLabels is how many step labels one message names before the rest is counted.
const maxLabels = 5

// ListLabels names the steps a message came from by their full labels, in plan order, so that
// a message names exactly the steps it was given for: add_service(22), never "2 ×
// add_service" (which would also count an allowed add_service(443)). Beyond maxLabels, the
// rest is "and N more steps".
func ListLabels(labels []string) string {
	if len(labels) <= maxLabels {
		return strings.Join(labels, ", ")
	}
	return fmt.Sprintf("%s and %d more steps", strings.Join(labels[:maxLabels], ", "), len(labels)-maxLabels)
}

// DeniedError is returned when the policy denies at least one step of a plan. It wraps
// policy.ErrDenied.
type DeniedError struct {
	Denied, Of int
	// Failed is how many of the Denied steps were denied because their evaluation failed
	// (policy.Decision.Err under the failure mode closed) rather than by a deny message. Such
	// a denial may pass on the next try with the same input (a deadline, an unreadable
	// namespace).
	Failed int
	// Messages are the grouped deny messages, truncated to an event message's size.
	Messages string
	// Applied are the labels of the mutations that ran, in order (steps fail alone); empty
	// when nothing changed.
	Applied []string
	// Skipped are the steps that did not run because they need a step that does not
	// ("add_target(server:3) (needs attach_to_network(5))").
	Skipped []string
	// Inputs is the digest of what was decided (Verdict.Digest): the policy revision and the
	// policy input of every step. "" when the decisions name no one revision or the input could
	// not be completed. The load balancer code remembers a denial under it.
	Inputs string
}

// NewDeniedError is the DeniedError of the decisions of the steps labels: the denied ones'
// messages grouped (Messages), with each step's decision ID.
func NewDeniedError(labels []string, decisions []policy.Decision) *DeniedError {
	var denied Messages
	e := &DeniedError{Of: len(decisions)}
	for i, d := range decisions {
		if d.Allowed {
			continue
		}
		denied.Add(WithDecisionID(labels[i], d.ID), DenyMessages(d))
		e.Denied++
		if d.Err != nil {
			e.Failed++
		}
	}
	e.Messages = denied.String()
	return e
}

// DeniedError of a Verdict: NewDeniedError of its steps, with the skipped steps and the digest.
// nil when nothing is denied.
func (v Verdict) DeniedError() *DeniedError {
	if !v.Denied() {
		return nil
	}
	labels := make([]string, len(v.Steps))
	decisions := make([]policy.Decision, len(v.Steps))
	for i, st := range v.Steps {
		labels[i], decisions[i] = st.Label, st.Decision
	}
	e := NewDeniedError(labels, decisions)
	e.Inputs = v.Digest
	for _, st := range v.Steps {
		if !st.Runs && !st.Denied() {
			e.Skipped = append(e.Skipped, st.Label+" ("+st.SkipReason()+")")
		}
	}
	return e
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%d of %d changes denied, %s", e.Denied, e.Of, e.Summary())
}

// Summary is the message of the PolicyDenied event: "nothing changed: MESSAGES" when nothing
// ran, else "applied: LABELS; denied: MESSAGES", each followed by "; skipped: STEPS" when
// steps were skipped with the denied ones; truncated to an event message's size.
func (e *DeniedError) Summary() string {
	msg := "nothing changed: " + e.Messages
	if len(e.Applied) > 0 {
		msg = "applied: " + ListLabels(e.Applied) + "; denied: " + e.Messages
	}
	if len(e.Skipped) > 0 {
		msg += "; skipped: " + ListLabels(e.Skipped)
	}
	return truncate.String(msg, truncate.EventMessage)
}

// Unwrap lets errors.Is(err, policy.ErrDenied) match.
func (e *DeniedError) Unwrap() error { return policy.ErrDenied }

// Remaining is the denial as a retry of the same inputs meets it once the applied steps are in:
// its plan holds only the denied steps and those skipped with them, and nothing changes. e is
// not modified.
func (e *DeniedError) Remaining() *DeniedError {
	c := *e
	c.Applied, c.Of = nil, e.Denied+len(e.Skipped)
	return &c
}
