package plugins_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// goExamples are the Go example plugins, built once per test binary with stock Go.
var goExamples struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if goExamples.dir != "" {
		_ = os.RemoveAll(goExamples.dir)
	}
	os.Exit(code)
}

// goExample returns the path of plugins/examples/<name> built as <name>.wasm with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w"
//
// (the first build compiles the standard library for wasip1, about 15 s).
func goExample(t testing.TB, name string) string {
	t.Helper()
	goExamples.once.Do(func() {
		goExamples.dir, goExamples.err = os.MkdirTemp("", "plugins-examples-")
		if goExamples.err != nil {
			return
		}
		for _, ex := range []string{"node-labels", "lb-name", "labels-and-name"} {
			cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath",
				"-ldflags=-s -w", "-o", filepath.Join(goExamples.dir, ex+".wasm"), "./examples/"+ex)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				goExamples.err = errors.New("build " + ex + ": " + err.Error() + "\n" + string(out))
				return
			}
		}
	})
	if goExamples.err != nil {
		t.Fatal(goExamples.err)
	}
	return filepath.Join(goExamples.dir, name+".wasm")
}

func loadExample(t testing.TB, name string, o plugins.Options) *plugins.Plugin {
	t.Helper()
	if o.CallTimeout == 0 { // these tests are about results, not deadlines: a loaded -race run is slow
		o.CallTimeout = 10 * time.Second
	}
	p, err := plugins.Load(context.Background(), goExample(t, name), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func TestExample_NodeLabels(t *testing.T) {
	p := loadExample(t, "node-labels", plugins.Options{})
	if d := cmp.Diff([]string{plugins.HookNodeLabels}, p.Hooks()); d != "" {
		t.Errorf("Hooks (-want +got):\n%s", d)
	}
	got, err := p.NodeLabels(context.Background(), nodeIn)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"node.hcloud.example/pool":          "db",
		"node.hcloud.example/server-family": "cax",
		"node.hcloud.example/cpu-arch":      "arm64",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	_, err = p.LoadBalancerName(context.Background(), lbIn)
	if !errors.Is(err, plugins.ErrNotExported) || !strings.Contains(err.Error(), "exports only node_labels") {
		t.Errorf("LoadBalancerName error %v, want ErrNotExported naming the exported hooks", err)
	}
}

func TestExample_LoadBalancerName(t *testing.T) {
	p := loadExample(t, "lb-name", plugins.Options{})
	if d := cmp.Diff([]string{plugins.HookLoadBalancerName}, p.Hooks()); d != "" {
		t.Errorf("Hooks (-want +got):\n%s", d)
	}
	got, err := p.LoadBalancerName(context.Background(), lbIn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "prod-shop-web-") || len(got) != len("prod-shop-web-")+8 {
		t.Errorf("name %q, want prod-shop-web-<8 hex>", got)
	}
	in := lbIn
	in.Service.UID = ""
	if _, err := p.LoadBalancerName(context.Background(), in); !errors.Is(err, plugins.ErrPluginError) || !strings.Contains(err.Error(), "service has no uid") {
		t.Errorf("error %v, want the plugin's error", err)
	}
	if _, err := p.NodeLabels(context.Background(), nodeIn); !errors.Is(err, plugins.ErrNotExported) {
		t.Errorf("NodeLabels error %v, want ErrNotExported", err)
	}
}

func TestExample_GzipFitsAConfigMap(t *testing.T) {
	raw, err := os.ReadFile(goExample(t, "node-labels"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	t.Logf("node-labels.wasm: %d bytes, gzipped %d bytes", len(raw), buf.Len())
	if buf.Len() >= 1<<20 {
		t.Errorf("gzipped plugin is %d bytes, a ConfigMap holds at most %d", buf.Len(), 1<<20)
	}
	path := filepath.Join(t.TempDir(), "node-labels.wasm.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := plugins.Load(context.Background(), path, plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if _, err := p.NodeLabels(context.Background(), nodeIn); err != nil {
		t.Error(err)
	}
}

func TestExample_MemoryLimitBelowGoMinimum(t *testing.T) {
	_, err := plugins.Load(context.Background(), goExample(t, "node-labels"), plugins.Options{MemoryLimitPages: 16})
	if err == nil || !strings.Contains(err.Error(), "over limit of 16 pages") {
		t.Errorf("error %v, want the declared minimum over the limit", err)
	}
}

func TestHammerGoPlugin(t *testing.T) {
	labels := loadExample(t, "node-labels", plugins.Options{PoolSize: 2, CallTimeout: 10 * time.Second})
	names := loadExample(t, "lb-name", plugins.Options{PoolSize: 2, CallTimeout: 10 * time.Second})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				in := lbIn
				in.Service.Name = strings.Repeat("w", g+i+1)
				name, err := names.LoadBalancerName(context.Background(), in)
				if err != nil || !strings.HasPrefix(name, "prod-shop-"+in.Service.Name) {
					t.Errorf("goroutine %d call %d: %q, %v", g, i, name, err)
					return
				}
				if _, err := labels.NodeLabels(context.Background(), nodeIn); err != nil {
					t.Errorf("goroutine %d call %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestExample_WAT(t *testing.T) {
	p, err := plugins.LoadBytes(context.Background(), "wat-labels.wasm", watLabels, plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	big := nodeIn
	big.Server.Labels = map[string]string{"k": strings.Repeat("v", 200_000)} // makes ccm_alloc grow memory
	for _, in := range []plugins.NodeInput{nodeIn, big, nodeIn} {
		got, err := p.NodeLabels(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(map[string]string{"node.hcloud.example/plugin-language": "wat"}, got); d != "" {
			t.Errorf("labels (-want +got):\n%s", d)
		}
	}
}

// TestExample_withoutCShared: the node-labels example built as Go builds by default (a WASI
// command) is refused at load with the flag that fixes it, not with a trap at the first call.
func TestExample_withoutCShared(t *testing.T) {
	out := filepath.Join(t.TempDir(), "command.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./examples/node-labels")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	p, err := plugins.Load(context.Background(), out, plugins.Options{})
	if err == nil {
		_ = p.Close(context.Background())
		t.Fatal("loaded a module built without -buildmode=c-shared")
	}
	if !strings.Contains(err.Error(), "build a Go plugin with -buildmode=c-shared") {
		t.Errorf("error %q does not name -buildmode=c-shared", err)
	}
}

// TestExample_LabelsAndName: the two-hook module passes the shared cases (plugin test) and,
// unlike the two one-hook modules together (TestCheck), fits one ConfigMap.
func TestExample_LabelsAndName(t *testing.T) {
	module := goExample(t, "labels-and-name")
	var out bytes.Buffer
	results, err := plugins.RunTests(context.Background(), module, "examples/cases", &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(results) != 6 {
		t.Errorf("%d cases ran, want 6:\n%s", len(results), out.String())
	}
	out.Reset()
	reports, err := plugins.Check(context.Background(), []string{module}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if d := cmp.Diff([]string{plugins.HookNodeLabels, plugins.HookLoadBalancerName}, reports[0].Hooks); d != "" {
		t.Errorf("hooks (-want +got):\n%s", d)
	}
	t.Logf("labels-and-name: %d bytes raw, %d gzipped", reports[0].RawBytes, reports[0].GzipBytes)
}
