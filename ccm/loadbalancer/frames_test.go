package loadbalancer_test

import (
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

// ourModule prefixes the function names of this repository's code.
const ourModule = "github.com/policy-ccm/hcloud-policy-ccm/"

// maxOurFrames is the bound on our frames from EnsureLoadBalancer to the HTTP client (issue 23:
// 5; issue 41: 4).
const maxOurFrames = 4

// frameRecorder is a transport that records, for the first POST to a path, the functions of
// this repository on the stack from EnsureLoadBalancer (outermost) to the transport.
type frameRecorder struct {
	path string

	mu     sync.Mutex
	frames []string // outermost first; nil until the POST was seen
}

func (f *frameRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, f.path) {
		f.mu.Lock()
		if f.frames == nil {
			f.frames = ourFrames()
		}
		f.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// ourFrames are the functions of this repository on the caller's stack, outermost first,
// from EnsureLoadBalancer on, without this test's own (package loadbalancer_test); hcloud-go
// and the standard library are not ours and not counted.
func ourFrames() []string {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(1, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var inner []string
	for {
		fr, more := frames.Next()
		name := fr.Function
		if strings.HasPrefix(name, ourModule) && !strings.Contains(name, "loadbalancer_test.") {
			inner = append(inner, strings.TrimPrefix(name, ourModule))
			if strings.HasSuffix(name, ".EnsureLoadBalancer") {
				break
			}
		}
		if !more {
			return nil // no EnsureLoadBalancer on the stack
		}
	}
	out := make([]string, 0, len(inner))
	for i := len(inner) - 1; i >= 0; i-- {
		out = append(out, inner[i])
	}
	return out
}

// TestFrames_EnsureLoadBalancerToTheHTTPClient proves issue 23's bound: from
// EnsureLoadBalancer to the HTTP client, a create and a later action run through at most
// maxOurFrames functions of ours (docs/rationale.md lists them).
func TestFrames_EnsureLoadBalancerToTheHTTPClient(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"the create", "/load_balancers"},
		{"an action after it (change_dns_ptr)", "/actions/change_dns_ptr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &frameRecorder{path: tt.path}
			ev := newEnv(t, func(c *envConfig) { c.transport = rec })
			ev.mustEnsure(newService("web", withPorts(80), withAnnotation(annotation.LBPublicIPv4RDNS, "lb.example.com")))
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.frames == nil {
				t.Fatalf("no POST to %s with EnsureLoadBalancer on the stack", tt.path)
			}
			if len(rec.frames) > maxOurFrames {
				t.Errorf("%d of our frames from EnsureLoadBalancer to the HTTP client, want at most %d:\n%s",
					len(rec.frames), maxOurFrames, strings.Join(rec.frames, "\n"))
			}
			t.Logf("%d frames: %s", len(rec.frames), strings.Join(rec.frames, " -> "))
		})
	}
}
