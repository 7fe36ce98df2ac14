package loadbalancer

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestQuiet_CopiesEveryField guards quiet against drift: every field of LoadBalancers set in
// l is set in quiet(l), or named here as left out. A field added to LoadBalancers and not
// copied in quiet is zero there, and this test names it.
func TestQuiet_CopiesEveryField(t *testing.T) {
	leftOut := map[string]bool{"exec": true, "denials": true, "converged": true, "auditDenied": true}
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: "http://127.0.0.1:1/v1", Token: "t", PollInterval: time.Second, RetryInterval: time.Second, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := executor.New(executor.Options{Conn: conn, Decider: policy.AllowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Options{
		Readers: Readers{
			LoadBalancers: conn.LoadBalancers(), Networks: conn.Networks(), Certificates: conn.Certificates(), Types: conn.LoadBalancerTypes(),
		},
		Executor: exec, Config: config.LoadBalancer{Location: "fsn1"}, Network: &hcloud.Network{ID: 7},
		Namer: nopNamer{}, Robot: true, DenialTracker: nopTracker{}, ClassOnly: true,
		Services: corelisters.NewServiceLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
	if err != nil {
		t.Fatal(err)
	}
	q := l.quiet()
	lv, qv := reflect.ValueOf(l).Elem(), reflect.ValueOf(q).Elem()
	for i := range lv.NumField() {
		name := lv.Type().Field(i).Name
		switch {
		case leftOut[name]:
			if !qv.Field(i).IsZero() {
				t.Errorf("quiet() sets %s; Preview must not have it", name)
			}
		case lv.Field(i).IsZero():
			t.Fatalf("field %s is not set in this test's LoadBalancers: set it, so the test checks quiet copies it", name)
		case qv.Field(i).IsZero():
			t.Errorf("quiet() does not copy field %s: copy it in quiet, or list it in leftOut here", name)
		}
	}
	if q.network.Load() != l.network.Load() || q.read != l.read || q.namer != l.namer || q.types != l.types {
		t.Errorf("quiet() has other readers, network, namer or type cache than l")
	}
}

type nopTracker struct{}

func (nopTracker) Denied(*corev1.Service)  {}
func (nopTracker) Settled(*corev1.Service) {}

type nopNamer struct{}

func (nopNamer) LoadBalancerName(context.Context, plugins.LoadBalancerNameInput) (string, error) {
	return "", nil
}
