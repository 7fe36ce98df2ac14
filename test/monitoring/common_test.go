package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/test/deploy"
)

// The files under test, relative to the repository root.
const (
	dashboardFile = "deploy/chart/dashboards/hcloud-policy-ccm.json"
	rulesFile     = "deploy/chart/alerts/hcloud-policy-ccm.rules.yaml"
)

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// repoRoot returns the repository root.
func repoRoot(t *testing.T) string {
	t.Helper()
	rootOnce.Do(func() { root, rootErr = deploy.Root(".") })
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return root
}

// readFile returns the content of the repository file path.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// dashboard is the part of a Grafana dashboard model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// panel is one panel of a dashboard; a row's collapsed panels are in Panels.
type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		X int `json:"x"`
		W int `json:"w"`
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"`
}

// target is one query of a panel.
type target struct {
	Expr string `json:"expr"`
}

// loadDashboard parses raw, a dashboard model.
func loadDashboard(t *testing.T, raw []byte) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	return d
}

// allPanels returns the panels of d, those inside rows included, rows left out.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// ruleFile is a Prometheus rule file, the spec of a PrometheusRule.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// rule is one alerting rule.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// helmBin returns the helm binary of `make helm-bin`.
func helmBin(t *testing.T) string {
	t.Helper()
	helm, err := deploy.HelmBin(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	return helm
}
