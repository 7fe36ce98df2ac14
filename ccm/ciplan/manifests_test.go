package ciplan

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

func TestReadManifests(t *testing.T) {
	tests := []struct {
		name         string
		input        string
		wantServices []string // namespace/name@line#index
		wantNS       []string
		wantProblem  string // substring of the only problem
	}{
		{
			name:         "multi-document, comments, leading separator, other kinds skipped",
			input:        "---\n# a comment\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\n\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {x: y}}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: shop}\n",
			wantServices: []string{"default/a@7#1", "shop/b@17#3"},
			wantNS:       []string{"shop"},
		},
		{
			name:         "not YAML names file and line",
			input:        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\nkind: [\n",
			wantServices: []string{"default/a@1#0"},
			wantProblem:  "stdin-test:5 (document 1): not a Kubernetes manifest",
		},
		{
			name:        "unknown field in a Service",
			input:       "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {typo: 1}\n",
			wantProblem: "stdin-test:1 (document 0): Service: error unmarshaling JSON",
		},
		{
			name:        "Service without a name",
			input:       "apiVersion: v1\nkind: Service\nspec: {type: LoadBalancer}\n",
			wantProblem: "has no metadata.name",
		},
		{
			name:  "other API group's Service kind skipped",
			input: "apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata: {name: k}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Manifests{Namespaces: map[string]map[string]string{}}
			m.add("stdin-test", []byte(tt.input))
			var got []string
			for _, s := range m.Services {
				got = append(got, s.Service.Namespace+"/"+s.Service.Name+"@"+itoa(s.Source.Line)+"#"+itoa(s.Source.Index))
			}
			if strings.Join(got, " ") != strings.Join(tt.wantServices, " ") {
				t.Errorf("services %v, want %v", got, tt.wantServices)
			}
			for _, ns := range tt.wantNS {
				if _, ok := m.Namespaces[ns]; !ok {
					t.Errorf("namespace %s not read", ns)
				}
			}
			switch {
			case tt.wantProblem == "" && len(m.Problems) > 0:
				t.Errorf("problems %v, want none", m.Problems)
			case tt.wantProblem != "" && (len(m.Problems) != 1 || !strings.Contains(m.Problems[0].Error(), tt.wantProblem)):
				t.Errorf("problems %v, want one containing %q", m.Problems, tt.wantProblem)
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestReadManifests_PathsAndStdin(t *testing.T) {
	dir := t.TempDir()
	svc := "apiVersion: v1\nkind: Service\nmetadata: {name: %s}\n"
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", strings.Replace(svc, "%s", "b", 1))
	write("a/x.yml", strings.Replace(svc, "%s", "a", 1))
	write("notes.txt", "not a manifest")
	m, err := ReadManifests([]string{dir, "-"}, strings.NewReader(strings.Replace(svc, "%s", "stdin", 1)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range m.Services {
		got = append(got, s.Service.Name+"@"+filepath.Base(s.Source.File))
	}
	if want := "a@x.yml b@b.yaml stdin@-"; strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if _, err := ReadManifests([]string{filepath.Join(dir, "missing")}, nil); err == nil || !strings.Contains(err.Error(), "read manifests") {
		t.Errorf("missing path: err %v, want one naming the operation", err)
	}
}

func TestReadEnvFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[string]string
		wantErr string
	}{
		{
			name:    "comments, export, quotes",
			content: "# env\nHCLOUD_LOAD_BALANCERS_LOCATION=fsn1\nexport HCLOUD_LOAD_BALANCERS_TYPE=\"lb21\"\n\nHCLOUD_NETWORK='k8s'\n",
			want:    map[string]string{"HCLOUD_LOAD_BALANCERS_LOCATION": "fsn1", "HCLOUD_LOAD_BALANCERS_TYPE": "lb21", "HCLOUD_NETWORK": "k8s"},
		},
		{name: "line without =", content: "A=1\nBROKEN\n", wantErr: ":2: want KEY=VALUE"},
		{name: "empty key", content: "=1\n", wantErr: ":1: want KEY=VALUE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadEnvFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s=%q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// FuzzPlan: no input crashes plan; whatever the documents, Run returns a report whose exit
// status is one of the three documented. Seeds: the example manifests and broken variants.
func FuzzPlan(f *testing.F) {
	for _, name := range []string{"allowed.yaml", "denied-port.yaml", "denied-public.yaml"} {
		b, err := os.ReadFile(filepath.Join(exampleManifests, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a, annotations: {load-balancer.hetzner.cloud/health-check-interval: -1s}}\nspec: {type: LoadBalancer, ports: [{port: 0}]}\n"))
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a, uid: x}\nspec: {type: LoadBalancer, allocateLoadBalancerNodePorts: false, ports: [{port: 80, protocol: UDP}]}\n"))
	f.Add([]byte("---\n---\n\x00\n"))
	e := policy.NewEngine(policy.Options{})
	files, err := policy.ReadDir(examplePolicies)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := e.Load(context.Background(), files, policy.DirSource(examplePolicies)); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := Manifests{Namespaces: map[string]map[string]string{}}
		m.add("fuzz.yaml", data)
		r := Run(context.Background(), m, Options{Config: config.Default(), Decider: e})
		if c := r.ExitCode(); c != ExitAllowed && c != ExitDenied && c != ExitBadInput {
			t.Fatalf("exit %d", c)
		}
	})
}
