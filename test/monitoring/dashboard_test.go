package monitoring

import (
	"slices"
	"strings"
	"testing"
)

// TestDashboardShape: the dashboard is one Grafana model with a stable uid, panels that fit the
// 24-column grid, have unique ids, a title and a description, query through the $datasource
// variable, and have at least one expression each.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t, readFile(t, dashboardFile))
	if d.UID != "hcloud-policy-ccm" || d.Title == "" {
		t.Errorf("uid %q, title %q: want uid hcloud-policy-ccm (links and provisioning use it) and a title", d.UID, d.Title)
	}
	var variables []string
	for _, v := range d.Templating.List {
		variables = append(variables, v.Name)
	}
	if !slices.Contains(variables, "datasource") {
		t.Errorf("variables %v: want a datasource variable, so the dashboard works with any Prometheus data source", variables)
	}
	ids := map[int]string{} // rows too: Grafana wants every id unique
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q have the same id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	panels := d.allPanels()
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	for _, p := range panels {
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q: want both", p.ID, p.Title, p.Description)
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: data source %q, want ${datasource}", p.Title, p.Datasource.UID)
		}
		if p.GridPos.W <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: x %d, w %d: outside the 24-column grid", p.Title, p.GridPos.X, p.GridPos.W)
		}
		if len(p.Targets) == 0 || slices.ContainsFunc(p.Targets, func(tg target) bool { return strings.TrimSpace(tg.Expr) == "" }) {
			t.Errorf("panel %q: want one or more targets, each with an expression", p.Title)
		}
	}
}

// TestDashboardPanels: the panels that docs/monitoring.md (and issue 31) promise are there, and
// each reads the metrics it is about.
func TestDashboardPanels(t *testing.T) {
	d := loadDashboard(t, readFile(t, dashboardFile))
	exprs, _ := dashboardExprs(t, d)
	resp := promqlCheck(t, promqlRequest{Exprs: exprs})
	metricsOf := func(title string) []string {
		var out []string
		for where, ms := range resp.Metrics {
			if strings.HasPrefix(where, "panel \""+title+"\" ") {
				out = append(out, ms...)
			}
		}
		return out
	}
	tests := []struct {
		topic   string
		title   string
		metrics []string
		texts   []string // each in one of the panel's expressions
	}{
		{topic: "decisions by result", title: "Decisions by result", metrics: []string{"hcloud_ccm_policy_decisions_total"}, texts: []string{"by (result)", `source="gate"`}},
		{topic: "denials by code", title: "Denials by code", metrics: []string{"hcloud_ccm_policy_denials_total"}, texts: []string{"by (code", `source="gate"`}},
		{topic: "API budget left", title: "API budget left", metrics: []string{"hcloud_ccm_api_ratelimit_remaining", "hcloud_ccm_api_ratelimit_limit"}},
		{topic: "429s", title: "429 responses and self-pacing", metrics: []string{"hcloud_ccm_api_requests_total"}, texts: []string{`code="429"`}},
		{topic: "cache hit rates", title: "Cache hit rate", metrics: []string{"hcloud_ccm_server_cache_requests_total", "hcloud_ccm_load_balancer_cache_requests_total"}, texts: []string{`result="hit"`}},
		{topic: "reconcile errors", title: "Reconcile errors", metrics: []string{"hcloud_ccm_mutations_total", "service_controller_nodesync_error_total", "route_controller_route_sync_total"}},
		{topic: "plugin call latency", title: "Plugin call latency", metrics: []string{"hcloud_ccm_plugin_call_duration_seconds_bucket"}, texts: []string{"histogram_quantile"}},
		{topic: "plugin failures", title: "Plugin failures", metrics: []string{"hcloud_ccm_plugin_failures_total"}},
		{topic: "audit violations", title: "Audit violations", metrics: []string{"hcloud_ccm_policy_audit_violations"}},
		{topic: "audit decisions apart", title: "Audit decisions by result", metrics: []string{"hcloud_ccm_policy_decisions_total"}, texts: []string{"by (result)", `source="audit"`}},
	}
	for _, tc := range tests {
		t.Run(tc.topic, func(t *testing.T) {
			i := slices.IndexFunc(d.allPanels(), func(p panel) bool { return p.Title == tc.title })
			if i < 0 {
				t.Fatalf("no panel %q", tc.title)
			}
			got := metricsOf(tc.title)
			for _, m := range tc.metrics {
				if !slices.Contains(got, m) {
					t.Errorf("panel %q reads %v, want %s among them", tc.title, got, m)
				}
			}
			p := d.allPanels()[i]
			for _, text := range tc.texts {
				if !slices.ContainsFunc(p.Targets, func(tg target) bool { return strings.Contains(tg.Expr, text) }) {
					t.Errorf("panel %q: no expression contains %q", tc.title, text)
				}
			}
		})
	}
}
