package ciplan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGoldenExamples")

const (
	examplePolicies  = "../../examples/policies"
	exampleManifests = "../../examples/manifests"
)

// exampleEngine loads the example policies as the CCM does (policy.ReadDir, Engine.Load).
func exampleEngine(t *testing.T) *policy.Engine {
	t.Helper()
	files, err := policy.ReadDir(examplePolicies)
	if err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{})
	if _, err := e.Load(context.Background(), files, policy.DirSource(examplePolicies)); err != nil {
		t.Fatal(err)
	}
	return e
}

func readExamples(t *testing.T) Manifests {
	t.Helper()
	m, err := ReadManifests([]string{exampleManifests}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Problems) > 0 {
		t.Fatalf("example manifests have problems: %v", m.Problems)
	}
	return m
}

var revisionRE = regexp.MustCompile(`(policy revision: |"revision": ")[0-9a-f]+`)

// decisionIDRE matches the decision IDs (random UUIDs) of the plan output.
var decisionIDRE = regexp.MustCompile(`(decision |"decision_id": ")[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestGoldenExamples: plan on examples/manifests with examples/policies, text and JSON, against
// testdata/examples.{txt,json} (go test -run TestGoldenExamples ./ccm/ciplan/ -update rewrites
// them). The policy revision is masked: it changes with every edit of the example policies;
// so are the decision IDs, random UUIDs.
func TestGoldenExamples(t *testing.T) {
	r := Run(context.Background(), readExamples(t), Options{Config: config.Default(), Cluster: input.Cluster{Name: "kubernetes"}, Decider: exampleEngine(t)})
	if got, want := r.ExitCode(), ExitDenied; got != want {
		t.Errorf("exit code %d, want %d", got, want)
	}
	for _, tc := range []struct {
		file  string
		write func(*Report, *bytes.Buffer) error
	}{
		{"examples.txt", func(r *Report, b *bytes.Buffer) error { return r.WriteText(b) }},
		{"examples.json", func(r *Report, b *bytes.Buffer) error { return r.WriteJSON(b) }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&r, &b); err != nil {
				t.Fatal(err)
			}
			got := revisionRE.ReplaceAll(b.Bytes(), []byte("${1}REVISION"))
			if n := len(decisionIDRE.FindAll(got, -1)); n == 0 {
				t.Errorf("no decision ID in the output; every step names its decision (JSON) and denied ones in text")
			}
			got = decisionIDRE.ReplaceAll(got, []byte("${1}DECISION-ID"))
			path := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (rerun with -update and review the diff):\n%s", path, got)
			}
		})
	}
}

// TestVerdicts: the verdict of each example Service and each bad input, by name.
func TestVerdicts(t *testing.T) {
	e := exampleEngine(t)
	tests := []struct {
		name      string
		manifest  string
		state     string // state file in testdata
		wantExit  int
		wantSteps []string // label=verdict
		wantErr   string   // substring of the Service's error
	}{
		{name: "allowed in default", manifest: "allowed.yaml", wantExit: ExitAllowed, wantSteps: []string{"create(web)=allowed"}},
		{name: "port 22 denied", manifest: "denied-port.yaml", wantExit: ExitDenied, wantSteps: []string{"create(ssh)=denied"}},
		{name: "public in unlabelled namespace denied", manifest: "denied-public.yaml", wantExit: ExitDenied, wantSteps: []string{"create(shop)=denied", "create(partner)=allowed"}},
		{
			name: "existing load balancer gets port 22 added: only that step is denied (the update sets the UID label)", manifest: "denied-port.yaml", state: "state-ssh.json",
			wantExit: ExitDenied, wantSteps: []string{"update(ssh)=allowed", "add_service(22)=denied"},
		},
		{name: "bad annotation names file and line", manifest: "testdata/bad-annotation.yaml", wantExit: ExitBadInput, wantErr: "bad-annotation.yaml:5 (document 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.manifest
			if !strings.HasPrefix(path, "testdata/") {
				path = filepath.Join(exampleManifests, path)
			}
			m, err := ReadManifests([]string{path}, nil)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Config: config.Default(), Decider: e}
			if tt.state != "" {
				if o.State, err = ReadState(filepath.Join("testdata", tt.state)); err != nil {
					t.Fatal(err)
				}
			}
			r := Run(context.Background(), m, o)
			if got := r.ExitCode(); got != tt.wantExit {
				t.Errorf("exit %d, want %d; report %+v", got, tt.wantExit, r)
			}
			var steps []string
			var errs []string
			for _, s := range r.Services {
				if s.Error != "" {
					errs = append(errs, s.Error)
				}
				for _, st := range s.Steps {
					v := "allowed"
					if !st.Allowed {
						v = "denied"
						if len(st.Deny) == 0 {
							t.Errorf("step %s denied without a message", st.Label)
						}
					}
					steps = append(steps, st.Label+"="+v)
				}
			}
			if strings.Join(steps, " ") != strings.Join(tt.wantSteps, " ") {
				t.Errorf("steps %v, want %v", steps, tt.wantSteps)
			}
			if tt.wantErr != "" && !strings.Contains(strings.Join(errs, "\n"), tt.wantErr) {
				t.Errorf("errors %q, want one containing %q", errs, tt.wantErr)
			}
			if tt.wantErr == "" && len(errs) > 0 {
				t.Errorf("unexpected errors %q", errs)
			}
		})
	}
}

// namespaces is the CCM's namespace lister for the test: the Namespace manifests, and any other
// namespace without labels (what plan assumes for a namespace the input does not declare).
type namespaces map[string]map[string]string

func (n namespaces) List(labels.Selector) ([]*corev1.Namespace, error) {
	return nil, errors.New("not used")
}

func (n namespaces) Get(name string) (*corev1.Namespace, error) {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: n[name]}}, nil
}

// TestPlanMatchesCCM: for every example Service, plan's verdict equals the CCM's decision: the
// executor's gate (executor.Run with the same engine, against the emulator) denies exactly the
// Services plan denies, names the steps plan denies in its PolicyDenied event, and an allowed
// Service's load balancer, once created, is the final load balancer plan showed.
func TestPlanMatchesCCM(t *testing.T) {
	m := readExamples(t)
	e := exampleEngine(t)
	cluster := input.Cluster{Name: "kubernetes"}
	r := Run(context.Background(), m, Options{Config: config.Default(), Cluster: cluster, Decider: e})
	if len(r.Services) != 4 {
		t.Fatalf("planned %d Services, want the 4 of examples/manifests", len(r.Services))
	}
	for i, mf := range m.Services {
		res := r.Services[i]
		t.Run(res.Namespace+"/"+res.Name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t)
			conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: 2 * time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}, ClientOptions: []hcloud.ClientOption{hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(2 * time.Millisecond)})}})
			if err != nil {
				t.Fatal(err)
			}
			rec := record.NewFakeRecorder(100)
			x, err := executor.New(executor.Options{Conn: conn, Decider: e, Recorder: rec, Cluster: cluster, Namespaces: namespaces(m.Namespaces)})
			if err != nil {
				t.Fatal(err)
			}
			svc := WithAPIDefaults(mf.Service)
			name, rename := lbName(svc)
			plan, err := compute(svc, name, rename, nil, Options{Config: config.Default()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = x.Run(context.Background(), svc, plan)
			ccmDenied := errors.Is(err, policy.ErrDenied)
			if err != nil && !ccmDenied {
				t.Fatalf("executor: %v", err)
			}
			if ccmDenied != !res.Allowed {
				t.Fatalf("CCM denied=%t, plan allowed=%t", ccmDenied, res.Allowed)
			}
			close(rec.Events)
			var events []string
			for ev := range rec.Events {
				events = append(events, ev)
			}
			for _, st := range res.Steps {
				if st.Allowed {
					continue
				}
				found := false
				for _, ev := range events {
					if strings.Contains(ev, executor.ReasonPolicyDenied) && strings.Contains(ev, st.Label) && strings.Contains(ev, st.Deny[0].Msg) {
						found = true
					}
				}
				if !found {
					t.Errorf("plan denied %s (%s); the CCM's events %q do not", st.Label, st.Deny[0].Msg, events)
				}
			}
			lbs := emu.LoadBalancers()
			if ccmDenied {
				if len(lbs) != 0 {
					t.Errorf("denied, yet the CCM created %d load balancers", len(lbs))
				}
				return
			}
			if len(lbs) != 1 {
				t.Fatalf("allowed, and the CCM created %d load balancers, want 1", len(lbs))
			}
			assertSameLB(t, lbs[0], res.Final)
		})
	}
}

// assertSameLB compares what the CCM created with plan's final load balancer.
func assertSameLB(t *testing.T, got schema.LoadBalancer, want *input.LoadBalancer) {
	t.Helper()
	if want == nil {
		t.Fatal("plan has no final load balancer")
	}
	if got.Name != want.Name || got.LoadBalancerType.Name != want.Type || got.Location.Name != want.Location || got.PublicNet.Enabled != want.PublicInterface {
		t.Errorf("CCM created %s type=%s at=%s public=%t; plan said %s type=%s at=%s public=%t",
			got.Name, got.LoadBalancerType.Name, got.Location.Name, got.PublicNet.Enabled, want.Name, want.Type, want.Location, want.PublicInterface)
	}
	var gotPorts, wantPorts []int
	for _, s := range got.Services {
		gotPorts = append(gotPorts, s.ListenPort)
	}
	for _, s := range want.Services {
		wantPorts = append(wantPorts, s.ListenPort)
	}
	gj, _ := json.Marshal(gotPorts)
	wj, _ := json.Marshal(wantPorts)
	if string(gj) != string(wj) {
		t.Errorf("CCM listeners %s, plan %s", gj, wj)
	}
}

// TestSaveStateRoundTrip: the state the allowed plans leave (After, WriteState), read back
// (ReadState) and planned again, holds the allowed Services' load balancers unchanged (no
// step), while the denied Services, which changed nothing, are still creates.
func TestSaveStateRoundTrip(t *testing.T) {
	m := readExamples(t)
	o := Options{Config: config.Default(), Decider: exampleEngine(t)}
	first := Run(context.Background(), m, o)
	path := filepath.Join(t.TempDir(), "state.json")
	if err := WriteState(path, first.After(State{})); err != nil {
		t.Fatal(err)
	}
	var err error
	if o.State, err = ReadState(path); err != nil {
		t.Fatal(err)
	}
	if got := len(o.State.LoadBalancers); got != 2 {
		t.Fatalf("saved %d load balancers, want the 2 allowed ones", got)
	}
	second := Run(context.Background(), m, o)
	for i, s := range second.Services {
		was := first.Services[i]
		switch {
		case was.Allowed && (!s.Exists || len(s.Steps) != 0):
			t.Errorf("%s/%s was allowed: want an existing load balancer and no step, got exists=%t steps=%+v", s.Namespace, s.Name, s.Exists, s.Steps)
		case !was.Allowed && (s.Exists || len(s.Steps) == 0 || s.Steps[0].Operation != "create"):
			t.Errorf("%s/%s was denied: want a create again, got exists=%t steps=%+v", s.Namespace, s.Name, s.Exists, s.Steps)
		}
	}
}
