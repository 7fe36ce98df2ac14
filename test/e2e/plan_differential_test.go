//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/ciplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// differentialRules are the policies of TestPlanMatchesCCMOnGeneratedManifests: the rule of
// examples/policies/groups.rego with short messages (a group has at most 2 members, all in its
// home namespace: a refused member may not bring its listeners; the messages stay short so that
// a PolicyDenied names every denied step uncut), and rules on what the API server defaults (a
// port's protocol, the external traffic policy), on a namespace label and on a listener.
const differentialRules = `package ccm

lb_changes if input.action in {"loadbalancer.create", "loadbalancer.update"}

namespace_labels := object.get(input.service, "namespace_labels", {})

deny contains sprintf("%s/%s is refused by its group", [m.namespace, m.name]) if {
	lb_changes
	is_object(input.group)
	not input.operation in {"delete_service", "remove_target"}
	some i, m in input.group.members
	refused(i, m)
	involved(m)
}

refused(i, _) if i >= 2

refused(_, m) if m.namespace != input.group.namespace

involved(m) if {
	m.namespace == input.service.namespace
	m.name == input.service.name
}

involved(m) if {
	some port in m.ports
	adds_listener(port)
}

# Hetzner load balancers serve TCP only.
deny contains msg if {
	lb_changes
	some p in input.service.ports
	p.protocol != "TCP"
	msg := sprintf("port %d: protocol %q", [p.port, p.protocol])
}

# Namespaces labelled traffic=local keep client addresses: externalTrafficPolicy Local.
deny contains "externalTrafficPolicy Local only" if {
	lb_changes
	namespace_labels.traffic == "local"
	input.service.external_traffic_policy == "Cluster"
}

# Port 8443 is reserved for the ingress controller.
deny contains "port 8443 reserved" if {
	lb_changes
	adds_listener(8443)
}

adds_listener(port) if {
	port in {s.listen_port | some s in input.load_balancer.services}
	not port in {s.listen_port | some s in object.get(input, ["current", "services"], [])}
}
`

// genManifest is one generated Service: its namespace/name, load balancer group ("" for none)
// and YAML document.
type genManifest struct {
	namespace, name, group, doc string
}

// generateManifests writes the manifests of seed: namespaces (one labelled traffic=local) and
// services Services of type LoadBalancer, some in load balancer groups (up to 4 members, so
// some are over the limit of 2, some across namespaces), with ports whose protocol is omitted,
// TCP or UDP, targetPort always omitted, externalTrafficPolicy omitted, Cluster or Local. The
// ports of a group never clash and stay within lb11's 5 listeners (a member refused for
// capacity or a port conflict is the CCM's error, not a verdict). Everything is named after the
// seed, so several seeds share one cluster.
func generateManifests(seed uint64, services int) (namespaces []*corev1.Namespace, svcs []genManifest) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := fmt.Sprintf("s%d-", seed%100000)
	nsNames := []string{p + "alpha", p + "beta", p + "edge"}
	for _, n := range nsNames {
		ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: n}}
		if strings.HasSuffix(n, "edge") {
			ns.Labels = map[string]string{"traffic": "local"}
		}
		namespaces = append(namespaces, ns)
	}
	groups := []string{p + "web", p + "api"}
	used := map[string][]int{} // listen ports by group
	pool := []int{80, 443, 8080, 8443, 9000, 9090}
	for i := range services {
		ns := nsNames[r.IntN(len(nsNames))]
		group := ""
		if r.IntN(10) < 7 {
			group = groups[r.IntN(len(groups))]
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: %s\n  name: svc-%d\n", ns, i)
		if group != "" {
			fmt.Fprintf(&b, "  annotations:\n    service.hcloud-policy-ccm.io/load-balancer-group: %s\n", group)
		}
		b.WriteString("spec:\n  type: LoadBalancer\n  selector:\n    app: demo\n")
		switch r.IntN(5) {
		case 0:
			b.WriteString("  externalTrafficPolicy: Cluster\n")
		case 1:
			b.WriteString("  externalTrafficPolicy: Local\n")
		}
		b.WriteString("  ports:\n")
		for j := range 1 + r.IntN(2) {
			port := pool[r.IntN(len(pool))]
			if group != "" {
				if slices.Contains(used[group], port) || len(used[group]) >= 4 {
					continue
				}
				used[group] = append(used[group], port)
			}
			if strings.Contains(b.String(), fmt.Sprintf("port: %d\n", port)) {
				continue
			}
			fmt.Fprintf(&b, "  - name: p%d\n    port: %d\n", j, port)
			switch r.IntN(6) {
			case 0, 1:
				b.WriteString("    protocol: TCP\n")
			case 2:
				b.WriteString("    protocol: UDP\n")
			}
		}
		if !strings.Contains(b.String(), "  - name:") { // every port was taken in its group
			continue
		}
		svcs = append(svcs, genManifest{namespace: ns, name: fmt.Sprintf("svc-%d", i), group: group, doc: b.String()})
	}
	return namespaces, svcs
}

// planReport is the part of `plan -o json` the differential test reads.
type planReport struct {
	Services []struct {
		Namespace, Name string
		Error           string `json:"error"`
		Allowed         bool   `json:"allowed"`
		Steps           []struct {
			Label    string `json:"label"`
			Allowed  bool   `json:"allowed"`
			Runs     bool   `json:"runs"`
			Requests []struct {
				Method string          `json:"method"`
				Path   string          `json:"path"`
				Body   json.RawMessage `json:"body"`
			} `json:"requests"`
		} `json:"steps"`
		Final *struct {
			Services []struct {
				ListenPort int `json:"listen_port"`
			} `json:"services"`
		} `json:"final"`
	} `json:"services"`
}

// stepLabelRE finds the step labels in an event message: "add_service(80)", "create(x)".
var stepLabelRE = regexp.MustCompile(`\b[a-z_]+\([^()\s]*\)`)

// stepLabels are the step labels in msg, with a create's load balancer name left out: the
// default name of a Service's own load balancer comes from its UID, which plan replaces with a
// placeholder (the group load balancers' names are compared through servingLB).
func stepLabels(msg string) []string {
	out := stepLabelRE.FindAllString(msg, -1)
	for i, l := range out {
		if strings.HasPrefix(l, "create(") {
			out[i] = "create"
		}
	}
	return out
}

// differentialSeeds are the seeds `make test` runs (TestPlanMatchesCCMOnGeneratedManifests):
// each is the base of 3 consecutive seeds, 7 generated Services each. The first is the default; the others are
// seeds random runs drew that found a disagreement, kept as regressions.
var differentialSeeds = []uint64{
	1795772166744063702,
	1795778295347155765, // a denied group member's steps that still run (issue 29's note)
}

// TestPlanMatchesCCMOnGeneratedManifests is the differential test of issue 29: seeded,
// generated manifests (groups over a member limit and across namespaces, omitted defaults,
// several namespaces, and the three members of issue 29 item 2) are planned by `plan` and
// applied to a real apiserver, where the CCM binary reconciles them against the emulator with
// the same policies, enforced. Once the CCM converged, the verdict per Service is the same, and
// per step: a denied Service's latest PolicyDenied names the steps plan denies; per load
// balancer, the steps the CCM applied (LoadBalancerCreated/Updated events, of whichever member
// of a group) are the ones plan lists, and its listeners are plan's final ones; --save-state
// holds as many load balancers as the emulator.
//
// The Services exist before the CCM starts, created in namespace/name order, so the creation
// timestamps give each group the age order plan gives manifests without timestamps. The service
// controller syncs in an order of its own; the verdicts compared are the converged ones (plan
// plans a denied group member again as the CCM retries it). No node exists: plan cannot know
// nodes, so the CCM adds no target either. The seed is printed; E2E_DIFFERENTIAL_SEED=N
// replays one, E2E_DIFFERENTIAL_SEED=random draws one.
//
// `make test` runs the fixed seeds differentialSeeds, so that CI is deterministic; random seeds
// (E2E_DIFFERENTIAL_SEED=random, a loop of them in docs/policy.md's note on the test) hunt for
// new disagreements, and a seed that finds one joins differentialSeeds with its fix.
func TestPlanMatchesCCMOnGeneratedManifests(t *testing.T) {
	t.Parallel()
	bases := differentialSeeds
	switch s := os.Getenv("E2E_DIFFERENTIAL_SEED"); s {
	case "":
	case "random":
		bases = []uint64{uint64(time.Now().UnixNano())}
	default:
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("E2E_DIFFERENTIAL_SEED=%q: %v (want a number or random)", s, err)
		}
		bases = []uint64{seed}
	}
	for _, seed := range bases {
		t.Logf("seed %d (replay: E2E_DIFFERENTIAL_SEED=%d)", seed, seed)
	}
	const seeds, perSeed = 3, 7

	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	dir := t.TempDir()
	policies := writeDifferentialPolicies(t, c, filepath.Join(dir, "policies"))

	var all []genManifest
	var docs []string
	ctx := context.Background()
	var sets []uint64
	for _, seed := range bases {
		for i := range uint64(seeds) {
			sets = append(sets, seed+i)
		}
	}
	for _, set := range sets {
		namespaces, svcs := generateManifests(set, perSeed)
		for _, ns := range namespaces {
			if _, err := c.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create namespace %s: %v", ns.Name, err)
			}
			b, err := yaml.Marshal(ns)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(b))
		}
		all = append(all, svcs...)
	}
	// The case of issue 29 item 2 in every run: three members of one group, at most 2 allowed.
	ns29 := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "issue29"}}
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, ns29, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace issue29: %v", err)
	}
	b, err := yaml.Marshal(ns29)
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, string(b))
	for i, port := range []int{80, 81, 82} {
		all = append(all, genManifest{namespace: "issue29", name: fmt.Sprintf("member-%d", i+1), group: "issue29", doc: fmt.Sprintf(
			"apiVersion: v1\nkind: Service\nmetadata:\n  namespace: issue29\n  name: member-%d\n  annotations:\n    service.hcloud-policy-ccm.io/load-balancer-group: issue29\nspec:\n  type: LoadBalancer\n  ports:\n  - port: %d\n",
			i+1, port)})
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seeds %d, manifests:\n%s", bases, strings.Join(docs, "---\n"))
		}
	})
	// Created in namespace/name order: the age order of each group, as plan has it.
	sort.Slice(all, func(i, j int) bool { return all[i].namespace+"/"+all[i].name < all[j].namespace+"/"+all[j].name })
	uids, groupOf := map[string]string{}, map[string]string{}
	for _, m := range all {
		groupOf[m.namespace+"/"+m.name] = m.group
		docs = append(docs, m.doc)
		svc := &corev1.Service{}
		if err := yaml.UnmarshalStrict([]byte(m.doc), svc); err != nil {
			t.Fatalf("generated manifest %s/%s: %v\n%s", m.namespace, m.name, err, m.doc)
		}
		created, err := c.Client().CoreV1().Services(m.namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create Service %s/%s: %v\n%s", m.namespace, m.name, err, m.doc)
		}
		uids[m.namespace+"/"+m.name] = string(created.UID)
	}
	manifests := filepath.Join(dir, "manifests.yaml")
	if err := os.WriteFile(manifests, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	report, saved := runPlan(t, manifests, policies, dir)

	emu, endpoint := hcloudemu.NewTestServer(t)
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv, args: []string{enforce}})
	want := map[string]planVerdict{}
	var order []string // plan's order: a group's later members plan from the earlier ones' state
	for _, s := range report.Services {
		if s.Error != "" {
			t.Fatalf("plan: %s/%s: %s (the generator makes valid manifests only)", s.Namespace, s.Name, s.Error)
		}
		v := planVerdict{allowed: s.Allowed}
		for _, st := range s.Steps {
			if !st.Allowed {
				v.denied = append(v.denied, stepLabels(st.Label)...)
			}
			if st.Runs { // a denied Service's other steps run too (steps fail alone)
				v.applied = append(v.applied, stepLabels(st.Label)...)
				v.applied = append(v.applied, inlineListeners(t, st.Requests)...)
			}
		}
		if s.Final != nil {
			for _, l := range s.Final.Services {
				v.ports = append(v.ports, l.ListenPort)
			}
		}
		want[s.Namespace+"/"+s.Name] = v
		order = append(order, s.Namespace+"/"+s.Name)
	}
	// The service controller syncs in an order of its own and retries denied Services with
	// backoff: a member that syncs before its group's load balancer exists is denied its create,
	// and decided again once another member wrote it. Wait until the CCM converged on every
	// verdict: each Service plan allows served, each Service plan denies with its latest
	// PolicyDenied naming exactly the steps plan denies.
	waitCCM(t, ccm, 3*time.Minute, func() (bool, error) {
		var diffs []string
		for key, v := range want {
			if d := verdictDiff(t, c, key, v); d != "" {
				diffs = append(diffs, d)
			}
		}
		slices.Sort(diffs)
		return len(diffs) == 0, fmt.Errorf("plan and the CCM differ:\n%s", strings.Join(diffs, "\n"))
	})

	// Per load balancer, the steps the CCM applied are the ones plan sends (a group's by whichever
	// member's sync, a denied member's steps that still run among them), and its listeners are
	// plan's final ones: for a group, those of --save-state, which has every member's steps that
	// run.
	lbs := emu.LoadBalancers()
	applied, planned := map[string][]string{}, map[string][]string{}
	ports := map[string][]int{}
	for _, key := range order {
		v := want[key]
		lbKey := key
		if g := groupOf[key]; g != "" {
			lbKey = "group " + g
		}
		ns, name, _ := strings.Cut(key, "/")
		applied[lbKey] = append(applied[lbKey], appliedLabels(t, c, ns, name)...)
		planned[lbKey] = append(planned[lbKey], v.applied...)
		if !v.allowed {
			continue
		}
		if v.ports != nil {
			ports[lbKey] = v.ports
		}
		if g := groupOf[key]; g != "" {
			if lb, ok := savedGroupLB(saved, g); ok {
				ports[lbKey] = lb
			}
		}
		if _, ok := servingLB(lbs, uids[key], groupOf[key]); !ok && v.ports != nil {
			t.Errorf("%s: served, but no load balancer of it in the emulator", key)
		}
	}
	for lbKey, steps := range planned {
		if len(steps) == 0 && len(applied[lbKey]) == 0 {
			continue
		}
		if !sameSet(applied[lbKey], steps) {
			t.Errorf("%s: plan sends %v, the CCM applied %v", lbKey, steps, applied[lbKey])
		}
	}
	for key := range want {
		lbKey := key
		if g := groupOf[key]; g != "" {
			lbKey = "group " + g
		}
		if lb, ok := servingLB(lbs, uids[key], groupOf[key]); ok && ports[lbKey] != nil {
			if got := lbListenPorts(lb); !sameSet(intStrings(got), intStrings(ports[lbKey])) {
				t.Errorf("%s: load balancer %s listens on %v, plan's final state on %v", lbKey, lb.Name, got, ports[lbKey])
			}
		}
	}
	if len(saved.LoadBalancers) != len(lbs) {
		t.Errorf("--save-state holds %d load balancers, the emulator %d: %v", len(saved.LoadBalancers), len(lbs), lbNames(lbs))
	}
}

// planVerdict is what plan says of one Service: allowed, the labels of its denied and of its
// allowed steps (a create's inline listeners as add_service steps), and the listen ports of its
// load balancer after the plan.
type planVerdict struct {
	allowed         bool
	denied, applied []string
	ports           []int
}

// verdictDiff says how the CCM's verdict on the Service key differs from plan's v ("" for not
// at all): an allowed Service must be served; a denied one not, with its latest PolicyDenied
// naming the steps plan denies.
func verdictDiff(t *testing.T, c *harness.Cluster, key string, v planVerdict) string {
	t.Helper()
	ns, name, _ := strings.Cut(key, "/")
	served := len(getService(t, c, ns, name).Status.LoadBalancer.Ingress) > 0
	if v.allowed {
		if !served {
			return key + ": plan allows it, the CCM does not serve it (yet)"
		}
		return ""
	}
	denied, err := events(c, ns, name, "PolicyDenied")
	switch {
	case err != nil:
		return key + ": " + err.Error()
	case served:
		return key + ": plan denies it, the CCM serves it"
	case len(denied) == 0:
		return key + ": plan denies it, no PolicyDenied yet"
	}
	last := slices.MaxFunc(denied, func(a, b corev1.Event) int { return cmp.Compare(eventNanos(a), eventNanos(b)) })
	if got := stepLabels(last.Message); !sameSet(got, v.denied) {
		return fmt.Sprintf("%s: plan denies %v, the CCM's latest PolicyDenied names %v: %s", key, v.denied, got, last.Message)
	}
	return ""
}

// eventNanos is when the recorder made e: client-go names an event "<object>.<UnixNano in hex>".
func eventNanos(e corev1.Event) int64 {
	i := strings.LastIndex(e.Name, ".")
	n, err := strconv.ParseInt(e.Name[i+1:], 16, 64)
	if err != nil {
		return e.LastTimestamp.UnixNano()
	}
	return n
}

// writeDifferentialPolicies writes the policies of the differential test to dir (for plan) and
// into the CCM's policy ConfigMap (before the CCM starts), and returns dir.
func writeDifferentialPolicies(t *testing.T, c *harness.Cluster, dir string) string {
	t.Helper()
	files := map[string]string{"rules.rego": differentialRules}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cm := getConfigMap(t, c)
	cm.Data = files
	if _, err := c.Client().CoreV1().ConfigMaps(ccmNamespace).Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update the policy ConfigMap: %v", err)
	}
	return dir
}

// runPlan runs `plan -o json --save-state` on manifests with policies and the CCM's environment
// (lbEnv), and returns its report and saved state. Exit status 1 (denied) is expected.
func runPlan(t *testing.T, manifests, policies, dir string) (planReport, ciplan.State) {
	t.Helper()
	envFile, state := filepath.Join(dir, "env"), filepath.Join(dir, "state.json")
	if err := os.WriteFile(envFile, []byte(strings.Join(lbEnv, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ccmBinary(t), "plan", "-f", manifests, "--policies", policies, "--env-file", envFile,
		"-o", "json", "--save-state", state, "--cluster-name", clusterName)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if denied := errors.As(err, &exit) && exit.ExitCode() == ciplan.ExitDenied; err != nil && !denied {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var r planReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	saved, err := ciplan.ReadState(state)
	if err != nil {
		t.Fatal(err)
	}
	return r, saved
}

// inlineListeners are the add_service labels of the listeners a create's request carries.
func inlineListeners(t *testing.T, reqs []struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
}) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		if r.Method != "POST" || r.Path != "/load_balancers" {
			continue
		}
		var body schema.LoadBalancerCreateRequest
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("plan's create body: %v", err)
		}
		for _, s := range body.Services {
			out = append(out, fmt.Sprintf("add_service(%d)", *s.ListenPort))
		}
	}
	return out
}

// appliedLabels are the step labels of the CCM's LoadBalancerCreated and LoadBalancerUpdated
// events of a Service ("applied: create(x), add_service(80)").
func appliedLabels(t *testing.T, c *harness.Cluster, namespace, name string) []string {
	t.Helper()
	var out []string
	for _, reason := range []string{"LoadBalancerCreated", "LoadBalancerUpdated"} {
		evs, err := events(c, namespace, name, reason)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if msg, ok := strings.CutPrefix(e.Message, "applied: "); ok {
				out = append(out, stepLabels(msg)...)
			}
		}
	}
	return out
}

// servingLB is the load balancer of the Service uid: its group's (by the group and cluster
// labels) when group is set, else its own (by the UID label).
func servingLB(lbs []schema.LoadBalancer, uid, group string) (schema.LoadBalancer, bool) {
	for _, lb := range lbs {
		if group == "" && lb.Labels[labelServiceUID] == uid || group != "" && lb.Labels[labelGroup] == group && lb.Labels[labelCluster] == clusterName {
			return lb, true
		}
	}
	return schema.LoadBalancer{}, false
}

// savedGroupLB is the listen ports of group's load balancer in plan's --save-state.
func savedGroupLB(saved ciplan.State, group string) ([]int, bool) {
	for _, lb := range saved.LoadBalancers {
		if lb.Labels[labelGroup] == group && lb.Labels[labelCluster] == clusterName {
			var out []int
			for _, s := range lb.Services {
				out = append(out, s.ListenPort)
			}
			return out, true
		}
	}
	return nil, false
}

func lbListenPorts(lb schema.LoadBalancer) []int {
	var out []int
	for _, s := range lb.Services {
		out = append(out, s.ListenPort)
	}
	return out
}

func intStrings(ns []int) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(n)
	}
	return out
}

// sameSet reports whether a and b hold the same strings (a message names a step once per
// deny message it got).
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
