package plugins_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins"
)

func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.wasm")
	write := func(b []byte) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // atomic, as the kubelet swaps ConfigMap files
			t.Fatal(err)
		}
	}
	write(fixture(t, "good"))
	notes := make(chan error, 10)
	w, err := plugins.Watch(context.Background(), path, plugins.Options{}, 5*time.Millisecond, func(err error) { notes <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	name := func() string {
		t.Helper()
		n, err := w.LoadBalancerName(context.Background(), lbIn)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	next := func() error {
		t.Helper()
		select {
		case err := <-notes:
			return err
		case <-time.After(bound):
			t.Fatal("no reload attempt within", bound)
			return nil
		}
	}
	if n := name(); n != "wat-lb" {
		t.Fatalf("name %q, want wat-lb", n)
	}
	first := w.Revision()

	write(fixture(t, "looplabels")) // a new revision with both hooks
	if err := next(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if n := name(); n != "still-serving" || w.Revision() == first {
		t.Errorf("after reload: name %q, revision %s; want still-serving and a new revision", n, w.Revision())
	}

	write([]byte("garbage"))
	if err := next(); err == nil || !strings.Contains(err.Error(), "keeping revision") {
		t.Errorf("bad file: notify(%v), want an error keeping the revision", err)
	}
	if n := name(); n != "still-serving" {
		t.Errorf("after a bad file: name %q, want still-serving", n)
	}

	write(watLabels) // node_labels only: drops load_balancer_name
	if err := next(); err == nil || !strings.Contains(err.Error(), "does not export hook load_balancer_name") {
		t.Errorf("dropped hook: notify(%v)", err)
	}
	if n := name(); n != "still-serving" {
		t.Errorf("after a dropped hook: name %q, want still-serving", n)
	}

	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.LoadBalancerName(context.Background(), lbIn); !errors.Is(err, plugins.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

func TestWatch_BadFirstRevision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.wasm")
	if _, err := plugins.Watch(context.Background(), path, plugins.Options{}, 0, nil); err == nil || !strings.Contains(err.Error(), "load plugin "+path) {
		t.Errorf("error %v, want one naming the file", err)
	}
}

func TestHammerWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lb.wasm")
	revisions := [][]byte{fixture(t, "good"), fixture(t, "looplabels")}
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(revisions[0])
	reloads := make(chan error, 100)
	w, err := plugins.Watch(context.Background(), path, plugins.Options{PoolSize: 2, CallTimeout: 5 * time.Second}, time.Millisecond, func(err error) { reloads <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n, err := w.LoadBalancerName(context.Background(), lbIn)
				if err != nil || n != "wat-lb" && n != "still-serving" {
					t.Errorf("goroutine %d call %d: %q, %v", g, i, n, err)
					return
				}
			}
		})
	}
	for i := range 10 {
		write(revisions[(i+1)%2])
		select {
		case err := <-reloads:
			if err != nil {
				t.Errorf("reload %d: %v", i, err)
			}
		case <-time.After(bound):
			t.Fatalf("reload %d: none within %s", i, bound)
		}
	}
	close(stop)
	wg.Wait()
}
