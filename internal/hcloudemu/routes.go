package hcloudemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
)

// apiFunc handles one API request under the emulator lock and returns the
// status and the body to encode (nil for an empty reply), or an error
// (*apiError for API errors; anything else becomes 500 server_error).
type apiFunc func(r *http.Request) (int, any, error)

// route is one /v1 endpoint: a method, a path pattern of net/http's ServeMux
// and its handler. Action verbs are routes of their own, so the table lists
// every operation the emulator serves.
type route struct {
	method, path string
	h            apiFunc
}

// routeTable is every /v1 endpoint the emulator serves (reference §12.2).
// The contract test checks that each one is an operation of Hetzner's API
// description and validates its replies; a route added here without one
// fails it.
func (e *Emulator) routeTable() []route {
	rs := []route{
		{"GET", "/v1/locations", e.listLocations},
		{"GET", "/v1/locations/{id}", e.getLocation},
		{"GET", "/v1/server_types", e.listServerTypes},
		{"GET", "/v1/server_types/{id}", e.getServerType},
		{"GET", "/v1/load_balancer_types", e.listLoadBalancerTypes},
		{"GET", "/v1/load_balancer_types/{id}", e.getLoadBalancerType},
		{"GET", "/v1/datacenters", e.datacentersGone},
		{"GET", "/v1/datacenters/{id}", e.datacentersGone},

		{"GET", "/v1/servers", e.listServers},
		{"GET", "/v1/servers/{id}", e.getServer},
		{"GET", "/v1/servers/{id}/actions", e.listResourceActions("server", e.serverExists)},

		{"GET", "/v1/networks", e.listNetworks},
		{"GET", "/v1/networks/{id}", e.getNetwork},
		{"PUT", "/v1/networks/{id}", e.updateNetwork},
		{"DELETE", "/v1/networks/{id}", e.deleteNetwork},
		{"GET", "/v1/networks/{id}/actions", e.listResourceActions("network", e.networkExists)},

		{"GET", "/v1/load_balancers", e.listLoadBalancers},
		{"POST", "/v1/load_balancers", e.createLoadBalancer},
		{"GET", "/v1/load_balancers/{id}", e.getLoadBalancer},
		{"PUT", "/v1/load_balancers/{id}", e.updateLoadBalancer},
		{"DELETE", "/v1/load_balancers/{id}", e.deleteLoadBalancer},
		{"GET", "/v1/load_balancers/{id}/actions", e.listResourceActions("load_balancer", e.loadBalancerExists)},
		{"GET", "/v1/load_balancers/{id}/metrics", e.getLoadBalancerMetrics},

		{"GET", "/v1/certificates", e.listCertificates},
		{"POST", "/v1/certificates", e.createCertificate},
		{"GET", "/v1/certificates/{id}", e.getCertificate},
		{"PUT", "/v1/certificates/{id}", e.updateCertificate},
		{"DELETE", "/v1/certificates/{id}", e.deleteCertificate},

		{"GET", "/v1/actions", e.listActions},
		{"GET", "/v1/actions/{id}", e.getAction},
	}
	for _, verb := range networkVerbs {
		rs = append(rs, route{"POST", "/v1/networks/{id}/actions/" + verb, e.networkAction})
	}
	for _, verb := range slices.Sorted(maps.Keys(lbVerbs)) {
		rs = append(rs, route{"POST", "/v1/load_balancers/{id}/actions/" + verb, e.loadBalancerAction})
	}
	return rs
}

// routes registers routeTable and, for every path, a method-less fallback
// answering 405 method_not_allowed in JSON; anything else is 404 not_found.
func (e *Emulator) routes() *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(pattern string, h apiFunc) { mux.Handle(pattern, e.api(h)) }
	paths := map[string]bool{}
	for _, rt := range e.routeTable() {
		handle(rt.method+" "+rt.path, rt.h)
		paths[rt.path] = true
	}
	for p := range paths {
		handle(p, func(r *http.Request) (int, any, error) {
			return 0, nil, newError(http.StatusMethodNotAllowed, "method_not_allowed", "method %s not allowed on %s", r.Method, r.URL.Path)
		})
	}
	handle("/", func(r *http.Request) (int, any, error) {
		return 0, nil, newError(http.StatusNotFound, "not_found", "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
	return mux
}

// verbOf is the action verb of a request to .../actions/{verb}: the last
// segment of its path.
func verbOf(r *http.Request) string {
	return r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
}

// api adapts an apiFunc: it runs under the lock after settling completed
// actions, and encodes the reply while still holding the lock (rendered
// values may share maps with the state).
func (e *Emulator) api(h apiFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, body, err := e.call(h, r)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				e.logf("hcloudemu: %s %s: %v", r.Method, r.URL.Path, err)
				ae = newError(http.StatusInternalServerError, "server_error", "internal error: %v", err)
			}
			writeError(w, ae)
			return
		}
		if body == nil {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
}

func (e *Emulator) call(h apiFunc, r *http.Request) (int, []byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.settle()
	status, v, err := h(r)
	if err != nil || v == nil {
		return status, nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, nil, fmt.Errorf("encode %s reply: %w", r.URL.Path, err)
	}
	return status, b, nil
}

// maxBody bounds request bodies; larger bodies get 400 json_error.
const maxBody = 1 << 20

// middleware wraps the API mux: panic recovery → (admin endpoints under
// /_emu/, token-checked but neither logged nor rate limited) → request log →
// rate limit → auth → faults → mux.
func (e *Emulator) middleware(mux *http.ServeMux) http.Handler {
	admin := e.adminRoutes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http does
					panic(v)
				}
				e.logf("hcloudemu: panic serving %s %s: %v\n%s", r.Method, r.URL.Path, v, debug.Stack())
				writeError(w, newError(http.StatusInternalServerError, "server_error", "internal error"))
			}
		}()
		if r.URL.Path == MetadataPath || strings.HasPrefix(r.URL.Path, MetadataPath+"/") {
			e.serveMetadata(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/_emu/") {
			if !e.authorized(r) {
				writeError(w, newError(http.StatusUnauthorized, "unauthorized", "unable to authenticate"))
				return
			}
			admin.ServeHTTP(w, r)
			return
		}

		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
		if err != nil || len(body) > maxBody {
			writeError(w, newError(http.StatusBadRequest, "json_error", "request body unreadable or larger than %d bytes", maxBody))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w}
		route := routeOf(mux, r)
		done := e.record(r, string(body), route)
		defer func() { done(rec.status) }()

		if !e.rateLimitAllows(rec) {
			writeError(rec, newError(http.StatusTooManyRequests, "rate_limit_exceeded", "limit of %d requests per hour reached", e.rateLimit))
			return
		}
		if !e.authorized(r) {
			writeError(rec, newError(http.StatusUnauthorized, "unauthorized", "unable to authenticate"))
			return
		}
		e.serveWithFaults(rec, r, func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), responseWriterKey{}, w)
			e.serveRecovering(mux, rec, w, r.WithContext(ctx))
		})
	})
}

// serveRecovering serves r, turning a handler panic into a logged 500
// server_error, so the request log records the status the client saw.
//
// The reply goes to w, which is rec or a buffer in front of it (an
// after-commit fault); rec tells whether a reply was already sent.
func (e *Emulator) serveRecovering(h http.Handler, rec *statusRecorder, w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http does
				panic(v)
			}
			e.logf("hcloudemu: panic serving %s %s: %v\n%s", r.Method, r.URL.Path, v, debug.Stack())
			if rec.status == 0 {
				writeError(w, newError(http.StatusInternalServerError, "server_error", "internal error"))
			}
		}
	}()
	h.ServeHTTP(w, r)
}

func (e *Emulator) authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+e.token
}

// routeOf names the endpoint a request hits, e.g. "GET /v1/servers/{id}" or
// "POST /v1/load_balancers/{id}/actions/add_service". Unmatched requests are
// named by method and path.
func routeOf(mux *http.ServeMux, r *http.Request) string {
	_, pattern := mux.Handler(r)
	if pattern == "" || pattern == "/" || !strings.Contains(pattern, " ") {
		return r.Method + " " + r.URL.Path
	}
	return pattern
}

// statusRecorder remembers the status written; it passes Hijack through so
// the drop fault can close the connection.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// decode reads a JSON request body into v; a missing or malformed body is
// 400 json_error. An empty body is accepted when allowEmpty is set.
func decode(r *http.Request, v any, allowEmpty bool) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return newError(http.StatusBadRequest, "json_error", "cannot read request body: %v", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return newError(http.StatusBadRequest, "json_error", "request body is empty")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return newError(http.StatusBadRequest, "json_error", "malformed JSON in request body: %v", err)
	}
	return nil
}
