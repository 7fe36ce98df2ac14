package loadbalancer_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const (
	testUID     = "8e0c1f52-3a0e-4d2b-9c1a-0f1e2d3c4b5a"
	clusterName = "kubernetes"
)

// decider is a switchable test Decider: it denies the operations in deny (all when denyAll),
// and the inputs denyIf names (a message of its own) when it is set.
type decider struct {
	mu      sync.Mutex
	denyAll bool
	deny    map[string]bool
	denyIf  func(input.Input) string
	inputs  []input.Input
	// revision is the policy revision the decider names (Revision); "" names none, and the
	// CCM then remembers no denial.
	revision string
}

func (d *decider) Revision() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.revision
}

// decisions is how many decisions d made.
func (d *decider) decisions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inputs)
}

func (d *decider) Decide(_ context.Context, in input.Input) policy.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inputs = append(d.inputs, in)
	if d.denyIf != nil {
		if msg := d.denyIf(in); msg != "" {
			return policy.Decision{Deny: []policy.Message{{Msg: msg, Code: "T2"}}}
		}
	}
	if d.denyAll || d.deny[in.Operation] {
		return policy.Decision{Deny: []policy.Message{{Msg: "not allowed in tests", Code: "T1"}}}
	}
	return policy.Decision{Allowed: true}
}

func (d *decider) set(denyAll bool, ops ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.denyAll, d.deny = denyAll, map[string]bool{}
	for _, op := range ops {
		d.deny[op] = true
	}
}

type env struct {
	t        *testing.T
	emu      *hcloudemu.Emulator
	client   *hcloud.Client
	conn     *hcloudclient.Conn
	recorder *record.FakeRecorder
	decider  *decider
	exec     *executor.Executor
	lbs      *loadbalancer.LoadBalancers
	network  *hcloud.Network
	nodes    []*corev1.Node
}

type envOption func(*envConfig)

type envConfig struct {
	cfg     config.LoadBalancer
	network bool
	namer   loadbalancer.Namer
	servers int
	lbOpts  []func(*loadbalancer.Options)
	// transport, when set, carries the client's requests (to the emulator).
	transport http.RoundTripper
}

func withLBOption(o func(*loadbalancer.Options)) envOption {
	return func(c *envConfig) { c.lbOpts = append(c.lbOpts, o) }
}

func withNetworkEnv(c *envConfig) { c.network = true }

func withNamer(n loadbalancer.Namer) envOption { return func(c *envConfig) { c.namer = n } }

func withServers(n int) envOption { return func(c *envConfig) { c.servers = n } }

// newEnv starts an emulator with servers (in a network when asked) and the CCM's load
// balancer implementation on top.
func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	c := envConfig{cfg: config.LoadBalancer{Location: "fsn1", Type: "lb11"}, servers: 2}
	for _, o := range opts {
		o(&c)
	}
	emu, endpoint := hcloudemu.NewTestServer(t)
	clientOpts := []hcloud.ClientOption{
		hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(2 * time.Millisecond)}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
	}
	if c.transport != nil {
		clientOpts = append(clientOpts, hcloud.WithHTTPClient(&http.Client{Transport: c.transport}))
	}
	client := hcloud.NewClient(clientOpts...)
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: endpoint, Token: emu.Token(), PollInterval: time.Millisecond, RetryInterval: time.Millisecond, Timeout: 30 * time.Second}, ClientOptions: clientOpts})
	if err != nil {
		t.Fatal(err)
	}
	ev := &env{t: t, emu: emu, client: client, conn: conn, recorder: record.NewFakeRecorder(1000), decider: &decider{}}
	var netID int64
	if c.network {
		var err error
		netID, err = emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
			Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/24", NetworkZone: "eu-central"}}})
		if err != nil {
			t.Fatal(err)
		}
		_, ipRange, _ := net.ParseCIDR("10.0.0.0/8")
		ev.network = &hcloud.Network{ID: netID, Name: "k8s", IPRange: ipRange}
	}
	for i := 1; i <= c.servers; i++ {
		spec := hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i), Location: "fsn1"}
		if c.network {
			spec.Networks = []hcloudemu.ServerNetwork{{NetworkID: netID, IP: fmt.Sprintf("10.0.0.%d", 10+i)}}
		}
		id, err := emu.AddServer(spec)
		if err != nil {
			t.Fatal(err)
		}
		ev.nodes = append(ev.nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: map[string]string{}},
			Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)},
		})
	}
	cluster := input.Cluster{Name: clusterName, ClusterCIDR: "10.244.0.0/16"}
	if ev.network != nil {
		cluster.Network = &input.Network{ID: netID, Name: "k8s", IPRange: "10.0.0.0/8"}
	}
	if ev.exec, err = executor.New(executor.Options{Conn: conn, Decider: ev.decider, Recorder: ev.recorder, Cluster: cluster}); err != nil {
		t.Fatal(err)
	}
	o := loadbalancer.Options{Readers: ev.readers(), Executor: ev.exec, Config: c.cfg, Network: ev.network, Recorder: ev.recorder, Namer: c.namer}
	for _, opt := range c.lbOpts {
		opt(&o)
	}
	ev.lbs = newLoadBalancers(t, o)
	return ev
}

// readers are the readers of ev's connection.
func (ev *env) readers() loadbalancer.Readers {
	return loadbalancer.Readers{
		LoadBalancers: ev.conn.LoadBalancers(), Networks: ev.conn.Networks(), Certificates: ev.conn.Certificates(), Types: ev.conn.LoadBalancerTypes(),
	}
}

// newLoadBalancers returns loadbalancer.New(o) and fails the test on an error.
func newLoadBalancers(t *testing.T, o loadbalancer.Options) *loadbalancer.LoadBalancers {
	t.Helper()
	l, err := loadbalancer.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNew_errors(t *testing.T) {
	tests := []struct {
		name    string
		o       loadbalancer.Options
		wantErr string
	}{
		{"nothing", loadbalancer.Options{}, "loadbalancer.New: Options.Executor and the four Options.Readers are required: pass the executor of executor.New and the readers of hcloudclient.Conn"},
		{"no type reader", loadbalancer.Options{Executor: &executor.Executor{}, Readers: loadbalancer.Readers{
			LoadBalancers: &hcloudclient.LoadBalancerReader{}, Networks: &hcloudclient.NetworkReader{}, Certificates: &hcloudclient.CertificateReader{},
		}}, "loadbalancer.New: Options.Executor and the four Options.Readers are required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadbalancer.New(tc.o); err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("New() error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

type serviceTweak func(*corev1.Service)

func newService(name string, tweaks ...serviceTweak) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(testUID), Annotations: map[string]string{}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, t := range tweaks {
		t(svc)
	}
	return svc
}

func withAnnotation(k annotation.Name, v string) serviceTweak {
	return func(s *corev1.Service) { s.Annotations[string(k)] = v }
}

func withoutAnnotation(k annotation.Name) serviceTweak {
	return func(s *corev1.Service) { delete(s.Annotations, string(k)) }
}

func withPorts(ports ...int32) serviceTweak {
	return func(s *corev1.Service) {
		for _, p := range ports {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint("p", p), Protocol: corev1.ProtocolTCP, Port: p, NodePort: 30000 + p})
		}
	}
}

func (ev *env) ensure(svc *corev1.Service) (*corev1.LoadBalancerStatus, error) {
	ev.t.Helper()
	return ev.lbs.EnsureLoadBalancer(context.Background(), clusterName, svc, ev.nodes)
}

func (ev *env) mustEnsure(svc *corev1.Service) *corev1.LoadBalancerStatus {
	ev.t.Helper()
	st, err := ev.ensure(svc)
	if err != nil {
		ev.t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	return st
}

// onlyLB returns the one load balancer in the emulator.
func (ev *env) onlyLB() *hcloud.LoadBalancer {
	ev.t.Helper()
	lbs, err := ev.client.LoadBalancer.All(context.Background())
	if err != nil {
		ev.t.Fatal(err)
	}
	if len(lbs) != 1 {
		ev.t.Fatalf("%d load balancers, want 1", len(lbs))
	}
	return lbs[0]
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

// hasEventContaining reports whether an event starts with prefix and contains substr.
func hasEventContaining(events []string, prefix, substr string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

// reads sums the GET requests of counts.
func reads(counts map[string]int) int {
	n := 0
	for k, v := range counts {
		if strings.HasPrefix(k, "GET ") {
			n += v
		}
	}
	return n
}

type namerFunc func(context.Context, plugins.LoadBalancerNameInput) (string, error)

func (f namerFunc) LoadBalancerName(ctx context.Context, in plugins.LoadBalancerNameInput) (string, error) {
	return f(ctx, in)
}

// events drains the recorded events.
func (ev *env) events() []string { return testutil.Events(ev.recorder) }
