//go:build bench

package bench

import (
	"testing"
	"time"
)

func TestSteadyWindow(t *testing.T) {
	tests := []struct {
		nodes int
		want  time.Duration
	}{
		{10, 5 * time.Minute},   // 1 page, kept 2 minutes: listed at every tick
		{50, 5 * time.Minute},   // 1 page
		{200, 10 * time.Minute}, // 4 pages, kept 8 minutes: every second tick
		{500, 20 * time.Minute}, // 10 pages, kept 20 minutes
		{501, 25 * time.Minute}, // 11 pages, kept 22 minutes
		{2000, 80 * time.Minute},
	}
	for _, tt := range tests {
		if got := steadyWindow(tt.nodes); got != tt.want {
			t.Errorf("steadyWindow(%d) = %s, want %s", tt.nodes, got, tt.want)
		}
	}
}
