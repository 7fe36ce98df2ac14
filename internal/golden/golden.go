// Package golden reads the cases recorded from the official hcloud CCM (test/golden/official-ccm,
// format in its README) and compares a load balancer and a Service status with a recorded step:
// the replay test in ccm/ and the adoption test in test/e2e share it. Only tests import it.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/yaml"
)

// Deliberate are the steps where this CCM deliberately ends elsewhere than the official one,
// each with the reason. Their expected outcome is read from test/golden/ours/<case>/;
// docs/reference/differences.md lists the same table.
var Deliberate = map[string]string{
	// The official CCM creates the load balancer, attaches it, then fails on the bad annotation
	// and leaves a half-configured, billed load balancer without listeners or targets. We check
	// every annotation before the first write: same error, nothing created.
	"36-empty-protocol/step1": "bad annotation: nothing is created instead of a half-configured load balancer",
	"41-invalid-bool/step1":   "bad annotation: nothing is created instead of a load balancer without targets",
	// The official CCM creates with public_interface false and attaches the network afterwards,
	// which the API refuses (load_balancer_not_attached_to_network): the Service never gets a
	// load balancer. We create it inside the network, so the private load balancer works.
	"15-disable-public-network-at-create/step1": "disable-public-network at create works: created inside the network",
}

// CertificateName is the uploaded certificate the recordings reference by name.
const CertificateName = "golden-cert"

// Case is one recorded case (case.json).
type Case struct {
	ID         string `json:"id"`
	EnvProfile string `json:"env_profile"`
	Service    string `json:"service"`
	Steps      []Step `json:"steps"`
	// Dir is the case's directory.
	Dir string `json:"-"`
}

// Step is one recorded step.
type Step struct {
	Step        int          `json:"step"`
	Kind        string       `json:"kind"`
	Description string       `json:"description"`
	ManualCalls []ManualCall `json:"manual_calls"`
}

// Name is the step's file prefix, e.g. step2.
func (s Step) Name() string { return fmt.Sprintf("step%d", s.Step) }

// ManualCall is a change made behind the CCM's back in a drift step.
type ManualCall struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	Status int             `json:"status"`
}

// Request is one recorded API request of the official CCM.
type Request struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Query  string          `json:"query"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// Root is the recorded fixtures' directory relative to a package directory two levels below the
// repository root (ccm/..., test/e2e), or GOLDEN_FIXTURES.
func Root(fromRepoRoot string) string {
	if d := os.Getenv("GOLDEN_FIXTURES"); d != "" {
		return d
	}
	return filepath.Join(fromRepoRoot, "test", "golden", "official-ccm")
}

// OursDir is our expected outcomes for the Deliberate steps.
func OursDir(fromRepoRoot string) string {
	return filepath.Join(fromRepoRoot, "test", "golden", "ours")
}

// Cases reads every case under root, sorted by ID.
func Cases(t testing.TB, root string) []Case {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatalf("read golden fixtures: %v", err)
	}
	var out []Case
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		var c Case
		ReadJSON(t, filepath.Join(root, e.Name(), "case.json"), &c)
		c.Dir = filepath.Join(root, e.Name())
		out = append(out, c)
	}
	return out
}

// ServiceOf reads the Service of a step: service.yaml for step 1, stepN.service.yaml when the
// step changed it; nil when the step did not.
func (c Case) ServiceOf(t testing.TB, st Step, uid types.UID) *corev1.Service {
	t.Helper()
	p := filepath.Join(c.Dir, st.Name()+".service.yaml")
	if st.Step == 1 {
		p = filepath.Join(c.Dir, "service.yaml")
	}
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(b, &svc); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	svc.UID = uid
	return &svc
}

// Requests reads the recorded requests of a step.
func (c Case) Requests(t testing.TB, st Step) []Request {
	var out []Request
	ReadJSON(t, filepath.Join(c.Dir, st.Name()+".requests.json"), &out)
	return out
}

// ExpectedPath is the file with the expected outcome of a step (file "lb.json", "status.json",
// "events.txt"): ours for a Deliberate step, else the recording.
func (c Case) ExpectedPath(fromRepoRoot string, st Step, file string) string {
	name := st.Name() + "." + file
	if _, ok := Deliberate[c.ID+"/"+st.Name()]; ok {
		return filepath.Join(OursDir(fromRepoRoot), c.ID, name)
	}
	return filepath.Join(c.Dir, name)
}

// DefaultName is cloudprovider.DefaultLoadBalancerName of a Service with uid.
func DefaultName(uid types.UID) string {
	return cloudprovider.DefaultLoadBalancerName(&corev1.Service{ObjectMeta: metav1.ObjectMeta{UID: uid}})
}

// API talks to the emulator (or any Hetzner API) over HTTP, as a person with a token would.
type API struct {
	T        testing.TB
	Endpoint string // ends in /v1
	Token    string
}

// Do sends a request (path starting with /v1) and returns status and body.
func (a API) Do(method, path string, body []byte) (int, []byte) {
	a.T.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(a.Endpoint, "/v1")+path, bytes.NewReader(body))
	if err != nil {
		a.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.Token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.T.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		a.T.Fatal(err)
	}
	return res.StatusCode, b
}

// UploadCertificate uploads the certificate the recordings reference.
func (a API) UploadCertificate(certPEM, keyPEM string) {
	body, _ := json.Marshal(map[string]string{"name": CertificateName, "type": "uploaded", "certificate": certPEM, "private_key": keyPEM})
	if status, b := a.Do(http.MethodPost, "/v1/certificates", body); status != http.StatusCreated {
		a.T.Fatalf("upload certificate: %d %s", status, b)
	}
}

// LoadBalancers lists load balancers as JSON, filtered by a label selector ("" = all).
func (a API) LoadBalancers(selector string) []map[string]any {
	path := "/v1/load_balancers?per_page=50"
	if selector != "" {
		path += "&label_selector=" + url.QueryEscape(selector)
	}
	status, b := a.Do(http.MethodGet, path, nil)
	if status != http.StatusOK {
		a.T.Fatalf("list load balancers: %d %s", status, b)
	}
	var res struct {
		LoadBalancers []map[string]any `json:"load_balancers"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		a.T.Fatal(err)
	}
	return res.LoadBalancers
}

// certificateID is the ID of the recordings' certificate, "" if none.
func (a API) certificateID() string {
	status, b := a.Do(http.MethodGet, "/v1/certificates?name="+CertificateName, nil)
	if status != http.StatusOK {
		return ""
	}
	var res struct {
		Certificates []struct{ ID int64 } `json:"certificates"`
	}
	if json.Unmarshal(b, &res) != nil || len(res.Certificates) == 0 {
		return ""
	}
	return strconv.FormatInt(res.Certificates[0].ID, 10)
}

func (a API) networkName(id float64) string {
	status, b := a.Do(http.MethodGet, fmt.Sprintf("/v1/networks/%d", int64(id)), nil)
	if status != http.StatusOK {
		return fmt.Sprintf("network %d (%d)", int64(id), status)
	}
	var res struct {
		Network struct{ Name string } `json:"network"`
	}
	_ = json.Unmarshal(b, &res)
	return res.Network.Name
}

// Placeholders replaces the recordings' placeholders with the values of the Service uid and of
// lb (nil: none yet). Extra pairs (old, new) are appended.
func (a API) Placeholders(uid types.UID, lb map[string]any, extra ...string) *strings.Replacer {
	pairs := append([]string{"$SERVICE_UID", string(uid), "$DEFAULT_LB_NAME", DefaultName(uid)}, extra...)
	if lb != nil {
		pairs = append(pairs, "$LB_ID", strconv.FormatInt(int64(lb["id"].(float64)), 10))
		pub := lb["public_net"].(map[string]any)
		if ip, _ := pub["ipv4"].(map[string]any)["ip"].(string); ip != "" {
			pairs = append(pairs, "$LB_PUBLIC_IPV4", ip)
		}
		if ip, _ := pub["ipv6"].(map[string]any)["ip"].(string); ip != "" {
			pairs = append(pairs, "$LB_PUBLIC_IPV6", ip)
		}
	}
	if id := a.certificateID(); id != "" {
		pairs = append(pairs, `"$CERT_ID:`+CertificateName+`"`, id, `$CERT_ID:`+CertificateName, id)
	}
	return strings.NewReplacer(pairs...)
}

// NormaliseLB reduces the API's load balancer as the recording did (see the fixtures' README);
// nil stays nil.
func (a API) NormaliseLB(lb map[string]any) map[string]any {
	if lb == nil {
		return nil
	}
	serverNames := map[float64]string{101: "node-1", 102: "node-2", 103: "node-3", 104: "node-4"}
	pub := lb["public_net"].(map[string]any)
	v4, v6 := pub["ipv4"].(map[string]any), pub["ipv6"].(map[string]any)
	out := map[string]any{
		"name":               lb["name"],
		"load_balancer_type": lb["load_balancer_type"].(map[string]any)["name"],
		"location":           lb["location"].(map[string]any)["name"],
		"network_zone":       lb["location"].(map[string]any)["network_zone"],
		"algorithm":          lb["algorithm"].(map[string]any)["type"],
		"public_net":         map[string]any{"enabled": pub["enabled"], "ipv4_dns_ptr": v4["dns_ptr"], "ipv6_dns_ptr": v6["dns_ptr"]},
		"labels":             lb["labels"],
		"protection":         lb["protection"],
	}
	var private []any
	for _, pn := range asList(lb["private_net"]) {
		pn := pn.(map[string]any)
		private = append(private, map[string]any{"ip": pn["ip"], "network": a.networkName(pn["network"].(float64))})
	}
	out["private_net"] = private
	services := asList(lb["services"])
	sort.Slice(services, func(i, j int) bool {
		return services[i].(map[string]any)["listen_port"].(float64) < services[j].(map[string]any)["listen_port"].(float64)
	})
	out["services"] = services
	var targets []any
	for _, tg := range asList(lb["targets"]) {
		tg := tg.(map[string]any)
		n := map[string]any{"type": tg["type"], "use_private_ip": tg["use_private_ip"]}
		if s, ok := tg["server"].(map[string]any); ok {
			n["server"] = serverNames[s["id"].(float64)]
		}
		targets = append(targets, n)
	}
	sort.Slice(targets, func(i, j int) bool {
		return fmt.Sprint(targets[i].(map[string]any)["server"]) < fmt.Sprint(targets[j].(map[string]any)["server"])
	})
	out["targets"] = targets
	return Normalise(a.T, out)
}

// ReadExpected reads an expected outcome file with the placeholders replaced, as generic JSON;
// false when the file does not exist.
func ReadExpected(t testing.TB, path string, rep *strings.Replacer) (any, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal([]byte(rep.Replace(string(b))), &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v, true
}

// Equal compares two JSON-like values after Normalise; nil equals nil.
func Equal(t testing.TB, want, got any) bool {
	if want == nil || got == nil {
		return isNil(want) && isNil(got)
	}
	return reflect.DeepEqual(Normalise(t, want), Normalise(t, got))
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return (rv.Kind() == reflect.Map || rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Slice) && rv.IsNil()
}

// Normalise round-trips v through JSON so that both sides compare as generic values; empty
// lists and null compare equal.
func Normalise(t testing.TB, v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out == nil {
		return nil
	}
	return dropEmpty(out).(map[string]any)
}

func dropEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			x = dropEmpty(x)
			if l, ok := x.([]any); x == nil || (ok && len(l) == 0) {
				delete(v, k)
				continue
			}
			v[k] = x
		}
		return v
	case []any:
		for i := range v {
			v[i] = dropEmpty(v[i])
		}
		return v
	}
	return v
}

// Diff shows want and got, line by line when they have the same shape.
func Diff(want, got any) string {
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	wl, gl := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	if len(wl) != len(gl) {
		return fmt.Sprintf("official:\n%s\nours:\n%s", w, g)
	}
	var b strings.Builder
	for i := range wl {
		if wl[i] != gl[i] {
			fmt.Fprintf(&b, "line %d: official %s | ours %s\n", i+1, strings.TrimSpace(wl[i]), strings.TrimSpace(gl[i]))
		}
	}
	return b.String()
}

// ReadJSON reads a JSON file into v.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
