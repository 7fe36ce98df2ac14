package executor_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

var decisionIDs = regexp.MustCompile(`\(decision ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\)`)

// withoutDecisionIDs replaces the random decision IDs in s by "ID".
func withoutDecisionIDs(s string) string { return decisionIDs.ReplaceAllString(s, "(decision ID)") }

// TestDecisionLog_denialTracesFromEventToLogAndReplays: a denial's PolicyDenied event names the
// decision ID of its decision log line, and replaying that line with the same policies gives
// the logged result.
func TestDecisionLog_denialTracesFromEventToLogAndReplays(t *testing.T) {
	dir := t.TempDir()
	src := "package ccm\ndeny contains \"no load balancers in namespace analytics\" if { input.service.namespace == \"analytics\" }\n"
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := policy.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	l, err := policy.NewDecisionLog(policy.DecisionLogDeny, &logBuf, map[string]string{"app": "hcloud-policy-ccm", "policy_mode": "enforce", "failure_mode": "closed"})
	if err != nil {
		t.Fatal(err)
	}
	eng := policy.NewEngine(policy.Options{DecisionLog: l})
	if _, err := eng.Load(context.Background(), files, policy.DirSource(dir)); err != nil {
		t.Fatal(err)
	}
	ev := newEnv(t, func(in input.Input) policy.Decision { return eng.Decide(context.Background(), in) })
	svc := newService()
	svc.Namespace = "analytics"
	if _, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, nil)); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("err = %v, want denied", err)
	}
	events := ev.events()
	if count(events, "Warning PolicyDenied") != 1 {
		t.Fatalf("events = %v, want one PolicyDenied", events)
	}
	m := decisionIDs.FindStringSubmatch(events[0])
	if m == nil {
		t.Fatalf("PolicyDenied event %q names no decision ID", events[0])
	}
	var line string
	for _, ln := range strings.Split(strings.TrimSpace(logBuf.String()), "\n") {
		if strings.Contains(ln, `"decision_id":"`+m[1]+`"`) {
			line = ln
		}
	}
	if line == "" {
		t.Fatalf("no decision log line with the event's ID %s in:\n%s", m[1], logBuf.String())
	}
	lineFile := filepath.Join(t.TempDir(), "line.json")
	if err := os.WriteFile(lineFile, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := policy.ReplayDecisionLogLine(context.Background(), dir, lineFile, &out, policy.Options{}); err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "decision "+m[1]+": same result as logged") {
		t.Errorf("replay output = %s", out.String())
	}
}
