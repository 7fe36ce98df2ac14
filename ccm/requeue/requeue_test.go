package requeue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func service(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)}}
}

// newTest returns a Requeuer over a fake clientset holding svcs, with a fixed clock.
func newTest(t *testing.T, svcs ...*corev1.Service) (*Requeuer, *fake.Clientset) {
	t.Helper()
	objs := make([]runtime.Object, len(svcs))
	for i, s := range svcs {
		objs[i] = s
	}
	client := fake.NewClientset(objs...)
	r := New(client)
	r.now = func() time.Time { return time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) }
	r.base = 0 // failed updates are queued at once (TestRequeuer_actionBackoff tests the backoff)
	t.Cleanup(r.queue.ShutDown)
	return r, client
}

// drain patches what is queued now.
func drain(r *Requeuer) {
	for r.queue.Len() > 0 {
		r.next(context.Background())
	}
}

// marked returns "ns/name=value" for the Services that carry the annotation.
func marked(t *testing.T, client *fake.Clientset) []string {
	t.Helper()
	list, err := client.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		if v, ok := s.Annotations[Annotation]; ok {
			out = append(out, s.Namespace+"/"+s.Name+"="+v)
		}
	}
	slices.Sort(out)
	return out
}

func TestRequeuer_triggers(t *testing.T) {
	const at = " at 2026-11-25T10:00:00Z"
	shopLabels := map[string]string{"team": "shop"}
	tests := []struct {
		name    string
		denied  []*corev1.Service
		settled []*corev1.Service
		trigger func(r *Requeuer)
		want    []string
	}{{
		name:    "namespace labels changed: that namespace's denied Services",
		denied:  []*corev1.Service{service("shop", "web"), service("shop", "api"), service("blog", "web")},
		trigger: func(r *Requeuer) { r.NamespaceChanged(namespace("shop", shopLabels), namespace("shop", nil)) },
		want:    []string{"shop/api=labels of namespace shop" + at, "shop/web=labels of namespace shop" + at},
	}, {
		name:    "namespace updated, same labels: nothing",
		denied:  []*corev1.Service{service("shop", "web")},
		trigger: func(r *Requeuer) { r.NamespaceChanged(namespace("shop", shopLabels), namespace("shop", shopLabels)) },
	}, {
		name:    "namespace added to the cache (its labels could not be read before): that namespace's denied Services",
		denied:  []*corev1.Service{service("shop", "web"), service("blog", "web")},
		trigger: func(r *Requeuer) { r.NamespaceAdded(namespace("shop", nil)) },
		want:    []string{"shop/web=namespace shop readable" + at},
	}, {
		name:    "policy revision: every denied Service",
		denied:  []*corev1.Service{service("shop", "web"), service("blog", "web")},
		trigger: func(r *Requeuer) { r.PolicyLoaded("0123456789ab") },
		want:    []string{"blog/web=policy revision 0123456789ab" + at, "shop/web=policy revision 0123456789ab" + at},
	}, {
		name:    "room in the inventory (a load balancer deleted): every denied Service",
		denied:  []*corev1.Service{service("shop", "web"), service("blog", "web")},
		settled: []*corev1.Service{service("shop", "api")},
		trigger: func(r *Requeuer) { r.RoomAppeared("load balancer a1 deleted") },
		want:    []string{"blog/web=load balancer a1 deleted" + at, "shop/web=load balancer a1 deleted" + at},
	}, {
		name:    "settled Services are not touched",
		denied:  []*corev1.Service{service("shop", "web"), service("shop", "api")},
		settled: []*corev1.Service{service("shop", "api")},
		trigger: func(r *Requeuer) { r.PolicyLoaded("0123456789ab") },
		want:    []string{"shop/web=policy revision 0123456789ab" + at},
	}, {
		name:   "group: the named Services, denied or not",
		denied: []*corev1.Service{service("shop", "web")},
		trigger: func(r *Requeuer) {
			r.Requeue([]*corev1.Service{service("other", "allowed")}, "shop/x left load balancer group web")
		},
		want: []string{"other/allowed=shop/x left load balancer group web" + at},
	}, {
		name:   "group, then a denial is settled: the group's sync still happens, once",
		denied: []*corev1.Service{service("shop", "web")},
		trigger: func(r *Requeuer) {
			r.Requeue([]*corev1.Service{service("shop", "web")}, "group web changed")
			r.Settled(service("shop", "web"))
		},
		want: []string{"shop/web=group web changed" + at},
	}, {
		name:    "settled after queueing, before the patch: not touched",
		denied:  []*corev1.Service{service("shop", "web")},
		trigger: func(r *Requeuer) { r.PolicyLoaded("0123456789ab"); r.Settled(service("shop", "web")) },
	}, {
		name: "a failed detached update: that Service, denied or not, with the error",
		trigger: func(r *Requeuer) {
			r.ActionFailed(service("other", "allowed"), errors.New("add_target node-3: action failed"))
		},
		want: []string{"other/allowed=failed load balancer update (add_target node-3: action failed)" + at},
	}, {
		name:   "a failed update is retried even when the Service settles before the patch",
		denied: []*corev1.Service{service("shop", "web")},
		trigger: func(r *Requeuer) {
			r.ActionFailed(service("shop", "web"), errors.New("boom"))
			r.Settled(service("shop", "web"))
		},
		want: []string{"shop/web=failed load balancer update (boom)" + at},
	}, {
		name:   "drift: the named Services, denied or not, once, with the reason",
		denied: []*corev1.Service{service("shop", "web")},
		trigger: func(r *Requeuer) {
			r.Drifted([]*corev1.Service{service("other", "allowed")}, "load balancer deleted behind the CCM's back")
		},
		want: []string{"other/allowed=load balancer deleted behind the CCM's back" + at},
	}, {
		name: "a failed update is retried once: a later policy revision does not retry it again",
		trigger: func(r *Requeuer) {
			r.ActionFailed(service("other", "allowed"), errors.New("boom"))
			drain(r)
			if _, err := r.client.CoreV1().Services("other").Patch(context.Background(), "allowed", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"`+Annotation+`":null}}}`), metav1.PatchOptions{}); err != nil {
				panic(err)
			}
			r.PolicyLoaded("0123456789ab")
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, client := newTest(t, append(tc.denied, service("other", "allowed"))...)
			for _, s := range tc.denied {
				r.Denied(s)
			}
			for _, s := range tc.settled {
				r.Settled(s)
			}
			tc.trigger(r)
			drain(r)
			if diff := cmp.Diff(tc.want, marked(t, client)); diff != "" {
				t.Errorf("annotated Services (-want +got):\n%s", diff)
			}
		})
	}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// TestRequeuer_patchesStatusWithUIDPrecondition: the patch goes to the status subresource (the
// CCM may patch services/status, not services) and carries the UID it recorded.
func TestRequeuer_patchesStatusWithUIDPrecondition(t *testing.T) {
	r, client := newTest(t, service("shop", "web"))
	r.Denied(service("shop", "web"))
	r.PolicyLoaded("0123456789ab")
	drain(r)
	var patches []k8stesting.PatchAction
	for _, a := range client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			patches = append(patches, p)
		}
	}
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1: %v", len(patches), client.Actions())
	}
	p := patches[0]
	if p.GetSubresource() != "status" || p.GetPatchType() != types.MergePatchType {
		t.Errorf("patch of subresource %q type %s, want status and a merge patch", p.GetSubresource(), p.GetPatchType())
	}
	if !strings.Contains(string(p.GetPatch()), `"uid":"shop-web"`) {
		t.Errorf("patch %s does not carry the Service's UID", p.GetPatch())
	}
}

// TestRequeuer_goneServiceIsForgotten: a Service deleted meanwhile (NotFound) is dropped from
// the denied set.
func TestRequeuer_goneServiceIsForgotten(t *testing.T) {
	r, _ := newTest(t) // the Service does not exist
	r.Denied(service("shop", "web"))
	r.PolicyLoaded("0123456789ab")
	drain(r)
	if got := r.DeniedServices(); len(got) != 0 {
		t.Errorf("denied after NotFound = %v, want none", got)
	}
}

// TestRequeuer_failedPatchIsRetried: an apiserver error is retried with backoff.
func TestRequeuer_failedPatchIsRetried(t *testing.T) {
	r, client := newTest(t, service("shop", "web"))
	fails := 2
	client.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails > 0 {
			fails--
			return true, nil, errors.New("apiserver unavailable")
		}
		return false, nil, nil
	})
	r.Denied(service("shop", "web"))
	r.PolicyLoaded("0123456789ab")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 3 { // two failures, then the patch; the backoff starts at 5 ms
		r.next(ctx)
	}
	want := []string{"shop/web=policy revision 0123456789ab at 2026-11-25T10:00:00Z"}
	if diff := cmp.Diff(want, marked(t, client)); diff != "" {
		t.Errorf("annotated Services (-want +got):\n%s", diff)
	}
}

// TestRequeuer_Run ends when ctx ends.
func TestRequeuer_Run(t *testing.T) {
	r, client := newTest(t, service("shop", "web"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Denied(service("shop", "web"))
	r.PolicyLoaded("0123456789ab")
	deadline := time.Now().Add(5 * time.Second)
	for len(marked(t, client)) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	if len(marked(t, client)) != 1 {
		t.Error("Run did not patch the denied Service")
	}
}

// TestRequeuer_ClearStatus: the load balancer addresses leave the status through the status
// subresource, with the UID as precondition; a Service that is gone is no error.
func TestRequeuer_ClearStatus(t *testing.T) {
	tests := []struct {
		name   string
		exists bool
	}{
		{"the addresses are removed", true},
		{"a Service that is gone is no error", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := service("shop", "web")
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
			var r *Requeuer
			var client *fake.Clientset
			if tc.exists {
				r, client = newTest(t, svc.DeepCopy())
			} else {
				r, client = newTest(t)
			}
			if err := r.ClearStatus(context.Background(), svc); err != nil {
				t.Fatalf("ClearStatus: %v", err)
			}
			if !tc.exists {
				return
			}
			got, err := client.CoreV1().Services("shop").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.LoadBalancer.Ingress) != 0 {
				t.Errorf("ingress %v after ClearStatus, want none", got.Status.LoadBalancer.Ingress)
			}
			for _, a := range client.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && (p.GetSubresource() != "status" || !strings.Contains(string(p.GetPatch()), `"uid":"shop-web"`)) {
					t.Errorf("patch %s of subresource %q, want status with the UID", p.GetPatch(), p.GetSubresource())
				}
			}
		})
	}
}

// TestRequeuer_actionBackoff: the retries of a Service's failed updates are 2, 4, 8, 16, 16 s
// apart; a failure while the retry is scheduled changes nothing; SyncFailed goes on with the
// streak only when there is one; Synced ends it.
func TestRequeuer_actionBackoff(t *testing.T) {
	type step struct {
		advance time.Duration // the clock moves first
		call    string        // "action", "sync-failed", "synced"
		// wantDue is how long after the step's time the retry is due (0: none scheduled).
		wantDue time.Duration
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "doubling up to the cap",
		steps: []step{
			{0, "action", 2 * time.Second},
			{2 * time.Second, "sync-failed", 4 * time.Second},
			{4 * time.Second, "sync-failed", 8 * time.Second},
			{8 * time.Second, "action", 16 * time.Second},
			{16 * time.Second, "sync-failed", 16 * time.Second},
			{16 * time.Second, "sync-failed", 16 * time.Second},
		},
	}, {
		name: "a failure while the retry is scheduled changes nothing",
		steps: []step{
			{0, "action", 2 * time.Second},
			{time.Second, "action", time.Second},
			{0, "sync-failed", time.Second},
			{time.Second, "sync-failed", 4 * time.Second},
		},
	}, {
		name: "a sync that fails outside a streak is the service controller's",
		steps: []step{
			{0, "sync-failed", 0},
		},
	}, {
		name: "a sync that succeeds ends the streak",
		steps: []step{
			{0, "action", 2 * time.Second},
			{2 * time.Second, "sync-failed", 4 * time.Second},
			{4 * time.Second, "synced", 0},
			{0, "sync-failed", 0},
			{time.Minute, "action", 2 * time.Second},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := service("shop", "web")
			r, _ := newTest(t, svc)
			r.base = ActionRetryBase
			now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
			r.now = func() time.Time { return now }
			for i, s := range tt.steps {
				now = now.Add(s.advance)
				switch s.call {
				case "action":
					r.ActionFailed(svc, errors.New("boom"))
				case "sync-failed":
					r.SyncFailed(svc, errors.New("boom"))
				case "synced":
					r.Synced(svc)
				}
				due, ok := r.RetryScheduled(svc)
				var got time.Duration
				if ok {
					got = due.Sub(now)
				}
				if got != s.wantDue {
					t.Errorf("step %d (%s after %v): retry due in %v, want %v", i, s.call, s.advance, got, s.wantDue)
				}
			}
		})
	}
}
