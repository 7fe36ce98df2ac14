// Command promql-check parses PromQL with Prometheus' own parser, for the monitoring tests
// (test/monitoring): the expressions of the chart's Grafana dashboard and the rule groups of its
// PrometheusRule.
//
// It reads one JSON Request on standard input and writes one JSON Response on standard output.
// Rule groups are validated as Prometheus loads a rule file (model/rulefmt: expressions, `for`,
// label names, annotation templates). Exit status 0 means the request was read; the problems are
// in Response.Errors.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// Request is what to check.
type Request struct {
	// Rules is a Prometheus rule file: the spec of a PrometheusRule, as YAML.
	Rules string `json:"rules"`
	// Exprs are single expressions, each with where it comes from.
	Exprs []Expr `json:"exprs"`
}

// Expr is one expression and where it comes from (for the messages).
type Expr struct {
	Where string `json:"where"`
	Expr  string `json:"expr"`
}

// Response is the outcome of a Request.
type Response struct {
	// Errors names every problem, each with where it is.
	Errors []string `json:"errors"`
	// Metrics maps where an expression comes from ("alert NAME" for a rule) to the metric names
	// its selectors name, sorted.
	Metrics map[string][]string `json:"metrics"`
	// Matchers maps each metric name to the label names its selectors match on (__name__ left
	// out), over every expression, sorted.
	Matchers map[string][]string `json:"matchers"`
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql-check: read standard input:", err)
		os.Exit(2)
	}
	var req Request
	if err := json.Unmarshal(in, &req); err != nil {
		fmt.Fprintln(os.Stderr, "promql-check: parse the request:", err)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(check(req)); err != nil {
		fmt.Fprintln(os.Stderr, "promql-check: write the response:", err)
		os.Exit(2)
	}
}

// check checks req.
func check(req Request) Response {
	p := parser.NewParser(parser.Options{})
	resp := Response{Errors: []string{}, Metrics: map[string][]string{}, Matchers: map[string][]string{}}
	exprs := slices.Clone(req.Exprs)
	if req.Rules != "" {
		groups, errs := rulefmt.Parse([]byte(req.Rules), false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		for _, err := range errs {
			resp.Errors = append(resp.Errors, "rules: "+err.Error())
		}
		if groups != nil {
			for _, g := range groups.Groups {
				for _, r := range g.Rules {
					where := "record " + r.Record
					if r.Alert != "" {
						where = "alert " + r.Alert
					}
					exprs = append(exprs, Expr{Where: where, Expr: r.Expr})
				}
			}
		}
	}
	for _, e := range exprs {
		selectors, err := vectorSelectors(p, e.Expr)
		if err != nil {
			resp.Errors = append(resp.Errors, fmt.Sprintf("%s: %v", e.Where, err))
			continue
		}
		var names []string
		for _, vs := range selectors {
			name := selectorName(vs)
			names = append(names, name)
			for _, m := range vs.LabelMatchers {
				if m.Name != model.MetricNameLabel {
					resp.Matchers[name] = append(resp.Matchers[name], m.Name)
				}
			}
		}
		resp.Metrics[e.Where] = sortedSet(names)
	}
	for name, labels := range resp.Matchers {
		resp.Matchers[name] = sortedSet(labels)
	}
	return resp
}

// vectorSelectors parses expr and returns its vector selectors (those of range selectors
// included).
func vectorSelectors(p parser.Parser, expr string) ([]*parser.VectorSelector, error) {
	ast, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []*parser.VectorSelector
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}

// sortedSet returns s sorted, each element once.
func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// selectorName is the metric name of vs: its name, or its __name__ equality matcher; "" when it
// names none.
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}
