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

// String joins the messages with "; ", each as "text: for step, step, N × operation", and
// truncates the whole to an event message's size.
func (g *messageGroups) String() string {
	parts := make([]string, 0, len(g.order))
	for _, text := range g.order {
		parts = append(parts, text+": for "+compactLabels(g.labels[text]))
	}
	return truncate.String(strings.Join(parts, "; "), truncate.EventMessage)
}

// compactLabels lists labels in order; several labels of one operation (add_target(server:1),
// add_target(server:2)) become "2 × add_target" at the first one's place.
func compactLabels(labels []string) string {
	count := map[string]int{}
	for _, l := range labels {
		count[operationOf(l)]++
	}
	var out []string
	done := map[string]bool{}
	for _, l := range labels {
		op := operationOf(l)
		switch {
		case count[op] == 1:
			out = append(out, l)
		case !done[op]:
			out = append(out, fmt.Sprintf("%d × %s", count[op], op))
			done[op] = true
		}
	}
	return strings.Join(out, ", ")
}

// operationOf is the operation of a step label: add_target of add_target(server:1).
func operationOf(label string) string {
	op, _, _ := strings.Cut(label, "(")
	return op
}
