package hcloudemu

import (
	"sync"
	"time"
)

// Clock is the emulator's source of time: action completion, locks and the
// rate-limit refill are all computed from it, never from goroutines.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// FakeClock is a Clock that moves only when told to. It is safe for
// concurrent use.
//
// Here's an example:
//
//	clock := hcloudemu.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
//	emu, endpoint := hcloudemu.NewTestServer(t, hcloudemu.WithClock(clock), hcloudemu.WithActionDelay(time.Minute))
//	clock.Advance(time.Minute) // every running action completes
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock set to t.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// Now returns the current fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
