package ciplan

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// WriteJSON writes r as indented JSON (the schema of docs/policy.md § In CI: plan).
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}

// WriteText writes r for people: per Service its load balancer, each step with its verdict
// and messages, and a summary of the final load balancer; then one verdict line.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "error: %s\n", e)
	}
	for _, s := range r.Services {
		state := "create"
		if s.Exists {
			state = "exists"
		}
		fmt.Fprintf(&b, "Service %s/%s (%s:%d): load balancer %s (%s)\n", s.Namespace, s.Name, s.Source.File, s.Source.Line, s.LoadBalancer, state)
		if s.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n\n", s.Error)
			continue
		}
		if len(s.Steps) == 0 {
			b.WriteString("  no change\n")
		}
		for _, st := range s.Steps {
			verdict, skipped := "allowed", ""
			switch {
			case !st.Allowed:
				verdict = "DENIED"
			case !st.Runs:
				verdict, skipped = "skipped", " ("+st.Skipped+")"
			}
			fmt.Fprintf(&b, "  %-7s %s%s%s\n", verdict, st.Label, decisionRef(st), skipped)
			writeMessages(&b, "deny", st.Deny)
			writeMessages(&b, "dry run", st.NotEnforced)
			writeMessages(&b, "warn", st.Warn)
			for _, r := range st.Requests {
				fmt.Fprintf(&b, "          request: %s %s\n", r.Method, r.Path)
			}
		}
		if !s.Allowed {
			fmt.Fprintf(&b, "  still runs: %s\n", stillRuns(s.Steps))
		}
		if f := s.Final; f != nil {
			ports := make([]string, 0, len(f.Services))
			for _, l := range f.Services {
				ports = append(ports, fmt.Sprintf("%s/%d", l.Protocol, l.ListenPort))
			}
			where := f.Location
			if where == "" {
				where = f.NetworkZone
			}
			fmt.Fprintf(&b, "  final: %s type=%s at=%s public=%t listeners=[%s] targets=%d\n",
				f.Name, f.Type, where, f.PublicInterface, strings.Join(ports, " "), len(f.Targets))
		}
		if s.Cost != nil {
			fmt.Fprintf(&b, "  cost: %s%s\n", costText(s.Cost, r.unknownCost()), costApplied(s))
		}
		b.WriteString("\n")
	}
	if r.Cost != nil {
		fmt.Fprintf(&b, "cost of every managed load balancer: %s\n", costText(r.Cost, r.unknownCost()))
	}
	switch code := r.ExitCode(); code {
	case ExitBadInput:
		b.WriteString("result: bad input (exit 2)\n")
	case ExitDenied:
		b.WriteString("result: denied (exit 1)\n")
	default:
		b.WriteString("result: allowed (exit 0)\n")
	}
	if r.Revision != "" {
		fmt.Fprintf(&b, "policy revision: %s\n", r.Revision)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}

// stillRuns lists the steps the CCM would send although a step of the Service is denied
// (steps fail alone), or says that none would.
func stillRuns(steps []Step) string {
	var runs []string
	for _, st := range steps {
		if st.Runs {
			runs = append(runs, st.Label)
		}
	}
	if len(runs) == 0 {
		return "nothing (a denied create or delete, or every step denied or skipped)"
	}
	return strings.Join(runs, ", ")
}

// decisionRef names the decision of a step that was denied or denied in dry run, as the
// PolicyDenied event does, so the line can be found in the decision log; "" otherwise.
func decisionRef(st Step) string {
	if st.DecisionID == "" || (st.Allowed && len(st.NotEnforced) == 0) {
		return ""
	}
	return " (decision " + st.DecisionID + ")"
}

func writeMessages(b *strings.Builder, kind string, msgs []policy.Message) {
	for _, m := range msgs {
		fmt.Fprintf(b, "          %s: %s", kind, m.Msg)
		if m.Code != "" {
			fmt.Fprintf(b, " [%s]", m.Code)
		}
		b.WriteString("\n")
	}
}

// costApplied says how much of a Service's cost line the CCM would apply: all of it (""),
// nothing (a denied create, or no step runs), or part (some steps run, steps fail alone).
func costApplied(s ServiceResult) string {
	switch {
	case s.Allowed:
		return ""
	case slices.ContainsFunc(s.Steps, func(st Step) bool { return st.Runs }):
		return " (denied in part: only the steps that run are applied)"
	}
	return " (denied: not applied)"
}

// unknownCost says why a cost is unknown.
func (r Report) unknownCost() string {
	if !r.priced {
		return "no prices: pass --prices FILE or --from-api"
	}
	return "the prices list none for a load balancer's type and location"
}
