package policy

import (
	"errors"
	"testing"
)

// TestResultOf: the metric's result label of a decision; an evaluation failure of deny or of
// warn is "error" whatever else the decision holds.
func TestResultOf(t *testing.T) {
	dry := Message{Msg: "soon", Enforcement: EnforcementDryRun}
	enforced := Message{Msg: "no"}
	tests := []struct {
		name string
		d    Decision
		want string
	}{
		{"Allowed without messages", Decision{Allowed: true}, resultAllow},
		{"Allowed with warnings", Decision{Allowed: true, Warn: []Message{{Msg: "w"}}}, resultWarn},
		{"Denied by a message", Decision{Deny: []Message{enforced}}, resultDeny},
		{"Denied next to a dry-run message", Decision{DryRun: true, Deny: []Message{enforced, dry}}, resultDeny},
		{"Allowed with a dry-run message only", Decision{Allowed: true, DryRun: true, Deny: []Message{dry}}, resultDryRunDeny},
		{"Allowed in dry-run mode", Decision{Allowed: true, DryRun: true, Deny: []Message{enforced}}, resultDryRunDeny},
		{"Failed closed", Decision{Err: errors.New("x")}, resultError},
		{"Failed open", Decision{Allowed: true, Err: errors.New("x")}, resultError},
		{"A warn rule failed, allowed", Decision{Allowed: true, WarnErr: errors.New("x")}, resultError},
		{"A warn rule failed, denied by deny", Decision{Deny: []Message{enforced}, WarnErr: errors.New("x")}, resultError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultOf(tc.d); got != tc.want {
				t.Errorf("resultOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDecision_BlockingNotEnforced: the split of deny messages the executor reports.
func TestDecision_BlockingNotEnforced(t *testing.T) {
	dry := Message{Msg: "soon", Enforcement: EnforcementDryRun}
	enforced := Message{Msg: "no"}
	tests := []struct {
		name                  string
		d                     Decision
		blocking, notEnforced int
	}{
		{"Enforced and dry-run messages, denied", Decision{Deny: []Message{enforced, dry}}, 1, 1},
		{"Dry-run mode: nothing blocks", Decision{Allowed: true, Deny: []Message{enforced, dry}}, 0, 2},
		{"A failure has no messages", Decision{Err: errors.New("x")}, 0, 0},
		{"A failure allowed by the failure mode is not a dry-run message", Decision{Allowed: true, Err: errors.New("x")}, 0, 0},
		{"A failure that dry-run mode allowed is one dry-run message", Decision{Allowed: true, DryRun: true, Err: errors.New("x")}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, n := len(tc.d.Blocking()), len(tc.d.NotEnforced()); b != tc.blocking || n != tc.notEnforced {
				t.Errorf("Blocking %d, NotEnforced %d; want %d, %d", b, n, tc.blocking, tc.notEnforced)
			}
		})
	}
}
