package admission_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/admission"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// benchHandler is the webhook as the CCM wires it: the load balancer implementation over the
// emulator on loopback (the reads of a review are real HTTP requests), the policy engine with
// the example policies in enforce mode, 10 nodes.
func benchHandler(b *testing.B) (*admission.Handler, *loadbalancer.LoadBalancers, []*corev1.Node) {
	b.Helper()
	klog.SetLogger(logr.Discard()) // the engine logs denials and warnings at level 0
	b.Cleanup(klog.ClearLogger)
	emu, endpoint := hcloudemu.NewTestServer(b)
	conn, err := hcloudclient.New(hcloudclient.Options{
		Config:        config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second},
		ClientOptions: []hcloud.ClientOption{hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)})},
	})
	if err != nil {
		b.Fatal(err)
	}
	var nodes []*corev1.Node
	for i := range 10 {
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i), Location: "fsn1"})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)}})
	}
	engine := policy.NewEngine(policy.Options{Mode: policy.ModeEnforce})
	if err := policy.WatchDir(b.Context(), engine, "../../examples/policies"); err != nil {
		b.Fatal(err)
	}
	cluster := input.Cluster{Name: "kubernetes", ClusterCIDR: "10.244.0.0/16"}
	exec, err := executor.New(executor.Options{Conn: conn, Decider: engine, Cluster: cluster})
	if err != nil {
		b.Fatal(err)
	}
	lbs, err := loadbalancer.New(loadbalancer.Options{
		Readers: loadbalancer.Readers{
			LoadBalancers: conn.LoadBalancers(), Networks: conn.Networks(), Certificates: conn.Certificates(), Types: conn.LoadBalancerTypes(),
		},
		Executor: exec, Config: config.LoadBalancer{Enabled: true, Location: "fsn1", Type: "lb11"},
	})
	if err != nil {
		b.Fatal(err)
	}
	h, err := admission.New(admission.Config{
		Planner: lbs, ClusterName: "kubernetes",
		Gate:  gate.Gate{Decider: engine, Cluster: cluster, NamespaceLabels: func(string) (map[string]string, error) { return map[string]string{}, nil }},
		Nodes: func() ([]*corev1.Node, error) { return nodes, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	return h, lbs, nodes
}

// BenchmarkReviewLatency is what the webhook adds to a Service write (issue 21: at most 5 ms
// at p99): the p50 and p99 of 1,000 reviews per iteration, end to end in the handler (decode,
// Preview with its Hetzner reads on loopback, every step decided by the example policies).
// Cases: a create in a public namespace (allowed), the same Service in a private namespace
// (denied), and a new port on an existing load balancer of 10 targets (an update).
func BenchmarkReviewLatency(b *testing.B) {
	h, lbs, nodes := benchHandler(b)
	https := func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: 30443})
	}
	existing := service("live", https)
	existing.Namespace = "default"
	if _, err := lbs.EnsureLoadBalancer(context.Background(), "kubernetes", existing, nodes); err != nil {
		b.Fatalf("create the existing load balancer: %v", err)
	}
	created := service("web", https)
	created.Namespace = "default"
	denied := service("web", https)
	denied.Namespace = "shop"
	changed := existing.DeepCopy()
	changed.Spec.Ports = changed.Spec.Ports[:1] // 443 removed: a delete_service step
	cases := []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		allowed bool
	}{
		{"create-allowed", request(admissionv1.Create, created, nil), true},
		{"create-denied", request(admissionv1.Create, denied, nil), false},
		{"update-existing", request(admissionv1.Update, changed, existing), true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			const n = 1000
			lat := make([]time.Duration, n)
			var p50, p99 time.Duration
			for b.Loop() {
				for i := range lat {
					start := time.Now()
					resp := h.Review(ctx, tc.req)
					lat[i] = time.Since(start)
					if resp.Allowed != tc.allowed {
						b.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
					}
				}
				slices.Sort(lat)
				p50, p99 = lat[n/2], lat[n*99/100]
			}
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}
