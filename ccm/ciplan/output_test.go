package ciplan

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
)

// TestRun_StepsFailAlone: plan shows which steps the CCM would still send when one is denied:
// on an existing load balancer that gets port 22, the update of its labels runs and
// add_service(22) is denied; the text names both.
func TestRun_StepsFailAlone(t *testing.T) {
	m, err := ReadManifests([]string{filepath.Join(exampleManifests, "denied-port.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Config: config.Default(), Decider: exampleEngine(t)}
	if o.State, err = ReadState(filepath.Join("testdata", "state-ssh.json")); err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), m, o)
	var got []string
	for _, s := range r.Services {
		for _, st := range s.Steps {
			got = append(got, st.Label+" runs="+map[bool]string{true: "yes", false: "no"}[st.Runs])
		}
	}
	if want := "update(ssh) runs=yes add_service(22) runs=no"; strings.Join(got, " ") != want {
		t.Errorf("steps %q, want %q", got, want)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "  still runs: update(ssh)\n") {
		t.Errorf("text output lacks the steps that still run:\n%s", b.String())
	}
}

// TestWriteText_SkippedSteps: a step that needs a denied one is shown as skipped, with what it
// needs, and is not among the steps that still run.
func TestWriteText_SkippedSteps(t *testing.T) {
	r := Report{Services: []ServiceResult{{Namespace: "shop", Name: "web", LoadBalancer: "web", Exists: true, Steps: []Step{
		{Label: "remove_target(server:1)", Allowed: true, Runs: true},
		{Label: "create_managed_certificate(c)", DecisionID: "d-1"},
		{Label: "add_service(443)", Allowed: true, Skipped: "needs create_managed_certificate(c)"},
		{Label: "add_target(server:3)", Allowed: true, Runs: true},
	}}}}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  DENIED  create_managed_certificate(c) (decision d-1)\n",
		"  skipped add_service(443) (needs create_managed_certificate(c))\n",
		"  still runs: remove_target(server:1), add_target(server:3)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, b.String())
		}
	}
}
