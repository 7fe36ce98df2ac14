package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/ciplan"
)

// TestPlanCommand: the exit status and output of `plan` for allowed, denied and bad input,
// from files and stdin, and the --env-file defaults reaching the plan.
func TestPlanCommand(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	if err := os.WriteFile(envFile, []byte("HCLOUD_LOAD_BALANCERS_LOCATION=hel1\nHCLOUD_LOAD_BALANCERS_TYPE=lb21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badEnv := filepath.Join(dir, "bad.env")
	if err := os.WriteFile(badEnv, []byte("HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP=maybe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const noLocation = "apiVersion: v1\nkind: Service\nmetadata: {name: web, annotations: {load-balancer.hetzner.cloud/name: web}}\nspec: {type: LoadBalancer, ports: [{port: 443}]}\n"
	const pol = "../../examples/policies"
	const prices = "../../examples/emulator/load_balancer_types.json"
	badPrices := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(badPrices, []byte(`{"load_balancer_types": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		stdin    string
		wantCode int
		want     []string // substrings of stdout (or of the error for bad input)
	}{
		{name: "allowed", args: []string{"-f", "../../examples/manifests/allowed.yaml", "--policies", pol}, wantCode: 0, want: []string{"allowed create(web)", "result: allowed (exit 0)"}},
		{name: "denied", args: []string{"-f", "../../examples/manifests", "--policies", pol}, wantCode: 1, want: []string{"DENIED  create(ssh)", "listen port 22 is not allowed"}},
		{name: "stdin with env file defaults", args: []string{"-f", "-", "--policies", pol, "--env-file", envFile, "-o", "json"}, stdin: noLocation, wantCode: 0, want: []string{`"location": "hel1"`, `"type": "lb21"`, `"file": "-"`}},
		{name: "bad manifest", args: []string{"-f", "-", "--policies", pol}, stdin: "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {typo: 1}\n", wantCode: 2, want: []string{"error: -:1 (document 0): Service:", "result: bad input (exit 2)"}},
		{name: "bad environment", args: []string{"-f", "-", "--policies", pol, "--env-file", badEnv}, stdin: noLocation, wantCode: 2, want: []string{"HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP"}},
		{name: "missing flags", args: []string{"--policies", pol}, wantCode: 2, want: []string{"-f and --policies are required"}},
		{name: "bad output", args: []string{"-f", "-", "--policies", pol, "-o", "yaml"}, wantCode: 2, want: []string{`-o "yaml": want text or json`}},
		{name: "priced", args: []string{"-f", "../../examples/manifests/allowed.yaml", "--policies", pol, "--prices", prices}, wantCode: 0, want: []string{"cost: +5.00 EUR/month net (+5.95 gross), 5.00 EUR/month net (5.95 gross) after", "cost of every managed load balancer: +5.00 EUR/month net"}},
		{name: "priced json", args: []string{"-f", "../../examples/manifests/allowed.yaml", "--policies", pol, "--prices", prices, "-o", "json"}, wantCode: 0, want: []string{`"known": true`, `"monthly_net": 5`}},
		{name: "unpriced", args: []string{"-f", "../../examples/manifests/allowed.yaml", "--policies", pol}, wantCode: 0, want: []string{"cost: unknown (no prices: pass --prices FILE or --from-api)"}},
		{name: "bad prices file", args: []string{"-f", "-", "--policies", pol, "--prices", badPrices}, wantCode: 2, want: []string{"plan: --prices " + badPrices + ": parse load balancer prices: want the JSON body of GET /load_balancer_types"}},
		{name: "prices and from-api", args: []string{"-f", "-", "--policies", pol, "--prices", prices, "--from-api"}, wantCode: 2, want: []string{"--prices and --from-api exclude each other"}},
		{name: "policy dir without rego", args: []string{"-f", "-", "--policies", dir}, wantCode: 2, want: []string{"no .rego file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := newToolsCommand()
			tools.SetIn(strings.NewReader(tt.stdin))
			var out bytes.Buffer
			err := runTool(tools, append([]string{"plan"}, tt.args...), &out)
			code := 0
			if err != nil {
				var exit *exitError
				if !errors.As(err, &exit) {
					t.Fatalf("error %v is no exitError (would exit 1 whatever it is)", err)
				}
				code = exit.code
			}
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; err %v; output:\n%s", code, tt.wantCode, err, out.String())
			}
			text := out.String()
			if err != nil {
				text += err.Error()
			}
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
			if strings.Contains(strings.Join(tt.args, " "), "-o json") {
				var r ciplan.Report
				if err := json.Unmarshal(out.Bytes(), &r); err != nil {
					t.Errorf("-o json is not a Report: %v", err)
				}
			}
		})
	}
}

// TestPlanDecisionLog: with --decision-log, each denied step's decision ID in the output is the
// decision_id of a line in the log, and `policy eval --decision-log-line` replays that line to
// the same result: a denial in CI traces to its log line as one in the cluster does.
func TestPlanDecisionLog(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "decisions.log")
	var out bytes.Buffer
	err := runTool(newToolsCommand(), []string{"plan", "-f", "../../examples/manifests", "--policies", "../../examples/policies", "--decision-log", logFile}, &out)
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != ciplan.ExitDenied {
		t.Fatalf("plan: %v, want exit %d:\n%s", err, ciplan.ExitDenied, out.String())
	}
	m := regexp.MustCompile(`DENIED  create\(ssh\) \(decision ([0-9a-f-]{36})\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no decision ID on the denied step:\n%s", out.String())
	}
	data, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(l, `"decision_id":"`+m[1]+`"`) {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("decision %s is not in the decision log:\n%s", m[1], data)
	}
	lineFile := filepath.Join(t.TempDir(), "line.json")
	if err := os.WriteFile(lineFile, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runTool(newToolsCommand(), []string{"policy", "eval", "--policies", "../../examples/policies", "--decision-log-line", lineFile}, &out); err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "decision "+m[1]+": same result as logged") {
		t.Errorf("replay output:\n%s", out.String())
	}
}
