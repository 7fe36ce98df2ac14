package loadbalancer_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// TestDenialCache_derivedFromInputs: what answers a retry from the denial cache is the policy
// input, not a list of the Service's fields. A change the input does not show (a spec field
// the planner does not read, a status written by another controller) is denied again without a
// request or a decision; a change that reaches the input only through the executor (the
// namespace's labels, never part of the call) is decided again, with fresh reads.
func TestDenialCache_derivedFromInputs(t *testing.T) {
	ev := newEnv(t)
	namespaces := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "a"}}}
	if err := namespaces.Add(ns); err != nil {
		t.Fatal(err)
	}
	exec, err := executor.New(executor.Options{Conn: ev.conn, Decider: ev.decider, Recorder: ev.recorder,
		Cluster: input.Cluster{Name: clusterName}, Namespaces: corelisters.NewNamespaceLister(namespaces)})
	if err != nil {
		t.Fatal(err)
	}
	lbs := newLoadBalancers(t, loadbalancer.Options{Readers: ev.readers(), Executor: exec, Recorder: ev.recorder,
		Config: config.LoadBalancer{Location: "fsn1", Type: "lb11"}})
	ev.decider.set(true)
	ev.decider.revision = "r1"
	svc := newService("web", withPorts(80))

	steps := []struct {
		name    string
		change  func()
		decided bool // decided again with reads, or answered from the cache
	}{
		{"the first try", nil, true},
		{"an unchanged retry", nil, false},
		{"a spec field no input shows", func() { svc = svc.DeepCopy(); svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP }, false},
		{"a status written by another controller", func() {
			svc = svc.DeepCopy()
			svc.Status.Conditions = []metav1.Condition{{Type: "Checked", Status: metav1.ConditionTrue}}
			svc.ResourceVersion = "2"
		}, false},
		{"the namespace's labels", func() {
			ns = ns.DeepCopy()
			ns.Labels["team"] = "b"
			if err := namespaces.Update(ns); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"unchanged since", nil, false},
		{"a label of the Service (input.service.labels)", func() { svc = svc.DeepCopy(); svc.Labels = map[string]string{"tier": "web"} }, true},
	}
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		ev.emu.ResetRequests()
		decisions := ev.decider.decisions()
		_, err := lbs.EnsureLoadBalancer(context.Background(), clusterName, svc, ev.nodes)
		if !errors.Is(err, policy.ErrDenied) {
			t.Fatalf("%s: err = %v, want the denial", st.name, err)
		}
		reqs, decided := total(ev.emu.Counts()), ev.decider.decisions() > decisions
		if decided != st.decided || (reqs > 0) != st.decided {
			t.Errorf("%s: %d requests, decided again %v; want decided again (with requests) %v", st.name, reqs, decided, st.decided)
		}
	}
}

// total sums counts.
func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
