//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// TestCCMLoadBalancerLifecycle follows one Service of type LoadBalancer through its life with
// the CCM as deployed (example policies from the ConfigMap), asserting on the Service and on
// the emulator's state and request counters at each step:
//
//   - created: one load balancer labelled hcloud-ccm/service-uid=<uid>, a tcp listener per
//     Service port to its node port, the initialised node as target, the load balancer's IPv4 in
//     status.loadBalancer.ingress, the cleanup finalizer on the Service;
//   - a port added, then removed: the listeners follow, same load balancer;
//   - a node added (initialised, so with a providerID), then deleted: the targets follow;
//   - the algorithm-type annotation changed: the algorithm follows on the same load balancer;
//   - steady state: a label and an unrelated annotation touched, so the service controller
//     reconciles an unchanged Service: zero mutating requests;
//   - deleted: the load balancer is gone from the cloud and the finalizer removed (the Service
//     object disappears).
func TestCCMLoadBalancerLifecycle(t *testing.T) {
	t.Parallel()
	c := harness.Start(t)
	c.ApplyKustomize(t, deployDir)
	emu, endpoint := hcloudemu.NewTestServer(t)
	id1 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-1"})
	id2 := addServer(t, emu, hcloudemu.ServerSpec{Name: "worker-2"})
	c.CreateNode(t, "worker-1", "10.244.1.0/24")
	ccm, _ := startCCM(t, c, "ccm", endpoint, emu.Token(), ccmRun{env: lbEnv})
	waitInitialised(t, c, ccm, "worker-1", id1)

	ctx := context.Background()
	admin := c.Client()
	const ns, name = "default", "web"
	svc := createService(t, c, loadBalancerService(ns, name))
	uid := svc.UID

	// Created.
	lb := waitLB(t, ccm, emu, uid, time.Minute, func(lb schema.LoadBalancer) error {
		if got, want := listeners(lb), wantListeners(svc); !slices.Equal(got, want) {
			return fmt.Errorf("listeners %v, want %v", got, want)
		}
		if got := targetServers(lb); !slices.Equal(got, []int64{id1}) {
			return fmt.Errorf("target servers %v, want [%d]", got, id1)
		}
		return nil
	})
	lbID := lb.ID
	if got := lb.LoadBalancerType.Name; got != "lb11" {
		t.Errorf("load balancer type = %q, want lb11", got)
	}
	if got := lb.Location.Name; got != "fsn1" {
		t.Errorf("load balancer location = %q, want fsn1", got)
	}
	ingress := waitIngress(t, c, ccm, ns, name)
	if ips := ingressIPs(ingress); !slices.Contains(ips, lb.PublicNet.IPv4.IP) {
		t.Errorf("service ingress IPs %v, want the load balancer's IPv4 %s among them", ips, lb.PublicNet.IPv4.IP)
	}
	if fin := getService(t, c, ns, name).Finalizers; !slices.Contains(fin, finalizerLBCleanup) {
		t.Errorf("service finalizers %v, want %s", fin, finalizerLBCleanup)
	}

	// sameLB wraps a load balancer condition: the load balancer must keep its ID.
	sameLB := func(cond func(schema.LoadBalancer) error) func(schema.LoadBalancer) error {
		return func(lb schema.LoadBalancer) error {
			if lb.ID != lbID {
				t.Fatalf("load balancer of %s/%s is %d, want the same %d", ns, name, lb.ID, lbID)
			}
			return cond(lb)
		}
	}
	wantListenersOf := func(svc *corev1.Service) func(schema.LoadBalancer) error {
		return sameLB(func(lb schema.LoadBalancer) error {
			if got, want := listeners(lb), wantListeners(svc); !slices.Equal(got, want) {
				return fmt.Errorf("listeners %v, want %v", got, want)
			}
			return nil
		})
	}
	wantTargets := func(ids ...int64) func(schema.LoadBalancer) error {
		return sameLB(func(lb schema.LoadBalancer) error {
			if got := targetServers(lb); !slices.Equal(got, ids) {
				return fmt.Errorf("target servers %v, want %v", got, ids)
			}
			return nil
		})
	}

	parent := t
	steps := []struct {
		name string
		// do changes the cluster and returns the condition the load balancer must reach.
		do func(t *testing.T) func(schema.LoadBalancer) error
	}{
		{"port added", func(t *testing.T) func(schema.LoadBalancer) error {
			svc := updateService(t, c, ns, name, func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "https", Port: 443})
			})
			if len(svc.Spec.Ports) != 2 {
				t.Fatalf("service ports %v, want 2", svc.Spec.Ports)
			}
			return wantListenersOf(svc)
		}},
		{"port removed", func(t *testing.T) func(schema.LoadBalancer) error {
			svc := updateService(t, c, ns, name, func(s *corev1.Service) {
				s.Spec.Ports = slices.DeleteFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == 443 })
			})
			return wantListenersOf(svc)
		}},
		{"node added", func(t *testing.T) func(schema.LoadBalancer) error {
			// Registered with the parent test: a subtest's cleanup would delete the node.
			createNodeLive(parent, c, "worker-2", "10.244.2.0/24", "worker-1")
			waitInitialised(t, c, ccm, "worker-2", id2)
			return wantTargets(id1, id2)
		}},
		{"node removed", func(t *testing.T) func(schema.LoadBalancer) error {
			if err := admin.CoreV1().Nodes().Delete(ctx, "worker-2", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete node worker-2: %v", err)
			}
			return wantTargets(id1)
		}},
		{"algorithm annotation changed", func(t *testing.T) func(schema.LoadBalancer) error {
			updateService(t, c, ns, name, func(s *corev1.Service) {
				s.Annotations[annotationPrefix+"algorithm-type"] = "least_connections"
			})
			return sameLB(func(lb schema.LoadBalancer) error {
				if lb.Algorithm.Type != "least_connections" {
					return fmt.Errorf("algorithm %q, want least_connections", lb.Algorithm.Type)
				}
				return nil
			})
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			cond := step.do(t)
			waitLB(t, ccm, emu, uid, time.Minute, cond)
		})
		if t.Failed() {
			t.FailNow()
		}
	}

	t.Run("steady state costs no mutation", func(t *testing.T) {
		// Let any reconcile still in flight from the steps above finish: the load balancer is
		// converged, so wait until the emulator sees no request for a moment.
		quiet(t, emu, time.Second, 30*time.Second)
		// The CCM's log of events (not the Event objects: the recorder's spam filter may drop
		// some after the many events of the steps above) says when a sync ended.
		ensured := fmt.Sprintf(`object="%s/%s" fieldPath="" kind="Service" apiVersion="v1" type="Normal" reason="EnsuredLoadBalancer"`, ns, name)
		before := strings.Count(ccm.Logs(), ensured)
		emu.ResetRequests()
		// A label is not a reason for the service controller to sync; an annotation is, even
		// one the CCM does not read: the whole Service is reconciled against the cloud.
		updateService(t, c, ns, name, func(s *corev1.Service) {
			s.Labels["e2e.example/touched"] = "1"
			s.Annotations["e2e.example/touched"] = "1"
		})
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			n := strings.Count(ccm.Logs(), ensured)
			return n > before, fmt.Errorf("%d EnsuredLoadBalancer events logged, want more than %d", n, before)
		})
		if n := emu.MutatingRequests(); n != 0 {
			t.Errorf("%d mutating requests for an unchanged load balancer, want 0: %v", n, emu.Counts())
		}
		if lbs := emu.LoadBalancers(); len(lbs) != 1 || lbs[0].ID != lbID {
			t.Errorf("load balancers %v, want only %d", lbNames(lbs), lbID)
		}
		t.Logf("requests of one reconcile of an unchanged load balancer: %v", emu.Counts())
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("service deleted", func(t *testing.T) {
		if err := admin.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete service: %v", err)
		}
		waitCCM(t, ccm, time.Minute, func() (bool, error) {
			svc, err := admin.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			return false, fmt.Errorf("service %s/%s still exists with finalizers %v", ns, name, svc.Finalizers)
		})
		if lbs := emu.LoadBalancers(); len(lbs) != 0 {
			t.Errorf("load balancers %v after the Service was deleted, want none", lbNames(lbs))
		}
		if diff := cmp.Diff(1, emu.Counts()["DELETE /v1/load_balancers/{id}"]); diff != "" {
			t.Errorf("DELETE /v1/load_balancers/{id} requests (-want +got):\n%s; all: %v", diff, emu.Counts())
		}
	})
}

// quiet waits until the emulator has received no request for the duration d (at most timeout).
func quiet(t *testing.T, emu *hcloudemu.Emulator, d, timeout time.Duration) {
	t.Helper()
	harness.WaitFor(t, timeout, func() (bool, error) {
		reqs := emu.Requests()
		if len(reqs) == 0 {
			return true, nil
		}
		last := reqs[len(reqs)-1]
		if age := time.Since(last.Time); age < d {
			return false, fmt.Errorf("last request %s %s ago", last.Route, age)
		}
		return true, nil
	})
}
