//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// Classes of the load balancer class scenarios (issue 43): ours, and Cilium's beside it.
const (
	ourClass   = "example.com/hetzner"
	otherClass = "io.cilium/l2-announcer"
)

// TestCCMLoadBalancerClassBeside runs the CCM with --load-balancer-class: a class-less
// Service (the upstream service controller's) and a Service of our class (our controller's)
// each get a load balancer, status and the cleanup finalizer; a Service of Cilium's class gets
// nothing and no Hetzner request names it; deleting the classed Service deletes its load
// balancer and removes the finalizer.
func TestCCMLoadBalancerClassBeside(t *testing.T) {
	t.Parallel()
	testLoadBalancerClass(t, false)
}

// TestCCMLoadBalancerClassOnly is TestCCMLoadBalancerClassBeside with
// --load-balancer-class-only: the upstream service controller does not run, so the class-less
// Service gets nothing either, and no Hetzner request names it.
func TestCCMLoadBalancerClassOnly(t *testing.T) {
	t.Parallel()
	testLoadBalancerClass(t, true)
}

// testLoadBalancerClass is the scenario of the two tests above.
func testLoadBalancerClass(t *testing.T, only bool) {
	args := []string{"--load-balancer-class=" + ourClass}
	if only {
		args = append(args, "--load-balancer-class-only")
	}
	c, emu, ccm := startOneWorker(t, ccmRun{args: args, env: lbEnv})
	const ns = "default"
	classed := func(name string, class *string) *corev1.Service {
		svc := loadBalancerService(ns, name)
		svc.Spec.LoadBalancerClass = class
		return svc
	}
	ours, other := ourClass, otherClass
	plain := createService(t, c, classed("plain", nil))
	mine := createService(t, c, classed("mine", &ours))
	cilium := createService(t, c, classed("cilium", &other))

	// Ours is served in both modes.
	lb := waitLB(t, ccm, emu, mine.UID, time.Minute, nil)
	if ips := ingressIPs(waitIngress(t, c, ccm, ns, mine.Name)); !slices.Contains(ips, lb.PublicNet.IPv4.IP) {
		t.Errorf("%s: ingress %v, want the load balancer's IPv4 %s", mine.Name, ips, lb.PublicNet.IPv4.IP)
	}
	if fin := getService(t, c, ns, mine.Name).Finalizers; !slices.Contains(fin, finalizerLBCleanup) {
		t.Errorf("%s: finalizers %v, want %s", mine.Name, fin, finalizerLBCleanup)
	}
	waitEvent(t, c, ccm, ns, mine.Name, corev1.EventTypeNormal, "EnsuredLoadBalancer", "Ensured load balancer")

	// The class-less one by the upstream controller, unless class-only.
	if !only {
		waitLB(t, ccm, emu, plain.UID, time.Minute, nil)
		waitIngress(t, c, ccm, ns, plain.Name)
	}
	// Let the CCM settle, then look at what it left alone.
	quiet(t, emu, 3*time.Second, time.Minute)
	untouched := []*corev1.Service{cilium}
	if only {
		untouched = append(untouched, plain)
		if !strings.Contains(ccm.Logs(), "The service controller does not run") {
			t.Error("class-only: the log does not say that the service controller does not run")
		}
	}
	for _, svc := range untouched {
		got := getService(t, c, ns, svc.Name)
		if len(got.Finalizers) != 0 || len(got.Status.LoadBalancer.Ingress) != 0 {
			t.Errorf("%s: finalizers %v, ingress %v; want none", svc.Name, got.Finalizers, got.Status.LoadBalancer.Ingress)
		}
		if n := len(serviceLBs(emu, svc.UID)); n != 0 {
			t.Errorf("%s: %d load balancers, want 0", svc.Name, n)
		}
		if n := requestsNaming(emu, svc); n != 0 {
			t.Errorf("%s: %d Hetzner requests name it, want 0", svc.Name, n)
		}
		if evs, err := c.Client().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + svc.Name}); err != nil {
			t.Fatal(err)
		} else if len(evs.Items) != 0 {
			t.Errorf("%s: %d events, want none (first: %s %s)", svc.Name, len(evs.Items), evs.Items[0].Reason, evs.Items[0].Message)
		}
	}
	t.Logf("only=%t: requests naming %s: %d, %s: %d, %s: %d; all: %v", only,
		plain.Name, requestsNaming(emu, plain), mine.Name, requestsNaming(emu, mine), cilium.Name, requestsNaming(emu, cilium), emu.Counts())

	// Deleting ours deletes its load balancer, then the finalizer goes and the Service with it.
	if err := c.Client().CoreV1().Services(ns).Delete(context.Background(), mine.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s: %v", mine.Name, err)
	}
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		svc, err := c.Client().CoreV1().Services(ns).Get(context.Background(), mine.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, fmt.Errorf("service %s still exists with finalizers %v", mine.Name, svc.Finalizers)
	})
	if n := len(serviceLBs(emu, mine.UID)); n != 0 {
		t.Errorf("%s deleted: %d load balancers left, want 0", mine.Name, n)
	}
	waitEvent(t, c, ccm, ns, mine.Name, corev1.EventTypeNormal, "DeletedLoadBalancer", "Deleted load balancer")
	if n := requestsNaming(emu, cilium); n != 0 {
		t.Errorf("%s: %d Hetzner requests name it after the deletion, want 0", cilium.Name, n)
	}
	if only {
		if n := requestsNaming(emu, plain); n != 0 {
			t.Errorf("class-only: %s: %d Hetzner requests name it, want 0", plain.Name, n)
		}
	}
}

// requestsNaming counts the Hetzner requests whose query or body names svc: its UID (the
// identity label of its load balancer, in every lookup and create) or its default load
// balancer name.
func requestsNaming(emu *hcloudemu.Emulator, svc *corev1.Service) int {
	name := cloudprovider.DefaultLoadBalancerName(svc)
	n := 0
	for _, r := range emu.Requests() {
		for _, s := range []string{r.Query, r.Body, r.Path} {
			if strings.Contains(s, string(svc.UID)) || strings.Contains(s, name) {
				n++
				break
			}
		}
	}
	return n
}

// TestCCMLoadBalancerClassPolicyDenied: a Service of our class in a namespace the example
// policies (enforced) refuse a public load balancer gets the usual Warning PolicyDenied from our
// controller's EnsureLoadBalancer, then SyncLoadBalancerFailed, and the cloud gets no mutating
// request; the finalizer is on (added before the first create, as upstream).
func TestCCMLoadBalancerClassPolicyDenied(t *testing.T) {
	t.Parallel()
	c, emu, ccm := startOneWorker(t, ccmRun{args: []string{enforce, "--load-balancer-class=" + ourClass, "--load-balancer-class-only"}, env: lbEnv})
	emu.ResetRequests()
	ctx := context.Background()
	if _, err := c.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	svc := loadBalancerService("shop", "web")
	class := ourClass
	svc.Spec.LoadBalancerClass = &class
	created := createService(t, c, svc)
	waitEvent(t, c, ccm, "shop", "web", corev1.EventTypeWarning, "PolicyDenied", `namespace "shop" may not expose load balancers publicly`)
	waitEvent(t, c, ccm, "shop", "web", corev1.EventTypeWarning, "SyncLoadBalancerFailed", "failed to ensure load balancer")
	if n := emu.MutatingRequests(); n != 0 {
		t.Errorf("%d mutating Hetzner requests after a deny, want 0: %v", n, emu.Counts())
	}
	if n := len(serviceLBs(emu, created.UID)); n != 0 {
		t.Errorf("%d load balancers after a deny, want 0", n)
	}
	if fin := getService(t, c, "shop", "web").Finalizers; !slices.Contains(fin, finalizerLBCleanup) {
		t.Errorf("finalizers %v, want %s", fin, finalizerLBCleanup)
	}
}
