package nodelabels_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/nodelabels"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/servercache"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

const ann = nodelabels.AnnotationPluginLabels

var (
	_ nodelabels.ServerLookup = (*servercache.Cache)(nil)
	_ nodelabels.ServerLookup = (*fakeServers)(nil)
	_ nodelabels.Labeler      = (*fakeLabeler)(nil)
	_ nodelabels.Labeler      = (*plugins.Plugin)(nil)
)

// fakeServers serves servers from a map; err fails every lookup.
type fakeServers struct {
	mu      sync.Mutex
	servers map[int64]*hcloud.Server
	err     error
}

func (f *fakeServers) ByID(_ context.Context, id int64) (*hcloud.Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.servers[id], nil
}

// fakeLabeler returns labels (or err) and records its inputs.
type fakeLabeler struct {
	mu     sync.Mutex
	labels map[string]string
	err    error
	got    []plugins.NodeInput
}

func (f *fakeLabeler) NodeLabels(_ context.Context, in plugins.NodeInput) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, in)
	return maps.Clone(f.labels), f.err
}

func (f *fakeLabeler) set(labels map[string]string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.labels, f.err = labels, err
}

func (f *fakeLabeler) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.got)
}

// newNode builds an initialised Node of server id, tweaked by the options.
func newNode(name string, id int64, tweaks ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "worker"}},
		Spec:       corev1.NodeSpec{ProviderID: fmt.Sprintf("hcloud://%d", id)},
	}
	for _, tweak := range tweaks {
		tweak(n)
	}
	return n
}

func withLabels(kv map[string]string) func(*corev1.Node) {
	return func(n *corev1.Node) { maps.Copy(n.Labels, kv) }
}

func withOwned(keys string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Annotations = map[string]string{ann: keys} }
}

func withProviderID(id string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

func withUninitializedTaint(n *corev1.Node) {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: corev1.TaintEffectNoSchedule})
}

// env is a controller over a fake clientset with started informers.
type env struct {
	client   *fake.Clientset
	servers  *fakeServers
	labeler  *fakeLabeler
	recorder *record.FakeRecorder
	ctrl     *nodelabels.Controller
	factory  informers.SharedInformerFactory
}

// newEnv returns a started env with the nodes, each with a server behind it.
func newEnv(t *testing.T, resync time.Duration, nodes ...*corev1.Node) *env {
	t.Helper()
	e := buildEnv(t, resync, nodes...)
	e.start(t)
	return e
}

// buildEnv returns an env whose informers are not started yet, so the clientset's reactors
// can still be changed.
func buildEnv(t *testing.T, resync time.Duration, nodes ...*corev1.Node) *env {
	t.Helper()
	objs := make([]runtime.Object, len(nodes))
	servers := &fakeServers{servers: map[int64]*hcloud.Server{}}
	for i, n := range nodes {
		objs[i] = n
		var id int64
		if _, err := fmt.Sscanf(n.Spec.ProviderID, "hcloud://%d", &id); err == nil {
			servers.servers[id] = &hcloud.Server{ID: id, Name: n.Name, Labels: map[string]string{"pool": "a"}}
		}
	}
	e := &env{
		client:   fake.NewClientset(objs...),
		servers:  servers,
		labeler:  &fakeLabeler{},
		recorder: record.NewFakeRecorder(100),
	}
	factory := informers.NewSharedInformerFactory(e.client, 0)
	ctrl, err := nodelabels.New(nodelabels.Options{
		Client:   e.client,
		Nodes:    factory.Core().V1().Nodes(),
		Servers:  e.servers,
		Labeler:  e.labeler,
		Recorder: e.recorder,
		Resync:   resync,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.ctrl, e.factory = ctrl, factory
	return e
}

// start starts the informers and stops them at the end of the test.
func (e *env) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	e.factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		e.factory.Shutdown()
	})
}

// writes returns the verbs and resources of the write requests the clientset received.
func (e *env) writes() []string {
	var w []string
	for _, a := range e.client.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		w = append(w, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return w
}

// node returns the stored node (not the cached one).
func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestController_sync syncs one node once. It is not parallel: it reads the global metric.
func TestController_sync(t *testing.T) {
	tests := []struct {
		name        string
		node        *corev1.Node
		plugin      map[string]string
		pluginErr   error
		serversErr  error
		noServer    bool
		wantLabels  map[string]string // the node's labels afterwards
		wantOwned   string            // the annotation afterwards; "-" for none
		wantWrites  []string
		wantEvent   string // a prefix; empty for none
		wantResult  string // empty for a skipped node
		wantRequeue bool
		wantCalls   int
	}{
		{
			name:       "a new plugin label is added and owned",
			node:       newNode("n1", 1),
			plugin:     map[string]string{"pool": "a", "example.com/tier": "gold"},
			wantLabels: map[string]string{"role": "worker", "pool": "a", "example.com/tier": "gold"},
			wantOwned:  "example.com/tier,pool",
			wantWrites: []string{"patch nodes"},
			wantResult: "applied",
			wantCalls:  1,
		},
		{
			name:       "an owned label gets the plugin's new value",
			node:       newNode("n1", 1, withLabels(map[string]string{"pool": "a"}), withOwned("pool")),
			plugin:     map[string]string{"pool": "b"},
			wantLabels: map[string]string{"role": "worker", "pool": "b"},
			wantOwned:  "pool",
			wantWrites: []string{"patch nodes"},
			wantResult: "applied",
			wantCalls:  1,
		},
		{
			name:       "a label applied at initialisation with the same value is claimed",
			node:       newNode("n1", 1, withLabels(map[string]string{"pool": "a"})),
			plugin:     map[string]string{"pool": "a"},
			wantLabels: map[string]string{"role": "worker", "pool": "a"},
			wantOwned:  "pool",
			wantWrites: []string{"patch nodes"},
			wantResult: "applied",
			wantCalls:  1,
		},
		{
			name:       "a label someone else set to another value is left alone and reported",
			node:       newNode("n1", 1),
			plugin:     map[string]string{"role": "gpu"},
			wantLabels: map[string]string{"role": "worker"},
			wantOwned:  "-",
			wantEvent:  `Warning PluginLabelConflict labels set by someone else differ from the node_labels plugin and are left alone: role (node has "worker", plugin wants "gpu")`,
			wantResult: "conflict",
			wantCalls:  1,
		},
		{
			name:       "a conflict does not hold back the other labels",
			node:       newNode("n1", 1),
			plugin:     map[string]string{"role": "gpu", "pool": "a"},
			wantLabels: map[string]string{"role": "worker", "pool": "a"},
			wantOwned:  "pool",
			wantWrites: []string{"patch nodes"},
			wantEvent:  "Warning PluginLabelConflict ",
			wantResult: "conflict",
			wantCalls:  1,
		},
		{
			name:       "owned labels the plugin no longer wants are removed, others stay",
			node:       newNode("n1", 1, withLabels(map[string]string{"pool": "a", "gpu": "yes", "team": "x"}), withOwned("gpu,pool")),
			plugin:     map[string]string{"pool": "a"},
			wantLabels: map[string]string{"role": "worker", "pool": "a", "team": "x"},
			wantOwned:  "pool",
			wantWrites: []string{"patch nodes"},
			wantResult: "applied",
			wantCalls:  1,
		},
		{
			name:       "an unchanged node costs no write",
			node:       newNode("n1", 1, withLabels(map[string]string{"pool": "a"}), withOwned("pool")),
			plugin:     map[string]string{"pool": "a"},
			wantLabels: map[string]string{"role": "worker", "pool": "a"},
			wantOwned:  "pool",
			wantResult: "unchanged",
			wantCalls:  1,
		},
		{
			name:       "a failing plugin changes nothing and raises PluginFailed",
			node:       newNode("n1", 1, withLabels(map[string]string{"pool": "a"}), withOwned("pool")),
			pluginErr:  errors.New("trap: unreachable"),
			wantLabels: map[string]string{"role": "worker", "pool": "a"},
			wantOwned:  "pool",
			wantEvent:  "Warning PluginFailed node_labels plugin failed, the node's labels are left as they are: trap: unreachable",
			wantResult: "failed",
			wantCalls:  1,
		},
		{
			name:       "an uninitialised node is left to the upstream node controller",
			node:       newNode("n1", 1, withUninitializedTaint),
			plugin:     map[string]string{"pool": "a"},
			wantLabels: map[string]string{"role": "worker"},
			wantOwned:  "-",
		},
		{
			name:       "a node without a provider ID is skipped",
			node:       newNode("n1", 1, withProviderID("")),
			plugin:     map[string]string{"pool": "a"},
			wantLabels: map[string]string{"role": "worker"},
			wantOwned:  "-",
		},
		{
			name:       "a Robot node is skipped",
			node:       newNode("n1", 1, withProviderID("hrobot://1")),
			plugin:     map[string]string{"pool": "a"},
			wantLabels: map[string]string{"role": "worker"},
			wantOwned:  "-",
		},
		{
			name:       "a node whose server is gone is left to node lifecycle",
			node:       newNode("n1", 1, withLabels(map[string]string{"pool": "a"}), withOwned("pool")),
			noServer:   true,
			wantLabels: map[string]string{"role": "worker", "pool": "a"},
			wantOwned:  "pool",
		},
		{
			name:        "a failed server lookup is retried with backoff",
			node:        newNode("n1", 1),
			plugin:      map[string]string{"pool": "a"},
			serversErr:  errors.New("hcloud: 503"),
			wantLabels:  map[string]string{"role": "worker"},
			wantOwned:   "-",
			wantResult:  "failed",
			wantRequeue: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 0, tc.node)
			e.labeler.set(tc.plugin, tc.pluginErr)
			e.servers.err = tc.serversErr
			if tc.noServer {
				delete(e.servers.servers, 1)
			}
			before := syncs(t, tc.wantResult)
			e.client.ClearActions()

			e.ctrl.SyncNow(t, t.Context(), "n1")

			n := e.node(t, "n1")
			if diff := cmp.Diff(tc.wantLabels, n.Labels); diff != "" {
				t.Errorf("labels mismatch (-want +got):\n%s", diff)
			}
			owned, ok := n.Annotations[ann]
			if !ok {
				owned = "-"
			}
			if owned != tc.wantOwned {
				t.Errorf("annotation %s = %q, want %q", ann, owned, tc.wantOwned)
			}
			if diff := cmp.Diff(tc.wantWrites, e.writes()); diff != "" {
				t.Errorf("writes mismatch (-want +got):\n%s", diff)
			}
			events := e.events()
			switch {
			case tc.wantEvent == "" && len(events) > 0:
				t.Errorf("events = %q, want none", events)
			case tc.wantEvent != "" && (len(events) != 1 || !strings.HasPrefix(events[0], tc.wantEvent)):
				t.Errorf("events = %q, want one starting with %q", events, tc.wantEvent)
			}
			if tc.wantResult != "" {
				if got := syncs(t, tc.wantResult) - before; got != 1 {
					t.Errorf("hcloud_ccm_node_label_sync_total{result=%q} grew by %v, want 1", tc.wantResult, got)
				}
			}
			if got := e.ctrl.Requeues("n1") > 0; got != tc.wantRequeue {
				t.Errorf("requeued = %v, want %v", got, tc.wantRequeue)
			}
			if got := e.labeler.calls(); got != tc.wantCalls {
				t.Errorf("plugin calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestController_syncPluginInput(t *testing.T) {
	e := newEnv(t, 0, newNode("n1", 1))
	e.ctrl.SyncNow(t, t.Context(), "n1")
	want := []plugins.NodeInput{{
		NodeName:   "n1",
		NodeLabels: map[string]string{"role": "worker"},
		Server:     plugins.Server{ID: 1, Name: "n1", Labels: map[string]string{"pool": "a"}, PrivateNets: []plugins.PrivateNet{}},
	}}
	if diff := cmp.Diff(want, e.labeler.got); diff != "" {
		t.Errorf("plugin input mismatch (-want +got):\n%s", diff)
	}
}

func TestController_syncConflictReportedOnce(t *testing.T) {
	e := newEnv(t, 0, newNode("n1", 1))
	e.labeler.set(map[string]string{"role": "gpu"}, nil)
	for range 3 {
		e.ctrl.SyncNow(t, t.Context(), "n1")
	}
	if got := e.events(); len(got) != 1 {
		t.Fatalf("events after three syncs with one conflict = %q, want one", got)
	}

	e.labeler.set(map[string]string{"role": "db"}, nil)
	e.ctrl.SyncNow(t, t.Context(), "n1")
	if got := e.events(); len(got) != 1 || !strings.Contains(got[0], `plugin wants "db"`) {
		t.Fatalf("events after the conflict changed = %q, want one naming the new value", got)
	}
	if got := e.writes(); len(got) != 0 {
		t.Errorf("writes = %q, want none", got)
	}
}

func TestController_syncPatchFailureIsRetried(t *testing.T) {
	e := buildEnv(t, 0, newNode("n1", 1))
	e.labeler.set(map[string]string{"pool": "a"}, nil)
	e.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcdserver: request timed out")
	})
	e.start(t)
	e.ctrl.SyncNow(t, t.Context(), "n1")
	if got := e.ctrl.Requeues("n1"); got != 1 {
		t.Errorf("requeues = %d, want 1", got)
	}
	if _, ok := e.node(t, "n1").Labels["pool"]; ok {
		t.Error("label pool was applied although the patch failed")
	}
}

// TestController_syncPatchConflictIsRetriedNotFailed: a patch rejected because the node changed
// since it was read (409 Conflict, as while the cloud-node controller initialises the node) is
// counted as retried, not failed, and the node is synced again; the next sync applies the labels.
func TestController_syncPatchConflictIsRetriedNotFailed(t *testing.T) {
	e := buildEnv(t, 0, newNode("n1", 1))
	e.labeler.set(map[string]string{"pool": "a"}, nil)
	conflicts := 1
	e.client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), "n1", errors.New("the object has been modified"))
	})
	e.start(t)
	retried, failed := syncs(t, "retried"), syncs(t, "failed")

	e.ctrl.SyncNow(t, t.Context(), "n1")
	if got := syncs(t, "retried") - retried; got != 1 {
		t.Errorf("hcloud_ccm_node_label_sync_total{result=\"retried\"} grew by %v, want 1", got)
	}
	if got := syncs(t, "failed") - failed; got != 0 {
		t.Errorf("hcloud_ccm_node_label_sync_total{result=\"failed\"} grew by %v, want 0", got)
	}
	if got := e.ctrl.Requeues("n1"); got != 1 {
		t.Errorf("requeues = %d, want 1", got)
	}

	applied := syncs(t, "applied")
	e.ctrl.SyncNow(t, t.Context(), "n1")
	if got := syncs(t, "applied") - applied; got != 1 {
		t.Errorf("the sync after the conflict: applied grew by %v, want 1", got)
	}
	if got := e.node(t, "n1").Labels["pool"]; got != "a" {
		t.Errorf("after the retry, label pool = %q, want a", got)
	}
}

// waitFor polls cond until it holds or 10 s passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run starts the controller and stops it at the end of the test, checking that Run returns.
func (e *env) run(t *testing.T, workers int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.ctrl.Run(ctx, workers)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context was cancelled")
		}
	})
}

func (e *env) labelIs(t *testing.T, name, key, value string) func() bool {
	return func() bool {
		v, ok := e.node(t, name).Labels[key]
		return ok && v == value
	}
}

func TestController_Run(t *testing.T) {
	e := newEnv(t, 0, newNode("n1", 1), newNode("n2", 2, withUninitializedTaint))
	e.labeler.set(map[string]string{"pool": "a"}, nil)
	e.run(t, 2)

	waitFor(t, "n1 to get pool=a from its add event", e.labelIs(t, "n1", "pool", "a"))

	t.Run("Trigger re-applies labels after the plugin's output changed", func(t *testing.T) {
		e.labeler.set(map[string]string{"pool": "b", "gpu": "yes"}, nil)
		e.ctrl.Trigger()
		waitFor(t, "n1 to get pool=b", e.labelIs(t, "n1", "pool", "b"))
		waitFor(t, "n1 to get gpu=yes", e.labelIs(t, "n1", "gpu", "yes"))
		if got := e.node(t, "n1").Annotations[ann]; got != "gpu,pool" {
			t.Errorf("annotation = %q, want %q", got, "gpu,pool")
		}
	})

	t.Run("a node is labelled once its uninitialized taint is gone", func(t *testing.T) {
		n := e.node(t, "n2")
		if _, ok := n.Labels["pool"]; ok {
			t.Fatal("the uninitialised node n2 got plugin labels")
		}
		n.Spec.Taints = nil
		if _, err := e.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "n2 to get pool=b", e.labelIs(t, "n2", "pool", "b"))
	})

	t.Run("a label someone removes is put back", func(t *testing.T) {
		n := e.node(t, "n1")
		delete(n.Labels, "gpu")
		if _, err := e.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "n1 to get gpu=yes back", e.labelIs(t, "n1", "gpu", "yes"))
	})
}

func TestController_RunResync(t *testing.T) {
	e := newEnv(t, 20*time.Millisecond, newNode("n1", 1))
	e.labeler.set(map[string]string{"pool": "a"}, nil)
	e.run(t, 1)
	waitFor(t, "n1 to get pool=a", e.labelIs(t, "n1", "pool", "a"))

	// A changed Hetzner label changes no node, so only the periodic pass picks it up.
	e.labeler.set(map[string]string{"pool": "b"}, nil)
	waitFor(t, "the resync to apply pool=b", e.labelIs(t, "n1", "pool", "b"))
}

// TestHammerController_Trigger changes the plugin's output and triggers while several workers
// sync many nodes; once the output stays put, every node converges to it.
func TestHammerController_Trigger(t *testing.T) {
	const nodes, rounds = 40, 20
	objs := make([]*corev1.Node, nodes)
	for i := range objs {
		objs[i] = newNode(fmt.Sprintf("n%d", i), int64(i+1))
	}
	e := newEnv(t, 0, objs...)
	e.labeler.set(map[string]string{"round": "0"}, nil)
	e.run(t, 4)

	var wg sync.WaitGroup
	for r := range rounds {
		e.labeler.set(map[string]string{"round": fmt.Sprint(r), fmt.Sprintf("r%d", r%3): "x"}, nil)
		wg.Go(e.ctrl.Trigger)
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	final := map[string]string{"round": "final", "keep": "yes"}
	e.labeler.set(final, nil)
	e.ctrl.Trigger()

	want := map[string]string{"role": "worker", "round": "final", "keep": "yes"}
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		waitFor(t, name+" to converge", func() bool {
			n := e.node(t, name)
			return maps.Equal(n.Labels, want) && n.Annotations[ann] == "keep,round"
		})
	}
}

func TestNew(t *testing.T) {
	client := fake.NewClientset()
	nodes := informers.NewSharedInformerFactory(client, 0).Core().V1().Nodes()
	full := nodelabels.Options{Client: client, Nodes: nodes, Servers: &fakeServers{}, Labeler: &fakeLabeler{}}
	tests := []struct {
		name    string
		tweak   func(*nodelabels.Options)
		wantErr []string
	}{
		{name: "all required options and no resync are enough", tweak: func(*nodelabels.Options) {}},
		{
			name:    "every missing option is named",
			tweak:   func(o *nodelabels.Options) { *o = nodelabels.Options{} },
			wantErr: []string{"option Client is required", "option Nodes is required", "option Servers is required", "option Labeler is required"},
		},
		{
			name:    "a negative resync is an error",
			tweak:   func(o *nodelabels.Options) { o.Resync = -time.Second },
			wantErr: []string{"option Resync must not be negative, got -1s"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := full
			tc.tweak(&o)
			c, err := nodelabels.New(o)
			if len(tc.wantErr) == 0 {
				if err != nil || c == nil {
					t.Fatalf("New() = %v, %v; want a controller", c, err)
				}
				return
			}
			if err == nil {
				t.Fatal("New() succeeded, want an error")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New() error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// events drains the recorded events.
func (e *env) events() []string { return testutil.Events(e.recorder) }

// syncs returns hcloud_ccm_node_label_sync_total{result}.
func syncs(t *testing.T, result string) float64 {
	return testutil.Metric(t, "hcloud_ccm_node_label_sync_total", map[string]string{"result": result})
}
