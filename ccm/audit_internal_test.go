package ccm

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestAuditChanges: which changes of a Service, node or namespace start an audit from the
// caches (nil old: an add; nil cur: a delete).
func TestAuditChanges(t *testing.T) {
	lb := func(tweak func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"a": "1"},
			Annotations: map[string]string{"load-balancer.hetzner.cloud/type": "lb11"}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
		if tweak != nil {
			tweak(s)
		}
		return s
	}
	clusterIP := func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}}
	}
	ns := func(labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: labels}}
	}
	tests := []struct {
		name     string
		changed  func(old, cur any) bool
		old, cur any
		want     bool
	}{
		{"a Service of type LoadBalancer added", serviceChanged, nil, lb(nil), true},
		{"a Service deleted unseen", serviceChanged, deleted(cache.DeletedFinalStateUnknown{Obj: lb(nil)}), nil, true},
		{"a Service of type LoadBalancer deleted", serviceChanged, lb(nil), nil, true},
		{"an annotation changed", serviceChanged, lb(nil), lb(func(s *corev1.Service) { s.Annotations["load-balancer.hetzner.cloud/type"] = "lb31" }), true},
		{"a label changed", serviceChanged, lb(nil), lb(func(s *corev1.Service) { s.Labels["a"] = "2" }), true},
		{"the spec changed", serviceChanged, lb(nil), lb(func(s *corev1.Service) { s.Spec.Ports[0].Port = 443 }), true},
		{"the type changed away from LoadBalancer", serviceChanged, lb(nil), lb(clusterIP), true},
		{"only the status changed", serviceChanged, lb(nil), lb(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
			s.ResourceVersion = "2"
		}), false},
		{"a ClusterIP Service changed", serviceChanged, lb(clusterIP), lb(func(s *corev1.Service) { clusterIP(s); s.Labels["a"] = "2" }), false},
		{"a node added", nodeChanged, nil, node(nil), true},
		{"not a node", nodeChanged, nil, ns(nil), false},
		{"a node deleted", nodeChanged, node(nil), nil, true},
		{"a node's labels changed", nodeChanged, node(map[string]string{"x": "1"}), node(map[string]string{"x": "2"}), true},
		{"a node's status changed", nodeChanged, node(map[string]string{"x": "1"}), node(map[string]string{"x": "1"}), false},
		{"a namespace's labels changed", namespaceLabelsChanged, ns(nil), ns(map[string]string{"hcloud-ccm/public": "true"}), true},
		{"a namespace added", namespaceLabelsChanged, nil, ns(nil), false},
		{"a namespace's labels unchanged", namespaceLabelsChanged, ns(map[string]string{"a": "1"}), ns(map[string]string{"a": "1"}), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.changed(tc.old, tc.cur); got != tc.want {
				t.Errorf("changed = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAuditWatch_SignalsChanges: a registered watch signals a Service's annotation change, not
// its status patch nor the adds of the informer's initial list.
func TestAuditWatch_SignalsChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: map[string]string{"k": "v"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	client := fake.NewClientset(svc)
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Services().Informer()
	changed := make(chan struct{}, 1)
	if err := (auditWatch{informer, serviceChanged}).register(changed); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	signalled := func() bool {
		select {
		case <-changed:
			return true
		case <-time.After(300 * time.Millisecond):
			return false
		}
	}
	if signalled() {
		t.Error("the initial list signalled a change")
	}
	status := svc.DeepCopy()
	status.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}
	if _, err := client.CoreV1().Services("shop").UpdateStatus(ctx, status, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if signalled() {
		t.Error("a status patch signalled a change")
	}
	fixed := status.DeepCopy()
	fixed.Annotations["k"] = "fixed"
	if _, err := client.CoreV1().Services("shop").Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !signalled() {
		t.Error("an annotation change signalled nothing")
	}
}
