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
	Status int       `json:"status"` // 0 when the connection was dropped (or the reply is not written yet)
	Route  string    `json:"route"`  // e.g. "GET /v1/servers/{id}", "POST /v1/load_balancers/{id}/actions/add_service"
	Time   time.Time `json:"time"`
}

// maxLoggedRequests bounds the request log; counters are not bounded.
const maxLoggedRequests = 100_000

// record logs and counts a request as soon as it arrives, so counters are
// current even when the connection is dropped; the returned function sets
// the status once the reply is written.
func (e *Emulator) record(r *http.Request, body, route string) func(status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.reqs) >= maxLoggedRequests {
		e.reqs = slices.Delete(e.reqs, 0, len(e.reqs)/10)
	}
	req := &Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body,
		Route: route, Time: e.now(),
	}
	e.reqs = append(e.reqs, req)
	e.counts[route]++
	if isMutating(r.Method) && strings.HasPrefix(r.URL.Path, "/v1/") {
		e.mutating++
	}
	return func(status int) {
		e.mu.Lock()
		defer e.mu.Unlock()
		req.Status = status
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
	out := make([]Request, len(e.reqs))
	for i, r := range e.reqs {
		out[i] = *r
	}
	return out
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
	e.metadataReqs = 0
}
