//go:build soak

package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// lbView is the part of a load balancer the checks read.
type lbView struct {
	ID        int64
	Name      string
	Labels    map[string]string
	Listeners []listener
	Targets   []int64 // server IDs, sorted
	IPv4      string
	Protected bool
}

// listener is one listen port and its destination (the node port).
type listener struct{ Listen, Dest int }

// cloud returns the emulator's load balancers, and remembers each one's name by ID (a request
// to a load balancer names its ID, a decision its name).
func (s *soak) cloud() []lbView {
	var out []lbView
	for _, lb := range s.emu.LoadBalancers() {
		v := lbView{ID: lb.ID, Name: lb.Name, Labels: lb.Labels, IPv4: lb.PublicNet.IPv4.IP, Protected: lb.Protection.Delete}
		for _, svc := range lb.Services {
			v.Listeners = append(v.Listeners, listener{Listen: svc.ListenPort, Dest: svc.DestinationPort})
		}
		sort.Slice(v.Listeners, func(i, j int) bool { return v.Listeners[i].Listen < v.Listeners[j].Listen })
		for _, t := range lb.Targets {
			if t.Type == "server" && t.Server != nil {
				v.Targets = append(v.Targets, t.Server.ID)
			}
		}
		slices.Sort(v.Targets)
		out = append(out, v)
	}
	s.namesMu.Lock()
	for _, lb := range out {
		s.lbNames[lb.ID] = lb.Name
	}
	s.namesMu.Unlock()
	return out
}

// lbName is the name load balancer id had when the soak last saw it.
func (s *soak) lbName(id int64) string {
	s.namesMu.Lock()
	defer s.namesMu.Unlock()
	return s.lbNames[id]
}

// checkCloud checks the ownership invariants on the load balancers as they are now: no two for
// one Service or group, a group's only in its home, none for a Service the policy always
// refuses, none without an owner for longer than orphanGrace (delete protection excepted).
func (s *soak) checkCloud(ctx context.Context) error {
	s.rep.count("ownership")
	svcs, err := s.c.Client().CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("check cloud: list services: %w", err)
	}
	owners := map[string]corev1.Service{}
	members := map[string]int{}
	for _, svc := range svcs.Items {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			owners[string(svc.UID)] = svc
			if g := svc.Annotations[annotationGroup]; g != "" {
				members[g]++
			}
		}
	}
	lbs := s.cloud()
	byUID, byGroup := map[string][]string{}, map[string][]string{}
	now := time.Now()
	seen := map[int64]bool{}
	for _, lb := range lbs {
		seen[lb.ID] = true
		desc := fmt.Sprintf("%d:%s", lb.ID, lb.Name)
		uid, g := lb.Labels[labelServiceUID], lb.Labels[labelGroup]
		if uid != "" {
			byUID[uid] = append(byUID[uid], desc)
		}
		if g != "" {
			byGroup[g] = append(byGroup[g], desc)
			if home, ok := groupHome[g]; ok && lb.Labels[labelGroupNamespace] != home.ns {
				s.violation("group-home-moved", g, []string{g, lb.Name, lb.Labels[labelGroupNamespace]},
					"load balancer %s of group %s is labelled %s=%q, want its home %q", desc, g, labelGroupNamespace, lb.Labels[labelGroupNamespace], home.ns)
			}
		}
		if uid != "" && s.refusedUID(uid) {
			s.violation("lb-for-refused-service", uid, []string{s.keyOf(uid), lb.Name},
				"load balancer %s exists for Service %s, which the policy refuses", desc, s.keyOf(uid))
		}
		orphan := (uid != "" && owners[uid].UID == "") || (g != "" && members[g] == 0)
		if !orphan || lb.Protected || lb.Labels[labelProtected] == "true" {
			delete(s.orphanSince, lb.ID)
			continue
		}
		since, ok := s.orphanSince[lb.ID]
		if !ok {
			s.orphanSince[lb.ID] = now
		} else if now.Sub(since) > s.cfg.orphanGrace {
			s.violation("orphan", desc, []string{s.keyOf(uid), lb.Name},
				"load balancer %s (Service UID %q, group %q) has had no owner for %s (grace %s)", desc, uid, g, now.Sub(since).Round(time.Second), s.cfg.orphanGrace)
		}
	}
	for id := range s.orphanSince {
		if !seen[id] {
			delete(s.orphanSince, id)
		}
	}
	for uid, l := range byUID {
		if len(l) > 1 {
			s.violation("duplicate", uid, []string{s.keyOf(uid)}, "%d load balancers for Service %s (UID %s): %v", len(l), s.keyOf(uid), uid, l)
		}
	}
	for g, l := range byGroup {
		if len(l) > 1 {
			s.violation("duplicate", "group "+g, []string{g}, "%d load balancers for group %s: %v", len(l), g, l)
		}
	}
	return nil
}

// refusedUID reports whether the Service of uid is one the policy always refuses its own load
// balancer (a Service in a namespace that was never public).
func (s *soak) refusedUID(uid string) bool {
	s.model.mu.Lock()
	defer s.model.mu.Unlock()
	for _, m := range s.model.services {
		if m.UID == uid {
			return m.Group == "" && m.LB && !s.model.everPublicNS[m.NS]
		}
	}
	return false
}

// keyOf is namespace/name of the Service of uid, current or deleted.
func (s *soak) keyOf(uid string) string {
	if uid == "" {
		return ""
	}
	s.model.mu.Lock()
	defer s.model.mu.Unlock()
	for k, m := range s.model.services {
		if m.UID == uid {
			return k
		}
	}
	if k, ok := s.model.deletedUIDs[uid]; ok {
		return k + " (deleted)"
	}
	return uid
}

// convergence returns what is not yet as the model asks: for each Service with its own load
// balancer, exactly one with its listeners (port to node port) and targets (its pool's nodes)
// and its address; for each group with home members, one load balancer with their listeners,
// the nodes of its oldest home member's pool and the address on each home member; for a refused Service, no load balancer of
// its own and no address. Empty means converged.
func (s *soak) convergence(ctx context.Context) ([]string, error) {
	s.rep.count("convergence")
	lbs := s.cloud()
	svcs, err := s.c.Client().CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("convergence: list services: %w", err)
	}
	stored := map[string]corev1.Service{}
	for _, svc := range svcs.Items {
		stored[svc.Namespace+"/"+svc.Name] = svc
	}
	s.model.mu.Lock()
	defer s.model.mu.Unlock()
	var bad []string
	groupWant := map[string][]listener{}
	for key, m := range s.model.services {
		svc, ok := stored[key]
		if !ok {
			bad = append(bad, key+": not stored")
			continue
		}
		switch s.model.expect(m) {
		case expectOwn:
			bad = append(bad, s.ownConverged(key, m, svc, lbs)...)
		case expectGroup:
			groupWant[m.Group] = append(groupWant[m.Group], wantListeners(svc)...)
		case expectNone:
			for _, lb := range lbs {
				if lb.Labels[labelServiceUID] == m.UID {
					bad = append(bad, fmt.Sprintf("%s: refused, but has load balancer %d", key, lb.ID))
				}
			}
			if ips := ingress(svc); len(ips) > 0 {
				bad = append(bad, fmt.Sprintf("%s: refused, but has the address %v", key, ips))
			}
		}
	}
	for g, want := range groupWant {
		bad = append(bad, s.groupConverged(g, want, stored, lbs)...)
	}
	sort.Strings(bad)
	return bad, nil
}

// ownConverged compares a Service that should have its own load balancer; m.mu is held.
func (s *soak) ownConverged(key string, m *svcModel, svc corev1.Service, lbs []lbView) []string {
	var mine []lbView
	for _, lb := range lbs {
		if lb.Labels[labelServiceUID] == m.UID {
			mine = append(mine, lb)
		}
	}
	if len(mine) != 1 {
		return []string{fmt.Sprintf("%s: %d load balancers, want 1", key, len(mine))}
	}
	return compareLB(key, mine[0], wantListeners(svc), s.model.nodesFor(m.Selector), ingress(svc))
}

// groupConverged compares group g's load balancer with its home members; m.mu is held.
func (s *soak) groupConverged(g string, want []listener, stored map[string]corev1.Service, lbs []lbView) []string {
	var mine []lbView
	for _, lb := range lbs {
		if lb.Labels[labelGroup] == g {
			mine = append(mine, lb)
		}
	}
	if len(mine) != 1 {
		return []string{fmt.Sprintf("group %s: %d load balancers, want 1", g, len(mine))}
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Listen < want[j].Listen })
	var bad []string
	for key, m := range s.model.services {
		if m.Group == g && s.model.expect(m) == expectGroup {
			bad = append(bad, compareLB("group "+g+" member "+key, mine[0], want, s.model.nodesFor(s.model.leaderPool(g)), ingress(stored[key]))...)
		}
	}
	return bad
}

// compareLB compares one load balancer with the listeners, targets and address wanted.
func compareLB(who string, lb lbView, want []listener, targets []int64, ips []string) []string {
	var bad []string
	if !slices.Equal(lb.Listeners, want) {
		bad = append(bad, fmt.Sprintf("%s: load balancer %d listeners %v, want %v", who, lb.ID, lb.Listeners, want))
	}
	if !slices.Equal(lb.Targets, targets) {
		bad = append(bad, fmt.Sprintf("%s: load balancer %d targets %v, want %v", who, lb.ID, lb.Targets, targets))
	}
	if lb.IPv4 == "" || !slices.Contains(ips, lb.IPv4) {
		bad = append(bad, fmt.Sprintf("%s: address %v, want load balancer %d's %s", who, ips, lb.ID, lb.IPv4))
	}
	return bad
}

// wantListeners are the listeners a Service's ports ask for, by listen port.
func wantListeners(svc corev1.Service) []listener {
	var out []listener
	for _, p := range svc.Spec.Ports {
		out = append(out, listener{Listen: int(p.Port), Dest: int(p.NodePort)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Listen < out[j].Listen })
	return out
}

// ingress are the IPs of the Service's load balancer status.
func ingress(svc corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// writeLag is how old a request must be before checkWrites judges it: the soak reads a
// replica's "acquired" log line (and takes the time in it) up to a scan period after it was
// written.
const writeLag = 3 * time.Second

// checkWrites judges the writes that reached the emulator since the last call: each must come
// from a replica that held the Lease then, and the latest decision of its process for that
// request (action, operation, load balancer name) must have allowed it.
func (s *soak) checkWrites() {
	s.rep.count("leader-writes+decisions")
	for _, name := range []string{"a", "b", "w"} {
		r := s.replicas[name]
		reqs, next := r.ep.since(s.writeCursor[name])
		cut := len(reqs)
		for i, req := range reqs {
			if time.Since(req.Time) < writeLag {
				cut = i
				break
			}
		}
		s.writeCursor[name] = next - (len(reqs) - cut)
		for _, req := range reqs[:cut] {
			if req.mutating() {
				s.judgeWrite(r, req)
			}
		}
	}
}

// judgeWrite checks one write of replica r.
func (s *soak) judgeWrite(r *replica, req apiRequest) {
	s.rep.writes(r.Name)
	l := r.lifetimeAt(req.Time)
	r.mu.Lock()
	led := l != nil && !l.leadSince.IsZero() && !l.leadSince.After(req.Time.Add(100*time.Millisecond))
	r.mu.Unlock()
	ep, id, ok := apireq.Of(req.Method, req.Path)
	name := s.lbName(id)
	if req.Method == "POST" && req.Path == "/load_balancers" {
		var body struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal([]byte(req.Body), &body)
		name = body.Name
	}
	if !led {
		s.violation("non-leader-write", r.Name+" "+req.Method+" "+routeOf(req.Path), []string{name},
			"replica %s, which did not hold the Lease, sent %s %s (status %d) at %s", r.Name, req.Method, req.Path, req.Status, req.Time.Format(time.TimeOnly))
	}
	if !ok {
		s.violation("unknown-write", r.Name+" "+req.Method+" "+routeOf(req.Path), nil,
			"replica %s sent %s %s, which is no endpoint of apireq.Endpoints", r.Name, req.Method, req.Path)
		return
	}
	if l == nil {
		return
	}
	d, found := s.decisions.latest(l, ep.Action, ep.Operation, name, req.Time)
	switch {
	case !found:
		s.rep.undecided(ep.Operation)
	case !d.Allowed:
		s.violation("denied-write", fmt.Sprintf("%s %s %s", r.Name, ep.Operation, name), []string{name},
			"replica %s sent %s %s (load balancer %q) at %s, but its latest decision for it (%s at %s) denied: %s",
			r.Name, req.Method, req.Path, name, req.Time.Format("15:04:05.000"), d.ID, d.Time.Format("15:04:05.000"), d.Deny)
	default:
		s.rep.decided()
	}
}

// routeOf replaces the IDs of an API path with {id}.
func routeOf(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// auditEvent is the part of an apiserver audit event the soak reads.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	RequestObject struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"requestObject"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// reviews are the resources whose create only asks the apiserver a question.
var reviews = map[string]bool{"tokenreviews": true, "subjectaccessreviews": true, "selfsubjectaccessreviews": true, "selfsubjectreviews": true}

// checkAudit reads the apiserver's audit log since the last call: the webhook replica, which
// never holds the Lease, must not write to the cluster (a PolicyViolation event, a status) nor
// touch a PolicyReport.
func (s *soak) checkAudit() {
	s.rep.count("webhook-replica-cluster-writes")
	for _, line := range s.auditTail.next() {
		var ev auditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.User.Username != webhookUser {
			continue
		}
		ref := ev.ObjectRef
		what := ref.Resource
		if ref.Subresource != "" {
			what += "/" + ref.Subresource
		}
		write := ev.Verb != "get" && ev.Verb != "list" && ev.Verb != "watch"
		switch {
		case !write || reviews[ref.Resource]:
			// Reads, and the reviews of delegated authentication and authorization (a create
			// that asks a question and stores nothing).
		case ref.APIGroup == "wgpolicyk8s.io":
			s.violation("webhook-replica-report", ev.Verb+" "+what, nil,
				"the webhook replica sent %s %s %s/%s (HTTP %d) at %s", ev.Verb, what, ref.Namespace, ref.Name, ev.ResponseStatus.Code, ev.StageTimestamp.Format(time.TimeOnly))
		case ref.Resource == "events" && engineEvent(ev):
			// Each replica compiles the policy and reports its own load on the ConfigMap
			// (PolicyLoaded, PolicyRejected, and the count patches of those): a fact about the
			// replica, not a report of the cluster's state (docs/reliability.md, Only the leader
			// writes).
		case ref.Resource == "events":
			reason := ev.RequestObject.Reason
			if reason == "" {
				reason = "(" + ev.Verb + " of an event, no reason in the body)"
			}
			s.violation("webhook-replica-event", reason, nil,
				"the webhook replica emitted a %s event on %s at %s: %s", reason, ref.Namespace, ev.StageTimestamp.Format(time.TimeOnly), ev.RequestObject.Message)
		default:
			s.violation("webhook-replica-write", ev.Verb+" "+what, nil,
				"the webhook replica sent %s %s %s/%s (HTTP %d) at %s", ev.Verb, what, ref.Namespace, ref.Name, ev.ResponseStatus.Code, ev.StageTimestamp.Format(time.TimeOnly))
		}
	}
}

// checkDeniedCost counts, in the quiet window from since, the requests of the replicas that
// name the UID of a Service the policy refuses: after its first round a denied Service should
// cost nothing (docs/policy.md § Retrying).
func (s *soak) checkDeniedCost(since time.Time) {
	if !since.Before(time.Now()) {
		s.event("denied-cost check skipped: the leader took the Lease less than %s before the end", firstRound)
		return
	}
	s.rep.count("denied-cost")
	s.model.mu.Lock()
	refused := map[string]string{}
	for k, m := range s.model.services {
		if m.LB && m.Group == "" && !s.model.everPublicNS[m.NS] {
			refused[m.UID] = k
		}
	}
	s.model.mu.Unlock()
	n := map[string]int{}
	for _, name := range []string{"a", "b"} {
		reqs, _ := s.replicas[name].ep.since(0)
		for _, req := range reqs {
			if req.Time.Before(since) {
				continue
			}
			for uid, k := range refused {
				if strings.Contains(req.Query, uid) {
					n[k]++
				}
			}
		}
	}
	for k, c := range n {
		s.violation("denied-service-cost", k, []string{k},
			"the denied Service %s cost %d requests in the quiet %s (want 0 after its first round)", k, c, time.Since(since).Round(time.Second))
	}
}

// engineEvent reports whether ev writes an event of the replica's policy engine about its own
// load of a revision: reason PolicyLoaded or PolicyRejected, or a count patch (no reason in the
// body) of such an event, whose message starts with "Policy revision".
func engineEvent(ev auditEvent) bool {
	switch ev.RequestObject.Reason {
	case policy.ReasonPolicyLoaded, policy.ReasonPolicyRejected:
		return true
	case "":
		return strings.HasPrefix(ev.RequestObject.Message, "Policy revision ")
	}
	return false
}
