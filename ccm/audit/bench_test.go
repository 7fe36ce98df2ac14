package audit_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/audit"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routes"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// Sizes of BenchmarkAudit (docs/performance.md, "Policy audit").
const (
	benchLBs    = 200
	benchRoutes = 500
	benchNodes  = 10 // load balancer targets, as test/bench's Services
)

// auditScale is a cluster of benchRoutes servers with a route each in the network and
// benchLBs Services with a load balancer each, on the emulator, judged by the example policies
// (dry run).
type auditScale struct {
	emu      *hcloudemu.Emulator
	conn     *hcloudclient.Conn
	exec     *executor.Executor
	network  *hcloud.Network
	services corelisters.ServiceLister
	nodes    []*corev1.Node
	nodeList corelisters.NodeLister
	engine   *policy.Engine
}

func newAuditScale(b *testing.B) *auditScale {
	b.Helper()
	ctx := context.Background()
	emu, endpoint := hcloudemu.NewTestServer(b)
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/16", NetworkZone: "eu-central"}}})
	if err != nil {
		b.Fatal(err)
	}
	s := &auditScale{emu: emu}
	s.conn, err = hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	client := hcloud.NewClient(hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()), hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond)}))
	if s.network, _, err = client.Network.GetByID(ctx, netID); err != nil {
		b.Fatal(err)
	}
	nodeIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range benchRoutes {
		ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250+2)
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i), Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: ip}}})
		if err != nil {
			b.Fatal(err)
		}
		cidr := fmt.Sprintf("10.%d.%d.0/24", 244+i/256, i%256)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i)}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id), PodCIDR: cidr, PodCIDRs: []string{cidr}}}
		if err := nodeIdx.Add(n); err != nil {
			b.Fatal(err)
		}
		if i < benchNodes {
			s.nodes = append(s.nodes, n)
		}
		_, dest, _ := net.ParseCIDR(cidr)
		a, _, err := client.Network.AddRoute(ctx, s.network, hcloud.NetworkAddRouteOpts{Route: hcloud.NetworkRoute{Destination: dest, Gateway: net.ParseIP(ip)}})
		if err == nil {
			err = client.Action.WaitFor(ctx, a)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	s.nodeList = corelisters.NewNodeLister(nodeIdx)
	s.engine = policy.NewEngine(policy.Options{Mode: policy.ModeDryRun, FailureMode: policy.FailClosed})
	files, err := policy.ReadDir("../../examples/policies")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.engine.Load(ctx, files, policy.DirSource("examples/policies")); err != nil {
		b.Fatal(err)
	}
	if s.exec, err = executor.New(executor.Options{Conn: s.conn, Decider: policy.AllowAll{}}); err != nil {
		b.Fatal(err)
	}
	svcIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	s.services = corelisters.NewServiceLister(svcIdx)
	lbs := s.loadBalancers(b)
	for i := range benchLBs {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("svc-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, NodePort: int32(30000 + i)},
			}},
		}
		if err := svcIdx.Add(svc); err != nil {
			b.Fatal(err)
		}
		if _, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, s.nodes); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// loadBalancers returns load balancers with fresh caches.
func (s *auditScale) loadBalancers(b *testing.B) *loadbalancer.LoadBalancers {
	lbs, err := loadbalancer.New(loadbalancer.Options{
		Readers:  loadbalancer.Readers{LoadBalancers: s.conn.LoadBalancers(), Networks: s.conn.Networks(), Certificates: s.conn.Certificates(), Types: s.conn.LoadBalancerTypes()},
		Executor: s.exec, Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"}, Network: s.network, Services: s.services,
	})
	if err != nil {
		b.Fatal(err)
	}
	return lbs
}

// auditor returns an Auditor whose load balancers and routes have fresh caches (a CCM that
// just started: every cache empty).
func (s *auditScale) auditor(b *testing.B) *audit.Auditor {
	servers, err := servercache.New(servercache.Options{Servers: s.conn.Servers(), Config: config.ServerCache{Mode: config.ServerCacheModeAll, MaxAge: time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	r, err := routes.New(routes.Options{Networks: s.conn.Networks(), Network: s.network, ClusterCIDR: "10.244.0.0/14", Servers: servers, Runner: s.exec, Nodes: s.nodeList})
	if err != nil {
		b.Fatal(err)
	}
	a, err := audit.New(audit.Options{
		LoadBalancers: s.loadBalancers(b), Routes: r, ClusterName: "kubernetes",
		Gate: gate.Gate{Decider: s.engine, Cluster: input.Cluster{Name: "kubernetes", ClusterCIDR: "10.244.0.0/14"},
			NamespaceLabels: func(string) (map[string]string, error) { return map[string]string{}, nil }},
		Nodes: func() ([]*corev1.Node, error) { return s.nodes, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// requests returns the emulator's requests since the last reset, and how many of them mutate.
func (s *auditScale) requests() (all, mutating int) {
	for _, n := range s.emu.Counts() {
		all += n
	}
	return all, s.emu.MutatingRequests()
}

// BenchmarkAudit measures one audit of benchLBs load balancers and benchRoutes routes with the
// example policies: "warm" with the caches filled (an audit within the caches' max ages of the
// CCM's own reads), "cold" with every cache empty (the worst case: each audit lists the load
// balancers, the network and the servers). It reports the Hetzner requests and the mutating
// ones per audit (docs/performance.md, "Policy audit").
func BenchmarkAudit(b *testing.B) {
	s := newAuditScale(b)
	ctx := context.Background()
	judge := func(b *testing.B, a *audit.Auditor) {
		sum, err := a.Audit(ctx)
		if err != nil || sum.LoadBalancers != benchLBs || sum.Routes != benchRoutes || sum.Failed != 0 {
			b.Fatalf("audit judged %d load balancers and %d routes (%d failed), want %d and %d: %v", sum.LoadBalancers, sum.Routes, sum.Failed, benchLBs, benchRoutes, err)
		}
	}
	b.Run("warm", func(b *testing.B) {
		a := s.auditor(b)
		judge(b, a) // fills the caches
		s.emu.ResetRequests()
		b.ReportAllocs()
		for b.Loop() {
			judge(b, a)
		}
		all, mutating := s.requests()
		b.ReportMetric(float64(all)/float64(b.N), "requests/op")
		b.ReportMetric(float64(mutating)/float64(b.N), "mutating/op")
	})
	b.Run("cold", func(b *testing.B) {
		s.emu.ResetRequests()
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			a := s.auditor(b)
			b.StartTimer()
			judge(b, a)
		}
		b.Logf("requests of %d cold audits: %v", b.N, s.emu.Counts())
		all, mutating := s.requests()
		b.ReportMetric(float64(all)/float64(b.N), "requests/op")
		b.ReportMetric(float64(mutating)/float64(b.N), "mutating/op")
	})
}
