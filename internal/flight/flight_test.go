package flight_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/flight"
)

// TestCall: every waiter gets the one result of the read, a waiter that gives up gets its own
// context's error, and the read runs on without the caller's cancellation.
func TestCall(t *testing.T) {
	errRead := errors.New("read failed")
	tests := []struct {
		name    string
		val     int
		err     error
		waiters int
	}{
		{"one waiter", 1, nil, 1},
		{"many waiters share the value", 7, nil, 10},
		{"many waiters share the error", 0, errRead, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			release := make(chan struct{})
			runs := 0
			c := flight.Start(ctx, func(ctx context.Context) (int, error) {
				runs++
				<-release
				if ctx.Err() != nil {
					t.Error("the read saw the caller's cancellation")
				}
				return tt.val, tt.err
			})

			gone, stop := context.WithCancel(context.Background())
			stop()
			if _, err := c.Wait(gone); !errors.Is(err, context.Canceled) {
				t.Errorf("Wait with an ended context: %v, want context.Canceled", err)
			}

			var wg sync.WaitGroup
			for range tt.waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := c.Wait(context.Background())
					if v != tt.val || !errors.Is(err, tt.err) {
						t.Errorf("Wait = %d, %v; want %d, %v", v, err, tt.val, tt.err)
					}
				}()
			}
			cancel() // the first caller gives up: the read goes on
			close(release)
			wg.Wait()
			if runs != 1 {
				t.Errorf("the read ran %d times, want 1", runs)
			}
		})
	}
}
