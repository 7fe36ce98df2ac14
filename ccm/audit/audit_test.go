package audit_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/audit"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/loadbalancer"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

// planner is a LoadBalancerPlanner over fixed Services: each one's create (lbplan, as the CCM
// plans it from its annotations). It counts the plannings that read Hetzner (from nil) and
// those from earlier reads; from earlier reads, the Services named in unread are plans with
// ErrNotRead.
type planner struct {
	t      *testing.T
	svcs   []*corev1.Service
	unread map[string]bool

	mu                  sync.Mutex
	reading, fromCaches int
}

func (p *planner) AuditPlansFrom(_ context.Context, _ string, _ []*corev1.Node, _ loadbalancer.StepDenier, from *loadbalancer.AuditReads) ([]loadbalancer.AuditPlan, *loadbalancer.AuditReads, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	replay := from != nil
	if replay {
		p.fromCaches++
	} else {
		p.reading++
		from = &loadbalancer.AuditReads{}
	}
	var out []loadbalancer.AuditPlan
	for _, svc := range p.svcs {
		if replay && p.unread[svc.Name] {
			out = append(out, loadbalancer.AuditPlan{Service: svc, Err: fmt.Errorf("planning %s: %w", svc.Name, loadbalancer.ErrNotRead)})
			continue
		}
		d, err := lbservice.NewDesired(lbservice.DesiredInput{Service: svc, Name: svc.Name, Defaults: config.LoadBalancer{Location: "fsn1", Type: "lb11"}})
		if err != nil {
			p.t.Fatal(err)
		}
		plan, err := lbplan.Compute(d, nil)
		if err != nil {
			p.t.Fatal(err)
		}
		out = append(out, loadbalancer.AuditPlan{Service: svc, Plan: plan})
	}
	return out, from, nil
}

// counts returns how often p planned reading Hetzner and from earlier reads.
func (p *planner) counts() (reading, fromCaches int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reading, p.fromCaches
}

// fixedRoutes is a RoutePlanner over fixed routes to node-1.
type fixedRoutes []string

// routesRead counts the reads of every fixedRoutes.
var routesRead atomic.Int64

func (r fixedRoutes) AuditPlans(context.Context) ([]routeplan.Plan, error) {
	routesRead.Add(1)
	var out []routeplan.Plan
	for _, dest := range r {
		out = append(out, routeplan.Ensure(nil, routeplan.Route{Destination: netip.MustParsePrefix(dest), Gateway: netip.MustParseAddr("10.0.0.2")}, "node-1"))
	}
	return out, nil
}

// rules is a Decider: lb31 is denied (code no_lb31), port 8080 warned (code port_8080), routes
// outside 10.244.0.0/16 denied (code route_cidr). It records whether every input had audit set.
type rules struct {
	mu      sync.Mutex
	relaxed bool
	noAudit int
}

func (r *rules) Decide(_ context.Context, in input.Input) policy.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !in.Audit {
		r.noAudit++
	}
	d := policy.Decision{Allowed: true}
	if r.relaxed {
		return d
	}
	if lb := in.LoadBalancer; lb != nil && lb.Type == "lb31" {
		d.Deny = append(d.Deny, policy.Message{Msg: "lb31 is not allowed", Code: "no_lb31"})
		d.DryRun = true // dry run: allowed, and still a violation
	}
	if lb := in.LoadBalancer; lb != nil {
		for _, s := range lb.Services {
			if s.ListenPort == 8080 {
				d.Warn = append(d.Warn, policy.Message{Msg: "port 8080 is deprecated", Code: "port_8080"})
			}
		}
	}
	if in.Route != nil && !netip.MustParsePrefix("10.244.0.0/16").Contains(netip.MustParsePrefix(in.Route.Destination).Addr()) {
		d.Deny, d.Allowed = append(d.Deny, policy.Message{Msg: "route outside the cluster CIDR", Code: "route_cidr"}), false
	}
	return d
}

func service(ns, name, typ string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Annotations: map[string]string{"load-balancer.hetzner.cloud/type": typ}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: port, NodePort: 30000}}},
	}
}

func newFakeDynamic() *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		audit.PolicyReports:        "PolicyReportList",
		audit.ClusterPolicyReports: "ClusterPolicyReportList",
	})
}

type env struct {
	p        *planner
	rules    *rules
	recorder *record.FakeRecorder
	dyn      *dynamicfake.FakeDynamicClient
	a        *audit.Auditor
}

func newEnv(t *testing.T, svcs ...*corev1.Service) *env {
	return newEnvDebounced(t, 0, svcs...)
}

// newEnvDebounced is newEnv with Options.Debounce.
func newEnvDebounced(t *testing.T, debounce time.Duration, svcs ...*corev1.Service) *env {
	e := &env{p: &planner{t: t, svcs: svcs}, rules: &rules{}, recorder: record.NewFakeRecorder(100), dyn: newFakeDynamic()}
	var err error
	e.a, err = audit.New(audit.Options{
		LoadBalancers: e.p, Routes: fixedRoutes{"10.244.1.0/24", "192.168.0.0/24"}, Gate: gate.Gate{Decider: e.rules, Cluster: input.Cluster{Name: "k"}},
		ClusterName: "k", Recorder: e.recorder, Reports: audit.Reports{Client: e.dyn},
		Debounce: debounce,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) audit(t *testing.T) audit.Summary {
	t.Helper()
	s, err := e.a.Audit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// results returns the results of every report as "ns|policy|result|resource".
func (e *env) results(t *testing.T) []string {
	t.Helper()
	var out []string
	add := func(items []unstructured.Unstructured) {
		for _, item := range items {
			results, _, _ := unstructured.NestedSlice(item.Object, "results")
			for _, r := range results {
				m := r.(map[string]any)
				res := m["resources"].([]any)[0].(map[string]any)
				out = append(out, strings.Join([]string{item.GetNamespace(), m["policy"].(string), m["result"].(string), res["kind"].(string) + "/" + res["name"].(string)}, "|"))
			}
		}
	}
	ns, err := e.dyn.Resource(audit.PolicyReports).Namespace("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add(ns.Items)
	cl, err := e.dyn.Resource(audit.ClusterPolicyReports).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add(cl.Items)
	return out
}

func TestAudit_ReportsViolations(t *testing.T) {
	e := newEnv(t, service("shop", "web", "lb31", 80), service("shop", "ok", "lb11", 80), service("blog", "old", "lb11", 8080))
	s := e.audit(t)
	if s.LoadBalancers != 3 || s.Routes != 2 {
		t.Errorf("judged %d load balancers and %d routes, want 3 and 2", s.LoadBalancers, s.Routes)
	}
	want := []string{"blog|port_8080|warn|Service/old", "shop|no_lb31|fail|Service/web", "|route_cidr|fail|Node/node-1"}
	if diff := cmp.Diff(want, e.results(t)); diff != "" {
		t.Errorf("report results (-want +got):\n%s", diff)
	}
	if e.rules.noAudit != 0 {
		t.Errorf("%d decisions without input.audit, want 0", e.rules.noAudit)
	}
	events := testutil.Events(e.recorder)
	if len(events) != 3 || !strings.HasPrefix(events[0], "Warning PolicyViolation policy audit") {
		t.Errorf("events = %q, want one PolicyViolation per violating subject", events)
	}

	e.p.svcs[0] = service("shop", "web", "lb11", 80) // the Service is fixed
	e.audit(t)
	want = []string{"blog|port_8080|warn|Service/old", "|route_cidr|fail|Node/node-1"}
	if diff := cmp.Diff(want, e.results(t)); diff != "" {
		t.Errorf("after the fix, report results (-want +got):\n%s", diff)
	}
	if ns, _ := e.dyn.Resource(audit.PolicyReports).Namespace("shop").List(context.Background(), metav1.ListOptions{}); len(ns.Items) != 0 {
		t.Errorf("namespace shop keeps %d reports without violations, want none", len(ns.Items))
	}

	e.rules.relaxed = true // the policy is relaxed
	e.audit(t)
	if got := e.results(t); len(got) != 0 {
		t.Errorf("after relaxing the policy, results %q, want none", got)
	}
}

// TestAudit_UnchangedStateGivesNoNewEvent: audits of an unchanged state put no second event on
// a Service; a change of its violations does.
func TestAudit_UnchangedStateGivesNoNewEvent(t *testing.T) {
	e := newEnv(t, service("shop", "web", "lb31", 80))
	for range 3 {
		e.audit(t)
	}
	if events := testutil.Events(e.recorder); len(events) != 2 { // the Service and the route
		t.Errorf("three audits of one state gave events %q, want one per subject", events)
	}
	e.p.svcs[0] = service("shop", "web", "lb31", 8080)
	e.audit(t)
	if events := testutil.Events(e.recorder); len(events) != 1 || !strings.Contains(events[0], "port_8080") {
		t.Errorf("a new violation gave events %q, want one naming it", events)
	}
}

// TestAudit_WithoutPolicyReportAPI: without the CRDs the audit still judges, records events and
// returns no error.
func TestAudit_WithoutPolicyReportAPI(t *testing.T) {
	e := newEnv(t, service("shop", "web", "lb31", 80))
	e.dyn.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "wgpolicyk8s.io", Resource: "policyreports"}, "")
	})
	s := e.audit(t)
	if len(s.Violations) != 2 || len(testutil.Events(e.recorder)) != 2 {
		t.Errorf("without the CRDs: %d violations, want 2, and an event each", len(s.Violations))
	}
}

// failingRoutes is a RoutePlanner whose listing fails.
type failingRoutes struct{}

func (failingRoutes) AuditPlans(context.Context) ([]routeplan.Plan, error) {
	return nil, errors.New("reading network 1: connection refused")
}

// TestAudit_FailedListingKeepsTheReports: an audit whose listing fails reports nothing, so the
// results of the last audit stay; the next good audit reports again.
func TestAudit_FailedListingKeepsTheReports(t *testing.T) {
	e := newEnv(t, service("shop", "web", "lb31", 80))
	e.audit(t)
	want := e.results(t)
	broken, err := audit.New(audit.Options{
		LoadBalancers: &planner{t: t}, Routes: failingRoutes{}, Gate: gate.Gate{Decider: e.rules}, Recorder: e.recorder, Reports: audit.Reports{Client: e.dyn},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Audit(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Audit() with a failing listing = %v, want its error", err)
	}
	if diff := cmp.Diff(want, e.results(t)); diff != "" || len(want) != 2 {
		t.Errorf("results after a failed audit (-before +after):\n%s", diff)
	}
}

// TestAuditFromCaches: an audit from the caches judges today's Services from the last reads
// (no planning that reads, no route read): a fixed Service's result is gone, a Service the reads
// do not cover keeps its violations of the last audit, and the routes are judged again. Before
// any audit that read, it reads.
func TestAuditFromCaches(t *testing.T) {
	e := newEnv(t, service("shop", "web", "lb31", 80), service("shop", "new", "lb31", 81))
	if s, err := e.a.AuditFromCaches(context.Background()); err != nil || s.FromCaches {
		t.Fatalf("first AuditFromCaches() = fromCaches %v, %v; want an audit that reads", s.FromCaches, err)
	}
	routesBefore := routesRead.Load()
	e.p.svcs[0] = service("shop", "web", "lb11", 80) // fixed
	e.p.svcs[1] = service("shop", "new", "lb11", 81) // fixed too, but not in the reads
	e.p.unread = map[string]bool{"new": true}
	s, err := e.a.AuditFromCaches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if reading, fromCaches := e.p.counts(); reading != 1 || fromCaches != 1 {
		t.Errorf("plannings: %d reading, %d from the reads; want 1 and 1", reading, fromCaches)
	}
	if n := routesRead.Load() - routesBefore; n != 0 {
		t.Errorf("the audit from the caches read the routes %d times, want 0", n)
	}
	if !s.FromCaches || s.Carried != 1 || s.Routes != 2 {
		t.Errorf("summary: fromCaches %v, carried %d, routes %d; want true, 1, 2", s.FromCaches, s.Carried, s.Routes)
	}
	want := []string{"shop|no_lb31|fail|Service/new", "|route_cidr|fail|Node/node-1"}
	if diff := cmp.Diff(want, e.results(t)); diff != "" {
		t.Errorf("report results (-want +got):\n%s", diff)
	}
	e.audit(t) // reads: the new Service is planned, its fix shows
	if diff := cmp.Diff([]string{"|route_cidr|fail|Node/node-1"}, e.results(t)); diff != "" {
		t.Errorf("after an audit that reads, report results (-want +got):\n%s", diff)
	}
}

// TestRun_ChangesAuditFromCachesDebounced: Run audits reading at once, then a burst of changes
// gives one audit from the caches once the debounce has passed, and no audit that reads; a
// revision (trigger) gives an audit that reads.
func TestRun_ChangesAuditFromCachesDebounced(t *testing.T) {
	const debounce = 100 * time.Millisecond
	e := newEnvDebounced(t, debounce, service("shop", "web", "lb31", 80))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trigger, changed := make(chan struct{}, 1), make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.a.Run(ctx, func() bool { return true }, trigger, changed, time.Hour)
	}()
	waitFor := func(what string, reading, fromCaches int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r, c := e.p.counts()
			if r == reading && c == fromCaches {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d plannings reading, %d from the caches; want %d and %d", what, r, c, reading, fromCaches)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("at start", 1, 0)
	start := time.Now()
	for range 5 {
		select {
		case changed <- struct{}{}:
		default:
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor("after a burst of changes", 1, 1)
	if took := time.Since(start); took < debounce {
		t.Errorf("the audit from the caches came %v after the first change, before the debounce of %v", took, debounce)
	}
	time.Sleep(3 * debounce)
	waitFor("once the burst settled", 1, 1)
	trigger <- struct{}{}
	waitFor("after a revision", 2, 1)
	cancel()
	<-done
}
