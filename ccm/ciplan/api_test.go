package ciplan

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/config"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/hcloudclient"
	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// TestStateFromAPI_ZeroWrites: --from-api reads the load balancers the API has and their
// prices (the emulator's placeholders) and plans against them, and the emulator's request log
// holds reads only.
func TestStateFromAPI_ZeroWrites(t *testing.T) {
	emu, endpoint := hcloudemu.NewTestServer(t)
	m := readExamples(t)
	o := Options{Config: config.Default(), Decider: exampleEngine(t)}
	// web exists in the project (added directly: no request logged).
	if _, err := emu.AddLoadBalancer(hcloudemu.LoadBalancerSpec{Name: "web", Type: "lb11", Location: "fsn1"}); err != nil {
		t.Fatal(err)
	}
	before := len(emu.Requests())
	st, err := StateFromAPI(context.Background(), config.HCloud{Token: emu.Token(), Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LoadBalancers) != 1 || st.LoadBalancers[0].Name != "web" {
		t.Fatalf("read %d load balancers, want web", len(st.LoadBalancers))
	}
	o.State = st
	if o.Prices, err = PricesFromAPI(context.Background(), config.HCloud{Token: emu.Token(), Endpoint: endpoint}); err != nil {
		t.Fatal(err)
	}
	r := Run(context.Background(), m, o)
	if !r.Services[0].Exists {
		t.Errorf("web is in the API, plan says it does not exist")
	}
	lb11 := float64(hcloudemu.PlaceholderMonthlyNet["lb11"])
	if c := r.Services[0].Cost; !c.Known || c.Before.MonthlyNet != lb11 || c.Delta.MonthlyNet != 0 {
		t.Errorf("web's cost %+v, want known, %v a month before and no change", c, lb11)
	}
	reqs := emu.Requests()[before:]
	if len(reqs) == 0 {
		t.Fatal("no request reached the emulator")
	}
	for _, q := range reqs {
		if q.Method != http.MethodGet {
			t.Errorf("plan --from-api sent %s %s", q.Method, q.Path)
		}
	}
}

func TestReadOnlyTransport(t *testing.T) {
	sent := 0
	next := roundTripFunc(func(*http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})
	tr := hcloudclient.ReadOnlyTransport{Next: next}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(method, "https://api.hetzner.cloud/v1/load_balancers", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		if !errors.Is(err, hcloudclient.ErrWriteRefused) || !strings.Contains(err.Error(), method) {
			t.Errorf("%s: err %v, want ErrWriteRefused naming the method", method, err)
		}
	}
	if sent != 0 {
		t.Fatalf("%d writes passed the read-only transport", sent)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://api.hetzner.cloud/v1/load_balancers", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || sent != 1 {
		t.Fatalf("GET: err %v, sent %d; want it passed on", err, sent)
	}
	_ = resp.Body.Close()
	if _, err := StateFromAPI(context.Background(), config.HCloud{}); err == nil || !strings.Contains(err.Error(), "HCLOUD_TOKEN") {
		t.Errorf("no token: err %v, want one naming HCLOUD_TOKEN", err)
	}
	if _, err := PricesFromAPI(context.Background(), config.HCloud{}); err == nil || !strings.Contains(err.Error(), "HCLOUD_TOKEN") {
		t.Errorf("prices without a token: err %v, want one naming HCLOUD_TOKEN", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
