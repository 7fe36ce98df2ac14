package loadbalancer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// failureTracker is a DenialTracker that also records failed detached updates.
type failureTracker struct {
	mu     sync.Mutex
	failed []string
}

func (*failureTracker) Denied(*corev1.Service)  {}
func (*failureTracker) Settled(*corev1.Service) {}

func (f *failureTracker) ActionFailed(svc *corev1.Service, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, svc.Name+": "+err.Error())
}

func (f *failureTracker) get() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// TestUpdateLoadBalancer_detached: an Update's target change returns once the API accepted it;
// when its action then fails, the Service is retried (ActionFailureTracker) and its cached load
// balancer forgotten, so the next Update reads it and adds the target again. A tracker that is
// not an ActionFailureTracker still gets the cache forgotten.
func TestUpdateLoadBalancer_detached(t *testing.T) {
	tests := []struct {
		name        string
		tracker     bool
		wantRetried int
	}{
		{"the tracker retries the Service", true, 1},
		{"no tracker: the cache is forgotten all the same", false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tracker := &failureTracker{}
			ev := newEnv(t, withServers(3), withLBOption(func(o *loadbalancer.Options) {
				if tc.tracker {
					o.DenialTracker = tracker
				}
			}))
			ctx := context.Background()
			svc := newService("web", withPorts(80))
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
				t.Fatal(err)
			}
			ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true, Times: 1})
			if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
				t.Fatalf("Update whose action fails later = %v, want nil (the API accepted the request)", err)
			}
			if err := ev.exec.Settle(ctx, svc.UID); err != nil {
				t.Fatal(err)
			}
			if got := tracker.get(); len(got) != tc.wantRetried || (len(got) == 1 && !strings.Contains(got[0], "action_failed")) {
				t.Errorf("retried %v, want %d retry naming action_failed", got, tc.wantRetried)
			}
			if !hasEvent(ev.events(), "Warning UpdateLoadBalancerFailed") {
				t.Error("no Warning event UpdateLoadBalancerFailed")
			}
			ev.emu.ResetRequests()
			if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes); err != nil {
				t.Fatal(err)
			}
			if err := ev.exec.Settle(ctx, svc.UID); err != nil {
				t.Fatal(err)
			}
			if got := lbReads(ev.emu); got != 1 {
				t.Errorf("load balancer reads after the failed action = %d, want 1 (the cache forgot it)", got)
			}
			if got := len(ev.onlyLB().Targets); got != 3 {
				t.Errorf("targets = %d, want 3 (the failed add repeated)", got)
			}
		})
	}
}

// retryTracker is a failureTracker that is also an ActionRetryTracker: a retry is scheduled
// (due in an hour) while scheduled is set, and it records SyncFailed and Synced.
type retryTracker struct {
	failureTracker
	scheduled bool
	results   []string
}

func (r *retryTracker) RetryScheduled(*corev1.Service) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Now().Add(time.Hour), r.scheduled
}

func (r *retryTracker) SyncFailed(svc *corev1.Service, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, "failed")
}

func (r *retryTracker) Synced(*corev1.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, "synced")
}

// TestLoadBalancers_retryScheduled (issue 34 §1): while the retry of a failed update is
// scheduled, UpdateLoadBalancer returns nil and EnsureLoadBalancer a *RetryScheduledError, both
// without a request; otherwise both run, and an Ensure reports its result to the tracker.
func TestLoadBalancers_retryScheduled(t *testing.T) {
	tests := []struct {
		name         string
		scheduled    bool
		fail         bool // the Ensure's add_target action fails
		wantRequests bool
		wantEnsure   string // "" (nil), "scheduled", "failed"
		wantResults  []string
	}{
		{"retry scheduled: nothing sent", true, false, false, "scheduled", nil},
		{"no retry scheduled: the sync runs and reports success", false, false, true, "", []string{"synced"}},
		{"no retry scheduled: a failed sync is reported", false, true, true, "failed", []string{"failed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tracker := &retryTracker{}
			ev := newEnv(t, withServers(3), withLBOption(func(o *loadbalancer.Options) { o.DenialTracker = tracker }))
			ctx := context.Background()
			svc := newService("web", withPorts(80))
			if _, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes[:1]); err != nil {
				t.Fatal(err)
			}
			tracker.results, tracker.scheduled = nil, tc.scheduled
			if tc.fail {
				ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", FailAction: true})
			}
			ev.emu.ResetRequests()
			if !tc.fail {
				if err := ev.lbs.UpdateLoadBalancer(ctx, clusterName, svc, ev.nodes[:2]); err != nil {
					t.Fatalf("UpdateLoadBalancer = %v, want nil", err)
				}
				if err := ev.exec.Settle(ctx, svc.UID); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ev.lbs.EnsureLoadBalancer(ctx, clusterName, svc, ev.nodes)
			var scheduled *loadbalancer.RetryScheduledError
			got := ""
			switch {
			case errors.As(err, &scheduled):
				got = "scheduled"
			case err != nil:
				got = "failed"
			}
			if got != tc.wantEnsure {
				t.Errorf("EnsureLoadBalancer = %v, want %q", err, tc.wantEnsure)
			}
			if got := len(ev.emu.Requests()) > 0; got != tc.wantRequests {
				t.Errorf("requests sent = %v, want %v (%d)", got, tc.wantRequests, len(ev.emu.Requests()))
			}
			if !slices.Equal(tracker.results, tc.wantResults) {
				t.Errorf("tracker results %v, want %v", tracker.results, tc.wantResults)
			}
		})
	}
}
