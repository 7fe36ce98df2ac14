//go:build soak

package soak

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// apiRequest is one request that reached the emulator through an endpoint.
type apiRequest struct {
	Time   time.Time
	Method string
	Path   string // below /v1, e.g. /load_balancers/7/actions/add_target
	Query  string
	Body   string // kept for POST /load_balancers only (the create names its load balancer)
	Status int    // 0 when the connection was dropped
}

// mutating reports whether r is a write (POST, PUT, DELETE) to the API.
func (r apiRequest) mutating() bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodDelete
}

// endpoint is the emulator's API served on a loopback port of its own for one client (a replica,
// or the soak's own hand edits), so that every request is attributed to the client that sent
// it: the emulator's request log does not say who sent a request, an endpoint does.
type endpoint struct {
	Name string
	URL  string // the hcloud endpoint, ".../v1"

	mu   sync.Mutex
	reqs []apiRequest
}

// newEndpoint serves emu's API for client name until the test ends.
func newEndpoint(t cleanupT, emu *hcloudemu.Emulator, name string) *endpoint {
	ep := &endpoint{Name: name}
	srv := httptest.NewServer(ep.wrap(emu.Handler()))
	t.Cleanup(srv.Close)
	ep.URL = srv.URL + "/v1"
	return ep
}

// cleanupT is the part of testing.T that newEndpoint needs.
type cleanupT interface{ Cleanup(func()) }

// wrap records each API request (not the emulator's /_emu/ admin calls) with its status.
func (ep *endpoint) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, api := strings.CutPrefix(r.URL.Path, "/v1")
		if !api {
			h.ServeHTTP(w, r)
			return
		}
		req := apiRequest{Time: time.Now(), Method: r.Method, Path: path, Query: r.URL.RawQuery}
		if r.Method == http.MethodPost && path == "/load_balancers" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			req.Body = string(b)
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			req.Status = sw.status
			ep.mu.Lock()
			ep.reqs = append(ep.reqs, req)
			ep.mu.Unlock()
		}()
		h.ServeHTTP(sw, r)
	})
}

// since returns the requests recorded from index i on, and the index to ask from next.
func (ep *endpoint) since(i int) ([]apiRequest, int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if i > len(ep.reqs) {
		i = len(ep.reqs)
	}
	return append([]apiRequest(nil), ep.reqs[i:]...), len(ep.reqs)
}

// statusWriter remembers the status of a reply. Unwrap lets http.ResponseController reach the
// underlying writer (the emulator's dropped replies hijack the connection).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
