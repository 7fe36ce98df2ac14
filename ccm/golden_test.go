package ccm_test

// The golden replay: every case recorded from the official CCM (test/golden/official-ccm, a
// copy of the fixtures in the shared spec; GOLDEN_FIXTURES points at another copy) is replayed
// through this CCM's cloudprovider.LoadBalancer, built by ccm.New from the case's environment
// exactly as the binary builds it, against a fresh emulator seeded like the recording. After
// every step the load balancer, the Service status and the Warning event reasons must equal the
// recording's. The requests may differ (we send fewer); the outcome may not.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
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
	"sigs.k8s.io/yaml"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
)

// goldenAllowedExtraReasons are Warning reasons we add where the official CCM has none, with
// the reason they are not a behaviour difference: the outcome is the same, the event says more.
var goldenAllowedExtraReasons = map[string]string{
	// The official reports a bad annotation only through the service controller's
	// SyncLoadBalancerFailed; we also name the annotation and the fix in an event of our own.
	"InvalidAnnotation": "names the annotation next to SyncLoadBalancerFailed",
}

// goldenDeliberate are the steps where this CCM deliberately ends elsewhere than the official
// one, each with the reason. For them the expected load balancer, status and events are read
// from test/golden/ours/<case>/ instead of the recording; every other step must equal the
// official CCM's outcome. docs/reference/differences.md lists the same table.
var goldenDeliberate = map[string]string{
	// The official CCM creates the load balancer, attaches it, then fails on the bad annotation
	// and leaves a half-configured, billed load balancer without listeners or targets. We check
	// every annotation before the first write: same error, nothing created.
	"36-empty-protocol/step1": "bad annotation: nothing is created instead of a half-configured load balancer",
	"41-invalid-bool/step1":   "bad annotation: nothing is created instead of a load balancer without targets",
	// The official CCM creates with public_interface false and attaches the network afterwards,
	// which the API refuses (load_balancer_not_attached_to_network): the Service never gets a
	// load balancer. We create it inside the network, so the private load balancer works.
	"15-disable-public-network-at-create/step1": "disable-public-network at create works: created inside the network",
}

type goldenCase struct {
	ID         string       `json:"id"`
	EnvProfile string       `json:"env_profile"`
	Service    string       `json:"service"`
	Steps      []goldenStep `json:"steps"`
}

type goldenStep struct {
	Step        int          `json:"step"`
	Kind        string       `json:"kind"`
	Description string       `json:"description"`
	ManualCalls []manualCall `json:"manual_calls"`
}

type manualCall struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
}

// goldenNodes are the nodes of the recording: servers 101-103, node-4 (104) only in node steps.
var goldenNodes = []struct {
	name, pool string
	server     int64
}{{"node-1", "web", 101}, {"node-2", "web", 102}, {"node-3", "batch", 103}, {"node-4", "web", 104}}

func goldenDir(t *testing.T) string {
	if d := os.Getenv("GOLDEN_FIXTURES"); d != "" {
		return d
	}
	return filepath.Join("..", "test", "golden", "official-ccm")
}

// TestGoldenDeliberateDifferencesHaveFiles keeps the deliberate differences honest: each one
// names a recorded step and has our expected outcome beside it.
func TestGoldenDeliberateDifferencesHaveFiles(t *testing.T) {
	for key := range goldenDeliberate {
		c, step, _ := strings.Cut(key, "/")
		for _, f := range []string{".lb.json", ".status.json", ".events.txt"} {
			if !fileExists(filepath.Join("..", "test", "golden", "official-ccm", c, step+f)) {
				t.Errorf("%s: no recorded %s%s", key, step, f)
			}
			if !fileExists(filepath.Join("..", "test", "golden", "ours", c, step+f)) {
				t.Errorf("%s: no expected %s%s under test/golden/ours", key, step, f)
			}
		}
	}
}

func TestGoldenOfficialCCM(t *testing.T) {
	dir := goldenDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read golden fixtures: %v", err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) { replayGolden(t, dir, filepath.Join(dir, e.Name())) })
	}
	if n < 40 {
		t.Fatalf("found %d golden cases in %s, want the recorded set (46)", n, dir)
	}
}

// goldenRun is one case's replay state.
type goldenRun struct {
	t        *testing.T
	dir      string
	emu      *hcloudemu.Emulator
	endpoint string
	lbs      cloudprovider.LoadBalancer
	recorder *record.FakeRecorder
	uid      types.UID
	svc      *corev1.Service
	status   *corev1.LoadBalancerStatus // nil: the Service is gone
}

func replayGolden(t *testing.T, root, dir string) {
	var c goldenCase
	readJSON(t, filepath.Join(dir, "case.json"), &c)
	seed, err := hcloudemu.LoadSeedFile(filepath.Join(root, "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithSeed(seed))
	if err := emu.SeedError(); err != nil {
		t.Fatal(err)
	}
	r := &goldenRun{t: t, dir: dir, emu: emu, endpoint: endpoint, recorder: record.NewFakeRecorder(10000),
		uid: types.UID(fmt.Sprintf("6f1c0de0-0000-4000-8000-%012d", len(c.ID)*1000+int(c.ID[0]))), status: &corev1.LoadBalancerStatus{}}
	r.recorder.IncludeObject = true
	r.uploadCertificate("golden-cert")
	r.lbs = r.provider(emu.Token())
	for _, st := range c.Steps {
		if !r.step(st) {
			return
		}
	}
}

// provider builds the CCM from the case's environment as the binary does.
func (r *goldenRun) provider(token string) cloudprovider.LoadBalancer {
	vars := map[string]string{}
	b, err := os.ReadFile(filepath.Join(r.dir, "env.txt"))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	vars["HCLOUD_ENDPOINT"] = r.endpoint
	vars["HCLOUD_TOKEN"] = token
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

// step runs one recorded step and compares the outcome; false stops the case.
func (r *goldenRun) step(st goldenStep) bool {
	t := r.t
	name := fmt.Sprintf("step%d", st.Step)
	if p := filepath.Join(r.dir, name+".service.yaml"); fileExists(p) || st.Step == 1 {
		if st.Step == 1 {
			p = filepath.Join(r.dir, "service.yaml")
		}
		r.svc = r.readService(p)
	}
	drain(r.recorder)
	ctx := context.Background()
	var errs []error
	nodes := r.nodes(3)
	switch st.Kind {
	case "create", "update", "drift":
		for _, call := range st.ManualCalls {
			r.manual(call)
		}
		status, err := r.lbs.EnsureLoadBalancer(ctx, "kubernetes", r.svc, nodes)
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
		errs = append(errs, r.lbs.UpdateLoadBalancer(ctx, "kubernetes", r.svc, nodes))
	case "delete":
		err := r.lbs.EnsureLoadBalancerDeleted(ctx, "kubernetes", r.svc)
		if err == nil {
			r.status = nil
		}
		errs = append(errs, err)
	default:
		t.Fatalf("%s: unknown step kind %q", name, st.Kind)
	}
	failed := false
	for _, err := range errs {
		if err != nil {
			failed = true
			t.Logf("%s (%s): error: %v", name, st.Description, err)
		}
	}
	events := drain(r.recorder)
	ok := r.compareLB(name, st) && r.compareStatus(name, st)
	ok = r.compareEvents(name, st, events, failed) && ok
	return ok
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

func (r *goldenRun) readService(path string) *corev1.Service {
	b, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatal(err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(b, &svc); err != nil {
		r.t.Fatalf("%s: %v", path, err)
	}
	svc.UID = r.uid
	return &svc
}

// defaultName is cloudprovider.DefaultLoadBalancerName of the case's Service.
func (r *goldenRun) defaultName() string {
	return cloudprovider.DefaultLoadBalancerName(&corev1.Service{ObjectMeta: metav1.ObjectMeta{UID: r.uid}})
}

// api sends a request to the emulator and returns status and body.
func (r *goldenRun) api(method, path string, body []byte) (int, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(r.endpoint, "/v1")+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.emu.Token())
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	return res.StatusCode, b
}

// manual replays a drift step's change made behind the CCM's back.
func (r *goldenRun) manual(c manualCall) {
	lb := r.lbJSON()
	if lb == nil {
		r.t.Fatalf("manual call %s %s: no load balancer", c.Method, c.Path)
	}
	path := strings.ReplaceAll(c.Path, "{lb}", strconv.FormatInt(int64(lb["id"].(float64)), 10))
	status, body := r.api(c.Method, path, c.Body)
	if status != c.Status {
		r.t.Fatalf("manual call %s %s = %d %s, recorded %d", c.Method, path, status, body, c.Status)
	}
}

func (r *goldenRun) uploadCertificate(name string) {
	cert, key := testutil.SelfSignedPEM(r.t, "golden.example.com")
	body, _ := json.Marshal(map[string]string{"name": name, "type": "uploaded", "certificate": cert, "private_key": key})
	if status, b := r.api(http.MethodPost, "/v1/certificates", body); status != http.StatusCreated {
		r.t.Fatalf("upload certificate: %d %s", status, b)
	}
}

// lbJSON returns the only load balancer of the emulator as JSON, nil when there is none; more
// than one is a duplicate and fails the test.
func (r *goldenRun) lbJSON() map[string]any {
	status, b := r.api(http.MethodGet, "/v1/load_balancers", nil)
	if status != http.StatusOK {
		r.t.Fatalf("list load balancers: %d %s", status, b)
	}
	var res struct {
		LoadBalancers []map[string]any `json:"load_balancers"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		r.t.Fatal(err)
	}
	switch len(res.LoadBalancers) {
	case 0:
		return nil
	case 1:
		return res.LoadBalancers[0]
	}
	r.t.Fatalf("%d load balancers exist, want at most one", len(res.LoadBalancers))
	return nil
}

// normaliseLB reduces the API's load balancer as the recording did (see the fixtures' README).
func (r *goldenRun) normaliseLB(lb map[string]any) map[string]any {
	if lb == nil {
		return nil
	}
	serverNames := map[float64]string{101: "node-1", 102: "node-2", 103: "node-3", 104: "node-4"}
	pub := lb["public_net"].(map[string]any)
	v4, v6 := pub["ipv4"].(map[string]any), pub["ipv6"].(map[string]any)
	out := map[string]any{
		"name":               lb["name"],
		"load_balancer_type": lb["load_balancer_type"].(map[string]any)["name"],
		"location":           lb["location"].(map[string]any)["name"],
		"network_zone":       lb["location"].(map[string]any)["network_zone"],
		"algorithm":          lb["algorithm"].(map[string]any)["type"],
		"public_net":         map[string]any{"enabled": pub["enabled"], "ipv4_dns_ptr": v4["dns_ptr"], "ipv6_dns_ptr": v6["dns_ptr"]},
		"labels":             lb["labels"],
		"protection":         lb["protection"],
	}
	var private []any
	for _, pn := range asList(lb["private_net"]) {
		pn := pn.(map[string]any)
		private = append(private, map[string]any{"ip": pn["ip"], "network": r.networkName(pn["network"].(float64))})
	}
	out["private_net"] = private
	services := asList(lb["services"])
	sort.Slice(services, func(i, j int) bool {
		return services[i].(map[string]any)["listen_port"].(float64) < services[j].(map[string]any)["listen_port"].(float64)
	})
	out["services"] = services
	var targets []any
	for _, tg := range asList(lb["targets"]) {
		tg := tg.(map[string]any)
		n := map[string]any{"type": tg["type"], "use_private_ip": tg["use_private_ip"]}
		if s, ok := tg["server"].(map[string]any); ok {
			n["server"] = serverNames[s["id"].(float64)]
		}
		targets = append(targets, n)
	}
	sort.Slice(targets, func(i, j int) bool {
		return fmt.Sprint(targets[i].(map[string]any)["server"]) < fmt.Sprint(targets[j].(map[string]any)["server"])
	})
	out["targets"] = targets
	return normaliseJSON(r.t, out)
}

func (r *goldenRun) networkName(id float64) string {
	status, b := r.api(http.MethodGet, fmt.Sprintf("/v1/networks/%d", int64(id)), nil)
	if status != http.StatusOK {
		return fmt.Sprintf("network %d (%d)", int64(id), status)
	}
	var res struct {
		Network struct{ Name string } `json:"network"`
	}
	_ = json.Unmarshal(b, &res)
	return res.Network.Name
}

// placeholders are the recording's placeholders with this run's values.
func (r *goldenRun) placeholders(lb map[string]any) *strings.Replacer {
	pairs := []string{"$SERVICE_UID", string(r.uid), "$DEFAULT_LB_NAME", r.defaultName()}
	if lb != nil {
		pub := lb["public_net"].(map[string]any)
		if ip, _ := pub["ipv4"].(map[string]any)["ip"].(string); ip != "" {
			pairs = append(pairs, "$LB_PUBLIC_IPV4", ip)
		}
		if ip, _ := pub["ipv6"].(map[string]any)["ip"].(string); ip != "" {
			pairs = append(pairs, "$LB_PUBLIC_IPV6", ip)
		}
	}
	if id := r.certificateID("golden-cert"); id != "" {
		pairs = append(pairs, `"$CERT_ID:golden-cert"`, id)
	}
	return strings.NewReplacer(pairs...)
}

func (r *goldenRun) certificateID(name string) string {
	status, b := r.api(http.MethodGet, "/v1/certificates?name="+name, nil)
	if status != http.StatusOK {
		return ""
	}
	var res struct {
		Certificates []struct{ ID int64 } `json:"certificates"`
	}
	if json.Unmarshal(b, &res) != nil || len(res.Certificates) == 0 {
		return ""
	}
	return strconv.FormatInt(res.Certificates[0].ID, 10)
}

// expectedPath is the file with the expected outcome of a step: ours for a deliberate
// difference (goldenDeliberate), else the official CCM's recording.
func (r *goldenRun) expectedPath(name string) string {
	c := filepath.Base(r.dir)
	step, _, _ := strings.Cut(name, ".")
	if _, ok := goldenDeliberate[c+"/"+step]; ok {
		return filepath.Join("..", "test", "golden", "ours", c, name)
	}
	return filepath.Join(r.dir, name)
}

// readGolden reads an expected outcome file with the placeholders replaced, as generic JSON.
func (r *goldenRun) readGolden(name string, rep *strings.Replacer) (any, bool) {
	b, err := os.ReadFile(r.expectedPath(name))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, false
		}
		r.t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(rep.Replace(string(b))), &v); err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	return v, true
}

func (r *goldenRun) compareLB(name string, st goldenStep) bool {
	raw := r.lbJSON()
	want, ok := r.readGolden(name+".lb.json", r.placeholders(raw))
	if !ok {
		r.t.Fatalf("%s: no %s.lb.json", name, name)
	}
	got := r.normaliseLB(raw)
	if want == nil && got == nil {
		return true
	}
	if reflect.DeepEqual(normaliseJSON(r.t, want), got) {
		return true
	}
	r.t.Errorf("%s (%s): load balancer differs from the official CCM's:\n%s", name, st.Description, diffJSON(r.t, want, got))
	return false
}

func (r *goldenRun) compareStatus(name string, st goldenStep) bool {
	want, ok := r.readGolden(name+".status.json", r.placeholders(r.lbJSON()))
	if !ok {
		r.t.Fatalf("%s: no %s.status.json", name, name)
	}
	if want == nil && r.status == nil {
		return true
	}
	var got any
	if r.status != nil {
		got = normaliseJSON(r.t, r.status)
	}
	if want != nil {
		want = normaliseJSON(r.t, want)
	}
	if reflect.DeepEqual(want, got) {
		return true
	}
	r.t.Errorf("%s (%s): Service status differs from the official CCM's:\n%s", name, st.Description, diffJSON(r.t, want, got))
	return false
}

// compareEvents compares the sets of Warning reasons, on the Service and on nodes. failed adds
// the service controller's own SyncLoadBalancerFailed/UpdateLoadBalancerFailed.
func (r *goldenRun) compareEvents(name string, st goldenStep, events []string, failed bool) bool {
	want := reasons(r.t, r.expectedPath(name+".events.txt"), "")
	if p := filepath.Join(r.dir, name+".node-events.txt"); fileExists(p) {
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
	r.t.Errorf("%s (%s): Warning event reasons = %v, official CCM: %v\nevents:\n%s", name, st.Description,
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

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// normaliseJSON round-trips v through JSON so that both sides compare as generic values;
// empty lists and null compare equal.
func normaliseJSON(t *testing.T, v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return dropEmpty(out).(map[string]any)
}

func dropEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			x = dropEmpty(x)
			if l, ok := x.([]any); x == nil || (ok && len(l) == 0) {
				delete(v, k)
				continue
			}
			v[k] = x
		}
		return v
	case []any:
		for i := range v {
			v[i] = dropEmpty(v[i])
		}
		return v
	}
	return v
}

func diffJSON(t *testing.T, want, got any) string {
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	wl, gl := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "official:\n%s\nours:\n%s", w, g)
	if len(wl) == len(gl) {
		b.Reset()
		for i := range wl {
			if wl[i] != gl[i] {
				fmt.Fprintf(&b, "line %d: official %s | ours %s\n", i+1, strings.TrimSpace(wl[i]), strings.TrimSpace(gl[i]))
			}
		}
	}
	return b.String()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readJSON(t *testing.T, path string, v any) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
