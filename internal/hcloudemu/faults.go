package hcloudemu

import (
	"context"
	"net/http"
	"path"
	"strings"
	"time"
)

// Fault is a fault injection rule for API requests (not /_emu/).
//
// A request matches when Method is "" (any) or equal to its method, and
// Pattern is "" (any), matches the URL path with path.Match
// ("/v1/load_balancers/*/actions/add_target"), or ends in "*" and the path
// starts with what precedes it ("/v1/load_balancers*" also matches every
// sub-path). Of the matching requests the first Skip pass untouched; then
// the fault fires on at most Times of them (0 = unlimited), each with
// Probability (0 = always). The first rule that fires decides, in order:
//
//   - Delay: sleep first (to trip client timeouts), then go on with the
//     effects below, or serve normally if there are none;
//   - Drop: close the connection without an answer (the client sees EOF);
//   - Raw: answer Status (default 503) with a non-JSON text body;
//   - Status or Code: answer a JSON API error (status from the code's usual
//     status when 0, code from the status when empty);
//   - FailAction: serve normally, but the action created by the request ends
//     in error (code action_failed) and the change is not applied.
//
// With AfterCommit the request is served first, so its change is applied
// (committed), and only then the effects above replace the reply: Delay
// holds the reply back (until the client gives up, or it is sent late),
// Drop closes the connection, Raw/Status/Code answer an error in place of
// the real reply, and with none of these the real reply is sent after the
// Delay ("hung"). This is how a create that succeeded but whose answer was
// lost looks to the client: a retry must not create a second resource.
// FailAction does not combine with AfterCommit.
type Fault struct {
	Method      string        `json:"method,omitempty"`
	Pattern     string        `json:"pattern,omitempty"`
	Skip        int           `json:"skip,omitempty"`
	Times       int           `json:"times,omitempty"`
	Probability float64       `json:"probability,omitempty"`
	Status      int           `json:"status,omitempty"`
	Code        string        `json:"code,omitempty"`
	Message     string        `json:"message,omitempty"`
	Raw         bool          `json:"raw,omitempty"`
	Delay       time.Duration `json:"delay,omitempty"` // nanoseconds in JSON
	Drop        bool          `json:"drop,omitempty"`
	FailAction  bool          `json:"fail_action,omitempty"`
	AfterCommit bool          `json:"after_commit,omitempty"`
}

type faultRule struct {
	Fault
	seen, fired int
}

// codeStatus are the statuses the API uses for its error codes.
var codeStatus = map[string]int{
	"json_error": 400, "unauthorized": 401, "forbidden": 403, "maintenance": 403,
	"resource_limit_exceeded": 403, "not_found": 404, "method_not_allowed": 405,
	"uniqueness_error": 409, "conflict": 409, "resource_unavailable": 412,
	"invalid_input": 422, "service_error": 422, "unsupported_error": 422,
	"locked": 423, "protected": 423, "rate_limit_exceeded": 429,
	"server_error": 500, "bad_gateway": 502, "unavailable": 503, "timeout": 504,
}

// AddFault adds a fault rule; rules are tried in the order added.
func (e *Emulator) AddFault(f Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &faultRule{Fault: f})
}

// ClearFaults removes every fault rule.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

func (f *Fault) matches(r *http.Request) bool {
	if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
		return false
	}
	if f.Pattern == "" {
		return true
	}
	if ok, _ := path.Match(f.Pattern, r.URL.Path); ok {
		return true
	}
	prefix, star := strings.CutSuffix(f.Pattern, "*")
	return star && strings.HasPrefix(r.URL.Path, prefix)
}

// pickFault returns the fault that fires for r, if any.
func (e *Emulator) pickFault(r *http.Request) (Fault, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rule := range e.faults {
		if !rule.matches(r) {
			continue
		}
		rule.seen++
		if rule.seen <= rule.Skip || (rule.Times > 0 && rule.fired >= rule.Times) {
			continue
		}
		if rule.Probability > 0 && e.rnd.Float64() >= rule.Probability {
			continue
		}
		rule.fired++
		return rule.Fault, true
	}
	return Fault{}, false
}

// serveWithFaults serves r through h, applying the fault that fires for r,
// if any: before h (the request is not applied) or, with AfterCommit, after
// h (the request is applied, the reply is replaced).
func (e *Emulator) serveWithFaults(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request)) {
	f, ok := e.pickFault(r)
	if !ok {
		h(w, r)
		return
	}
	if !f.AfterCommit {
		ctx, answered := e.runFault(w, r, f)
		if !answered {
			h(w, r.WithContext(ctx))
		}
		return
	}
	buf := &bufferedReply{header: http.Header{}}
	h(buf, r)
	if _, answered := e.runFault(w, r, f); !answered {
		buf.sendTo(w)
	}
}

// bufferedReply holds a reply until the after-commit fault decides whether
// the client gets it.
type bufferedReply struct {
	header http.Header
	status int
	body   []byte
}

func (b *bufferedReply) Header() http.Header { return b.header }

func (b *bufferedReply) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedReply) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	b.body = append(b.body, p...)
	return len(p), nil
}

// sendTo writes the held reply to w.
func (b *bufferedReply) sendTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if b.status == 0 {
		b.status = http.StatusOK
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body)
}

// applyFault runs the fault that fires for r, if any, before r is served.
// It returns the context to serve the request with, and done when the fault
// answered (or dropped) the request itself. After-commit faults are only
// applied by serveWithFaults; here they do nothing.
func (e *Emulator) applyFault(w http.ResponseWriter, r *http.Request) (context.Context, bool) {
	f, ok := e.pickFault(r)
	if !ok || f.AfterCommit {
		return r.Context(), false
	}
	return e.runFault(w, r, f)
}

// runFault applies the effects of f to the request r: see Fault.
func (e *Emulator) runFault(w http.ResponseWriter, r *http.Request, f Fault) (context.Context, bool) {
	ctx := r.Context()
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx, true
		}
	}
	switch {
	case f.Drop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		_ = conn.Close()
		return ctx, true
	case f.Raw:
		status := f.Status
		if status == 0 {
			status = http.StatusServiceUnavailable
		}
		msg := f.Message
		if msg == "" {
			msg = http.StatusText(status)
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html><body><h1>" + msg + "</h1></body></html>\n"))
		return ctx, true
	case f.Status != 0 || f.Code != "":
		status, code := f.Status, f.Code
		if status == 0 {
			status = codeStatus[code]
			if status == 0 {
				status = http.StatusInternalServerError
			}
		}
		if code == "" {
			code = statusCode(status)
		}
		msg := f.Message
		if msg == "" {
			msg = "injected fault: " + code
		}
		writeError(w, &apiError{status: status, code: code, message: msg})
		return ctx, true
	case f.FailAction && !f.AfterCommit:
		return withFailAction(ctx), false
	}
	return ctx, false
}

// statusCode picks the usual code for a status.
func statusCode(status int) string {
	for _, code := range []string{"json_error", "unauthorized", "forbidden", "not_found", "method_not_allowed",
		"conflict", "resource_unavailable", "invalid_input", "locked", "rate_limit_exceeded",
		"server_error", "bad_gateway", "unavailable", "timeout"} {
		if codeStatus[code] == status {
			return code
		}
	}
	return "server_error"
}
