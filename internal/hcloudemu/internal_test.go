package hcloudemu

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMiddleware_HandlerPanicBecomesJSONServerError(t *testing.T) {
	var logged []string
	e := New(WithRateLimit(0), WithLogf(func(f string, args ...any) { logged = append(logged, f) }))
	mux := http.NewServeMux()
	mux.Handle("GET /v1/boom", e.api(func(*http.Request) (int, any, error) { panic("kaboom") }))
	srv := httptest.NewServer(e.middleware(mux))
	defer srv.Close()

	req, _ := http.NewRequest("GET", srv.URL+"/v1/boom", nil)
	req.Header.Set("Authorization", "Bearer "+e.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(body), `"server_error"`) {
		t.Errorf("reply = %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if len(logged) == 0 {
		t.Error("panic was not logged")
	}
	// The lock was released: the emulator still serves.
	if _, ok := e.Server(1); ok {
		t.Error("unexpected server")
	}
	if reqs := e.Requests(); len(reqs) != 1 || reqs[0].Status != 500 || reqs[0].Route != "GET /v1/boom" {
		t.Errorf("request log = %+v", reqs)
	}
}
