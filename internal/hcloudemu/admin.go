package hcloudemu

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// adminRoutes serves the control endpoints under /_emu/ (same bearer token,
// not logged, not rate limited, no faults):
//
//	POST   /_emu/servers                 ServerSpec → {"id":N}
//	DELETE /_emu/servers/{id}
//	PUT    /_emu/servers/{id}/status     {"status":"off"}
//	PUT    /_emu/servers/{id}/labels     {"labels":{...}}
//	POST   /_emu/networks                NetworkSpec → {"id":N}
//	POST   /_emu/load_balancers          LoadBalancerSpec → {"id":N}
//	POST   /_emu/seed                    Seed (JSON) added to the state
//	POST   /_emu/faults                  Fault (delay as a Go duration string or nanoseconds)
//	DELETE /_emu/faults
//	GET    /_emu/requests                {"requests":[...]}
//	GET    /_emu/counts                  {"counts":{route:n},"mutating":n}
//	DELETE /_emu/requests                clears log and counters
//	POST   /_emu/clock/advance           {"duration":"30s"}
//	PUT    /_emu/rate_limit              {"per_hour":3600} (0 = off)
//	PUT    /_emu/metadata                {"server":"name-or-id"} ("" = none)
//	POST   /_emu/reset                   back to catalog + seeds
func (e *Emulator) adminRoutes() http.Handler {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, v any) {
		if v == nil {
			v = map[string]any{}
		}
		writeJSON(w, http.StatusOK, v)
	}
	bad := func(w http.ResponseWriter, err error) {
		writeError(w, newError(http.StatusUnprocessableEntity, "invalid_input", "%v", err))
	}
	body := func(w http.ResponseWriter, r *http.Request, v any) bool {
		if err := decodeAPI(r, v, false); err != nil {
			writeError(w, err)
			return false
		}
		return true
	}
	id := func(w http.ResponseWriter, r *http.Request) (int64, bool) {
		n, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			writeError(w, newError(http.StatusNotFound, "not_found", "bad id %q", r.PathValue("id")))
			return 0, false
		}
		return n, true
	}
	created := func(w http.ResponseWriter, n int64, err error) {
		if err != nil {
			bad(w, err)
			return
		}
		ok(w, map[string]int64{"id": n})
	}

	mux.HandleFunc("POST /_emu/servers", func(w http.ResponseWriter, r *http.Request) {
		var s ServerSpec
		if body(w, r, &s) {
			n, err := e.AddServer(s)
			created(w, n, err)
		}
	})
	mux.HandleFunc("DELETE /_emu/servers/{id}", func(w http.ResponseWriter, r *http.Request) {
		if n, okID := id(w, r); okID {
			if err := e.DeleteServer(n); err != nil {
				bad(w, err)
				return
			}
			ok(w, nil)
		}
	})
	mux.HandleFunc("PUT /_emu/servers/{id}/status", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Status string `json:"status"`
		}
		if n, okID := id(w, r); okID && body(w, r, &req) {
			if err := e.SetServerStatus(n, req.Status); err != nil {
				bad(w, err)
				return
			}
			ok(w, nil)
		}
	})
	mux.HandleFunc("PUT /_emu/servers/{id}/labels", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Labels map[string]string `json:"labels"`
		}
		if n, okID := id(w, r); okID && body(w, r, &req) {
			if err := e.SetServerLabels(n, req.Labels); err != nil {
				bad(w, err)
				return
			}
			ok(w, nil)
		}
	})
	mux.HandleFunc("POST /_emu/networks", func(w http.ResponseWriter, r *http.Request) {
		var s NetworkSpec
		if body(w, r, &s) {
			n, err := e.AddNetwork(s)
			created(w, n, err)
		}
	})
	mux.HandleFunc("POST /_emu/load_balancers", func(w http.ResponseWriter, r *http.Request) {
		var s LoadBalancerSpec
		if body(w, r, &s) {
			n, err := e.AddLoadBalancer(s)
			created(w, n, err)
		}
	})
	mux.HandleFunc("POST /_emu/seed", func(w http.ResponseWriter, r *http.Request) {
		var s Seed
		if body(w, r, &s) {
			if err := e.ApplySeed(s); err != nil {
				bad(w, err)
				return
			}
			ok(w, nil)
		}
	})
	mux.HandleFunc("POST /_emu/faults", func(w http.ResponseWriter, r *http.Request) {
		var f adminFault
		if body(w, r, &f) {
			d, err := f.delay()
			if err != nil {
				bad(w, err)
				return
			}
			f.Fault.Delay = d
			e.AddFault(f.Fault)
			ok(w, nil)
		}
	})
	mux.HandleFunc("DELETE /_emu/faults", func(w http.ResponseWriter, r *http.Request) {
		e.ClearFaults()
		ok(w, nil)
	})
	mux.HandleFunc("GET /_emu/requests", func(w http.ResponseWriter, r *http.Request) {
		ok(w, map[string]any{"requests": e.Requests()})
	})
	mux.HandleFunc("DELETE /_emu/requests", func(w http.ResponseWriter, r *http.Request) {
		e.ResetRequests()
		ok(w, nil)
	})
	mux.HandleFunc("GET /_emu/counts", func(w http.ResponseWriter, r *http.Request) {
		ok(w, map[string]any{"counts": e.Counts(), "mutating": e.MutatingRequests()})
	})
	mux.HandleFunc("POST /_emu/clock/advance", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Duration string `json:"duration"`
		}
		if body(w, r, &req) {
			d, err := time.ParseDuration(req.Duration)
			if err != nil || d < 0 {
				bad(w, err)
				return
			}
			e.AdvanceClock(d)
			ok(w, map[string]any{"now": e.Now()})
		}
	})
	mux.HandleFunc("PUT /_emu/rate_limit", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			PerHour int `json:"per_hour"`
		}
		if body(w, r, &req) {
			e.SetRateLimit(req.PerHour)
			ok(w, nil)
		}
	})
	mux.HandleFunc("PUT /_emu/metadata", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Server string `json:"server"`
		}
		if body(w, r, &req) {
			e.SetMetadataServer(req.Server)
			ok(w, nil)
		}
	})
	mux.HandleFunc("POST /_emu/reset", func(w http.ResponseWriter, r *http.Request) {
		e.Reset()
		ok(w, nil)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, "not_found", "no such admin endpoint: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// adminFault is a Fault whose delay may be given as a duration string.
type adminFault struct {
	Fault
	DelayRaw json.RawMessage `json:"delay,omitempty"`
}

func (f adminFault) delay() (time.Duration, error) {
	if len(f.DelayRaw) == 0 {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(f.DelayRaw, &s); err == nil {
		return time.ParseDuration(s)
	}
	var n int64
	if err := json.Unmarshal(f.DelayRaw, &n); err != nil {
		return 0, err
	}
	return time.Duration(n), nil
}
