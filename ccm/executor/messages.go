package executor

import (
	"fmt"
	"strings"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/truncate"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// messageGroups collects policy messages of one kind (deny, warn, dry run) across the steps of
// a plan. Identical messages become one entry naming every step they came from, so that one
// deny rule matching ten targets is one line, not ten.
type messageGroups struct {
	order  []string            // message texts in first-seen order
	labels map[string][]string // text -> step labels
}

// add records ms for the step label.
func (g *messageGroups) add(label string, ms []policy.Message) {
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
func (g *messageGroups) Len() int { return len(g.order) }

// String joins the messages with "; ", each as "text: for step, step", and truncates the whole
// to an event message's size.
func (g *messageGroups) String() string {
	parts := make([]string, 0, len(g.order))
	for _, text := range g.order {
		parts = append(parts, text+": for "+listLabels(g.labels[text]))
	}
	return truncate.String(strings.Join(parts, "; "), truncate.EventMessage)
}

// maxLabels is how many step labels one message names before the rest is counted.
const maxLabels = 5

// listLabels names the steps a message came from by their full labels, in plan order, so that
// a message names exactly the steps it was given for: add_service(22), never "2 ×
// add_service" (which would also count an allowed add_service(443)). Beyond maxLabels, the
// rest is "and N more steps".
func listLabels(labels []string) string {
	if len(labels) <= maxLabels {
		return strings.Join(labels, ", ")
	}
	return fmt.Sprintf("%s and %d more steps", strings.Join(labels[:maxLabels], ", "), len(labels)-maxLabels)
}
