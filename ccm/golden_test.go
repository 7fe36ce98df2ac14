package ccm_test

// The golden replay: every case recorded from the official CCM (test/golden/official-ccm, a
// copy of the fixtures in the shared spec; GOLDEN_FIXTURES points at another copy) is replayed
// through this CCM's cloudprovider.LoadBalancer, built by ccm.New from the case's environment
// exactly as the binary builds it, against a fresh emulator seeded like the recording. After
// every step the load balancer, the Service status and the Warning event reasons must equal the
// recording's (or ours, for the steps in golden.Deliberate). The requests may differ (we send
// fewer); the outcome may not.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/golden"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// repoRoot is the repository root seen from this package.
const repoRoot = ".."

// goldenAllowedExtraReasons are Warning reasons we add where the official CCM has none, with
// the reason they are not a behaviour difference: the outcome is the same, the event says more.
var goldenAllowedExtraReasons = map[string]string{
	// The official reports a bad annotation only through the service controller's
	// SyncLoadBalancerFailed; we also name the annotation and the fix in an event of our own.
	"InvalidAnnotation": "names the annotation next to SyncLoadBalancerFailed",
}

// goldenNodes are the nodes of the recording: servers 101-103, node-4 (104) only in node steps.
var goldenNodes = []struct {
	name, pool string
	server     int64
}{{"node-1", "web", 101}, {"node-2", "web", 102}, {"node-3", "batch", 103}, {"node-4", "web", 104}}

// TestGoldenDeliberateDifferencesHaveFiles keeps the deliberate differences honest: each one
// names a recorded step and has our expected outcome beside it.
func TestGoldenDeliberateDifferencesHaveFiles(t *testing.T) {
	for key := range golden.Deliberate {
		c, step, _ := strings.Cut(key, "/")
		for _, f := range []string{".lb.json", ".status.json", ".events.txt"} {
			if !fileExists(filepath.Join(golden.Root(repoRoot), c, step+f)) {
				t.Errorf("%s: no recorded %s%s", key, step, f)
			}
			if !fileExists(filepath.Join(golden.OursDir(repoRoot), c, step+f)) {
				t.Errorf("%s: no expected %s%s under test/golden/ours", key, step, f)
			}
		}
	}
}

func TestGoldenOfficialCCM(t *testing.T) {
	root := golden.Root(repoRoot)
	cases := golden.Cases(t, root)
	if len(cases) < 40 {
		t.Fatalf("found %d golden cases in %s, want the recorded set (46)", len(cases), root)
	}
	for _, c := range cases {
		t.Run(c.ID, func(t *testing.T) { replayGolden(t, root, c) })
	}
}

// goldenRun is one case's replay state.
type goldenRun struct {
	t        *testing.T
	c        golden.Case
	api      golden.API
	lbs      cloudprovider.LoadBalancer
	recorder *record.FakeRecorder
	uid      types.UID
	svc      *corev1.Service
	status   *corev1.LoadBalancerStatus // nil: the Service is gone
}

func replayGolden(t *testing.T, root string, c golden.Case) {
	seed, err := hcloudemu.LoadSeedFile(filepath.Join(root, "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithSeed(seed))
	if err := emu.SeedError(); err != nil {
		t.Fatal(err)
	}
	r := &goldenRun{t: t, c: c, api: golden.API{T: t, Endpoint: endpoint, Token: emu.Token()},
		recorder: record.NewFakeRecorder(10000), status: &corev1.LoadBalancerStatus{},
		uid: types.UID(fmt.Sprintf("6f1c0de0-0000-4000-8000-%012d", len(c.ID)*1000+int(c.ID[0])))}
	r.recorder.IncludeObject = true
	r.api.UploadCertificate(testutil.SelfSignedPEM(t, "golden.example.com"))
	r.lbs = r.provider()
	for _, st := range c.Steps {
		if !r.step(st) {
			return
		}
	}
}

// provider builds the CCM from the case's environment as the binary does.
func (r *goldenRun) provider() cloudprovider.LoadBalancer {
	vars := map[string]string{}
	b, err := os.ReadFile(filepath.Join(r.c.Dir, "env.txt"))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	vars["HCLOUD_ENDPOINT"], vars["HCLOUD_TOKEN"] = r.api.Endpoint, r.api.Token
	kube := fake.NewClientset()
	cloud, err := ccm.New(context.Background(), ccm.Deps{
		Options: ccm.NewOptions(), Env: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Kube: kube, Informers: informers.NewSharedInformerFactory(kube, 0), Recorder: r.recorder,
		ClusterName: "kubernetes",
	})
	if err != nil {
		r.t.Fatalf("ccm.New: %v", err)
	}
	lbs, ok := cloud.LoadBalancer()
	if !ok {
		r.t.Fatal("no load balancer support")
	}
	return lbs
}

// step runs one recorded step as the service controller would and compares the outcome; false
// stops the case.
func (r *goldenRun) step(st golden.Step) bool {
	t := r.t
	if svc := r.c.ServiceOf(t, st, r.uid); svc != nil {
		r.svc = svc
	}
	testutil.Events(r.recorder)
	ctx := context.Background()
	var errs []error
	switch st.Kind {
	case "create", "update", "drift":
		for _, call := range st.ManualCalls {
			r.manual(call)
		}
		status, err := r.lbs.EnsureLoadBalancer(ctx, "kubernetes", r.svc, r.nodes(3))
		if err == nil {
			r.status = status
		}
		errs = append(errs, err)
	case "add-node":
		// The recording registered node-4 without a provider ID (as a kubelet does), then the
		// node controller set it: the service controller saw both.
		pending := r.nodes(4)
		pending[3].Spec.ProviderID = ""
		errs = append(errs, r.lbs.UpdateLoadBalancer(ctx, "kubernetes", r.svc, pending))
		errs = append(errs, r.lbs.UpdateLoadBalancer(ctx, "kubernetes", r.svc, r.nodes(4)))
	case "remove-node":
		errs = append(errs, r.lbs.UpdateLoadBalancer(ctx, "kubernetes", r.svc, r.nodes(3)))
	case "delete":
		err := r.lbs.EnsureLoadBalancerDeleted(ctx, "kubernetes", r.svc)
		if err == nil {
			r.status = nil
		}
		errs = append(errs, err)
	default:
		t.Fatalf("%s: unknown step kind %q", st.Name(), st.Kind)
	}
	failed := false
	for _, err := range errs {
		if err != nil {
			failed = true
			t.Logf("%s (%s): error: %v", st.Name(), st.Description, err)
		}
	}
	events := testutil.Events(r.recorder)
	ok := r.compareLB(st) && r.compareStatus(st)
	return r.compareEvents(st, events, failed) && ok
}

func (r *goldenRun) nodes(n int) []*corev1.Node {
	var out []*corev1.Node
	for _, g := range goldenNodes[:n] {
		out = append(out, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: g.name, Labels: map[string]string{"pool": g.pool}},
			Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", g.server)},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	return out
}

// manual replays a drift step's change made behind the CCM's back.
func (r *goldenRun) manual(c golden.ManualCall) {
	lb := r.onlyLB()
	if lb == nil {
		r.t.Fatalf("manual call %s %s: no load balancer", c.Method, c.Path)
	}
	path := strings.ReplaceAll(c.Path, "{lb}", strconv.FormatInt(int64(lb["id"].(float64)), 10))
	if status, body := r.api.Do(c.Method, path, c.Body); status != c.Status {
		r.t.Fatalf("manual call %s %s = %d %s, recorded %d", c.Method, path, status, body, c.Status)
	}
}

// onlyLB returns the only load balancer of the emulator, nil when there is none; more than one
// is a duplicate and fails the test.
func (r *goldenRun) onlyLB() map[string]any {
	lbs := r.api.LoadBalancers("")
	if len(lbs) > 1 {
		r.t.Fatalf("%d load balancers exist, want at most one", len(lbs))
	}
	if len(lbs) == 0 {
		return nil
	}
	return lbs[0]
}

func (r *goldenRun) expected(st golden.Step, file string) any {
	lb := r.onlyLB()
	v, ok := golden.ReadExpected(r.t, r.c.ExpectedPath(repoRoot, st, file), r.api.Placeholders(r.uid, lb))
	if !ok {
		r.t.Fatalf("%s: no expected %s", st.Name(), file)
	}
	return v
}

func (r *goldenRun) compareLB(st golden.Step) bool {
	want, got := r.expected(st, "lb.json"), r.api.NormaliseLB(r.onlyLB())
	if golden.Equal(r.t, want, got) {
		return true
	}
	r.t.Errorf("%s (%s): load balancer differs from the official CCM's:\n%s", st.Name(), st.Description, golden.Diff(want, got))
	return false
}

func (r *goldenRun) compareStatus(st golden.Step) bool {
	want := r.expected(st, "status.json")
	var got any
	if r.status != nil {
		got = r.status
	}
	if golden.Equal(r.t, want, got) {
		return true
	}
	r.t.Errorf("%s (%s): Service status differs from the official CCM's:\n%s", st.Name(), st.Description, golden.Diff(want, got))
	return false
}

// compareEvents compares the sets of Warning reasons, on the Service and on nodes. failed adds
// the service controller's own SyncLoadBalancerFailed/UpdateLoadBalancerFailed.
func (r *goldenRun) compareEvents(st golden.Step, events []string, failed bool) bool {
	want := reasons(r.t, r.c.ExpectedPath(repoRoot, st, "events.txt"), "")
	if p := filepath.Join(r.c.Dir, st.Name()+".node-events.txt"); fileExists(p) {
		maps.Copy(want, reasons(r.t, p, "Node/"))
	}
	got := map[string]bool{}
	for _, e := range events {
		fields := strings.Fields(e)
		if len(fields) < 2 || fields[0] != corev1.EventTypeWarning {
			continue
		}
		reason := fields[1]
		if strings.Contains(e, "involvedObject{kind=Node") {
			reason = "Node/" + reason
		}
		got[reason] = true
	}
	if failed {
		switch st.Kind {
		case "add-node", "remove-node":
			got["UpdateLoadBalancerFailed"] = true
		default:
			got["SyncLoadBalancerFailed"] = true
		}
	}
	for reason := range got {
		if _, extra := goldenAllowedExtraReasons[reason]; extra && !want[reason] && failed {
			delete(got, reason)
		}
	}
	if maps.Equal(want, got) {
		return true
	}
	r.t.Errorf("%s (%s): Warning event reasons = %v, official CCM: %v\nevents:\n%s", st.Name(), st.Description,
		slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)), strings.Join(events, "\n"))
	return false
}

// reasons reads an events file ("Reason (xN): message" per line; node files start with
// "Node/name Reason").
func reasons(t *testing.T, path, prefix string) map[string]bool {
	out := map[string]bool{}
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return out
		}
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if prefix != "" && len(fields) > 1 && strings.HasPrefix(fields[0], prefix) {
			out[prefix+fields[1]] = true
			continue
		}
		out[fields[0]] = true
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
