package plugins_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

// bound is how long any call or load may take in these tests, whatever the plugin does.
const bound = 2 * time.Second

var (
	nodeIn = plugins.NodeInput{
		NodeName: "worker-1",
		Server: plugins.Server{ID: 42, Name: "worker-1", Type: "cax21", Location: "fsn1", NetworkZone: "eu-central",
			Labels: map[string]string{"node.hcloud.example/pool": "db", "team": "shop"}},
	}
	lbIn = plugins.LoadBalancerNameInput{
		ClusterName: "prod", DefaultName: "a1b2c3",
		Service: plugins.Service{Namespace: "shop", Name: "web", UID: "7f6c1c4e-2d0b-4a4e-9d0e-3f1b2c3d4e5f"},
	}
)

func load(t testing.TB, name string, o plugins.Options) *plugins.Plugin {
	t.Helper()
	p, err := plugins.LoadBytes(context.Background(), name+".wasm", fixture(t, name), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// timed runs f and fails the test when it takes longer than bound.
func timed(t *testing.T, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if d := time.Since(start); d > bound {
		t.Errorf("took %s, more than %s", d, bound)
	}
}

func TestPlugin_GoodFixture(t *testing.T) {
	p := load(t, "good", plugins.Options{})
	if d := cmp.Diff([]string{plugins.HookNodeLabels, plugins.HookLoadBalancerName}, p.Hooks()); d != "" {
		t.Errorf("Hooks (-want +got):\n%s", d)
	}
	for i := range 300 { // more than the bump allocator's memory if the ABI sequence leaked
		labels, err := p.NodeLabels(context.Background(), nodeIn)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if d := cmp.Diff(map[string]string{"example.com/lang": "wat", "example.com/fixture": "good"}, labels); d != "" {
			t.Fatalf("labels (-want +got):\n%s", d)
		}
		name, err := p.LoadBalancerName(context.Background(), lbIn)
		if err != nil || name != "wat-lb" {
			t.Fatalf("LoadBalancerName = %q, %v; want wat-lb", name, err)
		}
	}
}

func TestPlugin_BadFixtures(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		opts    plugins.Options
		reason  string
		msg     string // in the error of both hooks
	}{
		{name: "A trap is an error", fixture: "trap", reason: "trap", msg: "unreachable"},
		{name: "An infinite loop stops at the deadline", fixture: "loop", reason: "timeout", msg: "deadline exceeded (limit 100ms)"},
		{name: "An infinite loop stops at a shorter configured deadline", fixture: "loop", opts: plugins.Options{CallTimeout: 20 * time.Millisecond}, reason: "timeout", msg: "limit 20ms"},
		{name: "Growing memory past the limit is refused and the guest's trap is an error", fixture: "oom", reason: "trap", msg: "unreachable"},
		{name: "A reply over the size cap is an error", fixture: "oversize", reason: "invalid_reply", msg: "reply of 1048576 bytes exceeds the 65536-byte limit"},
		{name: "A reply outside memory is an ABI violation", fixture: "outofbounds", reason: "abi", msg: "reply at 65000+1000 is outside the 65536-byte memory"},
		{name: "A plugin's error reply is an error carrying its message", fixture: "errorreply", reason: "plugin_error", msg: "for you"},
		{name: "An AssemblyScript abort is a trap", fixture: "abort", reason: "trap", msg: "exit_code(255)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, tc.fixture, tc.opts)
			for i := range 3 { // the plugin keeps answering, with the same error
				timed(t, func() {
					_, err := p.NodeLabels(context.Background(), nodeIn)
					checkErr(t, err, tc.reason, "plugin "+tc.fixture+".wasm: hook node_labels: ", tc.msg)
				})
				timed(t, func() {
					_, err := p.LoadBalancerName(context.Background(), lbIn)
					checkErr(t, err, tc.reason, "plugin "+tc.fixture+".wasm: hook load_balancer_name: ", tc.msg)
				})
				if t.Failed() {
					t.Fatalf("round %d failed", i)
				}
			}
		})
	}
}

func checkErr(t *testing.T, err error, reason, prefix, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", reason)
	}
	if got := plugins.Reason(err); got != reason {
		t.Errorf("Reason(%v) = %q, want %q", err, got, reason)
	}
	if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q: want prefix %q and %q in it", err, prefix, msg)
	}
}

func TestPlugin_InvalidReplies(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		call    func(p *plugins.Plugin) error
		msgs    []string
	}{
		{
			name: "Truncated JSON is an invalid reply", fixture: "badjson",
			call: func(p *plugins.Plugin) error { _, err := p.NodeLabels(context.Background(), nodeIn); return err },
			msgs: []string{"unexpected EOF"},
		},
		{
			name: "An unknown field is an invalid reply", fixture: "badjson",
			call: func(p *plugins.Plugin) error { _, err := p.LoadBalancerName(context.Background(), lbIn); return err },
			msgs: []string{`unknown field "nome"`},
		},
		{
			name: "Reserved and malformed label keys are all reported", fixture: "badlabels",
			call: func(p *plugins.Plugin) error { _, err := p.NodeLabels(context.Background(), nodeIn); return err },
			msgs: []string{`label key "Bad Key"`, `label key "kubernetes.io/hostname"`, "reserved"},
		},
		{
			name: "A name ending in whitespace is refused (Hetzner's rule)", fixture: "badlabels",
			call: func(p *plugins.Plugin) error { _, err := p.LoadBalancerName(context.Background(), lbIn); return err },
			msgs: []string{`load balancer name "Has Space "`, "whitespace"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, tc.fixture, plugins.Options{})
			before := plugins.Failures(plugins.HookNodeLabels) + plugins.Failures(plugins.HookLoadBalancerName)
			err := tc.call(p)
			if !errors.Is(err, plugins.ErrInvalidReply) {
				t.Fatalf("error %v, want ErrInvalidReply", err)
			}
			if got := plugins.Failures(plugins.HookNodeLabels) + plugins.Failures(plugins.HookLoadBalancerName) - before; got != 1 {
				t.Errorf("hcloud_ccm_plugin_failures_total grew by %v, want 1: the host counts every refused reply once", got)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
}

func TestPlugin_KeepsServingAfterTimeout(t *testing.T) {
	p := load(t, "looplabels", plugins.Options{PoolSize: 1})
	for range 3 {
		timed(t, func() {
			if _, err := p.NodeLabels(context.Background(), nodeIn); !errors.Is(err, plugins.ErrTimeout) {
				t.Errorf("NodeLabels error %v, want ErrTimeout", err)
			}
		})
		name, err := p.LoadBalancerName(context.Background(), lbIn)
		if err != nil || name != "still-serving" {
			t.Fatalf("LoadBalancerName = %q, %v; want still-serving", name, err)
		}
	}
}

func TestPlugin_CallerContext(t *testing.T) {
	p := load(t, "loop", plugins.Options{CallTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	timed(t, func() {
		_, err := p.NodeLabels(ctx, nodeIn)
		if !errors.Is(err, context.Canceled) || plugins.Reason(err) != "canceled" {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	timed(t, func() {
		if _, err := p.NodeLabels(ctx, nodeIn); !errors.Is(err, plugins.ErrTimeout) {
			t.Errorf("error %v, want ErrTimeout", err)
		}
	})
}

func TestLoadBytes_Errors(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		wasm    []byte
		opts    plugins.Options
		msgs    []string
	}{
		{name: "A wrong ABI version is refused", fixture: "abi2", msgs: []string{"ccm_abi_version returned 2, this host supports ABI version 1"}},
		{name: "A missing export is named", fixture: "noexport", msgs: []string{`missing export "ccm_free" (i32, i32) -> ()`}},
		{name: "Every forbidden import is listed", fixture: "badimport", msgs: []string{"forbidden imports: function env.get_secret (allowed:"}},
		{name: "A hook with the wrong signature is refused", fixture: "badsig", msgs: []string{`export "ccm_node_labels" has signature (i32, i32) -> (i32), want (i32, i32) -> (i64)`}},
		{name: "A module without hooks is refused", fixture: "nohooks", msgs: []string{"exports no hook"}},
		{name: "A WASI command (Go without -buildmode=c-shared) is named with the fix", fixture: "command", msgs: []string{"WASI command (exports _start, no _initialize)", "-buildmode=c-shared"}},
		{name: "An _initialize that never returns fails the load in bounded time", fixture: "initloop", opts: plugins.Options{CallTimeout: 10 * time.Millisecond}, msgs: []string{"instantiate: deadline exceeded"}},
		{name: "Memory declared over the limit is refused", fixture: "oversize", opts: plugins.Options{MemoryLimitPages: 16}, msgs: []string{"over limit of 16 pages"}},
		{name: "Bytes that are not wasm are refused", wasm: []byte("not wasm"), msgs: []string{"compile: invalid magic number"}},
		{name: "A memory limit above the wasm maximum is refused", fixture: "good", opts: plugins.Options{MemoryLimitPages: 65537}, msgs: []string{"above the wasm maximum of 65536"}},
		{name: "Negative options are refused", fixture: "good", opts: plugins.Options{PoolSize: -1, CallTimeout: -time.Second}, msgs: []string{"pool size -1 is negative", "call timeout -1s is negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wasm := tc.wasm
			if tc.fixture != "" {
				wasm = fixture(t, tc.fixture)
			}
			timed(t, func() {
				p, err := plugins.LoadBytes(context.Background(), "bad.wasm", wasm, tc.opts)
				if err == nil {
					_ = p.Close(context.Background())
					t.Fatal("loaded, want an error")
				}
				if !strings.HasPrefix(err.Error(), "load plugin bad.wasm: ") {
					t.Errorf("error %q does not name the plugin", err)
				}
				for _, m := range tc.msgs {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not mention %q", err, m)
					}
				}
			})
		})
	}
}

func TestLoad_Files(t *testing.T) {
	dir := t.TempDir()
	good := fixture(t, "good")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(good)
	_ = zw.Close()
	files := map[string][]byte{
		"plain.wasm":      good,
		"packed.wasm.gz":  gz.Bytes(),
		"sniffed.wasm":    gz.Bytes(), // gzip without the suffix is recognised by its magic
		"corrupt.wasm.gz": gz.Bytes()[:20],
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"plain.wasm", "packed.wasm.gz", "sniffed.wasm"} {
		p, err := plugins.Load(context.Background(), filepath.Join(dir, name), plugins.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, err := p.LoadBalancerName(context.Background(), lbIn); err != nil || n != "wat-lb" {
			t.Errorf("%s: LoadBalancerName = %q, %v", name, n, err)
		}
		_ = p.Close(context.Background())
	}
	for name, msg := range map[string]string{"corrupt.wasm.gz": "gunzip", "missing.wasm": "no such file"} {
		path := filepath.Join(dir, name)
		_, err := plugins.Load(context.Background(), path, plugins.Options{})
		if err == nil || !strings.Contains(err.Error(), "load plugin "+path+": ") || !strings.Contains(err.Error(), msg) {
			t.Errorf("Load(%s) error %v, want it to name the file and %q", name, err, msg)
		}
	}
}

func TestPlugin_Close(t *testing.T) {
	p := load(t, "good", plugins.Options{})
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.NodeLabels(context.Background(), nodeIn); !errors.Is(err, plugins.ErrClosed) {
		t.Errorf("error %v, want ErrClosed", err)
	}
}

func TestHammerPlugin(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		ok      bool
	}{
		{name: "Concurrent calls to a good plugin all succeed", fixture: "good", ok: true},
		{name: "Concurrent calls to a trapping plugin all fail cleanly", fixture: "trap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, tc.fixture, plugins.Options{PoolSize: 3, CallTimeout: time.Second})
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					for i := range 100 {
						var err error
						if (g+i)%2 == 0 {
							_, err = p.NodeLabels(context.Background(), nodeIn)
						} else {
							_, err = p.LoadBalancerName(context.Background(), lbIn)
						}
						if (err == nil) != tc.ok {
							t.Errorf("goroutine %d call %d: %v", g, i, err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

func TestPlugin_RecyclesGrownInstances(t *testing.T) {
	// Each call grows memory by a page; without recycling the 8th call on one instance traps.
	p := load(t, "grow", plugins.Options{MemoryLimitPages: 8, PoolSize: 1})
	for i := range 50 {
		if n, err := p.LoadBalancerName(context.Background(), lbIn); err != nil || n != "grown" {
			t.Fatalf("call %d: %q, %v", i, n, err)
		}
	}
}

// recordWriter counts writes (log records with the default Stderr) and bytes.
type recordWriter struct {
	mu             sync.Mutex
	records, bytes int
	notes          int
}

func (r *recordWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records++
	r.bytes += len(p)
	if strings.HasPrefix(string(p), "[plugin output dropped") {
		r.notes++
	}
	return len(p), nil
}

// TestPlugin_GuestOutputBudget: guest output is capped per plugin over time (16 KiB burst, then
// 1 KiB/s), across instances: the stderr fixture writes 100 KiB and traps on every call, so
// every call runs on a fresh instance; the chatty fixture writes 10,000 one-byte records per
// call. What is dropped is counted in hcloud_ccm_plugin_output_dropped_bytes_total.
func TestPlugin_GuestOutputBudget(t *testing.T) {
	tests := []struct {
		fixture      string
		wantErr      error
		writtenBytes int // by the guest per call
		perRecord    int // least budget a record costs
	}{
		{fixture: "stderr", wantErr: plugins.ErrTrap, writtenBytes: 100 << 10, perRecord: 128},
		{fixture: "chatty", writtenBytes: 10_000, perRecord: 128},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			var out recordWriter
			name := t.Name() + ".wasm" // a budget of its own
			p, err := plugins.LoadBytes(context.Background(), name, fixture(t, tc.fixture), plugins.Options{Stderr: &out, PoolSize: 2, CallTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			const calls = 20
			start := time.Now()
			for range calls {
				if _, err := p.NodeLabels(context.Background(), nodeIn); !errors.Is(err, tc.wantErr) {
					t.Fatalf("NodeLabels error %v, want %v", err, tc.wantErr)
				}
			}
			elapsed := time.Since(start).Seconds()
			budget := 16<<10 + int((elapsed+1)*1024)
			out.mu.Lock()
			defer out.mu.Unlock()
			t.Logf("%d calls in %.2fs: %d records, %d bytes passed, %d notes, %.0f bytes dropped",
				calls, elapsed, out.records, out.bytes, out.notes, plugins.OutputDroppedBytes(name))
			if out.bytes > budget+len("[plugin output dropped: over 1 KiB/s, see hcloud_ccm_plugin_output_dropped_bytes_total]\n")*(out.notes) {
				t.Errorf("%d bytes of guest output passed in %.2fs, want at most the budget of %d", out.bytes, elapsed, budget)
			}
			if maxRecords := budget/tc.perRecord + 2*out.notes; out.records > maxRecords {
				t.Errorf("%d records passed, want at most %d", out.records, maxRecords)
			}
			if out.notes < 1 {
				t.Error("no note that output was dropped")
			}
			written := calls * tc.writtenBytes
			if dropped := plugins.OutputDroppedBytes(name); int(dropped) < written-out.bytes || int(dropped) > written {
				t.Errorf("dropped bytes metric = %.0f, want %d written - %d passed", dropped, written, out.bytes)
			}
		})
	}
}

func TestRegisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if err := plugins.RegisterMetrics(reg); err != nil {
			t.Fatalf("RegisterMetrics = %v, want nil (also the second time)", err)
		}
	}
}

// TestPlugin_CallsAreTimed: every hook call, good or failed, is timed once in
// hcloud_ccm_plugin_call_duration_seconds{hook}; only failed ones count in
// hcloud_ccm_plugin_failures_total{hook}.
func TestPlugin_CallsAreTimed(t *testing.T) {
	tests := []struct {
		name        string
		fixture     string
		wantFailure float64
	}{
		{name: "A good call is timed, not a failure", fixture: "good"},
		{name: "A trapping call is timed and a failure", fixture: "trap", wantFailure: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, tc.fixture, plugins.Options{})
			for _, hook := range []string{plugins.HookNodeLabels, plugins.HookLoadBalancerName} {
				calls, failures := plugins.Calls(hook), plugins.Failures(hook)
				if hook == plugins.HookNodeLabels {
					_, _ = p.NodeLabels(context.Background(), nodeIn)
				} else {
					_, _ = p.LoadBalancerName(context.Background(), lbIn)
				}
				if got := plugins.Calls(hook) - calls; got != 1 {
					t.Errorf("%s: hcloud_ccm_plugin_call_duration_seconds count grew by %d, want 1", hook, got)
				}
				if got := plugins.Failures(hook) - failures; got != tc.wantFailure {
					t.Errorf("%s: hcloud_ccm_plugin_failures_total grew by %v, want %v", hook, got, tc.wantFailure)
				}
			}
		})
	}
}

func TestPlugin_LongErrorsAreTruncated(t *testing.T) {
	p := load(t, "longerror", plugins.Options{})
	_, err := p.LoadBalancerName(context.Background(), lbIn)
	if !errors.Is(err, plugins.ErrPluginError) {
		t.Fatalf("error %v, want ErrPluginError", err)
	}
	if msg := err.Error(); len(msg) > 1200 || !strings.HasSuffix(msg, strings.Repeat("x", 100)+"... (truncated)") {
		t.Errorf("error of %d bytes ending %q, want at most 1200 ending in x... (truncated)", len(msg), msg[max(0, len(msg)-40):])
	}
}

func TestHammerClose(t *testing.T) {
	p := load(t, "good", plugins.Options{PoolSize: 3, CallTimeout: 5 * time.Second})
	var wg sync.WaitGroup
	calls := make(chan struct{}, 8)
	for g := range 8 {
		wg.Go(func() {
			sent := false
			defer func() {
				if !sent { // never leave the test waiting
					calls <- struct{}{}
				}
			}()
			for i := 0; ; i++ { // until Close: every goroutine is calling when it happens
				_, err := p.NodeLabels(context.Background(), nodeIn)
				if i == 10 {
					sent = true
					calls <- struct{}{}
				}
				if errors.Is(err, plugins.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("goroutine %d call %d: %v, want success or ErrClosed", g, i, err)
					return
				}
			}
		})
	}
	for range 8 {
		<-calls
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
