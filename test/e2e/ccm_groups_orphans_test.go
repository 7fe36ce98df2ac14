//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestCCMLoadBalancerGroupOrphansDeletedAtStart: the last member of a group leaves while no CCM
// runs, so no leave is ever seen. Group "solo" loses its only member by the annotation removed,
// group "xg" by its member switching to group "xg2"; group "kept" keeps its member. The CCM is
// stopped with SIGTERM, the Services are annotated, and a CCM is started again: its sweep at
// start (once the Service informer has synced) deletes the load balancers of solo and xg
// through the gate, as the last member's leave would have (issue 34: they were left with their
// listeners, labelled as groups, with no member, and nothing ever deleted them). The leavers
// are served elsewhere (a load balancer of its own, the group xg2's), kept's load balancer is
// untouched.
func TestCCMLoadBalancerGroupOrphansDeletedAtStart(t *testing.T) {
	t.Parallel()
	c, emu, endpoint, id := oneWorker(t, "10.244.1.0/24")
	first, _ := startCCM(t, c, "ccm-first", endpoint, emu.Token(), ccmRun{env: lbEnv, args: fastElection})
	waitInitialised(t, c, first, "worker-1", id)

	const ns = "default"
	solo := createService(t, c, groupService(ns, "solo", "solo", 80))
	xg := createService(t, c, groupService(ns, "xg", "xg", 81))
	kept := createService(t, c, groupService(ns, "kept", "kept", 82))
	for _, m := range []*corev1.Service{solo, xg, kept} {
		lb := waitGroupLB(t, first, emu, m.Annotations[annotationGroup], hasListeners(wantGroupListeners(m)))
		waitServedBy(t, c, first, lb, m)
	}
	keptLB := groupLBs(emu, "kept")[0]

	first.Stop()
	t.Logf("stopped %s with SIGTERM", first.Name)
	updateService(t, c, ns, solo.Name, func(s *corev1.Service) { delete(s.Annotations, annotationGroup) })
	updateService(t, c, ns, xg.Name, func(s *corev1.Service) { s.Annotations[annotationGroup] = "xg2" })

	second, _ := startCCM(t, c, "ccm-second", endpoint, emu.Token(), ccmRun{env: lbEnv, args: fastElection})
	waitCCM(t, second, time.Minute, func() (bool, error) {
		var left []string
		for _, g := range []string{"solo", "xg"} {
			if lbs := groupLBs(emu, g); len(lbs) > 0 {
				left = append(left, fmt.Sprintf("%s: %v", g, lbNames(lbs)))
			}
		}
		return len(left) == 0, fmt.Errorf("load balancers of groups without members still there after the restart: %s", strings.Join(left, "; "))
	})
	waitLB(t, second, emu, solo.UID, time.Minute, hasListeners(wantListeners(solo)))
	waitGroupLB(t, second, emu, "xg2", hasListeners(wantGroupListeners(xg)))
	if lbs := groupLBs(emu, "kept"); len(lbs) != 1 || lbs[0].ID != keptLB.ID || !slices.Equal(listeners(lbs[0]), wantGroupListeners(kept)) {
		t.Errorf("group kept: load balancers %v, want %d untouched with listeners %v", lbNames(lbs), keptLB.ID, wantGroupListeners(kept))
	}
	if n := strings.Count(second.Logs(), "Deleting the load balancer of a group without members"); n != 2 {
		t.Errorf("%s logged %d deletes of a group without members, want 2 (solo and xg)", second.Name, n)
	}
}
