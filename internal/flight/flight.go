// Package flight shares one read in flight among concurrent callers: the first caller starts
// it, the others wait for its result instead of sending the same request again.
//
// The owner (a cache) keeps the *Call of the read in flight under its own mutex, and forgets
// it, and installs the result, under that mutex in the read's function:
//
//	c.mu.Lock()
//	if c.listing == nil {
//		c.listing = flight.Start(ctx, c.runList) // runList ends with: c.mu.Lock(); c.listing = nil; …
//	}
//	cl := c.listing
//	c.mu.Unlock()
//	return cl.Wait(ctx)
//
// # Why not golang.org/x/sync/singleflight?
//
// It would be a new dependency, its key is a string where the owners want a field of their own,
// and its Do runs the function on the first caller's goroutine and context, so a first caller
// that gives up fails every caller waiting with it.
package flight

import "context"

// Call is one read in flight. Its result is set once, when the read's function returns.
type Call[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// Start runs fn on a goroutine of its own and returns the call that carries its result. fn
// gets ctx without its cancellation, so a caller that gives up does not fail the others;
// deadlines and cancellation of the read itself are fn's business.
func Start[T any](ctx context.Context, fn func(context.Context) (T, error)) *Call[T] {
	c := &Call[T]{done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx)
	go func() {
		c.val, c.err = fn(ctx)
		close(c.done)
	}()
	return c
}

// Wait returns the result of the call once fn returned, or the zero T and the error of ctx if
// ctx ends first (the read goes on for the others).
func (c *Call[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
