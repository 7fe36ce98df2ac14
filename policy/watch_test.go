package policy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/policy-ccm/hcloud-policy-ccm/policy"
)

// waitRevision polls e until its revision is want or the timeout passes.
func waitRevision(t *testing.T, e *policy.Engine, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for e.Revision() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Revision() = %q after %s, want %q", e.Revision(), timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// revisionOf loads fs into a fresh engine to learn its revision.
func revisionOf(t *testing.T, fs map[string][]byte) string {
	t.Helper()
	rev, _ := policy.NewEngine(policy.Options{}).Load(context.Background(), fs, policy.Source{Name: "probe"})
	return rev
}

// kubeletDir writes fs like the kubelet mounts a ConfigMap: the files live in a timestamped
// directory, "..data" points to it, and each visible name is a symlink through "..data".
// Calling it again swaps "..data" atomically, as the kubelet does on a ConfigMap change.
func kubeletDir(t *testing.T, dir string, generation int, fs map[string][]byte) {
	t.Helper()
	ts := fmt.Sprintf("..2026_11_22_02_00_%02d.%d", generation, generation)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range fs {
		if err := os.WriteFile(filepath.Join(dir, ts, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func TestWatchDir_reloadsMountedConfigMap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	v1 := files("lb.rego", denyLB31, "data.json", `{"config": {"v": 1}}`)
	kubeletDir(t, dir, 1, v1)

	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchDir(ctx, e, dir); err != nil {
		t.Fatalf("WatchDir: %v", err)
	}
	waitRevision(t, e, revisionOf(t, v1), 0)

	v2 := files("lb.rego", denyLB31+"\n# v2\n", "data.json", `{"config": {"v": 2}}`)
	kubeletDir(t, dir, 2, v2)
	waitRevision(t, e, revisionOf(t, v2), 2*time.Second)

	// A bad revision is rejected; the good one stays in force.
	kubeletDir(t, dir, 3, files("lb.rego", "package ccm\n\ndeny contains msg if msg := y\n", "data.json", `{}`))
	time.Sleep(500 * time.Millisecond)
	if got := e.Revision(); got != revisionOf(t, v2) {
		t.Fatalf("Revision() = %q after a bad reload, want %q", got, revisionOf(t, v2))
	}

	v4 := files("lb.rego", denyLB31+"\n# v4\n", "data.json", `{}`)
	kubeletDir(t, dir, 4, v4)
	waitRevision(t, e, revisionOf(t, v4), 2*time.Second)
}

func TestWatchDir_reloadsPlainFiles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lb.rego", denyLB31)
	write("README.md", "this is ignored")
	if err := os.Mkdir(filepath.Join(dir, "inputs"), 0o755); err != nil {
		t.Fatal(err)
	}
	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchDir(ctx, e, dir); err != nil {
		t.Fatalf("WatchDir: %v", err)
	}
	write("ports.rego", "package ccm\n\ndeny contains \"port\" if input.load_balancer.type == \"lb21\"\n")
	waitRevision(t, e, revisionOf(t, files("lb.rego", denyLB31, "README.md", "this is ignored", "ports.rego", "package ccm\n\ndeny contains \"port\" if input.load_balancer.type == \"lb21\"\n")), 2*time.Second)
	if d := e.Decide(ctx, lbInput("lb21")); d.Allowed {
		t.Fatalf("Decide(lb21) = %+v after adding ports.rego, want denied", d)
	}
}

func TestWatchDir_errors(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "lb.rego"), []byte("package ccm\n\ndeny contains msg if msg := y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		want string
	}{
		{name: "A missing directory is an error", dir: filepath.Join(t.TempDir(), "missing"), want: "read policy directory"},
		{name: "A first revision that does not compile is an error with its location", dir: bad, want: "lb.rego:3:22: rego_unsafe_var_error: var y is unsafe"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.WatchDir(context.Background(), policy.NewEngine(policy.Options{}), tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WatchDir() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func policyConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "ccm-policy"},
		Data:       data,
	}
}

func TestWatchConfigMap_reloads(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "other"}, Data: map[string]string{"x.rego": "junk"}}
	client := fake.NewClientset(policyConfigMap(map[string]string{"lb.rego": denyLB31}), other)
	rec := record.NewFakeRecorder(20)
	e := policy.NewEngine(policy.Options{Recorder: rec})

	if err := policy.WatchConfigMap(ctx, e, client, "kube-system", "ccm-policy"); err != nil {
		t.Fatalf("WatchConfigMap: %v", err)
	}
	v1 := revisionOf(t, files("lb.rego", denyLB31))
	waitRevision(t, e, v1, 0)

	v2data := map[string]string{"lb.rego": denyLB31, "data.json": `{"config": {}}`}
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, policyConfigMap(v2data), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v2 := revisionOf(t, files("lb.rego", denyLB31, "data.json", `{"config": {}}`))
	waitRevision(t, e, v2, time.Second)

	bad := map[string]string{"lb.rego": "package ccm\n\ndeny contains msg if msg := y\n"}
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, policyConfigMap(bad), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Normal PolicyLoaded Policy revision " + v1,
		"Normal PolicyLoaded Policy revision " + v2,
		"Warning PolicyRejected Policy revision " + revisionOf(t, files("lb.rego", bad["lb.rego"])),
	}
	for i, w := range want {
		select {
		case ev := <-rec.Events:
			if !strings.HasPrefix(ev, w) {
				t.Fatalf("event %d = %q, want it to start with %q", i, ev, w)
			}
		case <-time.After(time.Second):
			t.Fatalf("event %d (%q) did not arrive within 1s", i, w)
		}
	}
	if got := e.Revision(); got != v2 {
		t.Fatalf("Revision() = %q after a bad update, want %q", got, v2)
	}

	if err := client.CoreV1().ConfigMaps("kube-system").Delete(ctx, "ccm-policy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := e.Revision(); got != v2 {
		t.Fatalf("Revision() = %q after deleting the ConfigMap, want %q", got, v2)
	}
}

func TestWatchConfigMap_createdLater(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	e := policy.NewEngine(policy.Options{})
	if err := policy.WatchConfigMap(ctx, e, client, "kube-system", "ccm-policy"); err != nil {
		t.Fatalf("WatchConfigMap without the ConfigMap: %v", err)
	}
	if d := e.Decide(ctx, lbInput("lb31")); !d.Allowed || d.Revision != "" {
		t.Fatalf("Decide without a revision = %+v, want allowed", d)
	}
	if _, err := client.CoreV1().ConfigMaps("kube-system").Create(ctx, policyConfigMap(map[string]string{"lb.rego": denyLB31}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRevision(t, e, revisionOf(t, files("lb.rego", denyLB31)), time.Second)
	if d := e.Decide(ctx, lbInput("lb31")); d.Allowed {
		t.Fatalf("Decide after the ConfigMap appeared = %+v, want denied", d)
	}
}

func TestWatchConfigMap_errors(t *testing.T) {
	tests := []struct {
		name      string
		client    *fake.Clientset
		namespace string
		want      string
	}{
		{
			name:      "A first revision that does not compile is an error",
			client:    fake.NewClientset(policyConfigMap(map[string]string{"lb.rego": "package ccm\n\ndeny contains msg if msg := y\n"})),
			namespace: "kube-system",
			want:      "rego_unsafe_var_error",
		},
		{
			name:      "An empty namespace is an error",
			client:    fake.NewClientset(),
			namespace: "",
			want:      "want namespace/name",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.WatchConfigMap(context.Background(), policy.NewEngine(policy.Options{}), tc.client, tc.namespace, "ccm-policy")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WatchConfigMap() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
