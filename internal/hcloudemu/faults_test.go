package hcloudemu_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

const createLBBody = `{"name":"web","load_balancer_type":"lb11","location":"fsn1"}`

// TestFaults_AfterCommit: an after-commit fault applies the request and then replaces its
// reply: the client sees an error, a dropped connection or no answer in time, and the load
// balancer exists all the same. The same fault without AfterCommit changes nothing.
func TestFaults_AfterCommit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fault      hcloudemu.Fault
		timeout    time.Duration
		wantStatus int // 0: no reply (transport error)
		wantBody   string
		wantLBs    int
	}{
		{"committed then 5xx", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Code: "server_error", AfterCommit: true}, 0, 500, `"code":"server_error"`, 1},
		{"committed then raw 502", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Raw: true, Status: 502, AfterCommit: true}, 0, 502, "<html>", 1},
		{"committed then dropped", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Drop: true, AfterCommit: true}, 0, 0, "", 1},
		{"committed then hung past the client timeout", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Delay: time.Second, AfterCommit: true}, 100 * time.Millisecond, 0, "", 1},
		{"committed then late: the real reply after the delay", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Delay: 50 * time.Millisecond, AfterCommit: true}, 0, 201, `"name":"web"`, 1},
		{"before commit, 5xx: nothing applied", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Code: "server_error"}, 0, 500, `"code":"server_error"`, 0},
		{"before commit, dropped: nothing applied", hcloudemu.Fault{Method: "POST", Pattern: "/v1/load_balancers", Drop: true}, 0, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu, endpoint := hcloudemu.NewTestServer(t)
			emu.AddFault(tc.fault)
			status, body, err := send(t, emu, tc.timeout, "POST", endpoint+"/load_balancers", createLBBody)
			if tc.wantStatus == 0 {
				if err == nil {
					t.Errorf("reply %d %s, want none (transport error)", status, body)
				}
			} else if err != nil || status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("reply %d %q (%v), want %d containing %q", status, body, err, tc.wantStatus, tc.wantBody)
			}
			if got := len(emu.LoadBalancers()); got != tc.wantLBs {
				t.Errorf("%d load balancers, want %d", got, tc.wantLBs)
			}
			// The fault fired once per match; with Times unset it fires again, so clear it
			// and check that the API answers normally.
			emu.ClearFaults()
			if status, body, err := send(t, emu, 0, "GET", endpoint+"/load_balancers", ""); err != nil || status != 200 {
				t.Errorf("after ClearFaults: %d %s (%v)", status, body, err)
			}
		})
	}
}

// TestFaults_AfterCommitThroughAdmin: the admin API takes after_commit, and Times bounds it.
func TestFaults_AfterCommitThroughAdmin(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	admin := strings.TrimSuffix(endpoint, "/v1") + "/_emu/faults"
	status, body, err := send(t, emu, 0, "POST", admin, `{"method":"POST","pattern":"/v1/load_balancers","code":"unavailable","after_commit":true,"times":1}`)
	if err != nil || status != 200 {
		t.Fatalf("POST /_emu/faults: %d %s (%v)", status, body, err)
	}
	if status, _, _ := send(t, emu, 0, "POST", endpoint+"/load_balancers", createLBBody); status != 503 {
		t.Errorf("first create: %d, want 503", status)
	}
	// The retry of a client that does not look first: the name is taken by the committed one.
	if status, body, _ := send(t, emu, 0, "POST", endpoint+"/load_balancers", createLBBody); status != 409 || !strings.Contains(body, "uniqueness_error") {
		t.Errorf("second create: %d %s, want 409 uniqueness_error", status, body)
	}
	if got := len(emu.LoadBalancers()); got != 1 {
		t.Errorf("%d load balancers, want 1", got)
	}
}

// send sends one request with the emulator's token and an optional client timeout; err is a
// transport error (dropped connection, timeout).
func send(t *testing.T, emu *hcloudemu.Emulator, timeout time.Duration, method, url, body string) (int, string, error) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(c, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+emu.Token())
	client := &http.Client{Timeout: timeout}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
