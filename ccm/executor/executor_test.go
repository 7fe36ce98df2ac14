package executor_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hetznercloud/hcloud-go/v2/hcloud"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/gate"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbservice"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/testutil"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
)

const uid = "0b7e7a52-6f1c-4a55-8a9e-2c3d4e5f6a7b"

// decider returns a fixed decision and records the inputs.
type decider struct {
	mu       sync.Mutex
	decision func(input.Input) policy.Decision
	inputs   []input.Input
}

func (d *decider) Decide(_ context.Context, in input.Input) policy.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inputs = append(d.inputs, in)
	return d.decision(in)
}

func allow(input.Input) policy.Decision { return policy.Decision{Allowed: true} }

func denyAll(input.Input) policy.Decision {
	return policy.Decision{Deny: []policy.Message{{Msg: "frozen", Code: "F1"}}}
}

type env struct {
	emu      *hcloudemu.Emulator
	client   *hcloud.Client
	conn     *hcloudclient.Conn
	recorder *record.FakeRecorder
	decider  *decider
	exec     *executor.Executor
	network  *hcloud.Network
	servers  []int64
}

func newEnv(t *testing.T, decide func(input.Input) policy.Decision, opts ...func(*executor.Options)) *env {
	t.Helper()
	emu, endpoint := hcloudemu.NewTestServer(t)
	clientOpts := []hcloud.ClientOption{
		hcloud.WithEndpoint(endpoint), hcloud.WithToken(emu.Token()),
		hcloud.WithPollOpts(hcloud.PollOpts{BackoffFunc: hcloud.ConstantBackoff(2 * time.Millisecond)}),
		hcloud.WithRetryOpts(hcloud.RetryOpts{BackoffFunc: hcloud.ConstantBackoff(time.Millisecond), MaxRetries: 3}),
	}
	client := hcloud.NewClient(clientOpts...)
	conn := testConn(t, endpoint, emu.Token(), clientOpts...)
	netID, err := emu.AddNetwork(hcloudemu.NetworkSpec{Name: "k8s", IPRange: "10.0.0.0/8",
		Subnets: []hcloudemu.SubnetSpec{{Type: "cloud", IPRange: "10.0.0.0/24", NetworkZone: "eu-central"}}})
	if err != nil {
		t.Fatal(err)
	}
	ev := &env{emu: emu, client: client, conn: conn, recorder: record.NewFakeRecorder(100), decider: &decider{decision: decide}, network: &hcloud.Network{ID: netID}}
	for i := 1; i <= 2; i++ {
		id, err := emu.AddServer(hcloudemu.ServerSpec{Name: fmt.Sprintf("node-%d", i), Networks: []hcloudemu.ServerNetwork{{NetworkID: netID, IP: fmt.Sprintf("10.0.0.%d", 10+i)}}})
		if err != nil {
			t.Fatal(err)
		}
		ev.servers = append(ev.servers, id)
	}
	cluster := input.Cluster{Name: "prod", ClusterCIDR: "10.244.0.0/16", Network: &input.Network{ID: netID, Name: "k8s", IPRange: "10.0.0.0/8"}}
	o := executor.Options{Conn: conn, Decider: ev.decider, Recorder: ev.recorder, Cluster: cluster}
	for _, opt := range opts {
		opt(&o)
	}
	ev.exec = newExecutor(t, o)
	return ev
}

func newService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: types.UID(uid), Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeLoadBalancer,
			Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
		},
	}
}

// plan plans svc against lb (nil: create).
func (ev *env) plan(t *testing.T, svc *corev1.Service, lb *hcloud.LoadBalancer) lbplan.Plan {
	t.Helper()
	var nodes []lbplan.Node
	for i, id := range ev.servers {
		nodes = append(nodes, lbplan.Node{Name: fmt.Sprintf("node-%d", i+1), ServerID: id})
	}
	d, err := lbservice.NewDesired(lbservice.DesiredInput{Service: svc, Name: "web", Nodes: nodes, Defaults: config.LoadBalancer{Location: "fsn1"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := lbplan.Compute(d, lbplan.NewActual(lb))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func count(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

func route(dst, gw string) hcloud.NetworkRoute {
	_, d, _ := net.ParseCIDR(dst)
	return hcloud.NetworkRoute{Destination: d, Gateway: net.ParseIP(gw)}
}

// TestInvariant_DenyAllMakesNoMutatingRequest is the architecture's first invariant: with a
// deny-all policy, a create, an update, a delete and route changes send no mutating request.
func TestInvariant_DenyAllMakesNoMutatingRequest(t *testing.T) {
	ev := newEnv(t, denyAll)
	ctx := context.Background()
	svc := newService()
	if _, err := ev.exec.Run(ctx, svc, ev.plan(t, svc, nil)); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("create: err = %v", err)
	}
	lb := ev.bareLB(t)
	if _, err := ev.exec.Run(ctx, svc, ev.plan(t, svc, lb)); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("update: err = %v", err)
	}
	del, err := lbplan.ComputeDelete(lbplan.NewActual(lb))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.exec.Run(ctx, svc, del); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("delete: err = %v", err)
	}
	if err := ev.exec.AddRoute(ctx, ev.network, route("10.244.1.0/24", "10.0.0.11"), "node-1"); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("add route: err = %v", err)
	}
	if err := ev.exec.DeleteRoute(ctx, ev.network, route("10.244.1.0/24", "10.0.0.11"), "node-1"); !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("delete route: err = %v", err)
	}
	if n := ev.emu.MutatingRequests(); n != 0 {
		t.Fatalf("%d mutating requests under deny-all: %v", n, ev.emu.Counts())
	}
	events := ev.events()
	if count(events, "Warning PolicyDenied") != 5 {
		t.Errorf("want one PolicyDenied per run, got %v", events)
	}
}

func TestRun_InputsDescribeEveryMutation(t *testing.T) {
	nsIndexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = nsIndexer.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"tier": "prod"}}})
	ev := newEnv(t, allow, withNamespaces(corelisters.NewNamespaceLister(nsIndexer)))
	svc := newService()
	p := ev.plan(t, svc, nil)
	lb, err := ev.exec.Run(context.Background(), svc, p)
	if err != nil {
		t.Fatal(err)
	}
	if lb == nil || lb.Name != "web" || len(lb.Targets) != 2 {
		t.Fatalf("run returned %+v", lb)
	}
	// One request (the create carries its listener and targets), so one decision that shows them.
	ins := ev.decider.inputs
	if len(ins) != 1 {
		t.Fatalf("%d decisions for the create of %d mutations, want 1", len(ins), len(p.Mutations))
	}
	first := ins[0]
	if first.Version != input.InputVersion || first.Action != input.ActionLoadBalancerCreate || first.Operation != "create" || first.Current != nil {
		t.Errorf("create input = %+v", first)
	}
	if lbv := first.LoadBalancer; len(lbv.Services) != 1 || lbv.Services[0].ListenPort != 80 || len(lbv.Targets) != 2 || first.Final == nil || len(first.Final.Targets) != 2 {
		t.Errorf("create input's load balancer = %+v, want the listener and both targets it is created with", lbv)
	}
	if first.Cluster.Name != "prod" || first.Service.Namespace != "shop" || first.Service.Ports[0].NodePort != 30080 ||
		first.Service.NamespaceLabels["tier"] != "prod" || first.Service.ExternalTrafficPolicy != "Cluster" || first.Service.Labels["app"] != "web" {
		t.Errorf("service input = %+v", first.Service)
	}
	if e := ev.events(); count(e, "Normal LoadBalancerCreated") != 1 {
		t.Errorf("events = %v", e)
	}
}

// TestRun_WarningsAndDryRunProceed: warnings and dry-run denials do not block; their events
// (PolicyWarning, PolicyDryRunDenied) each name the decision IDs, as PolicyDenied does.
func TestRun_WarningsAndDryRunProceed(t *testing.T) {
	ev := newEnv(t, func(in input.Input) policy.Decision {
		return policy.Decision{ID: "id-" + in.Operation, Allowed: true, DryRun: true, Deny: []policy.Message{{Msg: "would deny " + in.Operation}}, Warn: []policy.Message{{Msg: "careful"}}}
	})
	svc := newService()
	if _, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, nil)); err != nil {
		t.Fatal(err)
	}
	e := ev.events()
	if count(e, "Warning PolicyWarning") != 1 || count(e, "Warning PolicyDryRunDenied") != 1 || count(e, "Warning PolicyDenied") != 0 {
		t.Errorf("events = %v", e)
	}
	for _, ev := range e {
		if (strings.HasPrefix(ev, "Warning PolicyWarning") || strings.HasPrefix(ev, "Warning PolicyDryRunDenied")) && !strings.Contains(ev, "(decision id-create)") {
			t.Errorf("event %q names no decision ID, want (decision id-create)", ev)
		}
	}
	if ev.emu.MutatingRequests() == 0 {
		t.Errorf("dry-run denial blocked the run")
	}
}

func TestRun_FailOpenEvaluationErrorWarns(t *testing.T) {
	ev := newEnv(t, func(input.Input) policy.Decision {
		return policy.Decision{Allowed: true, Err: errors.New("rego: undefined function")}
	})
	svc := newService()
	if _, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, nil)); err != nil {
		t.Fatal(err)
	}
	e := ev.events()
	if count(e, "Warning PolicyWarning") != 1 || !strings.Contains(strings.Join(e, "\n"), "allowed by the failure mode: rego: undefined function") {
		t.Errorf("events = %v", e)
	}
}

func TestRun_FailClosedEvaluationErrorDenies(t *testing.T) {
	ev := newEnv(t, func(input.Input) policy.Decision { return policy.Decision{Err: errors.New("timeout")} })
	svc := newService()
	_, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, nil))
	if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), "policy evaluation failed: timeout") || ev.emu.MutatingRequests() != 0 {
		t.Errorf("err = %v, %d mutating", err, ev.emu.MutatingRequests())
	}
}

// TestRun_StepsFailAlone: on an existing load balancer a denied step skips itself and the steps
// that need it (lbplan.Plan.Needs), and every other step is sent; the error and the one
// PolicyDenied event name what was applied, what was denied and what was skipped with it, and
// the returned state is what the API holds. A create is all or nothing.
func TestRun_StepsFailAlone(t *testing.T) {
	t.Parallel()
	denyOp := func(op string) func(input.Input) policy.Decision {
		return func(in input.Input) policy.Decision {
			if in.Operation == op {
				return policy.Decision{ID: "d-1", Deny: []policy.Message{{Msg: "not today", Code: "T1"}}}
			}
			return policy.Decision{Allowed: true}
		}
	}
	cases := []struct {
		name string
		deny string
		// plan builds the plan; nil: the test Service against a bare load balancer.
		plan func(ev *env, t *testing.T) lbplan.Plan
		// sent are the mutating routes sent, by their last path element.
		sent  []string
		event string
	}{
		{
			name: "a denied listener holds no target hostage", deny: lbplan.OpAddService,
			sent:  []string{"add_target", "add_target"},
			event: "applied: add_target(server:1), add_target(server:2); denied: not today (T1): for add_service(80) (decision d-1)",
		},
		{
			name: "denied targets leave the listener to run", deny: lbplan.OpAddTarget,
			sent:  []string{"add_service"},
			event: "applied: add_service(80); denied: not today (T1): for add_target(server:1) (decision d-1), add_target(server:2) (decision d-1)",
		},
		{
			name: "a step that needs the denied one is skipped with it", deny: lbplan.OpAttachToNetwork,
			plan: func(ev *env, t *testing.T) lbplan.Plan {
				p := ev.plan(t, newService(), ev.bareLB(t))
				p.Mutations = append([]lbplan.Mutation{lbplan.AttachNetwork{Network: lbplan.Attachment{ID: ev.network.ID, IPRange: "10.0.0.0/8"}}},
					lbplan.AddService{Listener: p.Mutations[0].(lbplan.AddService).Listener},
					lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[0], UsePrivateIP: true, Node: "node-1"}},
					lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[1], Node: "node-2"}})
				return p
			},
			sent: []string{"add_service", "add_target"},
			event: "applied: add_service(80), add_target(server:2); denied: not today (T1): for attach_to_network({net}) (decision d-1); " +
				"skipped: add_target(server:1) (needs attach_to_network({net}))",
		},
		{
			name: "a create is all or nothing", deny: lbplan.OpCreate,
			plan: func(ev *env, t *testing.T) lbplan.Plan {
				p := ev.plan(t, newService(), nil)
				p.Mutations = append(p.Mutations, lbplan.ChangeDNSPtr{Ptr: "lb.example.com"})
				return p
			},
			event: "nothing changed: not today (T1): for create(web) (decision d-1); skipped: change_dns_ptr(ipv4) (a create or delete is all or nothing)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := newEnv(t, denyOp(tc.deny))
			svc := newService()
			var plan lbplan.Plan
			if tc.plan != nil {
				plan = tc.plan(ev, t)
			} else {
				plan = ev.plan(t, svc, ev.bareLB(t))
			}
			ev.emu.ResetRequests()
			state, err := ev.exec.Run(context.Background(), svc, plan)
			var denied *gate.DeniedError
			if !errors.As(err, &denied) || !errors.Is(err, policy.ErrDenied) {
				t.Fatalf("err = %v, want a *DeniedError", err)
			}
			var sent []string
			for _, r := range ev.emu.Requests() {
				if r.Method != "GET" {
					sent = append(sent, r.Route[strings.LastIndex(r.Route, "/")+1:])
				}
			}
			if !slices.Equal(sent, tc.sent) {
				t.Errorf("sent %q, want %q", sent, tc.sent)
			}
			want := strings.ReplaceAll(tc.event, "{net}", fmt.Sprint(ev.network.ID))
			var policyEvents []string
			for _, e := range ev.events() {
				if strings.HasPrefix(e, "Warning PolicyDenied ") {
					policyEvents = append(policyEvents, strings.TrimPrefix(e, "Warning PolicyDenied "))
				}
			}
			if len(policyEvents) != 1 || policyEvents[0] != want {
				t.Errorf("PolicyDenied events = %q, want one %q", policyEvents, want)
			}
			if !strings.HasSuffix(err.Error(), want) {
				t.Errorf("err = %q, want it to end in the event's message", err)
			}
			if len(tc.sent) == 0 {
				if state != nil {
					t.Errorf("state = %+v after a denial that ran nothing, want nil", state)
				}
				return
			}
			lb, _, gerr := ev.client.LoadBalancer.GetByID(context.Background(), plan.Actual.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			api := lbplan.NewActual(lb).Policy(true)
			if diff := cmp.Diff(api, withAPIDefaults(state.Policy(true), api)); diff != "" {
				t.Errorf("returned state differs from the API's (-api +returned):\n%s", diff)
			}
		})
	}
}

// withAPIDefaults is the view returned with each health check field that the requests did not
// send (null) taken from api: the API fills in its defaults, which the CCM does not model.
func withAPIDefaults(returned, api *input.LoadBalancer) *input.LoadBalancer {
	for i := range returned.Services {
		for _, a := range api.Services {
			if a.ListenPort != returned.Services[i].ListenPort {
				continue
			}
			hc, ahc := &returned.Services[i].HealthCheck, a.HealthCheck
			hc.Interval, hc.Timeout, hc.Retries = orSent(hc.Interval, ahc.Interval), orSent(hc.Timeout, ahc.Timeout), orSent(hc.Retries, ahc.Retries)
		}
	}
	return returned
}

func orSent(sent, api *int) *int {
	if sent == nil {
		return api
	}
	return sent
}

func TestRun_Delete(t *testing.T) {
	tests := []struct {
		name       string
		fault      *hcloudemu.Fault
		wantErr    string
		wantEvent  string
		wantRemain int
	}{
		{name: "a delete waits for the action and the load balancer is gone"},
		{name: "a load balancer already gone counts as deleted", fault: &hcloudemu.Fault{Method: "DELETE", Pattern: "/v1/load_balancers/*", Code: "not_found"}, wantRemain: 1},
		{name: "a protected load balancer is a clear error with an event", fault: &hcloudemu.Fault{Method: "DELETE", Pattern: "/v1/load_balancers/*", Code: "protected"},
			wantErr: "has delete protection", wantEvent: "Warning DeleteProtected", wantRemain: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			svc := newService()
			lb, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.fault != nil {
				ev.emu.AddFault(*tc.fault)
			}
			p, _ := lbplan.ComputeDelete(lb)
			got, err := ev.exec.Run(context.Background(), svc, p)
			if tc.wantErr == "" && (err != nil || got != nil) {
				t.Fatalf("got %v, err %v", got, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "delete(web): ")) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var protected *lbplan.ProtectedError
			if tc.wantErr != "" && (!errors.As(err, &protected) || !errors.Is(err, lbplan.ErrProtected) || !hcloud.IsError(err, hcloud.ErrorCodeProtected)) {
				t.Errorf("err = %v, want a *lbplan.ProtectedError wrapping the API's refusal", err)
			}
			if n := len(ev.emu.LoadBalancers()); n != tc.wantRemain {
				t.Errorf("%d load balancers remain, want %d", n, tc.wantRemain)
			}
			if tc.wantEvent != "" && count(ev.events(), tc.wantEvent) == 0 {
				t.Errorf("no %s event", tc.wantEvent)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	ev := newEnv(t, allow)
	ctx := context.Background()
	r := route("10.244.1.0/24", "10.0.0.11")
	if err := ev.exec.AddRoute(ctx, ev.network, r, "node-1"); err != nil {
		t.Fatal(err)
	}
	n, _ := ev.emu.Network(ev.network.ID)
	if len(n.Routes) != 1 || n.Routes[0].Destination != "10.244.1.0/24" || n.Routes[0].Gateway != "10.0.0.11" {
		t.Fatalf("routes = %+v", n.Routes)
	}
	in := ev.decider.inputs[0]
	if in.Action != input.ActionRouteCreate || in.Operation != "add_route" || in.Route == nil || in.Route.Node != "node-1" || in.Service != nil {
		t.Errorf("input = %+v", in)
	}
	if err := ev.exec.DeleteRoute(ctx, ev.network, r, "node-1"); err != nil {
		t.Fatal(err)
	}
	if n, _ := ev.emu.Network(ev.network.ID); len(n.Routes) != 0 {
		t.Errorf("route not deleted: %+v", n.Routes)
	}
	if ev.decider.inputs[1].Action != input.ActionRouteDelete || ev.decider.inputs[1].Operation != "delete_route" {
		t.Errorf("input = %+v", ev.decider.inputs[1])
	}
	ev.emu.AddFault(hcloudemu.Fault{Method: "POST", Pattern: "/v1/networks/*/actions/add_route", Times: 1, Code: "locked"})
	err := ev.exec.AddRoute(ctx, ev.network, r, "node-1")
	var retry interface{ RetryAfter() time.Duration }
	if !errors.As(err, &retry) {
		t.Errorf("locked: err = %v, want a retry error", err)
	}
}

func TestRoutes_DenyPutsTheEventOnTheNode(t *testing.T) {
	ev := newEnv(t, denyAll)
	err := ev.exec.AddRoute(context.Background(), ev.network, route("10.244.1.0/24", "10.0.0.11"), "node-1")
	if !errors.Is(err, policy.ErrDenied) || !strings.Contains(err.Error(), "frozen (F1)") {
		t.Fatalf("err = %v", err)
	}
	e := ev.events()
	if len(e) != 1 || !strings.HasPrefix(e[0], "Warning PolicyDenied") || !strings.Contains(e[0], "add_route(10.244.1.0/24 via 10.0.0.11)") {
		t.Errorf("events = %v", e)
	}
}

func TestRun_CreateIsOneRequest(t *testing.T) {
	ev := newEnv(t, allow)
	svc := newService()
	p := ev.plan(t, svc, nil)
	lb, err := ev.exec.Run(context.Background(), svc, p)
	if err != nil {
		t.Fatal(err)
	}
	if n := ev.emu.MutatingRequests(); n != 1 {
		t.Errorf("%d mutating requests, want 1: %v", n, ev.emu.Counts())
	}
	if n := ev.emu.Counts()["GET /v1/load_balancers/{id}"]; n != 0 {
		t.Errorf("%d reloads after the create, want 0: the answer has what the status needs", n)
	}
	if lb == nil || len(lb.Services) != 1 || len(lb.Targets) != 2 || lb.IPv4 == "" {
		t.Fatalf("run returned %+v", lb)
	}
	if n := len(ev.decider.inputs); n != 1 || len(p.Mutations) != 4 {
		t.Errorf("%d decisions for %d mutations in one request, want 1", n, len(p.Mutations))
	}
	want := fmt.Sprintf("Normal LoadBalancerCreated applied: create(web), add_service(80), add_target(server:%d), add_target(server:%d)", ev.servers[0], ev.servers[1])
	if e := ev.events(); count(e, want) != 1 {
		t.Errorf("events = %v, want %q", e, want)
	}
}

func withMessage(f *hcloudemu.Fault, msg string) *hcloudemu.Fault {
	f.Message = msg
	return f
}

func TestRun_RejectedInlineCreateFallsBackToOneRequestPerStep(t *testing.T) {
	create := hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Times: 1}
	addTarget := hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers/*/actions/add_target", Skip: 1, Times: 1}
	with := func(f hcloudemu.Fault, code string, status int) *hcloudemu.Fault {
		f.Code, f.Status = code, status
		return &f
	}
	tests := []struct {
		name          string
		faults        []*hcloudemu.Fault
		wantErr       string // prefix; "" for success
		wantTargets   int
		wantEvent     string
		wantMutations int
		wantContains  string
	}{
		{
			name:          "too many targets: the create is sent alone, then each step, and the limit is reported",
			faults:        []*hcloudemu.Fault{with(create, "resource_limit_exceeded", 0), with(addTarget, "resource_limit_exceeded", 0)},
			wantTargets:   1,
			wantEvent:     "Warning MaxTargetsReached",
			wantMutations: 5,
		},
		{
			name:          "a permanent refusal is not retried stripped: no half-built load balancer",
			faults:        []*hcloudemu.Fault{with(create, "resolve_cloud_private_targets_error", 422)},
			wantErr:       "create(web): ",
			wantTargets:   -1,
			wantMutations: 1,
		},
		{
			name:          "an unknown certificate: the error names the annotation, nothing is created",
			faults:        []*hcloudemu.Fault{withMessage(with(create, "invalid_input", 422), "certificate 999 not found")},
			wantErr:       "create(web): ",
			wantContains:  `(check "load-balancer.hetzner.cloud/http-certificates")`,
			wantTargets:   -1,
			wantMutations: 1,
		},
		{
			name:          "an error of the create itself is not retried",
			faults:        []*hcloudemu.Fault{with(create, "uniqueness_error", 0)},
			wantErr:       "create(web): ",
			wantTargets:   -1,
			wantMutations: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			for _, f := range tc.faults {
				ev.emu.AddFault(*f)
			}
			svc := newService()
			_, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, nil))
			if (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr))) {
				t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
			}
			if tc.wantContains != "" && !strings.Contains(err.Error(), tc.wantContains) {
				t.Errorf("err = %v, want it to contain %s", err, tc.wantContains)
			}
			if n := ev.emu.MutatingRequests(); n != tc.wantMutations {
				t.Errorf("%d mutating requests, want %d: %v", n, tc.wantMutations, ev.emu.Counts())
			}
			lbs := ev.emu.LoadBalancers()
			switch {
			case tc.wantTargets < 0 && len(lbs) != 0:
				t.Errorf("%d load balancers, want none", len(lbs))
			case tc.wantTargets >= 0 && (len(lbs) != 1 || len(lbs[0].Services) != 1 || len(lbs[0].Targets) != tc.wantTargets):
				t.Errorf("load balancers = %+v, want one with a listener and %d targets", lbs, tc.wantTargets)
			}
			if tc.wantEvent != "" && count(ev.events(), tc.wantEvent) == 0 {
				t.Errorf("no %s event", tc.wantEvent)
			}
		})
	}
}

func TestRun_ReloadsOnlyWhenTheAddressesChange(t *testing.T) {
	tests := []struct {
		name       string
		mutation   func(ev *env) lbplan.Mutation
		wantReload int
	}{
		{"a new target keeps the addresses: no reload", func(ev *env) lbplan.Mutation {
			return lbplan.AddTarget{Target: lbplan.Target{ServerID: ev.servers[1], Node: "node-2"}}
		}, 0},
		{"an attachment gets a private IP from the API: one reload", func(ev *env) lbplan.Mutation {
			return lbplan.AttachNetwork{Network: lbplan.Attachment{ID: ev.network.ID}}
		}, 1},
		{"an attachment with a fixed IP is known: no reload", func(ev *env) lbplan.Mutation {
			return lbplan.AttachNetwork{Network: lbplan.Attachment{ID: ev.network.ID, IP: net.ParseIP("10.0.0.50")}}
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, allow)
			lb := ev.bareLB(t)
			ev.emu.ResetRequests()
			p := lbplan.Plan{Actual: lbplan.NewActual(lb), IPv6: true, Mutations: []lbplan.Mutation{tc.mutation(ev)}}
			got, err := ev.exec.Run(context.Background(), newService(), p)
			if err != nil {
				t.Fatal(err)
			}
			if n := ev.emu.Counts()["GET /v1/load_balancers/{id}"]; n != tc.wantReload {
				t.Errorf("%d reloads, want %d: %v", n, tc.wantReload, ev.emu.Counts())
			}
			if got == nil || got.ID != lb.ID {
				t.Fatalf("run returned %+v", got)
			}
			if _, attach := p.Mutations[0].(lbplan.AttachNetwork); attach && (len(got.Networks) != 1 || got.Networks[0].IP == nil) {
				t.Errorf("run returned %+v", got)
			}
		})
	}
}

// bareLB is an existing load balancer of the test Service without listeners or targets: a plan
// against it sends each listener and target in a request (and a decision) of its own.
func (ev *env) bareLB(t *testing.T) *hcloud.LoadBalancer {
	t.Helper()
	id, err := ev.emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "web", Labels: map[string]string{lbplan.LabelServiceUID: uid}})
	if err != nil {
		t.Fatal(err)
	}
	lb, _, err := ev.client.LoadBalancer.GetByID(context.Background(), id)
	if err != nil || lb == nil {
		t.Fatalf("get load balancer %d: %v", id, err)
	}
	return lb
}

// events drains the recorded events.
func (ev *env) events() []string { return testutil.Events(ev.recorder) }

// TestRun_DenyMessagesAreGroupedAndBounded: one deny rule matching many steps is one line naming
// them, and a huge deny message does not become a huge event or error.
func TestRun_DenyMessagesAreGroupedAndBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	ev := newEnv(t, func(in input.Input) policy.Decision {
		return policy.Decision{Deny: []policy.Message{{Msg: "no changes today", Code: "C1"}, {Msg: huge}}}
	})
	svc := newService()
	_, err := ev.exec.Run(context.Background(), svc, ev.plan(t, svc, ev.bareLB(t)))
	if !errors.Is(err, policy.ErrDenied) {
		t.Fatalf("err = %v", err)
	}
	if strings.Count(err.Error(), "no changes today (C1)") != 1 || !strings.Contains(err.Error(), "add_service(80)") || !strings.Contains(err.Error(), "add_target(server:1), add_target(server:2)") {
		t.Errorf("err = %.300s, want the message once, naming the add_service and both add_target steps", err)
	}
	for _, e := range append(ev.events(), err.Error()) {
		if len(e) > 1200 {
			t.Errorf("message of %d bytes, want it truncated: %.200s", len(e), e)
		}
	}
}

// TestRun_WithoutService: a run on behalf of no Service (the sweep of a load balancer group
// without members) decides with input.service null and logs its events instead of recording
// them (there is no object to put them on); allowed, it runs, denied, nothing is sent.
func TestRun_WithoutService(t *testing.T) {
	tests := []struct {
		name       string
		decide     func(input.Input) policy.Decision
		wantDenied bool
	}{
		{name: "allowed: the load balancer is deleted", decide: allow},
		{name: "denied: nothing is sent", decide: denyAll, wantDenied: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEnv(t, tc.decide)
			plan, err := lbplan.ComputeDelete(lbplan.NewActual(ev.bareLB(t)))
			if err != nil {
				t.Fatal(err)
			}
			ev.emu.ResetRequests()
			_, err = ev.exec.Run(context.Background(), nil, plan)
			if denied := errors.Is(err, policy.ErrDenied); denied != tc.wantDenied || err != nil && !denied {
				t.Fatalf("Run = %v, want denied %v", err, tc.wantDenied)
			}
			if len(ev.decider.inputs) != 1 || ev.decider.inputs[0].Service != nil || ev.decider.inputs[0].Action != input.ActionLoadBalancerDelete {
				t.Errorf("inputs %+v, want one delete with service null", ev.decider.inputs)
			}
			if n := ev.emu.MutatingRequests(); (n == 0) != tc.wantDenied {
				t.Errorf("%d mutating requests, want them only when allowed", n)
			}
			if events := ev.events(); len(events) != 0 {
				t.Errorf("events %q recorded without a Service, want them logged only", events)
			}
		})
	}
}
