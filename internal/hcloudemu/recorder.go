package hcloudemu

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Request is one logged API request (admin requests under /_emu/ are not
// logged).
type Request struct {
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Query  string    `json:"query"`
	Body   string    `json:"body"`
	Status int       `json:"status"` // 0 when the connection was dropped
	Route  string    `json:"route"`  // e.g. "GET /v1/servers/{id}", "POST /v1/load_balancers/{id}/actions/add_service"
	Time   time.Time `json:"time"`
}

// maxLoggedRequests bounds the request log; counters are not bounded.
const maxLoggedRequests = 100_000

func (e *Emulator) record(r *http.Request, body, route string, status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.reqs) >= maxLoggedRequests {
		e.reqs = slices.Delete(e.reqs, 0, len(e.reqs)/10)
	}
	e.reqs = append(e.reqs, Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body,
		Status: status, Route: route, Time: e.now(),
	})
	e.counts[route]++
	if isMutating(r.Method) && strings.HasPrefix(r.URL.Path, "/v1/") {
		e.mutating++
	}
}

func isMutating(method string) bool {
	return method == http.MethodPost || method == http.MethodPut || method == http.MethodDelete || method == http.MethodPatch
}

// Requests returns a copy of the request log, oldest first (at most the
// newest 100,000 requests are kept).
func (e *Emulator) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.reqs)
}

// Counts returns the number of requests per route since the last
// ResetRequests, e.g. {"GET /v1/servers": 2, "POST /v1/load_balancers/{id}/actions/add_service": 1}.
// Requests rejected by auth, rate limit or faults count too.
func (e *Emulator) Counts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.counts)
}

// MutatingRequests returns the number of POST, PUT and DELETE requests under
// /v1 since the last ResetRequests, whatever their outcome.
func (e *Emulator) MutatingRequests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mutating
}

// ResetRequests clears the request log and the counters.
func (e *Emulator) ResetRequests() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reqs = nil
	e.counts = map[string]int{}
	e.mutating = 0
}
