package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/executor"
)

func TestSplitPolicyEvent(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		want        []finding
	}{
		{
			name:  "A denial of a plan groups the operations per message",
			event: `nothing changed: create(demo-shop-web-1): namespace "shop" may not: label it (code); add_service(80): namespace "shop" may not: label it (code); add_target(server:101): port 80 only`,
			want: []finding{
				{msg: `namespace "shop" may not: label it (code)`, subjects: []string{"create(demo-shop-web-1)", "add_service(80)"}},
				{msg: "port 80 only", subjects: []string{"add_target(server:101)"}},
			},
		},
		{
			name:  "A warning of one operation",
			event: "add_service(80): the load balancer listens on port 80 without 443: traffic is not encrypted",
			want:  []finding{{msg: "the load balancer listens on port 80 without 443: traffic is not encrypted", subjects: []string{"add_service(80)"}}},
		},
		{
			name:  "A denial whose other steps were applied keeps only what was denied",
			event: "applied: add_target(server:3); denied: port 443 (ports): for add_service(443) (decision 5); skipped: update_service(443) (needs add_service(443))",
			want:  []finding{{msg: "port 443 (ports): for add_service(443) (decision 5)"}},
		},
		{
			name:  "A message in another format is kept whole",
			event: "policy evaluation failed: timeout",
			want:  []finding{{msg: "policy evaluation failed: timeout"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := splitPolicyEvent(tc.event)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(finding{})); diff != "" {
				t.Errorf("splitPolicyEvent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitGroupedEvent(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		want        []finding
	}{
		{
			name:  "A dry-run denial of two steps",
			event: "would be denied (dry run): listen port 443 is reserved: for create(a1), add_target(server:101)",
			want:  []finding{{msg: "listen port 443 is reserved", subjects: []string{"create(a1)", "add_target(server:101)"}}},
		},
		{
			name:  "A denial with two messages, a code and more steps",
			event: `nothing changed: namespace "shop" may not: label it (public_exposure): for create(a1); port 22 (ports): for add_service(22) and 3 more steps`,
			want: []finding{
				{msg: `namespace "shop" may not: label it (public_exposure)`, subjects: []string{"create(a1)"}},
				{msg: "port 22 (ports)", subjects: []string{"add_service(22) and 3 more steps"}},
			},
		},
		{
			name:  "A dry-run denial names its decisions",
			event: "would be denied (dry run): listen port 443 is reserved: for create(a1) (decision 2f1c-9), add_target(server:101) (decision 77)",
			want:  []finding{{msg: "listen port 443 is reserved", subjects: []string{"create(a1)", "add_target(server:101)"}}},
		},
		{
			name:  "A denied step that failed alone: the others were applied, one was skipped with it",
			event: "applied: add_target(server:3), remove_target(server:1); denied: port 443 (ports): for add_service(443) (decision 5); skipped: update_service(443) (needs add_service(443))",
			want:  []finding{{msg: "port 443 (ports)", subjects: []string{"add_service(443)"}}},
		},
		{
			name:  "A warning",
			event: "the load balancer listens on port 80 without 443: traffic is not encrypted: for add_service(80)",
			want:  []finding{{msg: "the load balancer listens on port 80 without 443: traffic is not encrypted", subjects: []string{"add_service(80)"}}},
		},
		{
			name:  "Another format is kept whole",
			event: "nothing changed: policy evaluation failed: timeout",
			want:  []finding{{msg: "policy evaluation failed: timeout"}},
		},
		{
			name:  "A tail that does not parse keeps the whole message",
			event: "a: for create(x); trailing text",
			want:  []finding{{msg: "a: for create(x); trailing text"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := splitGroupedEvent(tc.event)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(finding{})); diff != "" {
				t.Errorf("splitGroupedEvent (-want +got):\n%s", diff)
			}
		})
	}
}

// ev is a test event with reason and message, t seconds after a fixed time.
func ev(t int, reason, msg string) corev1.Event {
	return corev1.Event{Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, t, 0, time.UTC))}
}

func TestSummarizeEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []corev1.Event
		want   serviceEvents
	}{
		{
			name: "Created then Updated: the operations in the order they ran, out-of-order input sorted",
			events: []corev1.Event{
				ev(2, executor.ReasonLoadBalancerUpdated, "applied: add_target(server:102)"),
				ev(1, executor.ReasonLoadBalancerCreated, "applied: create(demo-default-web-1a2b3c4d), add_service(80), add_target(server:101)"),
				ev(3, "EnsuringLoadBalancer", "Ensuring load balancer"),
			},
			want: serviceEvents{applied: []string{"create(demo-default-web-1a2b3c4d)", "add_service(80)", "add_target(server:101)", "add_target(server:102)"}},
		},
		{
			name: "Denied, with a sync failure after it",
			events: []corev1.Event{
				ev(1, executor.ReasonPolicyDenied, "nothing changed: create(x): no"),
				ev(2, reasonSyncFailed, "Error syncing load balancer: denied by policy"),
			},
			want: serviceEvents{denied: []string{"nothing changed: create(x): no"}, failure: "Error syncing load balancer: denied by policy"},
		},
		{
			name: "A failure followed by an applied change is overcome",
			events: []corev1.Event{
				ev(1, reasonSyncFailed, "timeout"),
				ev(2, executor.ReasonLoadBalancerCreated, "applied: create(x)"),
			},
			want: serviceEvents{applied: []string{"create(x)"}},
		},
		{
			name: "Dry-run denial and warnings kept apart; an applied message without operations kept whole",
			events: []corev1.Event{
				ev(1, executor.ReasonPolicyDryRunDenied, "create(x): public"),
				ev(2, executor.ReasonPolicyWarning, "add_service(80): unencrypted"),
				ev(3, executor.ReasonLoadBalancerCreated, "something else"),
			},
			want: serviceEvents{dryRunDenied: []string{"create(x): public"}, warnings: []string{"add_service(80): unencrypted"}, applied: []string{"something else"}},
		},
		{name: "No events", want: serviceEvents{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summarizeEvents(tc.events)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(serviceEvents{})); diff != "" {
				t.Errorf("summarizeEvents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	ip := []string{"203.0.113.10"}
	for _, tc := range []struct {
		name    string
		ingress []string
		events  serviceEvents
		want    string
	}{
		{name: "An address and applied changes", ingress: ip, events: serviceEvents{applied: []string{"create(x)"}}, want: "allowed"},
		{name: "An address is never denied by policy", ingress: ip, events: serviceEvents{denied: []string{"create(x): no"}},
			want: "has an address; a later change was denied by policy"},
		{name: "Dry run: denied and applied", ingress: ip, events: serviceEvents{dryRunDenied: []string{"create(x): no"}},
			want: "allowed in dry run: the policy denied, the CCM applied it anyway"},
		{name: "Denied without an address", events: serviceEvents{denied: []string{"create(x): no"}, failure: "denied"}, want: "denied by policy"},
		{name: "A failure without a decision", events: serviceEvents{failure: "plugin timeout"}, want: "not reconciled: plugin timeout"},
		{name: "Nothing yet", want: "pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serviceState{ingress: tc.ingress, events: tc.events}
			if got := s.verdict(); got != tc.want {
				t.Errorf("verdict() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWriteReport(t *testing.T) {
	allowed := serviceState{demoService: demoService{namespace: "default", name: "web", note: "public"},
		ingress: []string{"203.0.113.10"}, lbName: "web-lb", lbID: 7,
		events: summarizeEvents([]corev1.Event{
			ev(1, executor.ReasonPolicyDryRunDenied, `would be denied (dry run): namespace "default" may not expose: for create(web-lb)`),
			ev(3, executor.ReasonPolicyDryRunDenied, `would be denied (dry run): namespace "default" may not expose: for add_service(80)`),
			ev(2, executor.ReasonLoadBalancerCreated, "applied: create(web-lb), add_service(80)"),
		})}
	denied := serviceState{demoService: demoService{namespace: "shop", name: "web", denied: true, note: "public in namespace shop"},
		events: summarizeEvents([]corev1.Event{ev(1, executor.ReasonPolicyDenied, "nothing changed: port 80 only: for create(x)")})}
	denied.denial = denied.events.denied[0]
	withIP := serviceState{demoService: demoService{namespace: "shop", name: "internal", note: "private"},
		ingress: []string{"10.0.0.5"},
		events: summarizeEvents([]corev1.Event{
			ev(1, executor.ReasonLoadBalancerCreated, "applied: create(int)"),
			ev(2, executor.ReasonPolicyDenied, "nothing changed: no: for add_target(server:101)"),
		})}
	withIP.denial = withIP.events.denied[0]
	nodes := []nodeState{{name: "worker-1", providerID: "hcloud://101", pluginLabels: []string{"team=a"}}}
	for _, tc := range []struct {
		name      string
		examples  bool
		converged bool
		services  []serviceState
		pending   []string
		warnings  []string // nodeWarnings
		want      []string // lines (substrings) the report must have
		wantNot   []string
	}{
		{
			name:      "Own policies in dry run: decisions and plan per Service",
			services:  []serviceState{allowed, withIP},
			converged: true,
			want: []string{
				"Ran with policies from /p, --policy-mode=dryrun",
				"default/web (public): allowed in dry run: the policy denied, the CCM applied it anyway",
				"policy: denied in dry run (PolicyDryRunDenied event; applied anyway):",
				`namespace "default" may not expose (for create(web-lb), add_service(80))`,
				"plan applied (LoadBalancerCreated/LoadBalancerUpdated events): create(web-lb), add_service(80)",
				"address: 203.0.113.10",
				"shop/internal (private): has an address; a later change was denied by policy",
				"  LABELS  ",
				"team=a",
			},
			wantNot: []string{"NOT CONVERGED", "node.hcloud.example", "kubectl label namespace shop", ": denied by policy"},
		},
		{
			name:      "Own policies, a denial without address",
			services:  []serviceState{denied},
			converged: true,
			want: []string{
				"shop/web (public in namespace shop): denied by policy",
				"policy: denied (PolicyDenied event; nothing was changed in the cloud):",
				"port 80 only (for create(x))",
				"plan applied: nothing",
			},
		},
		{
			name:     "Own policies, not converged: what is missing, no example labels",
			services: []serviceState{{demoService: demoService{namespace: "default", name: "web", note: "public"}}},
			pending:  []string{"service default/web has no external IP and no PolicyDenied event yet"},
			want:     []string{"NOT CONVERGED", "service default/web has no external IP", "default/web (public): pending", "policy: no decision reported yet"},
			wantNot:  []string{"node.hcloud.example"},
		},
		{
			name: "Own policies, a sync failure without a decision",
			services: []serviceState{{demoService: demoService{namespace: "default", name: "web", note: "public"},
				events: summarizeEvents([]corev1.Event{ev(1, reasonSyncFailed, "plugin timeout")})}},
			pending: []string{"service default/web has no external IP and no PolicyDenied event yet (SyncLoadBalancerFailed: plugin timeout)"},
			want:    []string{"default/web (public): not reconciled: plugin timeout", "last error (SyncLoadBalancerFailed): plugin timeout", "plan applied: nothing"},
			wantNot: []string{"denied"},
		},
		{
			name:     "Examples: the report as before",
			examples: true, converged: true,
			services: []serviceState{allowed, denied},
			want: []string{
				"Nodes (initialised by the CCM; labels node.hcloud.example/* from the node-labels plugin)",
				"Services of type LoadBalancer (load balancer names from the lb-name plugin)",
				"public in namespace shop: denied by policy",
				"Denied by policy (PolicyDenied event on shop/web; nothing was changed in the cloud):",
				"kubectl label namespace shop hcloud-ccm/public=true",
			},
			wantNot: []string{"Ran with", "plan applied", "Warning events on the nodes"},
		},
		{
			name:     "Warning events on nodes are listed below the nodes",
			examples: true, converged: true,
			services: []serviceState{allowed},
			warnings: []string{`worker-1: UnknownProviderIDPrefix (2x): Node could not be added`},
			want:     []string{"  Warning events on the nodes:\n    worker-1: UnknownProviderIDPrefix (2x): Node could not be added\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			env := exploreEnv{examples: tc.examples, setup: "policies from /p, --policy-mode=dryrun, no plugins, routes off", endpoint: "http://127.0.0.1:1/v1"}
			writeReport(&buf, state{nodes: nodes, services: tc.services, pending: tc.pending, nodeWarnings: tc.warnings}, tc.converged, time.Second, env, true)
			report := buf.String()
			for _, w := range tc.want {
				if !strings.Contains(report, w) {
					t.Errorf("the report lacks %q:\n%s", w, report)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(report, w) {
					t.Errorf("the report has %q:\n%s", w, report)
				}
			}
		})
	}
}

func TestSummarizeNodeWarnings(t *testing.T) {
	onNode := func(node string, sec int, reason, msg string, count int32) corev1.Event {
		e := ev(sec, reason, msg)
		e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: node}
		e.Count = count
		return e
	}
	got := summarizeNodeWarnings([]corev1.Event{
		onNode("worker-2", 1, "UnknownProviderIDPrefix", `for service web: invalid provider ID ""`, 2),
		onNode("worker-1", 2, "UnknownProviderIDPrefix", `for service api: invalid provider ID ""`, 1),
		onNode("worker-1", 1, "UnknownProviderIDPrefix", `for service web: invalid provider ID ""`, 0), // count unset: once
		onNode("worker-1", 3, "MaxTargetsReached", "full", 1),
	})
	want := []string{
		"worker-1: MaxTargetsReached (1x): full",
		`worker-1: UnknownProviderIDPrefix (2x): for service api: invalid provider ID ""`,
		`worker-2: UnknownProviderIDPrefix (2x): for service web: invalid provider ID ""`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarizeNodeWarnings mismatch (-want +got):\n%s", diff)
	}
	if got := summarizeNodeWarnings(nil); len(got) != 0 {
		t.Errorf("summarizeNodeWarnings(nil) = %q, want none", got)
	}
}
