package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const denyCreate = `package ccm
deny contains "no lb21" if { input.load_balancer.type == "lb21" }
`

func declogEngine(t *testing.T, level string, buf *bytes.Buffer) *policy.Engine {
	t.Helper()
	l, err := policy.NewDecisionLog(level, buf, map[string]string{"app": "hcloud-policy-ccm", "version": "test", "policy_mode": "enforce"})
	if err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{DecisionLog: l})
	mustLoad(t, e, map[string][]byte{"p.rego": []byte(denyCreate)})
	return e
}

func declogInput(typ string, annotations map[string]string) input.Input {
	return input.Input{Version: "v1", Action: "load_balancer", Operation: "create",
		Service:      &input.Service{Namespace: "default", Name: "web", Annotations: annotations},
		LoadBalancer: &input.LoadBalancer{Name: "web", Type: typ}}
}

func TestDecisionLog_levels(t *testing.T) {
	tests := []struct {
		level     string
		typ       string
		wantLines int
	}{
		{policy.DecisionLogOff, "lb21", 0},
		{policy.DecisionLogDeny, "lb21", 1},
		{policy.DecisionLogDeny, "lb11", 0},
		{policy.DecisionLogAll, "lb11", 1},
		{policy.DecisionLogAll, "lb21", 1},
	}
	for _, tc := range tests {
		t.Run(tc.level+"/"+tc.typ, func(t *testing.T) {
			var buf bytes.Buffer
			e := declogEngine(t, tc.level, &buf)
			e.Decide(context.Background(), declogInput(tc.typ, nil))
			if got := strings.Count(buf.String(), "\n"); got != tc.wantLines {
				t.Errorf("%d lines, want %d: %s", got, tc.wantLines, buf.String())
			}
		})
	}
	if _, err := policy.NewDecisionLog("some", nil, nil); err == nil || !strings.Contains(err.Error(), `"off", "deny" or "all"`) {
		t.Errorf("NewDecisionLog(some) error = %v, want one naming the levels", err)
	}
}

// TestDecisionLog_lineShape checks the line against the field names of OPA's EventV1
// (v1/plugins/logs) and the decision it logs.
func TestDecisionLog_lineShape(t *testing.T) {
	var buf bytes.Buffer
	e := declogEngine(t, policy.DecisionLogDeny, &buf)
	d := e.Decide(context.Background(), declogInput("lb21", map[string]string{"a": "b"}))
	var line map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("line is not one JSON object: %v: %s", err, buf.String())
	}
	for _, k := range []string{"labels", "decision_id", "bundles", "path", "input", "result", "timestamp", "metrics"} {
		if _, ok := line[k]; !ok {
			t.Errorf("line has no %q: %s", k, buf.String())
		}
	}
	var got policy.DecisionLogLine
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if d.ID == "" || got.DecisionID != d.ID || !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(d.ID) {
		t.Errorf("decision_id = %q, Decision.ID = %q: want the same UUID v4", got.DecisionID, d.ID)
	}
	if got.Path != "ccm" || got.Bundles["ccm"].Revision != d.Revision || got.Labels["app"] != "hcloud-policy-ccm" || got.Timestamp.IsZero() {
		t.Errorf("line = %+v", got)
	}
	if got.Result == nil || got.Result.Allowed || len(got.Result.Deny) != 1 || got.Result.Deny[0].Msg != "no lb21" {
		t.Errorf("result = %+v, want the denial", got.Result)
	}
	if _, ok := got.Metrics["timer_rego_query_eval_ns"].(float64); !ok {
		t.Errorf("metrics = %v, want timer_rego_query_eval_ns", got.Metrics)
	}
	if d2 := e.Decide(context.Background(), declogInput("lb21", nil)); d2.ID == d.ID {
		t.Errorf("two decisions share the ID %s", d.ID)
	}
}

func TestDecisionLog_bounds(t *testing.T) {
	long := strings.Repeat("x", policy.MaxLoggedAnnotationValue+100)
	tests := []struct {
		name        string
		annotations map[string]string
		wantMasked  []string
		wantErased  bool
		wantAbsent  string
	}{
		{"plain", map[string]string{"load-balancer.hetzner.cloud/type": "lb21"}, nil, false, ""},
		{"secret values redacted", map[string]string{"example.com/api-token": "s3cr3t-tok", "tls-cert": "-----BEGIN"},
			[]string{"/input/service/annotations/example.com~1api-token", "/input/service/annotations/tls-cert"}, false, "s3cr3t-tok"},
		{"long value cut", map[string]string{"note": long}, []string{"/input/service/annotations/note"}, false, long},
		{"huge input replaced", map[string]string{"a": long[:400], "b": long[:400], "c": strings.Repeat("y", 500), "d": strings.Repeat("z", 500),
			"e": long[:500], "f": long[:500], "g": long[:500], "h": long[:500], "i": long[:500], "j": long[:500], "k": long[:500],
			"l": long[:500], "m": long[:500], "n": long[:500], "o": long[:500], "p": long[:500], "q": long[:500], "r": long[:500],
			"s": long[:500], "t": long[:500], "u": long[:500], "v": long[:500], "w": long[:500], "x": long[:500], "y": long[:500],
			"z": long[:500], "aa": long[:500], "ab": long[:500], "ac": long[:500], "ad": long[:500], "ae": long[:500], "af": long[:500],
			"ag": long[:500], "ah": long[:500]}, nil, true, "yyyy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			e := declogEngine(t, policy.DecisionLogAll, &buf)
			e.Decide(context.Background(), declogInput("lb21", tc.annotations))
			var got policy.DecisionLogLine
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Masked, ",") != strings.Join(tc.wantMasked, ",") {
				t.Errorf("masked = %v, want %v", got.Masked, tc.wantMasked)
			}
			if (len(got.Erased) > 0) != tc.wantErased {
				t.Errorf("erased = %v, want erased %v", got.Erased, tc.wantErased)
			}
			if tc.wantAbsent != "" && strings.Contains(buf.String(), tc.wantAbsent) {
				t.Errorf("line holds %.20q…", tc.wantAbsent)
			}
			if len(*got.Input) > policy.MaxLoggedInput {
				t.Errorf("input is %d bytes, over %d", len(*got.Input), policy.MaxLoggedInput)
			}
			if tc.wantErased && !strings.Contains(string(*got.Input), `"truncated":true`) {
				t.Errorf("input = %s, want the truncated stub", *got.Input)
			}
		})
	}
}

// TestDecisionLog_largeInventory: an input over MaxLoggedInput because of its inventory (200
// load balancers) is logged without the inventory's list, which "erased" names, and with its
// totals; the rest of the input stays.
func TestDecisionLog_largeInventory(t *testing.T) {
	var buf bytes.Buffer
	e := declogEngine(t, policy.DecisionLogAll, &buf)
	in := declogInput("lb21", nil)
	inv := input.Inventory{Currency: "EUR", Namespaces: map[string]input.Totals{"shop": {LoadBalancers: 200}}, Cluster: input.Totals{LoadBalancers: 200}}
	for i := range 200 {
		inv.LoadBalancers = append(inv.LoadBalancers, input.InventoryLoadBalancer{ID: int64(i + 1), Name: fmt.Sprintf("lb-%03d", i), Type: "lb11", Location: "fsn1",
			Owner: input.Owner{Kind: "service", Namespace: "shop", Name: fmt.Sprintf("svc-%03d", i)}})
	}
	in.Inventory = &inv
	e.Decide(context.Background(), in)
	var got policy.DecisionLogLine
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Erased, ",") != "/input/inventory/load_balancers" {
		t.Errorf("erased = %v, want the inventory's list only", got.Erased)
	}
	var logged input.Input
	if err := json.Unmarshal(*got.Input, &logged); err != nil {
		t.Fatal(err)
	}
	if logged.Inventory == nil || logged.Inventory.LoadBalancers != nil || logged.Inventory.Cluster.LoadBalancers != 200 || logged.LoadBalancer == nil {
		t.Errorf("logged input = %s, want the input with the inventory's totals and without its list", *got.Input)
	}
}

func TestReplayDecisionLogLine(t *testing.T) {
	var buf bytes.Buffer
	e := declogEngine(t, policy.DecisionLogDeny, &buf)
	d := e.Decide(context.Background(), declogInput("lb21", nil))
	dir := t.TempDir()
	same, other := filepath.Join(dir, "same"), filepath.Join(dir, "other")
	for p, src := range map[string]string{same: denyCreate, other: "package ccm\ndeny contains \"other\" if { false }\n"} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "p.rego"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lineFile := filepath.Join(dir, "line.json")
	if err := os.WriteFile(lineFile, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dir     string
		wantErr error
		wantOut string
	}{
		{"same policies", same, nil, "decision " + d.ID + ": same result as logged"},
		{"changed policies", other, policy.ErrReplayDiffers, "DIFFERS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := policy.ReplayDecisionLogLine(context.Background(), tc.dir, lineFile, &out, policy.Options{})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output = %s, want %q", out.String(), tc.wantOut)
			}
		})
	}
}
