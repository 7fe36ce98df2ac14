package main

import (
	"runtime/debug"
	"testing"

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

func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	tests := []struct {
		name string
		env  map[string]string
		want int
	}{
		{"GOGC unset: the default", map[string]string{}, defaultGCPercent},
		{"GOGC set: left to the runtime", map[string]string{"GOGC": "100"}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			setGCPercent(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if got := debug.SetGCPercent(100); got != tt.want {
				t.Errorf("GC percent = %d, want %d", got, tt.want)
			}
		})
	}
}
