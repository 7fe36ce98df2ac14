package monitoring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// promqlTool is the module of promql-check, relative to the repository root.
const promqlTool = "test/tools/promql"

// grafanaVariables are the values the dashboard's variables take when its expressions are
// parsed: the built-in intervals as durations, the dashboard's own variables as a regular
// expression. A variable not in here fails the test, so a new one is added here on purpose.
var grafanaVariables = map[string]string{
	"__rate_interval": "5m",
	"__interval":      "1m",
	"__range":         "1h",
	"job":             ".*",
}

// grafanaVariable matches $name and ${name} in an expression.
var grafanaVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// labelValues matches the query of a Grafana query variable, label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\((\w+),\s*\w+\)$`)

// promqlRequest and promqlResponse are promql-check's Request and Response.
type promqlRequest struct {
	Rules string       `json:"rules"`
	Exprs []promqlExpr `json:"exprs"`
}

type promqlExpr struct {
	Where string `json:"where"`
	Expr  string `json:"expr"`
}

type promqlResponse struct {
	Errors   []string            `json:"errors"`
	Metrics  map[string][]string `json:"metrics"`
	Matchers map[string][]string `json:"matchers"`
}

var (
	promqlOnce sync.Once
	promqlBin  string
	promqlErr  error
)

// promqlCheck builds promql-check once per test binary (the Go build cache makes later builds
// quick) and runs it on req.
func promqlCheck(t *testing.T, req promqlRequest) promqlResponse {
	t.Helper()
	promqlOnce.Do(func() {
		dir, err := promqlBuildDir()
		if err != nil {
			promqlErr = err
			return
		}
		promqlBin = filepath.Join(dir, "promql-check")
		cmd := exec.Command("go", "build", "-o", promqlBin, ".")
		cmd.Dir = filepath.Join(repoRoot(t), promqlTool)
		if out, err := cmd.CombinedOutput(); err != nil {
			promqlErr = fmt.Errorf("build %s (go build in %s): %w\n%s", promqlTool, cmd.Dir, err, out)
		}
	})
	if promqlErr != nil {
		t.Fatal(promqlErr)
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promqlBin)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promql-check: %v\n%s", err, stderr.String())
	}
	var resp promqlResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("promql-check answered %q: %v", out, err)
	}
	return resp
}

// promqlBuildDir is the directory promql-check is built into: one for the whole test binary,
// removed by TestMain.
var promqlBuildDir = sync.OnceValues(func() (string, error) { return tempDir("promql-check-") })

// dashboardExprs returns the PromQL expressions of d, each with where it is, the variables
// replaced by grafanaVariables, and the metric names of its label_values() variable queries.
// An unknown variable is an error.
func dashboardExprs(t *testing.T, d dashboard) (exprs []promqlExpr, variableMetrics []string) {
	t.Helper()
	for _, p := range d.allPanels() {
		for i, tg := range p.Targets {
			where := fmt.Sprintf("panel %q target %d", p.Title, i)
			exprs = append(exprs, promqlExpr{Where: where, Expr: substituteVariables(t, where, tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		variableMetrics = append(variableMetrics, m[1])
	}
	return exprs, variableMetrics
}

// substituteVariables replaces the Grafana variables of expr by grafanaVariables.
func substituteVariables(t *testing.T, where, expr string) string {
	t.Helper()
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVariable.FindStringSubmatch(v)[1]
		value, ok := grafanaVariables[name]
		if !ok {
			t.Errorf("%s: variable $%s has no value in grafanaVariables", where, name)
		}
		return value
	})
}

// TestPromQLParses: every expression of the dashboard parses, and the rule file loads as
// Prometheus loads a rule file (expressions, durations, label names, annotation templates).
func TestPromQLParses(t *testing.T) {
	exprs, _ := dashboardExprs(t, loadDashboard(t, readFile(t, dashboardFile)))
	resp := promqlCheck(t, promqlRequest{Rules: string(readFile(t, rulesFile)), Exprs: exprs})
	for _, e := range resp.Errors {
		t.Error(e)
	}
	if len(resp.Metrics) == 0 {
		t.Error("promql-check parsed no expression")
	}
}

// TestPromQLCheckFindsErrors: promql-check reports a broken expression and a broken rule, and
// names the metrics of a good one (so TestPromQLParses and TestMetricsExported cannot pass on a
// checker that accepts everything).
func TestPromQLCheckFindsErrors(t *testing.T) {
	tests := []struct {
		name         string
		req          promqlRequest
		wantErr      string // every error starts with it; "": no error
		wantMetrics  map[string][]string
		wantMatchers map[string][]string // checked when not nil
	}{
		{
			name:         "a good expression: its metrics, a histogram's bucket included, and the labels matched",
			req:          promqlRequest{Exprs: []promqlExpr{{Where: "p", Expr: `sum(rate(a_total{x="1",job=~"j"}[5m])) / histogram_quantile(0.9, sum by (le) (rate(b_bucket[5m])))`}}},
			wantMetrics:  map[string][]string{"p": {"a_total", "b_bucket"}},
			wantMatchers: map[string][]string{"a_total": {"job", "x"}},
		},
		{
			name:        "an unbalanced parenthesis",
			req:         promqlRequest{Exprs: []promqlExpr{{Where: "p", Expr: `sum(rate(a_total[5m])`}}},
			wantErr:     "p: ",
			wantMetrics: map[string][]string{},
		},
		{
			name:        "a rule with a bad duration",
			req:         promqlRequest{Rules: "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    for: soon\n"},
			wantErr:     "rules: ",
			wantMetrics: map[string][]string{},
		},
		{
			name:        "a rule with a bad annotation template",
			req:         promqlRequest{Rules: "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up == 0\n    annotations:\n      summary: '{{ $value'\n"},
			wantErr:     "rules: ",
			wantMetrics: map[string][]string{"alert A": {"up"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := promqlCheck(t, tc.req)
			if (len(resp.Errors) > 0) != (tc.wantErr != "") {
				t.Fatalf("errors %q, want some: %v", resp.Errors, tc.wantErr != "")
			}
			for _, e := range resp.Errors {
				if !strings.HasPrefix(e, tc.wantErr) {
					t.Errorf("error %q, want it to start with %q", e, tc.wantErr)
				}
			}
			if !maps.EqualFunc(resp.Metrics, tc.wantMetrics, slices.Equal) {
				t.Errorf("metrics %v, want %v", resp.Metrics, tc.wantMetrics)
			}
			if tc.wantMatchers != nil && !maps.EqualFunc(resp.Matchers, tc.wantMatchers, slices.Equal) {
				t.Errorf("matchers %v, want %v", resp.Matchers, tc.wantMatchers)
			}
		})
	}
}
