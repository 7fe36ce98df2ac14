//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// annotationDeleteProtection is this CCM's delete protection annotation (the change_protection
// kind).
const annotationDeleteProtection = "service.hcloud-policy-ccm.io/load-balancer-delete-protection"

// TestCCMDeleteProtectionKeepsTheLoadBalancer: a Service with the delete protection annotation
// gets a protected load balancer (change_protection, through the example policies); deleting
// the Service releases its finalizer (the Service goes) and keeps the load balancer, with a
// DeleteProtected event and no DELETE request.
func TestCCMDeleteProtectionKeepsTheLoadBalancer(t *testing.T) {
	t.Parallel()
	c, emu, ccm := startOneWorker(t, ccmRun{env: lbEnv})

	const ns, name = "default", "protected"
	svc := loadBalancerService(ns, name)
	svc.Annotations = map[string]string{annotationDeleteProtection: "true"}
	uid := createService(t, c, svc).UID
	lb := waitLB(t, ccm, emu, uid, time.Minute, func(lb schema.LoadBalancer) error {
		if !lb.Protection.Delete {
			return fmt.Errorf("load balancer %s is not delete protected", lb.Name)
		}
		return nil
	})

	ctx := context.Background()
	admin := c.Client()
	if err := admin.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete service: %v", err)
	}
	waitCCM(t, ccm, time.Minute, func() (bool, error) {
		svc, err := admin.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return false, fmt.Errorf("service %s/%s still exists with finalizers %v", ns, name, svc.Finalizers)
	})
	if lbs := emu.LoadBalancers(); len(lbs) != 1 || lbs[0].ID != lb.ID {
		t.Errorf("load balancers %v after the Service was deleted, want the protected %d", lbNames(lbs), lb.ID)
	}
	if n := emu.Counts()["DELETE /v1/load_balancers/{id}"]; n != 0 {
		t.Errorf("%d DELETE /v1/load_balancers/{id} requests, want 0", n)
	}
	if !strings.Contains(ccm.Logs(), `reason="DeleteProtected"`) {
		t.Error("no DeleteProtected event logged")
	}
}
