package hcloudemu

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// LoadBalancerSpec describes a load balancer to pre-create (adoption tests).
type LoadBalancerSpec struct {
	Name      string            `json:"name"`
	Type      string            `json:"type,omitempty"`     // default "lb11"
	Location  string            `json:"location,omitempty"` // default "fsn1"
	Labels    map[string]string `json:"labels,omitempty"`
	NetworkID int64             `json:"network_id,omitempty"` // 0 = not attached
	PrivateIP string            `json:"private_ip,omitempty"` // "" = next free in the network
}

// AddLoadBalancer creates a load balancer directly (no action, no request
// logged) and returns its ID.
func (e *Emulator) AddLoadBalancer(s LoadBalancerSpec) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addLoadBalancerLocked(s)
}

func (e *Emulator) addLoadBalancerLocked(s LoadBalancerSpec) (int64, error) {
	typ := orDefault(s.Type, "lb11")
	req := schema.LoadBalancerCreateRequest{
		Name:             s.Name,
		LoadBalancerType: schema.IDOrName{Name: typ},
		Location:         new(orDefault(s.Location, "fsn1")),
		Labels:           &s.Labels,
	}
	if id, err := strconv.ParseInt(typ, 10, 64); err == nil {
		req.LoadBalancerType = schema.IDOrName{ID: id}
	}
	if s.NetworkID != 0 {
		req.Network = &s.NetworkID
	}
	lb, aerr := e.buildLoadBalancer(req, s.PrivateIP)
	if aerr != nil {
		return 0, fmt.Errorf("add load balancer %q: %s", s.Name, aerr.Error())
	}
	e.commitLoadBalancer(lb)
	return lb.ID, nil
}

// LoadBalancers returns snapshots of all load balancers in ID order.
func (e *Emulator) LoadBalancers() []schema.LoadBalancer {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle()
	out := make([]schema.LoadBalancer, 0, len(e.st.lbs))
	for _, id := range sortedIDs(e.st.lbs) {
		out = append(out, deepCopy(e.renderLB(e.st.lbs[id])))
	}
	return out
}

// LoadBalancer returns a snapshot of one load balancer.
func (e *Emulator) LoadBalancer(id int64) (schema.LoadBalancer, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle()
	lb, ok := e.st.lbs[id]
	if !ok {
		return schema.LoadBalancer{}, false
	}
	return deepCopy(e.renderLB(lb)), true
}

// renderLB adds what is computed: target health and resolved label selectors.
func (e *Emulator) renderLB(lb *schema.LoadBalancer) schema.LoadBalancer {
	out := *lb
	out.Targets = e.renderTargets(lb)
	return out
}

// healthStatus is one healthy entry per service listen port.
func healthStatus(lb *schema.LoadBalancer) []schema.LoadBalancerTargetHealthStatus {
	hs := make([]schema.LoadBalancerTargetHealthStatus, 0, len(lb.Services))
	for _, s := range lb.Services {
		hs = append(hs, schema.LoadBalancerTargetHealthStatus{ListenPort: s.ListenPort, Status: "healthy"})
	}
	return hs
}

func (e *Emulator) renderTargets(lb *schema.LoadBalancer) []schema.LoadBalancerTarget {
	out := make([]schema.LoadBalancerTarget, 0, len(lb.Targets))
	for _, t := range lb.Targets {
		t.HealthStatus = healthStatus(lb)
		if t.Type == "label_selector" && t.LabelSelector != nil {
			t.Targets = []schema.LoadBalancerTarget{}
			for _, id := range e.selectorServers(t.LabelSelector.Selector) {
				t.Targets = append(t.Targets, schema.LoadBalancerTarget{
					Type: "server", Server: &schema.LoadBalancerTargetServer{ID: id},
					UsePrivateIP: t.UsePrivateIP, HealthStatus: healthStatus(lb),
				})
			}
		}
		out = append(out, t)
	}
	return out
}

// selectorServers returns the IDs of servers matching a label selector.
func (e *Emulator) selectorServers(selector string) []int64 {
	sel, err := ParseSelector(selector)
	if err != nil {
		return nil
	}
	var ids []int64
	for _, id := range sortedIDs(e.st.servers) {
		if sel.Matches(e.st.servers[id].Labels) {
			ids = append(ids, id)
		}
	}
	return ids
}

// targetCount counts targets as max_targets does: a label selector counts
// the servers it resolves to.
func (e *Emulator) targetCount(lb *schema.LoadBalancer) int {
	n := 0
	for _, t := range lb.Targets {
		if t.Type == "label_selector" && t.LabelSelector != nil {
			n += len(e.selectorServers(t.LabelSelector.Selector))
		} else {
			n++
		}
	}
	return n
}

func (e *Emulator) listLoadBalancers(r *http.Request) (int, any, error) {
	items := make([]listItem, 0, len(e.st.lbs))
	for _, id := range sortedIDs(e.st.lbs) {
		lb := e.st.lbs[id]
		items = append(items, listItem{id: id, name: lb.Name, labels: lb.Labels, created: lb.Created,
			render: func() any { return wireLB(e.renderLB(lb)) }})
	}
	return e.list(r, "load_balancers", items, nil)
}

func (e *Emulator) lbByPath(r *http.Request) (*schema.LoadBalancer, error) {
	id, err := pathID(r, "load_balancer")
	if err != nil {
		return nil, err
	}
	lb, ok := e.st.lbs[id]
	if !ok {
		return nil, errNotFound("load_balancer", id)
	}
	return lb, nil
}

func (e *Emulator) getLoadBalancer(r *http.Request) (int, any, error) {
	lb, err := e.lbByPath(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, lbReply{LoadBalancer: wireLB(e.renderLB(lb))}, nil
}

func (e *Emulator) lbNameTaken(name string, except int64) bool {
	for _, lb := range e.st.lbs {
		if lb.Name == name && lb.ID != except {
			return true
		}
	}
	return false
}

// buildLoadBalancer validates a create request and returns the new load
// balancer without storing it (ID 0, no public IPs yet); privateIP is the
// requested IP in req.Network, if any.
func (e *Emulator) buildLoadBalancer(req schema.LoadBalancerCreateRequest, privateIP string) (*schema.LoadBalancer, *apiError) {
	if err := validateName(req.Name); err != nil {
		return nil, err
	}
	if e.lbNameTaken(req.Name, 0) {
		return nil, newError(http.StatusConflict, "uniqueness_error", "load balancer name %q is already used", req.Name)
	}
	typ, ok := e.st.lbType(req.LoadBalancerType)
	if !ok {
		return nil, errInvalid("load_balancer_type", "load balancer type %v not found", idOrName(req.LoadBalancerType))
	}
	var loc schema.Location
	switch {
	case req.Location != nil && req.NetworkZone != nil:
		return nil, errInvalid("location", "location and network_zone are mutually exclusive")
	case req.Location != nil:
		if loc, ok = e.st.location(*req.Location); !ok {
			return nil, errInvalid("location", "location %q not found", *req.Location)
		}
	case req.NetworkZone != nil:
		i := slices.IndexFunc(e.st.locations, func(l schema.Location) bool { return l.NetworkZone == *req.NetworkZone })
		if i < 0 {
			return nil, errInvalid("network_zone", "network zone %q not found", *req.NetworkZone)
		}
		loc = e.st.locations[i]
	default:
		return nil, errInvalid("location", "location or network_zone is required")
	}
	algorithm := "round_robin"
	if req.Algorithm != nil {
		algorithm = req.Algorithm.Type
	}
	if algorithm != "round_robin" && algorithm != "least_connections" {
		return nil, errInvalid("algorithm.type", "algorithm must be round_robin or least_connections, got %q", algorithm)
	}
	labels := map[string]string{}
	if req.Labels != nil && *req.Labels != nil {
		labels = *req.Labels
	}
	if err := validateLabels(labels); err != nil {
		return nil, err
	}
	if req.PublicNet != nil && (req.PublicNet.IPv4 != 0 || req.PublicNet.IPv6 != 0) {
		return nil, errInvalid("public_net", "primary IPs are not supported by the emulator")
	}
	lb := &schema.LoadBalancer{
		Name: req.Name, Location: loc, LoadBalancerType: typ, Labels: copyLabels(labels),
		Created: e.now(), Services: []schema.LoadBalancerService{}, Targets: []schema.LoadBalancerTarget{},
		PrivateNet: []schema.LoadBalancerPrivateNet{}, Algorithm: schema.LoadBalancerAlgorithm{Type: algorithm},
		PublicNet: schema.LoadBalancerPublicNet{Enabled: req.PublicInterface == nil || *req.PublicInterface},
	}
	if req.Network != nil {
		if err := e.attach(lb, schema.LoadBalancerActionAttachToNetworkRequest{Network: *req.Network, IP: nonEmpty(privateIP)}); err != nil {
			return nil, err
		}
	}
	for i, s := range req.Services {
		svc, err := convert[schema.LoadBalancerActionAddServiceRequest](s)
		if err != nil {
			return nil, errInvalid(fmt.Sprintf("services[%d]", i), "%v", err)
		}
		if err := e.addService(lb, svc); err != nil {
			return nil, err
		}
	}
	for i, t := range req.Targets {
		tgt, err := convert[schema.LoadBalancerActionAddTargetRequest](t)
		if err != nil {
			return nil, errInvalid(fmt.Sprintf("targets[%d]", i), "%v", err)
		}
		if err := e.addTarget(lb, tgt); err != nil {
			return nil, err
		}
	}
	if !lb.PublicNet.Enabled {
		if err := e.checkPrivateOnly(lb); err != nil {
			return nil, err
		}
	}
	return lb, nil
}

// commitLoadBalancer assigns an ID and public IPs and stores lb.
func (e *Emulator) commitLoadBalancer(lb *schema.LoadBalancer) {
	lb.ID = e.st.nextID("load_balancer")
	v4, v6 := e.st.allocIPv4(), e.st.allocIPv6()
	lb.PublicNet.IPv4 = schema.LoadBalancerPublicNetIPv4{IP: v4, DNSPtr: defaultPtr(v4)}
	lb.PublicNet.IPv6 = schema.LoadBalancerPublicNetIPv6{IP: v6, DNSPtr: defaultPtr(v6)}
	e.st.lbs[lb.ID] = lb
}

func defaultPtr(ip string) string { return "static." + ip + ".clients.your-server.de" }

func idOrName(v schema.IDOrName) string {
	if v.Name != "" {
		return strconv.Quote(v.Name)
	}
	return strconv.FormatInt(v.ID, 10)
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (e *Emulator) createLoadBalancer(r *http.Request) (int, any, error) {
	var req schema.LoadBalancerCreateRequest
	if err := decode(r, &req, false); err != nil {
		return 0, nil, err
	}
	lb, aerr := e.buildLoadBalancer(req, "")
	if aerr != nil {
		return 0, nil, aerr
	}
	e.commitLoadBalancer(lb)
	a := e.startAction(r, "create_load_balancer", ref("load_balancer", lb.ID))
	resp := lbCreateReply{LoadBalancer: wireLB(e.renderLB(lb)), Action: a.renderStarted()}
	if a.fail {
		// A failed create leaves nothing behind.
		delete(e.st.lbs, lb.ID)
	}
	return http.StatusCreated, resp, nil
}

// updateLoadBalancer serves PUT: name and labels (labels replace the set).
func (e *Emulator) updateLoadBalancer(r *http.Request) (int, any, error) {
	lb, err := e.lbByPath(r)
	if err != nil {
		return 0, nil, err
	}
	var req schema.LoadBalancerUpdateRequest
	if err := decode(r, &req, false); err != nil {
		return 0, nil, err
	}
	if req.Name != nil {
		if err := validateName(*req.Name); err != nil {
			return 0, nil, err
		}
		if e.lbNameTaken(*req.Name, lb.ID) {
			return 0, nil, newError(http.StatusConflict, "uniqueness_error", "load balancer name %q is already used", *req.Name)
		}
	}
	if req.Labels != nil {
		if err := validateLabels(*req.Labels); err != nil {
			return 0, nil, err
		}
	}
	if req.Name != nil {
		lb.Name = *req.Name
	}
	if req.Labels != nil {
		lb.Labels = copyLabels(*req.Labels)
	}
	return http.StatusOK, lbReply{LoadBalancer: wireLB(e.renderLB(lb))}, nil
}

// deleteLoadBalancer answers 201 with a running delete_load_balancer action;
// the load balancer disappears when the action succeeds.
func (e *Emulator) deleteLoadBalancer(r *http.Request) (int, any, error) {
	lb, err := e.lbByPath(r)
	if err != nil {
		return 0, nil, err
	}
	if lb.Protection.Delete {
		return 0, nil, newError(http.StatusLocked, "protected", "load balancer %d is delete protected", lb.ID)
	}
	if err := e.checkLock("load_balancer", lb.ID); err != nil {
		return 0, nil, err
	}
	a := e.startAction(r, "delete_load_balancer", ref("load_balancer", lb.ID))
	e.st.deleting[lb.ID] = a.id
	return actionReply(a)
}
