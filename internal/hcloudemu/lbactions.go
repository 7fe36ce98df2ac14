package hcloudemu

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// loadBalancerAction serves POST /v1/load_balancers/{id}/actions/{action}.
// Every verb checks the lock, decodes and validates, starts the action,
// and applies the change only when the action is not set to fail.
func (e *Emulator) loadBalancerAction(r *http.Request) (int, any, error) {
	lb, err := e.lbByPath(r)
	if err != nil {
		return 0, nil, err
	}
	verb := verbOf(r)
	do, ok := lbVerbs[verb]
	if !ok {
		return 0, nil, newError(http.StatusNotFound, "not_found", "unknown load balancer action %q", verb)
	}
	if err := e.checkLock("load_balancer", lb.ID); err != nil {
		return 0, nil, err
	}
	// Validate against a copy so a rejected request changes nothing.
	cp := deepCopy(*lb)
	res, aerr := do(e, r, &cp)
	if aerr != nil {
		return 0, nil, aerr
	}
	a := e.startAction(r, verb, append([]schema.ActionResourceReference{ref("load_balancer", lb.ID)}, res...)...)
	if !a.fail {
		*lb = cp
	}
	return actionReply(a)
}

// lbVerb validates a request and applies it to lb (a copy); it returns extra
// resources for the action.
type lbVerb func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError)

var lbVerbs map[string]lbVerb

func init() {
	lbVerbs = map[string]lbVerb{
		"add_service": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionAddServiceRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			return nil, e.addService(lb, req)
		},
		"update_service": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionUpdateServiceRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			return nil, e.updateService(lb, req)
		},
		"delete_service": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerDeleteServiceRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			i := slices.IndexFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == req.ListenPort })
			if i < 0 {
				return nil, newError(http.StatusNotFound, "not_found", "service with listen port %d not found", req.ListenPort)
			}
			lb.Services = slices.Delete(lb.Services, i, i+1)
			return nil, nil
		},
		"add_target": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionAddTargetRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			if err := e.addTarget(lb, req); err != nil {
				return nil, err
			}
			return targetRefs(req.Type, req.Server), nil
		},
		"remove_target": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionRemoveTargetRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			i := slices.IndexFunc(lb.Targets, func(t schema.LoadBalancerTarget) bool { return sameTarget(t, req) })
			if i < 0 {
				return nil, newError(http.StatusNotFound, "not_found", "target not found on load balancer %d", lb.ID)
			}
			lb.Targets = slices.Delete(lb.Targets, i, i+1)
			var srv *schema.LoadBalancerActionAddTargetRequestServer
			if req.Server != nil {
				srv = &schema.LoadBalancerActionAddTargetRequestServer{ID: req.Server.ID}
			}
			return targetRefs(req.Type, srv), nil
		},
		"attach_to_network": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionAttachToNetworkRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			if err := e.attach(lb, req); err != nil {
				return nil, err
			}
			return []schema.ActionResourceReference{ref("network", req.Network)}, nil
		},
		"detach_from_network": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionDetachFromNetworkRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			i := slices.IndexFunc(lb.PrivateNet, func(p schema.LoadBalancerPrivateNet) bool { return p.Network == req.Network })
			if i < 0 {
				return nil, newError(http.StatusUnprocessableEntity, "load_balancer_not_attached_to_network", "load balancer %d is not attached to network %d", lb.ID, req.Network)
			}
			lb.PrivateNet = slices.Delete(lb.PrivateNet, i, i+1)
			return []schema.ActionResourceReference{ref("network", req.Network)}, nil
		},
		"enable_public_interface": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			if err := decodeAPI(r, &struct{}{}, true); err != nil {
				return nil, err
			}
			lb.PublicNet.Enabled = true
			return nil, nil
		},
		"disable_public_interface": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			if err := decodeAPI(r, &struct{}{}, true); err != nil {
				return nil, err
			}
			if err := e.checkPrivateOnly(lb); err != nil {
				return nil, err
			}
			lb.PublicNet.Enabled = false
			return nil, nil
		},
		"change_algorithm": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionChangeAlgorithmRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			if req.Type != "round_robin" && req.Type != "least_connections" {
				return nil, errInvalid("type", "algorithm must be round_robin or least_connections, got %q", req.Type)
			}
			lb.Algorithm.Type = req.Type
			return nil, nil
		},
		"change_type": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionChangeTypeRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			typ, ok := e.st.lbType(req.LoadBalancerType)
			if !ok {
				return nil, newError(http.StatusUnprocessableEntity, "invalid_load_balancer_type", "load balancer type %s not found", idOrName(req.LoadBalancerType))
			}
			if e.targetCount(lb) > typ.MaxTargets || len(lb.Services) > typ.MaxServices {
				return nil, newError(http.StatusUnprocessableEntity, "invalid_load_balancer_type", "load balancer type %s allows %d targets and %d services, the load balancer has %d and %d",
					typ.Name, typ.MaxTargets, typ.MaxServices, e.targetCount(lb), len(lb.Services))
			}
			lb.LoadBalancerType = typ
			return nil, nil
		},
		"change_dns_ptr": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionChangeDNSPtrRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			var ip string
			var dst *string
			switch {
			case sameIP(req.IP, lb.PublicNet.IPv4.IP):
				ip, dst = lb.PublicNet.IPv4.IP, &lb.PublicNet.IPv4.DNSPtr
			case sameIP(req.IP, lb.PublicNet.IPv6.IP):
				ip, dst = lb.PublicNet.IPv6.IP, &lb.PublicNet.IPv6.DNSPtr
			default:
				return nil, errInvalid("ip", "%q is not a public IP of load balancer %d", req.IP, lb.ID)
			}
			*dst = defaultPtr(ip)
			if req.DNSPtr != nil {
				*dst = *req.DNSPtr
			}
			return nil, nil
		},
		"change_protection": func(e *Emulator, r *http.Request, lb *schema.LoadBalancer) ([]schema.ActionResourceReference, *apiError) {
			var req schema.LoadBalancerActionChangeProtectionRequest
			if err := decodeAPI(r, &req, false); err != nil {
				return nil, err
			}
			if req.Delete != nil {
				lb.Protection.Delete = *req.Delete
			}
			return nil, nil
		},
	}
}

// decodeAPI is decode with the *apiError type the verbs return.
func decodeAPI(r *http.Request, v any, allowEmpty bool) *apiError {
	if err := decode(r, v, allowEmpty); err != nil {
		return err.(*apiError) //nolint:errorlint // decode returns only *apiError, never wrapped
	}
	return nil
}

func targetRefs(typ string, srv *schema.LoadBalancerActionAddTargetRequestServer) []schema.ActionResourceReference {
	if typ == "server" && srv != nil {
		return []schema.ActionResourceReference{ref("server", srv.ID)}
	}
	return nil
}

// sameIP compares two addresses in any notation ("2001:db8::1" equals
// "2001:0db8:0::1"); strings that do not parse compare as text.
func sameIP(a, b string) bool {
	pa, errA := netip.ParseAddr(a)
	pb, errB := netip.ParseAddr(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return pa == pb
}

func sameTarget(t schema.LoadBalancerTarget, req schema.LoadBalancerActionRemoveTargetRequest) bool {
	if t.Type != req.Type {
		return false
	}
	switch t.Type {
	case "server":
		return req.Server != nil && t.Server != nil && t.Server.ID == req.Server.ID
	case "ip":
		return req.IP != nil && t.IP != nil && sameIP(t.IP.IP, req.IP.IP)
	case "label_selector":
		return req.LabelSelector != nil && t.LabelSelector != nil && t.LabelSelector.Selector == req.LabelSelector.Selector
	}
	return false
}

// addService validates and appends a service, filling in the API's defaults.
func (e *Emulator) addService(lb *schema.LoadBalancer, req schema.LoadBalancerActionAddServiceRequest) *apiError {
	svc := schema.LoadBalancerService{Protocol: req.Protocol}
	switch req.Protocol {
	case "tcp":
		if req.ListenPort == nil {
			return errInvalid("listen_port", "listen_port is required for tcp services")
		}
	case "http":
		svc.ListenPort, svc.DestinationPort = 80, 80
	case "https":
		svc.ListenPort, svc.DestinationPort = 443, 80
	default:
		return errInvalid("protocol", "protocol must be tcp, http or https, got %q", req.Protocol)
	}
	if req.ListenPort != nil {
		svc.ListenPort = *req.ListenPort
		if req.Protocol == "tcp" {
			svc.DestinationPort = *req.ListenPort
		}
	}
	if req.DestinationPort != nil {
		svc.DestinationPort = *req.DestinationPort
	}
	if req.Proxyprotocol != nil {
		svc.Proxyprotocol = *req.Proxyprotocol
	}
	if err := checkPort("listen_port", svc.ListenPort); err != nil {
		return err
	}
	if err := checkPort("destination_port", svc.DestinationPort); err != nil {
		return err
	}
	if slices.ContainsFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == svc.ListenPort }) {
		return newError(http.StatusPreconditionFailed, "source_port_already_used", "listen port %d is already used by another service", svc.ListenPort)
	}
	if len(lb.Services) >= lb.LoadBalancerType.MaxServices {
		return newError(http.StatusForbidden, "resource_limit_exceeded", "load balancer type %s allows at most %d services", lb.LoadBalancerType.Name, lb.LoadBalancerType.MaxServices)
	}
	if svc.Protocol != "tcp" {
		svc.HTTP = &schema.LoadBalancerServiceHTTP{CookieName: "HCLBSTICKY", CookieLifetime: 300, TimeoutIdle: 60, Certificates: []int64{}}
	}
	if req.HTTP != nil {
		if err := mergeHTTP(&svc, req.HTTP); err != nil {
			return err
		}
	}
	hc := schema.LoadBalancerServiceHealthCheck{Protocol: "tcp", Port: svc.DestinationPort, Interval: 15, Timeout: 10, Retries: 3}
	if req.HealthCheck != nil {
		h := req.HealthCheck
		hc.Protocol = orDefault(h.Protocol, "tcp")
		setIf(&hc.Port, h.Port)
		setIf(&hc.Interval, h.Interval)
		setIf(&hc.Timeout, h.Timeout)
		setIf(&hc.Retries, h.Retries)
		if hc.Protocol != "tcp" {
			hc.HTTP = &schema.LoadBalancerServiceHealthCheckHTTP{Path: "/", StatusCodes: []string{"2??", "3??"}}
		}
		if err := mergeHealthCheckHTTP(&hc, h.HTTP); err != nil {
			return err
		}
	}
	svc.HealthCheck = &hc
	if err := e.checkService(lb, svc); err != nil {
		return err
	}
	lb.Services = append(lb.Services, svc)
	return nil
}

// updateService applies the given fields to the service on ListenPort.
func (e *Emulator) updateService(lb *schema.LoadBalancer, req schema.LoadBalancerActionUpdateServiceRequest) *apiError {
	i := slices.IndexFunc(lb.Services, func(s schema.LoadBalancerService) bool { return s.ListenPort == req.ListenPort })
	if i < 0 {
		return newError(http.StatusNotFound, "not_found", "service with listen port %d not found", req.ListenPort)
	}
	svc := deepCopy(lb.Services[i])
	if req.Protocol != nil {
		switch *req.Protocol {
		case "tcp":
			svc.HTTP = nil
		case "http", "https":
			if svc.HTTP == nil {
				svc.HTTP = &schema.LoadBalancerServiceHTTP{CookieName: "HCLBSTICKY", CookieLifetime: 300, TimeoutIdle: 60, Certificates: []int64{}}
			}
		default:
			return errInvalid("protocol", "protocol must be tcp, http or https, got %q", *req.Protocol)
		}
		svc.Protocol = *req.Protocol
	}
	setIf(&svc.DestinationPort, req.DestinationPort)
	setIf(&svc.Proxyprotocol, req.Proxyprotocol)
	if err := checkPort("destination_port", svc.DestinationPort); err != nil {
		return err
	}
	if req.HTTP != nil {
		// The update request's HTTP settings have the add request's fields exactly.
		if err := mergeHTTP(&svc, (*schema.LoadBalancerActionAddServiceRequestHTTP)(req.HTTP)); err != nil {
			return err
		}
	}
	if req.HealthCheck != nil {
		h := req.HealthCheck
		if svc.HealthCheck == nil {
			svc.HealthCheck = &schema.LoadBalancerServiceHealthCheck{Protocol: "tcp", Port: svc.DestinationPort, Interval: 15, Timeout: 10, Retries: 3}
		}
		hc := svc.HealthCheck
		setIf(&hc.Protocol, h.Protocol)
		setIf(&hc.Port, h.Port)
		setIf(&hc.Interval, h.Interval)
		setIf(&hc.Timeout, h.Timeout)
		setIf(&hc.Retries, h.Retries)
		switch hc.Protocol {
		case "tcp":
			hc.HTTP = nil
		case "http", "https":
			if hc.HTTP == nil {
				hc.HTTP = &schema.LoadBalancerServiceHealthCheckHTTP{Path: "/", StatusCodes: []string{"2??", "3??"}}
			}
		default:
			return errInvalid("health_check.protocol", "health check protocol must be tcp, http or https, got %q", hc.Protocol)
		}
		// The update request's health check HTTP settings have the add request's fields exactly.
		if err := mergeHealthCheckHTTP(hc, (*schema.LoadBalancerActionAddServiceRequestHealthCheckHTTP)(h.HTTP)); err != nil {
			return err
		}
	}
	if err := e.checkService(lb, svc); err != nil {
		return err
	}
	lb.Services[i] = svc
	return nil
}

// checkService validates what add and update share: the health check, the
// http settings and the certificates of https services (none is TLS
// passthrough, per the spec).
func (e *Emulator) checkService(lb *schema.LoadBalancer, svc schema.LoadBalancerService) *apiError {
	if hc := svc.HealthCheck; hc != nil {
		if hc.Protocol != "tcp" && hc.Protocol != "http" && hc.Protocol != "https" {
			return errInvalid("health_check.protocol", "health check protocol must be tcp, http or https, got %q", hc.Protocol)
		}
		if err := checkPort("health_check.port", hc.Port); err != nil {
			return err
		}
		if err := checkHealthCheck(hc); err != nil {
			return err
		}
	}
	if h := svc.HTTP; h != nil {
		if n := len([]rune(h.CookieName)); n < 1 || n > 100 {
			return errInvalid("http.cookie_name", "cookie_name must be 1 to 100 characters, got %d", n)
		}
		if h.CookieLifetime < 30 || h.CookieLifetime > 86400 {
			return errInvalid("http.cookie_lifetime", "cookie_lifetime must be between 30 and 86400 seconds, got %d", h.CookieLifetime)
		}
		// The spec gives timeout_idle no range; the official CCM's annotation doc says the
		// idle timeout must be between 30s and 300s (unverified against the live API).
		if h.TimeoutIdle < 30 || h.TimeoutIdle > 300 {
			return errInvalid("http.timeout_idle", "timeout_idle must be between 30 and 300 seconds, got %d", h.TimeoutIdle)
		}
	}
	if svc.Protocol != "https" {
		if svc.HTTP != nil && len(svc.HTTP.Certificates) > 0 {
			return errInvalid("http.certificates", "certificates are only allowed for https services")
		}
		return nil
	}
	if svc.HTTP == nil || len(svc.HTTP.Certificates) == 0 {
		return nil // the spec: certificates are "empty for TLS/SSL passthrough"
	}
	for _, id := range svc.HTTP.Certificates {
		if _, ok := e.st.certs[id]; !ok {
			return errInvalid("http.certificates", "certificate %d not found", id)
		}
	}
	n := len(svc.HTTP.Certificates)
	for _, other := range lb.Services {
		if other.ListenPort != svc.ListenPort && other.HTTP != nil {
			n += len(other.HTTP.Certificates)
		}
	}
	if n > lb.LoadBalancerType.MaxAssignedCertificates {
		return newError(http.StatusForbidden, "resource_limit_exceeded", "load balancer type %s allows at most %d certificates", lb.LoadBalancerType.Name, lb.LoadBalancerType.MaxAssignedCertificates)
	}
	return nil
}

// checkHealthCheck applies the spec's ranges: interval 3–60 s, timeout
// 1–60 s, retries at least 1, and for http checks a domain of at most 128
// characters without spaces, percent signs or backslashes, a path of 1–256
// characters without spaces, a response of at most 256 characters and at
// most 20 status codes.
func checkHealthCheck(hc *schema.LoadBalancerServiceHealthCheck) *apiError {
	switch {
	case hc.Interval < 3 || hc.Interval > 60:
		return errInvalid("health_check.interval", "interval must be between 3 and 60 seconds, got %d", hc.Interval)
	case hc.Timeout < 1 || hc.Timeout > 60:
		return errInvalid("health_check.timeout", "timeout must be between 1 and 60 seconds, got %d", hc.Timeout)
	case hc.Retries < 1:
		// The spec's maximum of 5 is not enforced: the golden fixtures of
		// the official CCM (test/golden/official-ccm, drift cases) set 7 and 9.
		return errInvalid("health_check.retries", "retries must be at least 1, got %d", hc.Retries)
	}
	h := hc.HTTP
	if h == nil {
		return nil
	}
	switch {
	case len([]rune(h.Domain)) > 128 || strings.ContainsAny(h.Domain, " %\\"):
		return errInvalid("health_check.http.domain", "domain must be at most 128 characters without spaces, percent signs or backslashes, got %q", h.Domain)
	case len([]rune(h.Path)) < 1 || len([]rune(h.Path)) > 256 || strings.Contains(h.Path, " "):
		return errInvalid("health_check.http.path", "path must be 1 to 256 characters without spaces (percent-encode them), got %q", h.Path)
	case len([]rune(h.Response)) > 256:
		return errInvalid("health_check.http.response", "response must be at most 256 characters, got %d", len([]rune(h.Response)))
	case len(h.StatusCodes) > 20:
		return errInvalid("health_check.http.status_codes", "at most 20 status codes are allowed, got %d", len(h.StatusCodes))
	}
	return nil
}

func checkPort(field string, p int) *apiError {
	if p < 1 || p > 65535 {
		return errInvalid(field, "port must be between 1 and 65535, got %d", p)
	}
	return nil
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// addTarget validates and appends a target.
func (e *Emulator) addTarget(lb *schema.LoadBalancer, req schema.LoadBalancerActionAddTargetRequest) *apiError {
	usePrivate := req.UsePrivateIP != nil && *req.UsePrivateIP
	t := schema.LoadBalancerTarget{Type: req.Type, UsePrivateIP: usePrivate}
	added := 1
	switch req.Type {
	case "server":
		if req.Server == nil {
			return errInvalid("server", "server is required for targets of type server")
		}
		srv, ok := e.st.servers[req.Server.ID]
		if !ok {
			return errInvalid("server.id", "server %d not found", req.Server.ID)
		}
		if slices.ContainsFunc(lb.Targets, func(o schema.LoadBalancerTarget) bool {
			return o.Type == "server" && o.Server != nil && o.Server.ID == srv.ID
		}) {
			return newError(http.StatusUnprocessableEntity, "target_already_defined", "server %d is already a target", srv.ID)
		}
		if usePrivate {
			if len(lb.PrivateNet) == 0 {
				return newError(http.StatusUnprocessableEntity, "load_balancer_not_attached_to_network", "load balancer is not attached to a network")
			}
			if !slices.ContainsFunc(srv.PrivateNet, func(sp schema.ServerPrivateNet) bool {
				return slices.ContainsFunc(lb.PrivateNet, func(lp schema.LoadBalancerPrivateNet) bool { return lp.Network == sp.Network })
			}) {
				return newError(http.StatusUnprocessableEntity, "server_not_attached_to_network", "server %d is not attached to the load balancer's network", srv.ID)
			}
		}
		t.Server = &schema.LoadBalancerTargetServer{ID: srv.ID}
	case "ip":
		if req.IP == nil {
			return errInvalid("ip", "ip is required for targets of type ip")
		}
		a, err := netip.ParseAddr(req.IP.IP)
		if err != nil {
			return errInvalid("ip.ip", "%q is not an IP address", req.IP.IP)
		}
		if slices.ContainsFunc(lb.Targets, func(o schema.LoadBalancerTarget) bool {
			return o.Type == "ip" && o.IP != nil && o.IP.IP == a.String()
		}) {
			return newError(http.StatusUnprocessableEntity, "target_already_defined", "IP %s is already a target", a)
		}
		t.IP = &schema.LoadBalancerTargetIP{IP: a.String()}
		t.UsePrivateIP = false
	case "label_selector":
		if req.LabelSelector == nil {
			return errInvalid("label_selector", "label_selector is required for targets of type label_selector")
		}
		if _, err := ParseSelector(req.LabelSelector.Selector); err != nil {
			return errInvalid("label_selector.selector", "%v", err)
		}
		if slices.ContainsFunc(lb.Targets, func(o schema.LoadBalancerTarget) bool {
			return o.Type == "label_selector" && o.LabelSelector != nil && o.LabelSelector.Selector == req.LabelSelector.Selector
		}) {
			return newError(http.StatusUnprocessableEntity, "target_already_defined", "label selector %q is already a target", req.LabelSelector.Selector)
		}
		if usePrivate && len(lb.PrivateNet) == 0 {
			return newError(http.StatusUnprocessableEntity, "load_balancer_not_attached_to_network", "load balancer is not attached to a network")
		}
		t.LabelSelector = &schema.LoadBalancerTargetLabelSelector{Selector: req.LabelSelector.Selector}
		added = len(e.selectorServers(req.LabelSelector.Selector))
	default:
		return errInvalid("type", "target type must be server, label_selector or ip, got %q", req.Type)
	}
	if !t.UsePrivateIP && !lb.PublicNet.Enabled {
		return newError(http.StatusUnprocessableEntity, "load_balancer_public_interface_disabled", "public interface is disabled; targets must use private IPs")
	}
	if e.targetCount(lb)+added > lb.LoadBalancerType.MaxTargets {
		return newError(http.StatusForbidden, "resource_limit_exceeded", "load balancer type %s allows at most %d targets", lb.LoadBalancerType.Name, lb.LoadBalancerType.MaxTargets)
	}
	lb.Targets = append(lb.Targets, t)
	return nil
}

// attach attaches lb to a network with an IP from a subnet in its zone.
func (e *Emulator) attach(lb *schema.LoadBalancer, req schema.LoadBalancerActionAttachToNetworkRequest) *apiError {
	nw, ok := e.st.networks[req.Network]
	if !ok {
		return errNotFound("network", req.Network)
	}
	if slices.ContainsFunc(lb.PrivateNet, func(p schema.LoadBalancerPrivateNet) bool { return p.Network == nw.ID }) {
		return newError(http.StatusUnprocessableEntity, "load_balancer_already_attached", "load balancer is already attached to network %d", nw.ID)
	}
	target := nw
	if req.IPRange != nil {
		sub := *nw
		sub.Subnets = slices.DeleteFunc(slices.Clone(nw.Subnets), func(s schema.NetworkSubnet) bool { return s.IPRange != *req.IPRange })
		if len(sub.Subnets) == 0 {
			return errInvalid("ip_range", "network %d has no subnet %s", nw.ID, *req.IPRange)
		}
		target = &sub
	}
	ip := ""
	if req.IP != nil {
		ip = *req.IP
	}
	got, err := e.st.allocPrivateIP(target, lb.Location.NetworkZone, ip)
	if err != nil {
		return err
	}
	lb.PrivateNet = append(lb.PrivateNet, schema.LoadBalancerPrivateNet{Network: nw.ID, IP: got})
	return nil
}

// checkPrivateOnly is the rule for a disabled public interface: attached to
// a network, and every target uses its private IP.
func (e *Emulator) checkPrivateOnly(lb *schema.LoadBalancer) *apiError {
	if len(lb.PrivateNet) == 0 {
		return newError(http.StatusUnprocessableEntity, "load_balancer_not_attached_to_network", "load balancer must be attached to a network to disable its public interface")
	}
	for _, t := range lb.Targets {
		if !t.UsePrivateIP {
			return newError(http.StatusUnprocessableEntity, "targets_without_use_private_ip", "all targets must use private IPs to disable the public interface")
		}
	}
	return nil
}

// mergeHTTP applies the HTTP settings of an add_service or update_service request to svc.
// An http object without settings (`"http":{}`, which the hcloud CLI sends)
// is accepted on a tcp service and changes nothing; settings are refused
// there. redirect_http may only be turned on for https services (spec).
func mergeHTTP(svc *schema.LoadBalancerService, h *schema.LoadBalancerActionAddServiceRequestHTTP) *apiError {
	if h == nil {
		return nil
	}
	if svc.HTTP == nil {
		if emptyHTTP(h) {
			return nil
		}
		return errInvalid("http", "http settings are only allowed for http and https services")
	}
	if h.RedirectHTTP != nil && *h.RedirectHTTP && svc.Protocol != "https" {
		return errInvalid("http.redirect_http", "redirect_http is only available for https services")
	}
	setIf(&svc.HTTP.CookieName, h.CookieName)
	setIf(&svc.HTTP.CookieLifetime, h.CookieLifetime)
	setIf(&svc.HTTP.Certificates, h.Certificates)
	setIf(&svc.HTTP.RedirectHTTP, h.RedirectHTTP)
	setIf(&svc.HTTP.StickySessions, h.StickySessions)
	setIf(&svc.HTTP.TimeoutIdle, h.TimeoutIdle)
	return nil
}

// emptyHTTP reports whether h carries no setting: every field absent, or
// only an empty certificate list.
func emptyHTTP(h *schema.LoadBalancerActionAddServiceRequestHTTP) bool {
	return h.CookieName == nil && h.CookieLifetime == nil && h.RedirectHTTP == nil &&
		h.StickySessions == nil && h.TimeoutIdle == nil && (h.Certificates == nil || len(*h.Certificates) == 0)
}

// mergeHealthCheckHTTP applies a health check's HTTP settings to hc. An
// object without settings (`"health_check":{"http":{}}`, which the hcloud CLI
// sends) is accepted on a tcp check and changes nothing; settings are refused
// there.
func mergeHealthCheckHTTP(hc *schema.LoadBalancerServiceHealthCheck, h *schema.LoadBalancerActionAddServiceRequestHealthCheckHTTP) *apiError {
	if h == nil {
		return nil
	}
	if hc.HTTP == nil {
		if *h == (schema.LoadBalancerActionAddServiceRequestHealthCheckHTTP{}) {
			return nil
		}
		return errInvalid("health_check.http", "http settings are only allowed for http and https health checks")
	}
	setIf(&hc.HTTP.Domain, h.Domain)
	setIf(&hc.HTTP.Path, h.Path)
	setIf(&hc.HTTP.Response, h.Response)
	setIf(&hc.HTTP.StatusCodes, h.StatusCodes)
	setIf(&hc.HTTP.TLS, h.TLS)
	return nil
}
