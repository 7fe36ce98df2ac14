package lbclass

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	servicehelper "k8s.io/cloud-provider/service/helpers"
)

const ours = "example.com/hetzner"

func strptr(s string) *string { return &s }

// svc builds a Service of type LoadBalancer with class (nil: none).
func svc(name string, class *string, mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

func withFinalizer(s *corev1.Service) {
	s.Finalizers = append(s.Finalizers, servicehelper.LoadBalancerCleanupFinalizer)
}

func deleting(s *corev1.Service) {
	now := metav1.Now()
	s.DeletionTimestamp = &now
}

func clusterIP(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		svc       *corev1.Service
		classOnly bool
		want      Action
	}{
		{name: "nil", svc: nil, want: Skip},
		{name: "our class: ensure", svc: svc("a", strptr(ours)), want: Ensure},
		{name: "our class with the finalizer: ensure", svc: svc("a", strptr(ours), withFinalizer), want: Ensure},
		{name: "our class, class-only: ensure", svc: svc("a", strptr(ours)), classOnly: true, want: Ensure},
		{name: "our class being deleted with the finalizer: cleanup", svc: svc("a", strptr(ours), withFinalizer, deleting), want: Cleanup},
		{name: "our class being deleted without the finalizer: skip", svc: svc("a", strptr(ours), deleting), want: Skip},
		{name: "another class: skip", svc: svc("a", strptr("io.cilium/l2-announcer")), want: Skip},
		{name: "another class with the finalizer, deleted, class-only: skip", svc: svc("a", strptr("io.cilium/l2-announcer"), withFinalizer, deleting), classOnly: true, want: Skip},
		{name: "a class that has ours as a prefix: skip", svc: svc("a", strptr(ours+"-2")), want: Skip},
		{name: "no class: skip (the upstream controller serves it)", svc: svc("a", nil), want: Skip},
		{name: "no class, deleted with the finalizer, default mode: skip (upstream)", svc: svc("a", nil, withFinalizer, deleting), want: Skip},
		{name: "no class, class-only: skip", svc: svc("a", nil), classOnly: true, want: Skip},
		{name: "no class with the finalizer, class-only: skip (never created or updated)", svc: svc("a", nil, withFinalizer), classOnly: true, want: Skip},
		{name: "no class, deleted with the finalizer, class-only: cleanup", svc: svc("a", nil, withFinalizer, deleting), classOnly: true, want: Cleanup},
		{name: "no class, ClusterIP with the finalizer, class-only: cleanup", svc: svc("a", nil, withFinalizer, clusterIP), classOnly: true, want: Cleanup},
		{name: "no class, ClusterIP without the finalizer, class-only: skip", svc: svc("a", nil, clusterIP), classOnly: true, want: Skip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Decide(ours, tc.classOnly, tc.svc); got != tc.want {
				t.Errorf("Decide = %d, want %d", got, tc.want)
			}
		})
	}
}

func node(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func TestEligible(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{name: "plain", node: node("n"), want: true},
		{name: "not ready is still passed, as upstream", node: node("n", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		}), want: true},
		{name: "excluded", node: node("n", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" }), want: false},
		{name: "exclusion label false", node: node("n", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "false" }), want: true},
		{name: "exclusion label malformed excludes", node: node("n", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "" }), want: false},
		{name: "autoscaler taint", node: node("n", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: toBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
		}), want: false},
		{name: "being deleted", node: node("n", func(n *corev1.Node) { now := metav1.Now(); n.DeletionTimestamp = &now }), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Eligible(tc.node); got != tc.want {
				t.Errorf("Eligible = %v, want %v", got, tc.want)
			}
		})
	}
}

// fakeBalancer records the calls of cloudprovider.LoadBalancer.
type fakeBalancer struct {
	mu     sync.Mutex
	calls  []string
	exists map[string]bool // by Service name
	err    error           // returned by EnsureLoadBalancer and UpdateLoadBalancer
}

func (f *fakeBalancer) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeBalancer) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeBalancer) GetLoadBalancer(_ context.Context, _ string, s *corev1.Service) (*corev1.LoadBalancerStatus, bool, error) {
	f.record("get " + s.Name)
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.exists[s.Name], nil
}

func (f *fakeBalancer) GetLoadBalancerName(_ context.Context, _ string, s *corev1.Service) string {
	return s.Name
}

func (f *fakeBalancer) EnsureLoadBalancer(_ context.Context, _ string, s *corev1.Service, nodes []*corev1.Node) (*corev1.LoadBalancerStatus, error) {
	f.record("ensure " + s.Name + " " + nodeNames(nodes))
	if f.err != nil {
		return nil, f.err
	}
	f.mu.Lock()
	f.exists[s.Name] = true
	f.mu.Unlock()
	return &corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}}, nil
}

func (f *fakeBalancer) UpdateLoadBalancer(_ context.Context, _ string, s *corev1.Service, nodes []*corev1.Node) error {
	f.record("update " + s.Name + " " + nodeNames(nodes))
	return f.err
}

func (f *fakeBalancer) EnsureLoadBalancerDeleted(_ context.Context, _ string, s *corev1.Service) error {
	f.record("delete " + s.Name)
	f.mu.Lock()
	delete(f.exists, s.Name)
	f.mu.Unlock()
	return nil
}

var _ cloudprovider.LoadBalancer = (*fakeBalancer)(nil)

func nodeNames(nodes []*corev1.Node) string {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	return "[" + strings.Join(names, ",") + "]"
}

// harness is a controller on a fake clientset with started informers.
type harness struct {
	c        *Controller
	client   *fake.Clientset
	balancer *fakeBalancer
	events   *record.FakeRecorder
}

func newHarness(t *testing.T, classOnly bool, objs ...runtime.Object) *harness {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	h := &harness{client: client, balancer: &fakeBalancer{exists: map[string]bool{}}, events: record.NewFakeRecorder(100)}
	c, err := New(Options{
		Class: ours, ClassOnly: classOnly, ClusterName: "k", Client: client,
		Services: factory.Core().V1().Services(), Nodes: factory.Core().V1().Nodes(),
		Balancer: h.balancer, Recorder: h.events,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	h.c = c
	return h
}

func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) get(t *testing.T, name string) *corev1.Service {
	t.Helper()
	s, err := h.client.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSyncService(t *testing.T) {
	tests := []struct {
		name          string
		svc           *corev1.Service
		classOnly     bool
		exists        bool
		ensureErr     error
		wantCalls     []string
		wantFinalizer bool
		wantIngress   bool
		wantEvents    []string
		wantErr       bool
	}{
		{
			name: "our class: finalizer, ensure with the eligible nodes, status", svc: svc("web", strptr(ours)),
			wantCalls: []string{"ensure web [n1,n2]"}, wantFinalizer: true, wantIngress: true,
			wantEvents: []string{"Normal EnsuringLoadBalancer", "Normal EnsuredLoadBalancer"},
		},
		{
			name: "another class: nothing", svc: svc("web", strptr("io.cilium/l2-announcer")),
		},
		{
			name: "no class: nothing (the upstream controller's)", svc: svc("web", nil),
		},
		{
			name: "a failed ensure: the finalizer stays, no status, SyncLoadBalancerFailed", svc: svc("web", strptr(ours)),
			ensureErr: errors.New("policy denied"), wantCalls: []string{"ensure web [n1,n2]"}, wantFinalizer: true,
			wantEvents: []string{"Normal EnsuringLoadBalancer", "Warning SyncLoadBalancerFailed"}, wantErr: true,
		},
		{
			name: "our class deleted: delete, finalizer removed", svc: svc("web", strptr(ours), withFinalizer, deleting), exists: true,
			wantCalls:  []string{"get web", "delete web"},
			wantEvents: []string{"Normal DeletingLoadBalancer", "Normal DeletedLoadBalancer"},
		},
		{
			name: "our class deleted without a load balancer: finalizer removed, no delete", svc: svc("web", strptr(ours), withFinalizer, deleting),
			wantCalls: []string{"get web"}, wantEvents: []string{"Normal DeletedLoadBalancer"},
		},
		{
			name: "class-only: a class-less Service deleted with the finalizer is cleaned up", svc: svc("web", nil, withFinalizer, deleting),
			classOnly: true, exists: true, wantCalls: []string{"get web", "delete web"},
			wantEvents: []string{"Normal DeletingLoadBalancer", "Normal DeletedLoadBalancer"},
		},
		{
			name: "class-only: a class-less Service is never ensured", svc: svc("web", nil, withFinalizer), classOnly: true, wantFinalizer: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			excluded := node("n3", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" })
			h := newHarness(t, tc.classOnly, tc.svc, node("n1"), node("n2"), excluded)
			h.balancer.err = tc.ensureErr
			h.balancer.exists["web"] = tc.exists
			err := h.c.syncService(context.Background(), "default/web")
			if (err != nil) != tc.wantErr {
				t.Fatalf("syncService = %v, want error %v", err, tc.wantErr)
			}
			if got := h.balancer.Calls(); !slices.Equal(got, tc.wantCalls) {
				t.Errorf("calls = %q, want %q", got, tc.wantCalls)
			}
			got := h.get(t, "web")
			if servicehelper.HasLBFinalizer(got) != tc.wantFinalizer {
				t.Errorf("finalizers = %v, want the cleanup finalizer %v", got.Finalizers, tc.wantFinalizer)
			}
			if (len(got.Status.LoadBalancer.Ingress) > 0) != tc.wantIngress {
				t.Errorf("status = %+v, want an ingress %v", got.Status.LoadBalancer, tc.wantIngress)
			}
			var reasons []string
			for _, e := range h.drainEvents() {
				f := strings.Fields(e)
				reasons = append(reasons, f[0]+" "+f[1])
			}
			if !slices.Equal(reasons, tc.wantEvents) {
				t.Errorf("events = %q, want %q", reasons, tc.wantEvents)
			}
		})
	}
}

func TestSyncNodes_updatesOnlyServedServicesWhoseNodesChanged(t *testing.T) {
	served := svc("web", strptr(ours), withFinalizer)
	notYet := svc("new", strptr(ours)) // no finalizer: never synced, its first sync ensures
	other := svc("cilium", strptr("io.cilium/l2-announcer"), withFinalizer)
	plain := svc("plain", nil, withFinalizer)
	h := newHarness(t, false, served, notYet, other, plain, node("n1"))
	h.c.storeNodes("default/web", []*corev1.Node{node("n1")})

	h.c.syncNodes(context.Background())
	if got := h.balancer.Calls(); len(got) != 0 {
		t.Fatalf("an unchanged node set: calls = %q, want none", got)
	}

	if _, err := h.client.CoreV1().Nodes().Create(context.Background(), node("n2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if ns, _ := h.c.eligibleNodes(); len(ns) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw n2")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.c.syncNodes(context.Background())
	if got, want := h.balancer.Calls(), []string{"update web [n1,n2]"}; !slices.Equal(got, want) {
		t.Fatalf("a node added: calls = %q, want %q", got, want)
	}

	h.balancer.err = errors.New("boom")
	if _, err := h.client.CoreV1().Nodes().Create(context.Background(), node("n3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if ns, _ := h.c.eligibleNodes(); len(ns) == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.c.syncNodes(context.Background())
	if n := h.c.queue.NumRequeues("default/web"); n != 1 {
		t.Errorf("a failed update: requeues of default/web = %d, want 1 (a retry with backoff)", n)
	}
	var failed bool
	for _, e := range h.drainEvents() {
		failed = failed || strings.HasPrefix(e, "Warning UpdateLoadBalancerFailed")
	}
	if !failed {
		t.Error("a failed update recorded no UpdateLoadBalancerFailed")
	}
}

func TestNeedsSync(t *testing.T) {
	base := svc("web", strptr(ours), withFinalizer)
	bare := svc("web", strptr(ours))
	tests := []struct {
		name string
		old  *corev1.Service
		mod  func(*corev1.Service)
		want bool
	}{
		{name: "the finalizer added (our own patch)", old: bare, mod: withFinalizer, want: false},
		{name: "a resync (no change)", mod: func(*corev1.Service) {}, want: false},
		{name: "status only (our own patch)", mod: func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		}, want: false},
		{name: "an annotation (the requeuer's retry)", mod: func(s *corev1.Service) {
			s.Annotations = map[string]string{"load-balancer.hetzner.cloud/type": "lb21"}
		}, want: true},
		{name: "a port", mod: func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{{Port: 80}} }, want: true},
		{name: "deletion", mod: deleting, want: true},
		{name: "the finalizer removed by hand", mod: func(s *corev1.Service) { s.Finalizers = nil }, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := base
			if tc.old != nil {
				old = tc.old
			}
			cur := old.DeepCopy()
			tc.mod(cur)
			if got := needsSync(old, cur); got != tc.want {
				t.Errorf("needsSync = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNew_requiresItsOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "lbclass.New") {
		t.Fatalf("New(Options{}) = %v, want an lbclass.New error", err)
	}
}
