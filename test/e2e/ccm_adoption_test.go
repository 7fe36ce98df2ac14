//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/golden"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// goldenNodePorts are the node ports of the recorded Services. Node ports are unique in a
// cluster, so case k gets its own (adoptionPort); the recorded bodies and outcomes are rewritten
// the same way.
var goldenNodePorts = regexp.MustCompile(`\b(30080|30443|30880|30053|30900)\b`)

func adoptionPort(k int, recorded string) string {
	idx := strings.Index("30080 30443 30880 30053 30900", recorded) / 6
	return strconv.Itoa(30100 + 10*k + idx)
}

// adoptionCase is one recorded case in the adoption test.
type adoptionCase struct {
	golden.Case
	k   int
	uid types.UID
}

func (a adoptionCase) remap(s string) string {
	return goldenNodePorts.ReplaceAllStringFunc(s, func(p string) string { return adoptionPort(a.k, p) })
}

// service is the case's Service of step st (nil if the step does not change it) with its node
// ports remapped, in namespace default.
func (a adoptionCase) service(t *testing.T, st golden.Step) *corev1.Service {
	svc := a.ServiceOf(t, st, "")
	if svc == nil {
		return nil
	}
	for i := range svc.Spec.Ports {
		n, _ := strconv.Atoi(adoptionPort(a.k, strconv.Itoa(int(svc.Spec.Ports[i].NodePort))))
		svc.Spec.Ports[i].NodePort = int32(n)
	}
	return svc
}

// TestCCMAdoptsOfficialLoadBalancers is the swap from the official CCM: the load balancers of
// the recorded cases are made exactly as the official CCM made them (its recorded requests of
// the first step, replayed against the emulator), then this CCM starts with the official
// environment and no policy. It must adopt every one with zero mutating requests and give each
// Service the official status; then each recorded Service change must converge to the official
// CCM's load balancer; deleting the Services leaves no load balancer.
//
// Cases of the "net" environment profile are run (one CCM, one environment); cases whose first
// step failed at the official CCM have nothing to adopt.
func TestCCMAdoptsOfficialLoadBalancers(t *testing.T) {
	t.Parallel()
	root := golden.Root(filepath.Join("..", ".."))
	seed, err := hcloudemu.LoadSeedFile(filepath.Join(root, "seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithSeed(seed))
	api := golden.API{T: t, Endpoint: endpoint, Token: emu.Token()}
	api.UploadCertificate(testutil.SelfSignedPEM(t, "golden.example.com"))
	// The nodes as the official CCM left them: initialised, with their provider IDs.
	for i, n := range []struct{ name, pool string }{{"node-1", "web"}, {"node-2", "web"}, {"node-3", "batch"}} {
		node := c.CreateNode(t, n.name, "", harness.WithLabels(map[string]string{"pool": n.pool}), harness.WithoutUninitializedTaint())
		node.Spec.ProviderID = fmt.Sprintf("hcloud://%d", 101+i)
		if _, err := c.Client().CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("set the provider ID of %s: %v", n.name, err)
		}
	}

	var cases []adoptionCase
	for _, gc := range golden.Cases(t, root) {
		first := gc.Steps[0]
		if gc.EnvProfile != "net" || strings.Contains(readFile(t, filepath.Join(gc.Dir, first.Name()+".events.txt")), "SyncLoadBalancerFailed") {
			continue
		}
		a := adoptionCase{Case: gc, k: len(cases)}
		svc := createService(t, c, a.service(t, first))
		a.uid = svc.UID
		replayOfficial(t, api, a, first)
		cases = append(cases, a)
	}
	if len(cases) < 25 {
		t.Fatalf("%d cases to adopt, want the recorded net cases", len(cases))
	}

	emu.ResetRequests()
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{
		args: []string{"--policy-configmap="},
		env:  []string{"HCLOUD_NETWORK=k8s", "HCLOUD_LOAD_BALANCERS_LOCATION=fsn1", "HCLOUD_NETWORK_ROUTES_ENABLED=false"},
	})
	for _, a := range cases {
		waitEvent(t, c, ccm, "default", a.Service, corev1.EventTypeNormal, "EnsuredLoadBalancer", "")
		want := expected(t, api, a, a.ExpectedPath(filepath.Join("..", ".."), a.Steps[0], "status.json"), lbOf(t, api, a.uid))
		if got := getService(t, c, "default", a.Service).Status.LoadBalancer; !golden.Equal(t, want, got) {
			t.Errorf("%s: status after adoption differs from the official CCM's:\n%s", a.ID, golden.Diff(want, got))
		}
	}
	if n := emu.MutatingRequests(); n != 0 {
		t.Fatalf("adopting %d official load balancers made %d mutating requests, want 0: %v", len(cases), n, emu.Counts())
	}
	t.Logf("adopted %d load balancers with 0 mutating requests (%v)", len(cases), emu.Counts())

	for _, a := range cases {
		for _, st := range a.Steps[1:] {
			if st.Kind != "update" && st.Kind != "drift" {
				continue
			}
			t.Run(a.ID+"/"+st.Name(), func(t *testing.T) { convergeStep(t, c, ccm, api, a, st) })
		}
	}

	for _, a := range cases {
		if err := c.Client().CoreV1().Services("default").Delete(t.Context(), a.Service, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCCM(t, ccm, 2*time.Minute, func() (bool, error) {
		if lbs := api.LoadBalancers(""); len(lbs) != 0 {
			return false, fmt.Errorf("%d load balancers left after deleting every Service", len(lbs))
		}
		return true, nil
	})
}

// replayOfficial sends the official CCM's recorded mutating requests of step st for case a,
// with its placeholders and node ports, and checks the result is the recorded load balancer.
func replayOfficial(t *testing.T, api golden.API, a adoptionCase, st golden.Step) {
	t.Helper()
	var lb map[string]any
	for _, r := range a.Requests(t, st) {
		if r.Method == http.MethodGet {
			continue
		}
		rep := api.Placeholders(a.uid, lb)
		path, body := rep.Replace(r.Path), []byte(a.remap(rep.Replace(string(r.Body))))
		if status, b := api.Do(r.Method, path, body); status != r.Status {
			t.Fatalf("%s: replaying %s %s = %d %s, the official CCM got %d", a.ID, r.Method, path, status, b, r.Status)
		}
		lb = lbOf(t, api, a.uid)
	}
	want := expected(t, api, a, filepath.Join(a.Dir, st.Name()+".lb.json"), lb)
	if got := api.NormaliseLB(lb); !golden.Equal(t, want, got) {
		t.Fatalf("%s: the replayed official requests did not rebuild the recorded load balancer:\n%s", a.ID, golden.Diff(want, got))
	}
}

// convergeStep applies a recorded Service change (and a drift step's changes behind the CCM's
// back) and waits until the load balancer is the official CCM's after that step.
func convergeStep(t *testing.T, c *harness.Cluster, ccm *harness.Process, api golden.API, a adoptionCase, st golden.Step) {
	for _, call := range st.ManualCalls {
		lb := lbOf(t, api, a.uid)
		path := strings.ReplaceAll(call.Path, "{lb}", strconv.FormatInt(int64(lb["id"].(float64)), 10))
		if status, b := api.Do(call.Method, path, []byte(a.remap(string(call.Body)))); status != call.Status {
			t.Fatalf("drift %s %s = %d %s, recorded %d", call.Method, path, status, b, call.Status)
		}
	}
	if next := a.service(t, st); next != nil {
		updateService(t, c, "default", a.Service, func(s *corev1.Service) {
			s.Annotations = next.Annotations
			s.Spec.Ports = next.Spec.Ports
		})
	}
	path := a.ExpectedPath(filepath.Join("..", ".."), st, "lb.json")
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		lb := lbOf(t, api, a.uid)
		want := expected(t, api, a, path, lb)
		if got := api.NormaliseLB(lb); !golden.Equal(t, want, got) {
			return false, fmt.Errorf("%s %s: load balancer not yet the official CCM's:\n%s", a.ID, st.Name(), golden.Diff(want, got))
		}
		return true, nil
	})
}

// readFile returns a file's content, "" when it does not exist.
func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// expected reads a recorded outcome of case a for the load balancer lb as it is now: placeholders,
// node ports and the private IP rewritten (the recording had one load balancer per emulator, so
// its private IP was always the first free one; here many share the network).
func expected(t *testing.T, api golden.API, a adoptionCase, path string, lb map[string]any) any {
	v, _ := golden.ReadExpected(t, path, api.Placeholders(a.uid, lb))
	v = remapJSON(t, a, v)
	want, _ := v.(map[string]any)
	if want == nil || lb == nil {
		return v
	}
	recorded, _ := golden.ReadExpected(t, filepath.Join(a.Dir, a.Steps[0].Name()+".lb.json"), api.Placeholders(a.uid, lb))
	from, to := privateIP(recorded), privateIP(lb)
	if from == "" || to == "" || from == to {
		return v
	}
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal([]byte(strings.ReplaceAll(string(b), `"`+from+`"`, `"`+to+`"`)), &out)
	return out
}

// privateIP is the only private IP of a load balancer (recorded or API form), "" if not one.
func privateIP(v any) string {
	lb, _ := v.(map[string]any)
	nets, _ := lb["private_net"].([]any)
	if len(nets) != 1 {
		return ""
	}
	ip, _ := nets[0].(map[string]any)["ip"].(string)
	return ip
}

// lbOf is the load balancer labelled for uid, nil if none.
func lbOf(t *testing.T, api golden.API, uid types.UID) map[string]any {
	lbs := api.LoadBalancers("hcloud-ccm/service-uid=" + string(uid))
	if len(lbs) > 1 {
		t.Fatalf("%d load balancers for %s", len(lbs), uid)
	}
	if len(lbs) == 0 {
		return nil
	}
	return lbs[0]
}

// remapJSON rewrites the node ports of an expected outcome for case a.
func remapJSON(t *testing.T, a adoptionCase, v any) any {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal([]byte(a.remap(string(b))), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
