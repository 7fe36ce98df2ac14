package loadbalancer

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// TestRead: a call's record keeps the first successful answer of each key (not errors, not the
// key ""); a replay answers from it without calling Hetzner and notes each read it cannot
// answer; without either, read just reads.
func TestRead(t *testing.T) {
	calls := 0
	live := func(v string, err error) func() (string, error) {
		return func() (string, error) { calls++; return v, err }
	}
	ctx, rec := recordReads(context.Background())
	for _, r := range []struct {
		key, answer string
		err         error
	}{{"a", "first", nil}, {"a", "second", nil}, {"b", "", errors.New("down")}, {"", "unnamed", nil}} {
		if got, err := read(ctx, r.key, live(r.answer, r.err)); got != r.answer || !errors.Is(err, r.err) {
			t.Errorf("recording read(%q) = %q, %v; want the live answer %q, %v", r.key, got, err, r.answer, r.err)
		}
	}
	if got := rec.recorded(); len(got) != 1 || got["a"] != "first" {
		t.Errorf("recorded %v, want only a: first (the first answer of a key, no error, no key \"\")", got)
	}

	calls = 0
	rctx, replay := replayReads(context.Background(), rec.recorded())
	if got, err := read(rctx, "a", live("fresh", nil)); got != "first" || err != nil || replay.wasMissed() {
		t.Errorf("replayed read(a) = %q, %v (missed %v); want the recorded %q", got, err, replay.wasMissed(), "first")
	}
	for _, key := range []string{"b", ""} {
		if _, err := read(rctx, key, live("fresh", nil)); !errors.Is(err, errNotRecorded) {
			t.Errorf("replayed read(%q) error = %v, want errNotRecorded", key, err)
		}
	}
	if !replay.wasMissed() || calls != 0 {
		t.Errorf("replay missed %v after %d calls to Hetzner; want missed and no call", replay.wasMissed(), calls)
	}
	if got, _ := read(context.Background(), "a", live("plain", nil)); got != "plain" || calls != 1 {
		t.Errorf("read without record or replay = %q after %d calls, want the live answer", got, calls)
	}
}

// TestRemember_onlyWhatTheReplayReproduces: a denial is remembered only when planning the call
// again from its reads gives the inputs the gate decided (DeniedError.Inputs); otherwise the
// Service is forgotten, so a replay that drifts from the real path never answers a retry.
func TestRemember_onlyWhatTheReplayReproduces(t *testing.T) {
	conn, err := hcloudclient.New(hcloudclient.Options{Config: config.HCloud{Endpoint: "http://127.0.0.1:1/v1", Token: "t", PollInterval: time.Second, RetryInterval: time.Second, Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := executor.New(executor.Options{Conn: conn, Decider: revisionDecider{}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Options{Executor: exec, Readers: Readers{
		LoadBalancers: conn.LoadBalancers(), Networks: conn.Networks(), Certificates: conn.Certificates(), Types: conn.LoadBalancerTypes(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-web"}}
	plan, err := lbplan.ComputeDelete(&lbplan.Actual{ID: 1, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	call := denialCall{kind: callDelete, svc: svc, plan: func(context.Context) (*lbplan.Plan, error) { return &plan, nil }}
	decided := l.gate.Digest(l.priced(plan), svc) // as the executor decides it: priced
	if decided == "" {
		t.Fatal("no digest of the plan")
	}
	for _, tc := range []struct {
		name     string
		inputs   string
		remember bool
	}{
		{"the replay gives the decided inputs", decided, true},
		{"the replay gives other inputs", "not-" + decided, false},
		{"the gate gave no digest", "", false},
	} {
		_, reads := recordReads(context.Background())
		l.remember(context.Background(), call, reads, &gate.DeniedError{Denied: 1, Of: 1, Inputs: tc.inputs})
		if _, ok := l.denied.reads(svc.UID); ok != tc.remember {
			t.Errorf("%s: remembered %v, want %v", tc.name, ok, tc.remember)
		}
	}
}

// revisionDecider allows everything and names the revision "r1".
type revisionDecider struct{ policy.AllowAll }

func (revisionDecider) Revision() string { return "r1" }
