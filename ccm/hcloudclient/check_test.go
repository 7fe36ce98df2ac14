package hcloudclient_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
)

// TestCheck_endpointNeverAnswers: against an endpoint that accepts connections and never
// answers, Check logs every attempt, ends within its bound (3 attempts of one HTTP timeout
// each, plus the backoff between them), and names HCLOUD_ENDPOINT in its error.
func TestCheck_endpointNeverAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; the client's timeout ends the request
	}))
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var lines []string
	klog.SetLogger(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}))
	t.Cleanup(klog.ClearLogger)

	cfg := config.HCloud{Endpoint: srv.URL, Token: "secret", PollInterval: time.Millisecond, RetryInterval: 10 * time.Millisecond, Timeout: 200 * time.Millisecond}
	client, err := hcloudclient.New(hcloudclient.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = hcloudclient.Check(t.Context(), client, cfg)
	took := time.Since(start)

	if err == nil {
		t.Fatal("Check() against an endpoint that never answers = nil")
	}
	for _, want := range []string{"HCLOUD_ENDPOINT", srv.URL, "after 3 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check() error = %q, want it to contain %q", err, want)
		}
	}
	// 3 attempts of 200ms and 10ms+20ms of backoff; allow for a slow machine.
	if took < 600*time.Millisecond || took > 3*time.Second {
		t.Errorf("Check() took %s, want about 630ms (3 bounded attempts)", took)
	}
	mu.Lock()
	defer mu.Unlock()
	attempts, failures := 0, 0
	for _, l := range lines {
		if strings.Contains(l, `"msg"="Checking the Hetzner Cloud API and token"`) && strings.Contains(l, srv.URL) {
			attempts++
		}
		if strings.Contains(l, `"msg"="Hetzner Cloud API check failed"`) {
			failures++
		}
	}
	if attempts != 3 || failures != 3 {
		t.Errorf("log has %d attempt and %d failure lines, want 3 and 3:\n%s", attempts, failures, strings.Join(lines, "\n"))
	}
}
