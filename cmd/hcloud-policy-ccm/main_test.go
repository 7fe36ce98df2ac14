package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStripManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationApply}}
	tests := []struct {
		name string
		obj  any
	}{
		{"node", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: managed}}},
		{"service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: managed, Labels: map[string]string{"a": "b"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stripManagedFields(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			m := got.(metav1.Object)
			if len(m.GetManagedFields()) != 0 {
				t.Errorf("managedFields = %v, want none", m.GetManagedFields())
			}
			if m.GetName() == "" {
				t.Error("the name was lost")
			}
		})
	}
	// Not an object: returned as it is, no error.
	if got, err := stripManagedFields("x"); err != nil || got != "x" {
		t.Errorf("stripManagedFields(\"x\") = %v, %v", got, err)
	}
}

func TestSetGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	// GOGC set: left to the runtime.
	debug.SetGCPercent(100)
	if f := setGC(func(k string) (string, bool) { return "100", k == "GOGC" }); f != nil {
		t.Error("GOGC set: setGC started a floor")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: GC percent = %d, want 100 (the runtime's)", got)
	}
	// GOGC unset: at least the default, and kept after each collection.
	live := make([][]byte, 0, 32)
	for range 32 {
		live = append(live, make([]byte, 1<<20)) // 32 MiB live, above the floor
	}
	runtime.GC()
	f := setGC(func(string) (string, bool) { return "", false })
	t.Cleanup(func() { f.stopped.Store(true) })
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GOGC unset, 32 MiB live: GC percent = %d, want %d", got, defaultGCPercent)
	}
	current := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	debug.SetGCPercent(100)
	deadline := time.Now().Add(5 * time.Second) // the sentinel's finalizer sets it again
	for current() == 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := current(); got != defaultGCPercent {
		t.Errorf("after a collection: GC percent = %d, want %d", got, defaultGCPercent)
	}
	runtime.KeepAlive(live)
}

func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	const floor = 20 * mib
	tests := []struct {
		live uint64
		want int
	}{
		{0, defaultGCPercent},         // nothing read
		{10 * mib, 100},               // 10 → 20 MiB
		{16 * mib, 25},                // 16 → 20 MiB
		{18 * mib, defaultGCPercent},  // 18 × 1.15 > 20 MiB
		{200 * mib, defaultGCPercent}, // large heaps: as before
		{1 * mib, 1000},               // capped
		{floor, defaultGCPercent},     // at the floor
	}
	for _, tt := range tests {
		if got := floorPercent(tt.live, floor, defaultGCPercent); got != tt.want {
			t.Errorf("floorPercent(%d MiB) = %d, want %d", tt.live/mib, got, tt.want)
		}
	}
}
