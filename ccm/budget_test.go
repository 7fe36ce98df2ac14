package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/requeue"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// The API budget tests run the provider through cloudprovider.Interface against the emulator
// and count the requests it makes, as the upstream controllers would call it.

// newBudgetCloud seeds n servers and returns a provider and the emulator.
// shippedPolicies is a copy of the example policies as they ship (quotas.rego included, which
// reads input.inventory), without their tests.
func shippedPolicies(tb testing.TB) string {
	tb.Helper()
	return copyPolicies(tb, func(string) bool { return true })
}

// budgetPolicies is a copy of the example policies without quotas.rego, for the request counts
// below: a policy that reads input.inventory makes the CCM read the inventory once at start
// (loadbalancer.PrimeInventory: ⌈n/50⌉ + ⌈g/50⌉ + 1 requests, asynchronous), which would land
// in a measured window at random. What a decision costs with the inventory is
// TestInventory_decisionsAddNoRequest's (ccm/loadbalancer): nothing.
func budgetPolicies(tb testing.TB) string {
	tb.Helper()
	return copyPolicies(tb, func(name string) bool { return !strings.HasPrefix(name, "quotas") })
}

// copyPolicies copies the example policies and data.json whose names keep accepts (tests
// left out) to a temporary directory and returns it.
func copyPolicies(tb testing.TB, keep func(name string) bool) string {
	tb.Helper()
	dir := tb.TempDir()
	src := "../examples/policies"
	entries, err := os.ReadDir(src)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !keep(name) || strings.HasSuffix(name, "_test.rego") ||
			!strings.HasSuffix(name, ".rego") && name != "data.json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

func newBudgetCloud(tb testing.TB, n int, policyDir string) (*ccm.Cloud, *hcloudemu.Emulator) {
	tb.Helper()
	emu, endpoint := hcloudemu.NewTestServer(tb)
	for i := range n {
		if _, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i)}); err != nil {
			tb.Fatal(err)
		}
	}
	vars := baseEnv(emu, endpoint)
	vars["HCLOUD_LOAD_BALANCERS_LOCATION"] = "fsn1"
	vars["HCLOUD_POLL_INTERVAL"] = "1ms"
	o := ccm.NewOptions()
	o.PolicyDir = policyDir
	// The start-up sweep of group load balancers (one list, asynchronous) would race the counts
	// (TestAPIBudget failed on one extra GET /v1/load_balancers).
	o.LoadBalancerGroupSweepInterval = 0
	// The namespace of lbService: the policy input carries its labels, and a namespace the CCM
	// cannot read fails the decision.
	kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}})
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	inf := informers.NewSharedInformerFactory(kube, 0)
	cloud, err := ccm.New(ctx, ccm.Deps{Options: o, Env: env(vars), Kube: kube,
		// The recorder drops events: nothing reads them here, and a buffered one blocks the
		// benchmarks once its buffer is full (1,000 PolicyWarning events of an Ensure loop).
		Informers: inf, Recorder: &record.FakeRecorder{}, ClusterName: "budget"})
	if err != nil {
		tb.Fatal(err)
	}
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())
	emu.ResetRequests()
	return cloud, emu
}

// initialiseNodes asks for the metadata of n nodes concurrently, as the cloud-node controller
// does when n kubelets register at once.
func initialiseNodes(tb testing.TB, cloud *ccm.Cloud, n int) {
	tb.Helper()
	inst, _ := cloud.InstancesV2()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}}
			if _, err := inst.InstanceMetadata(context.Background(), node); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

func lbService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
}

func lbNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, n)
	for i := range n {
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)},
			Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", i+1)}}
	}
	return nodes
}

func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func TestAPIBudget(t *testing.T) {
	t.Run("initialising 500 nodes costs ceil(500/50) server list pages", func(t *testing.T) {
		cloud, emu := newBudgetCloud(t, 500, "")
		initialiseNodes(t, cloud, 500)
		if got := total(emu.Counts()); got != 10 {
			t.Errorf("requests = %d (%v), want 10 list pages", got, emu.Counts())
		}
	})
	t.Run("creating a load balancer with 1 port and 3 targets costs one mutating request", func(t *testing.T) {
		cloud, emu := newBudgetCloud(t, 3, budgetPolicies(t))
		lbs, _ := cloud.LoadBalancer()
		if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", lbService("web"), lbNodes(3)); err != nil {
			t.Fatal(err)
		}
		if got := emu.MutatingRequests(); got != 1 {
			t.Errorf("mutating requests for a create = %d, want 1 (listener and targets inline): %v", got, emu.Counts())
		}
		// Lookup by UID label and by name, the type list, the create and one action poll.
		if got := total(emu.Counts()); got != 5 {
			t.Errorf("requests for a create = %d, want 5: %v", got, emu.Counts())
		}
	})
	t.Run("an unchanged load balancer costs one read and no write", func(t *testing.T) {
		cloud, emu := newBudgetCloud(t, 3, budgetPolicies(t))
		lbs, _ := cloud.LoadBalancer()
		svc, nodes := lbService("web"), lbNodes(3)
		if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); err != nil {
			t.Fatal(err)
		}
		emu.ResetRequests()
		for range 10 {
			if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); err != nil {
				t.Fatal(err)
			}
		}
		if got := emu.MutatingRequests(); got != 0 {
			t.Errorf("mutating requests for 10 unchanged reconciles = %d, want 0 (%v)", got, emu.Counts())
		}
		if got := total(emu.Counts()); got != 10 {
			t.Errorf("requests for 10 unchanged reconciles = %d, want 10 (%v)", got, emu.Counts())
		}
	})
	t.Run("a round of UpdateLoadBalancer reads no load balancer the CCM wrote within the max age", func(t *testing.T) {
		const services = 60
		cloud, emu := newBudgetCloud(t, 11, budgetPolicies(t))
		lbs, _ := cloud.LoadBalancer()
		ctx := context.Background()
		for i := range services {
			if _, err := lbs.EnsureLoadBalancer(ctx, "budget", lbService(fmt.Sprintf("web-%d", i)), lbNodes(10)); err != nil {
				t.Fatal(err)
			}
		}
		for _, round := range []struct {
			name            string
			nodes           int
			mutating, reads int
		}{
			// Before lbcache each Update listed its load balancer by UID label: 60 reads a round.
			{"unchanged node set", 10, 0, 0},
			// One add_target each; its action poll is the only other request.
			{"one node joined", 11, services, 0},
			{"one node left", 10, services, 0},
		} {
			emu.ResetRequests()
			for i := range services {
				if err := lbs.UpdateLoadBalancer(ctx, "budget", lbService(fmt.Sprintf("web-%d", i)), lbNodes(round.nodes)); err != nil {
					t.Fatal(err)
				}
			}
			reads := 0
			for _, r := range emu.Requests() {
				if r.Method == "GET" && strings.HasPrefix(r.Path, "/v1/load_balancers") {
					reads++
				}
			}
			if got := emu.MutatingRequests(); got != round.mutating {
				t.Errorf("%s: mutating requests = %d, want %d (%v)", round.name, got, round.mutating, emu.Counts())
			}
			if reads != round.reads {
				t.Errorf("%s: load balancer reads = %d, want %d (%v)", round.name, reads, round.reads, emu.Counts())
			}
			if round.mutating == 0 && total(emu.Counts()) != 0 {
				t.Errorf("%s: requests = %v, want none", round.name, emu.Counts())
			}
		}
	})
}

// BenchmarkInitialiseNodes reports the Hetzner requests per node for initialising 500 nodes at
// once with a cold cache.
func BenchmarkInitialiseNodes(b *testing.B) {
	const n = 500
	var requests int
	for b.Loop() {
		b.StopTimer()
		cloud, emu := newBudgetCloud(b, n, "")
		b.StartTimer()
		initialiseNodes(b, cloud, n)
		requests += total(emu.Counts())
	}
	b.ReportMetric(float64(requests)/float64(b.N*n), "requests/node")
}

// BenchmarkEnsureLoadBalancerUnchanged reports the cost of reconciling an unchanged load
// balancer with the example policies: requests and mutating requests per reconcile.
func BenchmarkEnsureLoadBalancerUnchanged(b *testing.B) {
	cloud, emu := newBudgetCloud(b, 10, budgetPolicies(b))
	lbs, _ := cloud.LoadBalancer()
	svc, nodes := lbService("web"), lbNodes(10)
	if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); err != nil {
		b.Fatal(err)
	}
	emu.ResetRequests()
	for b.Loop() {
		if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total(emu.Counts()))/float64(b.N), "requests/op")
	b.ReportMetric(float64(emu.MutatingRequests())/float64(b.N), "mutating/op")
}

// BenchmarkEnsureLoadBalancerCreate reports the requests of creating a load balancer with one
// port and 10 targets, through the policy gate with the example policies (the delete after
// each create is not counted).
func BenchmarkEnsureLoadBalancerCreate(b *testing.B) {
	cloud, emu := newBudgetCloud(b, 10, budgetPolicies(b))
	lbs, _ := cloud.LoadBalancer()
	nodes := lbNodes(10)
	var creates, mutating int
	i := 0
	for b.Loop() {
		i++
		svc := lbService(fmt.Sprintf("web-%d", i))
		emu.ResetRequests()
		if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); err != nil {
			b.Fatal(err)
		}
		creates += total(emu.Counts())
		mutating += emu.MutatingRequests()
		if err := lbs.EnsureLoadBalancerDeleted(context.Background(), "budget", svc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(creates)/float64(b.N), "requests/create")
	b.ReportMetric(float64(mutating)/float64(b.N), "mutating/create")
}

// BenchmarkUpdateLoadBalancerNodeChange reports the requests of UpdateLoadBalancer when a node
// joins or leaves (one add_target or remove_target), with the example policies.
func BenchmarkUpdateLoadBalancerNodeChange(b *testing.B) {
	cloud, emu := newBudgetCloud(b, 10, budgetPolicies(b))
	lbs, _ := cloud.LoadBalancer()
	svc, nodes := lbService("web"), lbNodes(10)
	if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); err != nil {
		b.Fatal(err)
	}
	emu.ResetRequests()
	i := 0
	for b.Loop() {
		i++
		if err := lbs.UpdateLoadBalancer(context.Background(), "budget", svc, nodes[:10-i%2]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total(emu.Counts()))/float64(b.N), "requests/op")
	b.ReportMetric(float64(emu.MutatingRequests())/float64(b.N), "mutating/op")
}

// BenchmarkDeniedRetries reports what 50 Services the example policies deny as they ship
// (quotas.rego included) cost: the requests of their first round, and the requests of each
// later round of retries, each with a new value of the CCM's retry annotation (issue 40 §2).
func BenchmarkDeniedRetries(b *testing.B) {
	const services = 50
	cloud, emu := newBudgetCloud(b, 3, shippedPolicies(b))
	lbs, _ := cloud.LoadBalancer()
	nodes := lbNodes(3)
	svcs := make([]*corev1.Service, services)
	for i := range svcs {
		svcs[i] = lbService(fmt.Sprintf("web-%d", i))
		svcs[i].Spec.Ports[0].Port = 8080 // outside data.config.listen_ports: denied
	}
	round := func(n int) int {
		emu.ResetRequests()
		for _, svc := range svcs {
			svc.Annotations = map[string]string{requeue.Annotation: fmt.Sprint("round ", n)}
			if _, err := lbs.EnsureLoadBalancer(context.Background(), "budget", svc, nodes); !errors.Is(err, policy.ErrDenied) {
				b.Fatalf("EnsureLoadBalancer(%s) = %v, want denied", svc.Name, err)
			}
		}
		return total(emu.Counts())
	}
	first := round(0)
	retries, n := 0, 0
	for b.Loop() {
		n++
		retries += round(n)
	}
	b.ReportMetric(float64(first), "requests/first-round")
	b.ReportMetric(float64(retries)/float64(n), "requests/retry-round")
}
